"""Issue 11's field faults, reproduced the way a deployment produces them: doctor and check agree,
no damaging advice on a wrong history path, reconcile with nothing to do needs no store, and
doctor sees every store file and every copy still holding memories."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from memsync.demo import deployment as build
from tests.helpers.holders import app_holding

ROOT = Path(__file__).resolve().parents[2]


# --- point 8: reconcile with nothing to do ------------------------------------------------------


def test_reconcile_with_nothing_to_do_needs_neither_the_store_nor_its_lock(deployment, cli):
    deployment.close()
    with app_holding(deployment.paths.qdrant):
        result = cli("reconcile", "--json", config=deployment.config)
    assert result.code == 0, result.err
    outcome = json.loads(result.out)
    assert outcome["actions"] == [] and outcome["check_after"]["errors"] == 0


# --- point 5: no damaging advice on a wrong path -------------------------------------------------


def point_history_at(deployment, wrong: Path) -> None:
    """A config whose history_db_path names a file that does not exist (a typo, a wrong mem0_dir)."""
    text = deployment.config.read_text()
    deployment.config.write_text(
        text.replace(
            f'history_db_path = "{deployment.paths.history_db}"', f'history_db_path = "{wrong}"'
        )
    )


def test_a_wrong_history_path_is_named_and_never_filled_with_a_new_history(
    deployment, cli, tmp_path
):
    deployment.close()
    wrong = deployment.paths.root / "mem0-typo" / "history.db"
    wrong.parent.mkdir()
    point_history_at(deployment, wrong)

    report = cli("check", "--json", config=deployment.config).json()
    [missing] = [f for f in report["findings"] if f["code"] == "history-missing"]
    assert "does not exist" in missing["message"] and str(wrong) in missing["message"]
    assert missing["fix"].startswith("check the path first"), missing["fix"]

    dry = cli("reconcile", "--dry-run", "--json", config=deployment.config).json()
    assert not [a for a in dry["actions"] if a["kind"] == "record-event"], dry["actions"]
    assert [a["kind"] for a in dry["actions"]] == ["report"]
    assert "--create-history" in dry["actions"][0]["why"]

    applied = cli("reconcile", "--json", "--no-snapshot", config=deployment.config)
    assert applied.code == 4 and not wrong.exists()

    doctor = cli("doctor", "--json", config=deployment.config).json()
    about = [r for r in doctor["results"] if r["path"] == str(wrong) and r["status"] == "error"]
    assert [r["code"] for r in about] == ["path-permissions"], about
    assert "does not exist" in about[0]["message"] and not wrong.exists()


def test_create_history_records_every_add_into_a_new_history_when_asked(deployment, cli):
    deployment.close()
    deployment.paths.history_db.unlink()
    result = cli(
        "reconcile", "--json", "--no-snapshot", "--create-history", config=deployment.config
    )
    assert result.code == 0, result.out + result.err
    actions = json.loads(result.out)["actions"]
    assert {a["kind"] for a in actions} == {"record-event"}
    assert len(actions) == len(deployment.seeded.live)
    assert cli("check", "--json", config=deployment.config).json()["counts"]["errors"] == 0


# --- point 4: doctor and check agree ------------------------------------------------------------


def test_doctor_and_check_agree_on_a_failure_in_the_last_two_seconds(deployment, cli):
    """A history write that failed just now looks in flight at first: check captures again and
    reports the error; doctor takes the same path and exits 3 too."""
    memory_id = build.add_with_failing_history(
        deployment.memory, deployment.paths, "likes jazz", "bob"
    )
    doctor = cli("doctor", "--json", config=deployment.config)
    check = cli("check", "--json", config=deployment.config)
    assert check.code == 3 and check.json()["findings"][0]["memory_id"] == memory_id
    summary = [r for r in doctor.json()["results"] if r["code"] == "check"]
    assert doctor.code == 3, summary
    assert summary[0]["status"] == "error" and "orphan-point" in summary[0]["message"]
    assert doctor.json()["check"]["errors"] == check.json()["counts"]["errors"] == 1


def test_check_names_a_store_held_in_another_mount_namespace_instead_of_bare_errors(
    deployment, cli
):
    """The field's PrivateTmp=yes: the app sees its own /tmp (a private tmpfs over the Qdrant
    directory here) and writes its vectors there, while its history.db is shared. memsync sees
    the old vectors: every new memory looks missing. check names the cause once."""
    assert shutil.which("unshare"), "util-linux unshare is needed"
    deployment.close()
    script = (
        "from memsync.demo import deployment as build\n"
        "import sys, time\nfrom pathlib import Path\n"
        f"paths = build.Paths(Path({str(deployment.paths.root)!r}))\n"
        "memory = build.open_memory(paths, embedder='memsync_hash')\n"
        "for n in range(6):\n"
        "    memory.add(f'fact number {n} about bob', user_id='bob', infer=False)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    app = subprocess.Popen(
        [
            "unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs tmpfs "$1" && exec "$2" -c "$3"', "sh",
            str(deployment.paths.qdrant), sys.executable, script,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert app.stdout is not None and app.stdout.readline().strip() == "ready", (
            app.stderr.read() if app.stderr else ""
        )
        check = cli("check", "--json", config=deployment.config)
        doctor = cli("doctor", "--json", config=deployment.config)
    finally:
        app.kill()
        app.wait()
    findings = check.json()["findings"]
    assert check.code == 3
    assert [f["code"] for f in findings] == ["private-tmp-mismatch"], findings
    assert "another mount namespace" in findings[0]["message"]
    # the six memories the app wrote look missing (plus what the stale files hold anyway)
    assert findings[0]["observed"] >= 6 and findings[0]["path"] == str(deployment.paths.qdrant)
    summary = [r for r in doctor.json()["results"] if r["code"] == "check"][0]
    assert doctor.code == 3 and "private-tmp-mismatch" in summary["message"]


# --- point 9: doctor sees what it should --------------------------------------------------------


def doctor_results(cli, deployment) -> list[dict]:
    result = cli("doctor", "--json", config=deployment.config)
    return result.json()["results"]


def test_doctor_warns_about_every_world_readable_store_file(deployment, cli):
    """mem0 creates its files under umask 022: storage.sqlite 0644 under a 0755 directory holds
    the same personal texts as history.db at 0644, and both warn."""
    deployment.close()
    storage = deployment.paths.qdrant / "collection" / "mem0" / "storage.sqlite"
    for path in (storage, deployment.paths.history_db):
        path.chmod(0o644)
    deployment.paths.qdrant.chmod(0o755)
    warned = {
        r["path"]
        for r in doctor_results(cli, deployment)
        if r["code"] == "path-permissions" and r["status"] == "warning"
    }
    assert {str(storage), str(deployment.paths.history_db)} <= warned
    storage.chmod(0o600)
    deployment.paths.history_db.chmod(0o600)
    results = doctor_results(cli, deployment)
    checked = {r["path"]: r["status"] for r in results if r["code"] == "path-permissions"}
    assert checked[str(storage)] == checked[str(deployment.paths.history_db)] == "ok"


def test_doctor_lists_the_old_history_left_after_a_move_with_its_age(deployment, cli):
    """history.db moved out of MEM0_DIR (the config now names the new place): the old file
    still holds every memory's text and is listed with its age."""
    deployment.close()
    moved = deployment.paths.root / "data" / "history.db"
    moved.parent.mkdir()
    shutil.copy2(deployment.paths.history_db, moved)
    text = deployment.config.read_text()
    deployment.config.write_text(
        text.replace(
            f'history_db_path = "{deployment.paths.history_db}"', f'history_db_path = "{moved}"'
        )
    )
    old = [r for r in doctor_results(cli, deployment) if r["code"] == "old-store-copy"]
    assert [r["path"] for r in old] == [str(deployment.paths.history_db)], old
    assert old[0]["status"] == "warning" and "old" in old[0]["message"]
    assert "day" in old[0]["message"] or "hour" in old[0]["message"]


