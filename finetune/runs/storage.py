"""The disk under the run ledger: a read-only or full disk said as such (never "the ledger may
be corrupt", whose advice -- move the file aside -- would lose it), a read-only connection for
commands that only read, rows read back whatever a damaged column holds, and the file kept
private (0600, its new folder 0700)."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
from pathlib import Path
from urllib.parse import quote

from finetune import settings
from finetune.errors import ConfigError, DataError
from finetune.files import no_room
from finetune.runs.ledger_schema import SCHEMA_VERSION, migrate

# How long a command waits for another process's lock on the ledger (a backup, a DB browser,
# another finetune writing) before it says so: finetune's own transactions take milliseconds.
LOCK_WAIT_S = 5.0


class LockedError(DataError):
    """Another process holds the ledger locked (the file is fine)."""


def locked_error(path: Path, exc: BaseException) -> LockedError | None:
    """A LockedError for SQLITE_BUSY/SQLITE_LOCKED ("database is locked"), else None."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in str(exc):
        return LockedError(
            f"the run ledger {path} is locked by another process (a backup, a database "
            f"browser, another finetune command) and stayed locked for {LOCK_WAIT_S:g} s; "
            "nothing was changed and the ledger is not damaged",
            "wait for that process to finish (or close it), then try again.",
        )
    return None


class StorageError(DataError):
    """The ledger's disk is read-only or full (the file itself may be fine)."""

    def __init__(self, what: str, fix: str, full: bool) -> None:
        super().__init__(what, fix)
        self.full = full


def storage_error(path: Path, exc: BaseException) -> StorageError | None:
    """A StorageError for a read-only or full disk under the ledger, else None."""
    code = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    full = code == errno.ENOSPC or name.startswith("SQLITE_FULL") or "disk is full" in text
    # SQLite reports a full disk met while growing its shared-memory or WAL file as a plain
    # I/O error: ask the file system whether it has room left
    io_error = name.startswith("SQLITE_IOERR") or "disk i/o error" in text
    if full or (io_error and no_room(path)):
        return StorageError(
            f"the disk holding the run ledger {path} is full (ENOSPC; SQLite said: {exc}); "
            "nothing was half-written and the ledger itself is not damaged",
            "free some space on that disk, or point FINETUNE_DATA_DIR (or FINETUNE_LEDGER) "
            "at another disk, then run the command again.",
            full=True,
        )
    readonly = code in (errno.EROFS, errno.EACCES, errno.EPERM)
    if readonly or name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")):
        return StorageError(
            f"the run ledger {path} cannot be written: {exc} (a read-only file system, or "
            "no permission to write there)",
            "make that folder writable, or point FINETUNE_DATA_DIR (or FINETUNE_LEDGER) at a "
            "writable folder.",
            full=False,
        )
    return None


