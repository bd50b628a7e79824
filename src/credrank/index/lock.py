"""The index-directory lock: ``DIR/.credrank.lock`` and ``flock`` on it — one writer at a time,
readers shared, nobody ever waits (see :class:`IndexLock`)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shlex
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from credrank.index.errors import StoreError
from credrank.index.manifest import check_index_dir

__all__ = ["LOCK_FILE", "IndexLock", "is_lock_error"]

#: the lock file of an index directory (see :class:`IndexLock`)
LOCK_FILE = ".credrank.lock"


class IndexLock:
    """The lock of an index directory: ``DIR/.credrank.lock`` and ``flock`` on it.

    A writer (:meth:`writer`, what ``open_store(..., create=True)`` and ``credrank index`` take)
    holds it exclusively for its whole run and records ``{"pid", "since", "command"}`` in the
    file; readers (:meth:`reader`) hold it shared. Neither ever waits: when the lock is taken
    the other way, :class:`StoreError` says by whom and since when, and nothing in the
    directory is touched. The kernel drops a ``flock`` when its process dies, so a lock file
    left by a killed run blocks no one; its content is only information.
    """

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def writer(cls, index_dir: str | Path, command: str | None = None) -> IndexLock:
        """Take the exclusive lock of ``index_dir`` (created, with its parents, if missing)."""
        check_index_dir(index_dir)
        directory = Path(index_dir)
        created = not directory.exists()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if created:
                _remove_new(directory)
            raise _lock_error(index_dir, "cannot create the index lock file", exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise StoreError(f"{index_dir}: cannot lock the index: {exc}") from exc
            try:
                readers_only = _try_shared(fd)
                holder = None if readers_only else _holder(fd)
            finally:
                os.close(fd)
            if readers_only:
                raise StoreError(f"index {index_dir} is being read by another process (a "
                                 "search); retry when it has finished") from None
            raise StoreError(f"{_written_by(index_dir, holder)}; wait for that run to finish "
                             "(or stop it) and re-run") from None
        info = {"pid": os.getpid(), "since": datetime.now(UTC).isoformat(timespec="seconds"),
                "command": command if command is not None else _command()}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode("utf-8") + b"\n", 0)
        except OSError as exc:  # a full disk: said, and a folder made here taken away again
            os.close(fd)
            if created:
                _remove_new(directory)
            raise _lock_error(index_dir, "cannot write the index lock file", exc) from exc
        return cls(directory / LOCK_FILE, fd)

    @classmethod
    def reader(cls, index_dir: str | Path) -> IndexLock:
        """Take the shared lock of ``index_dir``; ``StoreError`` while a writer holds it.

        A directory without a lock file that cannot be written (read-only media) is read
        without a lock; a missing directory takes none (opening it then says there is no index).
        """
        check_index_dir(index_dir)
        directory = Path(index_dir)
        path = directory / LOCK_FILE
        if not directory.is_dir():
            return cls(path, None)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                return cls(path, None)
        if _try_shared(fd):
            return cls(path, fd)
        try:
            holder = _holder(fd)
        finally:
            os.close(fd)
        raise StoreError(f"{_written_by(index_dir, holder)}; retry when it has finished")

    def release(self) -> None:
        """Drop the lock (idempotent); the file stays, as information only."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> IndexLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lock_error(index_dir: str | Path, what: str, exc: OSError) -> StoreError:
    """The lock's failure as a :class:`StoreError` (a :class:`~credrank.index.diskspace.
    DiskFullError` for a full disk: an error with a message, exit 2, never a traceback)."""
    from credrank.index.diskspace import DiskFullError, is_disk_full

    message = f"{index_dir}: {what}: {exc.strerror or exc}"
    if is_disk_full(exc):
        return DiskFullError(f"{message} (disk full); nothing was written")
    return StoreError(message)


def _remove_new(directory: Path) -> None:
    """Take away ``directory``, made by the failed lock, when it holds no more than its lock
    file (never a folder holding anything else)."""
    try:
        (directory / LOCK_FILE).unlink(missing_ok=True)
        directory.rmdir()
    except OSError:
        pass


def _try_shared(fd: int) -> bool:
    """Whether a shared lock could be taken on ``fd`` without waiting (it is then held)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise StoreError(f"cannot lock the index: {exc}") from exc
    return True


def _holder(fd: int) -> dict[str, Any] | None:
    """What the lock file says about its writer (``None`` when unreadable or not yet written)."""
    try:
        data = json.loads(os.pread(fd, 65536, 0).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _written_by(index_dir: str | Path, holder: Mapping[str, Any] | None) -> str:
    if not holder or "pid" not in holder:
        return f"index {index_dir} is being written by another process"
    text = f"index {index_dir} is being written by PID {holder['pid']}"
    if holder.get("since"):
        text += f" since {holder['since']}"
    if holder.get("command"):
        text += f" ({holder['command']})"
    return text


def _command() -> str:
    """This process's command line, for the lock file (shortened)."""
    argv = [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv and sys.argv[0] else ["python"]
    text = shlex.join(argv)
    return text if len(text) <= 200 else text[:199] + "…"


def is_lock_error(exc: BaseException) -> bool:
    """Whether an engine's exception on open says another process holds the data."""
    text = str(exc)
    return "WouldBlock" in text or "already accessed" in text or "Resource temporarily" in text
