"""Crash-safe file and folder replacement (a reader sees the old one or the new one, never
half) and file fingerprints."""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any


def fsync_dir(directory: Path) -> None:
    """fsync a folder so a rename in it survives a crash (skipped where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (``/proc``), else
    by setting it back at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def replacing_mode(path: Path) -> int:
    """The permission bits a file written in place of ``path`` gets: those of the file it
    replaces, else what ``open()`` gives a new file (``0o666`` less the umask). A temporary
    file (``mkstemp``) is private, ``0o600``: renamed into place as it was, a model file
    written for a service running as another user was unreadable to it."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def replaceable(path: Path) -> Path:
    """The file a write in place of ``path`` replaces: ``path``, or the file a symbolic link
    there points to (the link is kept). An ``OSError`` naming ``path`` when it exists and is
    no regular file: a device (``--out /dev/full --force`` turned the device into a file), a
    pipe, a socket or a folder is never replaced by a rename."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return path
    if not stat.S_ISREG(found.st_mode):
        kind = "a folder" if stat.S_ISDIR(found.st_mode) else "a device, a pipe or a socket"
        raise OSError(errno.EEXIST, f"exists and is {kind}, not a regular file; it is "
                      "never replaced", str(path))
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A new temporary file beside ``path`` (:func:`replaceable`) for the block to write;
    when the block ends without an error it is fsynced, given the permissions of the file it
    replaces (:func:`replacing_mode`) and renamed over ``path``, and the folder is fsynced;
    on any error it is removed and ``path`` is left as it was (a full disk left a truncated
    file). An ``OSError`` without a file name is raised naming ``path``."""
    target = replaceable(Path(path))
    mode = replacing_mode(target)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with tmp.open("rb+") as written:
            os.fchmod(written.fileno(), mode)
            os.fsync(written.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # a write names no file
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise
    fsync_dir(target.parent)


def atomic_write_text(path: str | Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` (:func:`replacing`: a reader sees the old file or the
    new one, never half; a device, pipe or folder at ``path`` is refused)."""
    with replacing(path) as tmp:
        tmp.write_bytes(data)


def save_json(path: str | Path, document: Mapping[str, Any], *, what: str = "file") -> None:
    """Write ``document`` as indented JSON (no NaN or infinity) to ``path`` atomically.
    ``ValueError`` naming ``path`` when it is a folder or its folder does not exist."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: expected a file path for the {what}, got a directory")
    if not path.parent.is_dir():
        raise ValueError(f"{path}: the folder {path.parent} does not exist")
    atomic_write_text(path, json.dumps(document, indent=2, allow_nan=False) + "\n")


def file_sha256(path: str | Path) -> str:
    """The hex SHA-256 of the bytes of the file at ``path`` (read a MiB at a time)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def staged_folder(target: Path, what: str, hint: str) -> Iterator[Path]:
    """A new private folder beside ``target`` for the block to build ``what`` in; when the
    block ends without an error the folder is made readable by every user (0o755) and
    replaces ``target`` (removed first when there), else it is removed and ``target`` is left
    as it was. :class:`RuntimeError` naming ``what`` and ``hint`` (where else it may go) when
    the folder cannot be made, when ``target`` is a file, and when it holds anything a build
    of ``what`` does not write (a folder of the user's: it is never removed; the build is
    then discarded)."""
    if target.exists() and not target.is_dir():
        raise RuntimeError(f"{target}: expected a folder for {what}, got a file; choose "
                           f"another folder with {hint}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as exc:
        raise RuntimeError(f"cannot write {what} under {target.parent} ({exc}); choose "
                           f"another folder with {hint}") from exc
    try:
        yield tmp
        tmp.chmod(0o755)  # mkdtemp made it private; what it holds is for every user
        if target.exists():
            foreign = sorted(set(os.listdir(target)) - set(os.listdir(tmp)))
            if foreign:  # not an earlier build of the same thing: never removed
                raise RuntimeError(
                    f"{target}: expected an empty folder or one holding {what}, got a folder "
                    f"holding {foreign[0]!r}" + (f" and {len(foreign) - 1} more"
                                                 if len(foreign) > 1 else "")
                    + f"; nothing was removed; choose another folder with {hint}")
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def folder_step_main(argv: Sequence[str] | None, *, prog: str, description: str,
                     dir_help: str, force_help: str, build: Callable[..., Any]) -> int:
    """The command line of a one-time step that builds a folder in :func:`staged_folder`
    (``python -m credrank.index.onnx_export``, ``python -m credrank.generate.prepare``):
    ``--dir`` and ``--force`` passed to ``build(directory, force=…)``; the
    :class:`RuntimeError` it raises is said on stderr as ``error: …`` and ends it with exit 2."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--dir", type=Path, default=None, help=dir_help)
    parser.add_argument("--force", action="store_true", help=force_help)
    args = parser.parse_args(argv)
    try:
        build(args.dir, force=args.force)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