# A private /tmp that still shows every entry of the machine's /tmp except "qdrant" (each bound
# back at its own path: the checkout, its venv and pytest's directories may live under /tmp),
# then a copy of the deployment's store where mem0 puts it by default: /tmp/qdrant.
PRIVATE_TMP = r"""
set -e
saved=$1; store=$2; shift 2
mount --bind /tmp "$saved"
mount -t tmpfs tmpfs /tmp
for entry in "$saved"/* "$saved"/.[!.]* "$saved"/..?*; do
  [ -e "$entry" ] || [ -L "$entry" ] || continue
  name=${entry##*/}
  [ "$name" = qdrant ] && continue
  if [ -L "$entry" ]; then ln -s "$(readlink "$entry")" "/tmp/$name"; continue; fi
  if [ -d "$entry" ]; then mkdir "/tmp/$name"; else touch "/tmp/$name"; fi
  mount --bind "$entry" "/tmp/$name"
done
cp -a "$store" /tmp/qdrant
exec "$@"
"""


def test_doctor_lists_the_qdrant_directory_left_in_tmp_after_a_move(deployment):
    """The how-to copies /tmp/qdrant (mem0's default) elsewhere; the old directory stays behind
    holding every vector and text until someone removes it. Doctor runs in its own mount
    namespace with a private /tmp, so the machine's /tmp/qdrant is never created, read or removed."""
    assert shutil.which("unshare"), "util-linux unshare is needed"
    deployment.close()
    saved = Path(tempfile.mkdtemp(prefix="memsync-test-tmp-", dir="/var/tmp"))  # a mount point
    try:
        result = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", PRIVATE_TMP, "sh", str(saved),
             str(deployment.paths.qdrant), sys.executable, "-m", "memsync", "doctor", "--json",
             "--config", str(deployment.config)],
            capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
        )  # fmt: skip
    finally:
        saved.rmdir()
    assert result.stdout, result.stderr
    old = [r for r in json.loads(result.stdout)["results"] if r["code"] == "old-store-copy"]
    assert [r["path"] for r in old] == ["/tmp/qdrant"], old  # noqa: S108 - mem0ai 2.2.1's default
    assert "hours old" in old[0]["message"] or "days old" in old[0]["message"]