def open_read_write(path: Path) -> sqlite3.Connection:
    """A read-write connection to the ledger at ``path`` (created or migrated); a DataError
    that says what is wrong (a read-only or full disk, a file that is no database)."""
    check_ledger_path(path)
    conn = None
    try:
        if str(path) != ":memory:":
            _private(path)
        conn = sqlite3.connect(path, timeout=LOCK_WAIT_S, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        migrate(conn)
        return conn
    except BaseException as exc:
        if conn is not None:
            conn.close()  # a refused ledger keeps no file open (nor its locks)
        if isinstance(exc, OSError | sqlite3.Error):
            storage = storage_error(path, exc) or locked_error(path, exc)
            if storage is not None:
                raise storage from None
        if isinstance(exc, sqlite3.DatabaseError):
            raise DataError(
                f"the run ledger {path} cannot be opened: {exc}",
                "move the file aside (it may be corrupt) and launch again; a new one is created.",
            ) from None
        raise


def _private(path: Path) -> None:
    """The ledger readable by its owner only: its folder made 0700 when finetune makes it,
    the file created 0600 (SQLite gives its -wal and -shm files the database's mode), and an
    older ledger of ours (0644 under the usual umask) narrowed to 0600 when opened. A folder
    that exists is left as it is: it may be the user's own, shared on purpose."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            st = os.lstat(file)
        except FileNotFoundError:
            continue
        mine = stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()
        if mine and st.st_mode & 0o077:
            os.chmod(file, stat.S_IMODE(st.st_mode) & 0o700)


def check_ledger_path(path: Path) -> None:
    """The ledger's path can hold a SQLite file: not a device (FINETUNE_LEDGER=/dev/null),
    not under a regular file (a folder that is a file)."""
    fix = (
        "set FINETUNE_LEDGER (or FINETUNE_DATA_DIR) to a file path in a folder of yours, e.g. "
        "~/finetune/ledger.sqlite, or unset it to use the data directory's."
    )
    if path.exists() and not path.is_file():
        raise ConfigError(
            f"the run ledger {path} is not a regular file (a device or a folder)", fix
        )
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(
                    f"the run ledger {path} cannot be made: {parent} is a file, not a folder",
                    fix,
                )
            break


def decode_json_columns(row: dict, columns: dict[str, str]) -> dict[str, str]:
    """Replace each JSON column of ``row`` ({attribute: column}) by its decoded value, in
    place; one that does not decode to its type (a hand edit, a damaged page) becomes empty,
    and the returned {column: problem} names it: one damaged row must not hide the others."""
    import json

    problems = {}
    for attr, col in columns.items():
        empty: list[object] | dict[str, object] = [] if attr == "charges" else {}
        text = row.pop(col, None)
        why: str | None
        try:
            value = json.loads(text or json.dumps(empty))
        except (ValueError, TypeError) as exc:
            value, why = empty, f"not JSON ({exc})"
        else:
            why = None if isinstance(value, type(empty)) else f"a {type(value).__name__}"
            value = value if why is None else empty
        if why:
            problems[col] = f"its {col} column is damaged ({why}); read as empty"
        row[attr] = value
    return problems


def default_path(file_name: str) -> Path:
    """FINETUNE_LEDGER (a file), else ``file_name`` in the data directory."""
    named = os.environ.get("FINETUNE_LEDGER")
    if named is not None and (not named.strip() or Path(named).expanduser().is_dir()):
        raise ConfigError(
            f"the environment variable FINETUNE_LEDGER={named!r} is invalid: "
            + ("it is empty" if not named.strip() else "it names a folder, not a file"),
            "set FINETUNE_LEDGER to the ledger's file path (e.g. DIR/ledger.sqlite), or unset "
            "it to use the data directory's.",
        )
    return Path(named).expanduser() if named else settings.get().data_dir / file_name


def open_read_only(path: Path, refused: StorageError) -> sqlite3.Connection:
    """The ledger at ``path`` opened read-only (for a command that only reads, on a disk it
    cannot write). SQLite reads a WAL database read-only when it can make its shared-memory
    file; where it cannot (a read-only file system), the file is read as immutable -- safe,
    as nothing can write to it there. ``refused`` is raised if neither works."""
    uri = "file:" + quote(str(path.resolve()))
    for mode in ("?mode=ro", "?mode=ro&immutable=1"):
        conn = None
        try:
            conn = sqlite3.connect(uri + mode, uri=True, timeout=LOCK_WAIT_S, isolation_level=None)
            conn.row_factory = sqlite3.Row
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            conn.execute("SELECT count(*) FROM runs").fetchone()
        except sqlite3.Error:
            if conn is not None:
                conn.close()
            continue
        if version > SCHEMA_VERSION:
            conn.close()
            raise DataError(
                f"the run ledger has schema version {version}, newer than this finetune "
                f"understands ({SCHEMA_VERSION})",
                "upgrade finetune, or point FINETUNE_DATA_DIR at another data directory.",
            )
        return conn
    raise refused
