#!/usr/bin/env bash
# Install memsync's systemd units and directories on a VPS. Idempotent; --dry-run prints only.
# Usage: sudo ops/install.sh [--dry-run] [--user mem0] [--config /etc/memsync/memsync.toml]
#          [--deployment DIR]... [--snapshots /var/backups/memsync] [--memsync /usr/local/bin/memsync]
# --snapshots: created for the snapshots (default /var/backups/memsync, the example config's;
# none with --config, whose snapshot.directory is used).
# --config: an existing memsync config; every directory it makes memsync write (the Qdrant
# directory's and history.db's parents, mem0_dir, state_dir, work_dir, snapshot.directory, the
# textfile's directory, [protect] directory) goes into the units' ReadWritePaths=, read with `memsync config show`.
# --deployment (repeatable) adds directories by hand; default /srv/agent when no --config.
set -euo pipefail
DRY=0; USER_NAME=mem0; DEPLOYMENTS=(); CONFIG=; SNAPSHOTS=; MEMSYNC=/usr/local/bin/memsync
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --user) USER_NAME=$2; shift ;;
    --config) CONFIG=$2; shift ;;
    --deployment) DEPLOYMENTS+=("$2"); shift ;;
    --snapshots) SNAPSHOTS=$2; shift ;;
    --memsync) MEMSYNC=$2; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
HERE=$(cd "$(dirname "$0")/.." && pwd)
UNITS=${UNITS_DIR:-/etc/systemd/system}
ETC=${ETC_DIR:-/etc/memsync}
run() { if [ "$DRY" = 1 ]; then echo "would run: $*"; else "$@"; fi; }

# Every directory memsync writes, from the config when given (through memsync itself, so the
# paths are exactly the ones it resolves), else from --deployment. Each entry: "required PATH"
# or "optional PATH" (a config path that may not exist yet: systemd's "-" prefix skips it).
ENTRIES=()
if [ -n "$CONFIG" ]; then
  [ -x "$MEMSYNC" ] || { echo "install.sh: --config needs memsync installed at $MEMSYNC (--memsync PATH)" >&2; exit 2; }
  CONFIG=$(realpath -m -- "$CONFIG")
  shown=$("$MEMSYNC" config show --json --config "$CONFIG") || {
    echo "install.sh: $CONFIG is not a valid memsync config (memsync config validate --config $CONFIG)" >&2; exit 2; }
  while IFS= read -r path; do [ -n "$path" ] && ENTRIES+=("optional $path"); done < <(printf '%s' "$shown" |
    python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)["writable_paths"]))')
fi
[ ${#DEPLOYMENTS[@]} -gt 0 ] || [ -n "$CONFIG" ] || DEPLOYMENTS=(/srv/agent)
for path in "${DEPLOYMENTS[@]}"; do ENTRIES+=("required $(realpath -m -- "$path")"); done
# the example config's [snapshot] directory, unless --config names its own (then only --snapshots)
[ -n "$SNAPSHOTS" ] || [ -n "$CONFIG" ] || SNAPSHOTS=/var/backups/memsync
[ -z "$SNAPSHOTS" ] || ENTRIES+=("required $(realpath -m -- "$SNAPSHOTS")")

# Writes one unit with this install's user, memsync binary, config and paths. Values go through
# systemd's quoting ("..." with C escapes) and "%" becomes "%%" (a specifier otherwise), so any
# path works: spaces, quotes, "&", "#".
render_unit() {  # render_unit SOURCE > TARGET
  USER_NAME="$USER_NAME" MEMSYNC="$MEMSYNC" CONFIG="$CONFIG" python3 - "$1" "${ENTRIES[@]}" <<'PY'
import os, sys

def word(value):
    value = value.replace("%", "%%")
    if value and not any(c in value for c in ' \t"\'\\'):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

source, entries = sys.argv[1], sys.argv[2:]
paths, seen = [], set()
for entry in entries:
    kind, path = entry.split(" ", 1)
    if path in seen:
        continue
    seen.add(path)
    paths.append(word(("-" if kind == "optional" and not os.path.exists(path) else "") + path))
out = []
for line in open(source, encoding="utf-8").read().splitlines():
    if line == "User=mem0":
        line = "User=" + os.environ["USER_NAME"]
    elif line == "Group=mem0":
        line = "Group=" + os.environ["USER_NAME"]
    elif line.startswith("ReadWritePaths="):
        line = "ReadWritePaths=" + " ".join(paths)
    elif line.startswith("ExecStart="):
        line = line.replace("/usr/local/bin/memsync", word(os.environ["MEMSYNC"]), 1)
        if os.environ["CONFIG"]:
            line = line.replace("--config /etc/memsync/memsync.toml", "--config " + word(os.environ["CONFIG"]))
    out.append(line)
sys.stdout.write("\n".join(out) + "\n")
PY
}

id "$USER_NAME" >/dev/null 2>&1 || { echo "install.sh: user $USER_NAME does not exist (the app's user)" >&2; exit 2; }
[ -x "$MEMSYNC" ] || echo "install.sh: note: $MEMSYNC is not installed yet (the units run it)" >&2
run install -d -m 0750 -o root -g "$USER_NAME" "$ETC"
[ -z "$SNAPSHOTS" ] || run install -d -m 0700 -o "$USER_NAME" -g "$USER_NAME" "$SNAPSHOTS"
if [ -n "$CONFIG" ]; then
  STEP1="your config $CONFIG is used as it is (every directory it writes is in the units' ReadWritePaths=); check its [snapshot], [s3] and [daemon]"
elif [ -e "$ETC/memsync.toml" ]; then
  STEP1="$ETC/memsync.toml was there and is kept as it is; check its [mem0], [snapshot], [s3] and [daemon]"
else
  run install -m 0640 -o root -g "$USER_NAME" "$HERE/ops/memsync.example.toml" "$ETC/memsync.toml"
  STEP1="edit $ETC/memsync.toml (the example): [mem0] is your app's mem0 config; set [snapshot], [s3], [daemon]"
fi
for unit in "$HERE"/systemd/*.service "$HERE"/systemd/*.timer; do
  name=$(basename "$unit")
  rendered=$(render_unit "$unit")  # the same text for a dry run and a real one
  if [ "$DRY" = 1 ]; then
    echo "would install $UNITS/$name (User=$USER_NAME, $(printf '%s\n' "$rendered" | grep '^ReadWritePaths=' || echo 'no ReadWritePaths'))"
  else
    printf '%s\n' "$rendered" > "$UNITS/$name.tmp"
    mv "$UNITS/$name.tmp" "$UNITS/$name"
  fi
done
if command -v systemctl >/dev/null 2>&1 && [ "$DRY" = 0 ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi
cat <<NEXT
Next steps:
  1. $STEP1
  2. put AWS credentials in $ETC/aws-credentials (0600) if you upload snapshots
  3. sudo -u $USER_NAME $MEMSYNC --config ${CONFIG:-$ETC/memsync.toml} doctor
  4. systemctl enable --now memsync && memsync --config ${CONFIG:-$ETC/memsync.toml} status
NEXT