def test_doctor_lists_pre_restore_copies_with_their_age(deployment, cli):
    deployment.close()
    aside = deployment.paths.qdrant.parent / "qdrant.pre-restore-20260101T000000Z"
    build.copy_qdrant(deployment.paths, aside)
    copies = [r for r in doctor_results(cli, deployment) if r["code"] == "pre-restore-copy"]
    assert [r["path"] for r in copies] == [str(aside)]
    assert "old" in copies[0]["message"] and "memories" in copies[0]["message"]


def test_doctor_prints_no_raw_none_and_no_lines_for_absent_optional_parts(deployment, cli):
    """A daemon configured but never run: its jobs have no success yet, and that is no error."""
    deployment.close()
    deployment.config.write_text(deployment.config.read_text() + '\n[daemon]\nprune_at = "03:10"\n')
    result = cli("doctor", config=deployment.config)
    assert "daemon-job" not in result.out  # not run yet: a fresh install is not "overdue"
    assert "it has never started: its jobs have not run yet" in result.out, result.out
    assert "None" not in result.out, result.out
    assert "migrations_qdrant" not in result.out  # telemetry off: mem0 never made it
    assert "does not exist" not in result.out, result.out


def test_doctor_never_takes_a_damaged_or_foreign_entry_for_the_newest_snapshot(deployment, cli):
    deployment.close()
    assert cli("snapshot", "create", config=deployment.config).code == 0
    directory = deployment.paths.root / "snapshots"
    real = next(p for p in directory.iterdir() if p.is_dir())
    fake = directory / "29990101T000000Z"  # newer by id and by mtime, but not a snapshot
    fake.mkdir()
    (fake / "manifest.json").write_text('{"format": 1, "id": "29990101T000000Z"}')
    (directory / "29980101T000000Z").symlink_to(real)  # a link named like a newer snapshot
    last = next(r for r in doctor_results(cli, deployment) if r["code"] == "last-snapshot")
    assert last["path"] == str(real) and real.name in last["message"], last
