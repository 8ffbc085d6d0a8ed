"""The app's mem0 config as the switch rewrites it: a JSON or YAML file, or printed for code.

"The app's mem0 config" is the file memsync's own config names in ``mem0_config_file`` (the
app reads it; JSON, or YAML by a ``.yaml``/``.yml`` suffix). The switch keeps every key of it
and replaces ``vector_store`` and ``embedder`` with the new config's, secrets resolved (mem0
reads no ``{file=...}``/``{env=...}`` forms: the app needs the values). Files are written
atomically (a temporary file in the same directory, fsync, ``os.replace``, the directory
fsynced) with the old file's mode and owner, after a byte-for-byte copy ``<file>.bak``.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsync.config import Config, Secret, resolve_secrets
from memsync.config.mem0_file import read_mem0_file
from memsync.errors import ConfigError, TryLaterError, UnavailableError
from memsync.state import fsync_dir

SWITCHED_KEYS = ("vector_store", "embedder")  # what the switch replaces in the app's mem0 dict


def app_config_path(config: Config) -> Path | None:
    """The app's mem0 config file (``mem0_config_file``), or None when the dict is in code. Pure."""
    return config.settings.mem0_config_file


def read_app_config(path: Path, source: str) -> dict[str, Any]:
    """The mapping in the app's mem0 config file, as written (secret forms kept). Reads only.

    Raises:
        ConfigError: (exit 10) the file is unreadable, not valid JSON/YAML, or not a mapping.
    """
    errors: list[str] = []
    mapping = read_mem0_file(path, errors)
    if errors:
        raise ConfigError(source, errors, f"fix the app's mem0 config {path}, then run again")
    return mapping


def switched_mapping(
    old: Mapping[str, Any], new_config: Config, environ: Mapping[str, str]
) -> dict[str, Any]:
    """``old`` with ``vector_store`` and ``embedder`` from ``new_config``, secrets resolved.

    Every other key of ``old`` is kept, in its order. Reads secret files.

    Raises:
        ConfigError: (exit 10) a secret of the new config cannot be resolved (named by key).
    """
    switched = dict(old)
    for name in SWITCHED_KEYS:
        switched[name] = resolve_secrets(new_config.mem0.get(name, {}), environ)
    return switched


def printed_config(new_config: Config) -> dict[str, Any]:
    """The new config's mem0 dict for the operator: secrets as their ``{file}``/``{env}`` form. Pure."""
    return _shown(dict(new_config.mem0))  # type: ignore[no-any-return]


def _shown(value: Any) -> Any:
    if isinstance(value, Secret):
        return {"file": value.file} if value.file is not None else {"env": value.env}
    if isinstance(value, Mapping):
        return {key: _shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shown(item) for item in value]
    return value


def render(path: Path, mapping: Mapping[str, Any]) -> str:
    """``mapping`` as the file's format: YAML for .yaml/.yml (``yaml.safe_dump``), else JSON. Pure."""
    if path.suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_dump(dict(mapping), sort_keys=False, allow_unicode=True)
    return json.dumps(mapping, indent=2, ensure_ascii=False) + "\n"


def backup_path(path: Path) -> Path:
    """``<file>.bak`` beside ``path``. Pure."""
    return path.with_name(path.name + ".bak")


def require_backup_free(path: Path, source: str) -> None:
    """Refuse (exit 10) when ``<file>.bak`` is there with other content than ``path``. Reads only.

    The switch writes the old config there; a ``.bak`` the operator kept (of an older
    version) would be lost. One equal to the file (a switch rolled back, or an operator's
    copy just before) is written over with the same bytes.

    Raises:
        ConfigError: the ``.bak`` differs from the file, or cannot be read.
    """
    backup = backup_path(path)
    try:
        kept = backup.read_bytes()
        if kept == path.read_bytes():
            return
    except FileNotFoundError:
        return
    except OSError as error:
        raise ConfigError(source, [f"{backup} cannot be read: {error.strerror}"]) from error
    raise ConfigError(
        source,
        [f"{backup} is there and is not a copy of {path}: the switch would write over it"],
        f"move {backup} aside (the switch keeps the old config there), then run --switch again",
    )


def back_up(path: Path) -> Path:
    """Copy ``path`` byte for byte to ``<file>.bak`` (atomically, same mode and owner).

    Raises:
        OSError: the file cannot be read or the copy written.
    """
    backup = backup_path(path)
    write_atomic(backup, path.read_bytes(), like=path)
    return backup


def replace_backed_up(path: Path, data: bytes) -> Path:
    """Back ``path`` up to its ``.bak`` (``back_up``), then write ``data`` over it atomically.

    Returns the ``.bak``. On an error ``path`` is as it was (a ``.bak`` may be written).

    Raises:
        TryLaterError: (exit 75) the disk is full (ENOSPC, EDQUOT).
        UnavailableError: (exit 11) another OS error (a read-only or unwritable directory).
    """
    try:
        backup = back_up(path)
        write_atomic(path, data, like=path)
    except OSError as error:
        said = f"cannot write {path} or its .bak ({error.strerror or error}); it is as it was"
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise TryLaterError(said, f"free space in {path.parent}, then run again") from error
        raise UnavailableError(said, f"make {path.parent} writable, then run again") from error
    return backup


def put_back(path: Path, backup: Path) -> None:
    """Write the ``.bak`` content over ``path`` atomically (the ``.bak`` is kept).

    Raises:
        OSError: the backup cannot be read or the file written.
    """
    write_atomic(path, backup.read_bytes(), like=backup)


def write_atomic(path: Path, data: bytes, *, like: Path) -> None:
    """Write ``data`` to ``path`` atomically with the mode and owner of ``like``.

    A temporary file in ``path``'s directory is written, fsynced, given ``like``'s mode (and
    owner, when this process may), renamed over ``path``; the directory is fsynced. A
    symbolic link is written through: the file it names is replaced, the link is kept.

    Raises:
        OSError: the directory cannot be written (the temporary file is removed).
    """
    path = Path(os.path.realpath(path))
    status = like.stat()
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as output:
            output.write(data)
            output.flush()
            os.fsync(output.fileno())
        os.chmod(temporary, status.st_mode & 0o7777)
        if (status.st_uid, status.st_gid) != (os.getuid(), os.getgid()):
            try:
                os.chown(temporary, status.st_uid, status.st_gid)
            except PermissionError:
                pass  # an unprivileged memsync keeps its own ownership; the mode is kept
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
