#!/usr/bin/env bash
# Install memsync's systemd units and directories on a VPS. Idempotent; --dry-run prints only.
# Usage: sudo ops/install.sh [--dry-run] [--user mem0] [--config /etc/memsync/memsync.toml]
#          [--deployment DIR]... [--snapshots /var/backups/memsync] [--memsync /usr/local/bin/memsync]
# --config: an existing memsync config; every directory it makes memsync write (the Qdrant
# directory's and history.db's parents, mem0_dir, state_dir, work_dir, snapshot.directory, the
# textfile's directory) goes into the units' ReadWritePaths=, read with `memsync config show`.
# --deployment (repeatable) adds directories by hand; default /srv/agent when no --config.
set -euo pipefail
DRY=0; USER_NAME=mem0; DEPLOYMENTS=(); CONFIG=; SNAPSHOTS=/var/backups/memsync; MEMSYNC=/usr/local/bin/memsync
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --user) USER_NAME=$2; shift ;;
    --config) CONFIG=$2; shift ;;
    --deployment) DEPLOYMENTS+=("$2"); shift ;;
    --snapshots) SNAPSHOTS=$2; shift ;;
    --memsync) MEMSYNC=$2; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
HERE=$(cd "$(dirname "$0")/.." && pwd)
UNITS=${UNITS_DIR:-/etc/systemd/system}
ETC=${ETC_DIR:-/etc/memsync}
run() { if [ "$DRY" = 1 ]; then echo "would run: $*"; else "$@"; fi; }

# Every directory memsync writes, from the config when given (through memsync itself, so the
# paths are exactly the ones it resolves), else from --deployment.
RW=""
add_path() {  # add once; "-" (skip if missing) for a config path that does not exist yet
  case " $RW " in *" $1 "*|*" -$1 "*) return ;; esac
  if [ "$2" = optional ] && [ ! -e "$1" ]; then RW="$RW -$1"; else RW="$RW $1"; fi
}
if [ -n "$CONFIG" ]; then
  [ -x "$MEMSYNC" ] || { echo "install.sh: --config needs memsync installed at $MEMSYNC (--memsync PATH)" >&2; exit 2; }
  shown=$("$MEMSYNC" config show --json --config "$CONFIG") || {
    echo "install.sh: $CONFIG is not a valid memsync config (memsync config validate --config $CONFIG)" >&2; exit 2; }
  while IFS= read -r path; do [ -n "$path" ] && add_path "$path" optional; done < <(printf '%s' "$shown" |
    python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)["writable_paths"]))')
fi
[ ${#DEPLOYMENTS[@]} -gt 0 ] || [ -n "$CONFIG" ] || DEPLOYMENTS=(/srv/agent)
for path in "${DEPLOYMENTS[@]}"; do add_path "$path" required; done
add_path "$SNAPSHOTS" required
RW=${RW# }

id "$USER_NAME" >/dev/null 2>&1 || { echo "install.sh: user $USER_NAME does not exist (the app's user)" >&2; exit 2; }
[ -x "$MEMSYNC" ] || echo "install.sh: note: $MEMSYNC is not installed yet (the units run it)" >&2
run install -d -m 0750 -o root -g "$USER_NAME" "$ETC"
run install -d -m 0700 -o "$USER_NAME" -g "$USER_NAME" "$SNAPSHOTS"
if [ -z "$CONFIG" ] && [ ! -e "$ETC/memsync.toml" ]; then
  run install -m 0640 -o root -g "$USER_NAME" "$HERE/ops/memsync.example.toml" "$ETC/memsync.toml"
fi
for unit in "$HERE"/systemd/*.service "$HERE"/systemd/*.timer; do
  name=$(basename "$unit")
  if [ "$DRY" = 1 ]; then
    echo "would install $UNITS/$name (User=$USER_NAME, ReadWritePaths=$RW)"
  else
    sed -e "s#^User=mem0#User=$USER_NAME#" -e "s#^Group=mem0#Group=$USER_NAME#" \
        -e "s#^ReadWritePaths=.*#ReadWritePaths=$RW#" \
        -e "s#/usr/local/bin/memsync#$MEMSYNC#" "$unit" > "$UNITS/$name.tmp"
    mv "$UNITS/$name.tmp" "$UNITS/$name"
  fi
done
if command -v systemctl >/dev/null 2>&1 && [ "$DRY" = 0 ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi
cat <<NEXT
Next steps:
  1. edit $ETC/memsync.toml: [mem0] is your app's mem0 config; set [snapshot], [s3], [daemon]
  2. put AWS credentials in $ETC/aws-credentials (0600) if you upload snapshots
  3. sudo -u $USER_NAME $MEMSYNC --config $ETC/memsync.toml doctor
  4. systemctl enable --now memsync && memsync --config $ETC/memsync.toml status
NEXT
