"""Crash-safe file replacement: a reader sees the old file or the new one, never half."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
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


def atomic_write_text(path: str | Path, text: str) -> None:
    """Replace ``path`` by ``text``: a unique temporary file in the same folder, flushed and
    fsynced, then ``os.replace`` and an fsync of the folder. On any error the temporary file
    is removed and the old file is left as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def save_json(path: str | Path, document: Mapping[str, Any], *, what: str = "file") -> None:
    """Write ``document`` as indented JSON (no NaN or infinity) to ``path`` atomically.
    ``ValueError`` naming ``path`` when it is a folder or its folder does not exist."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: expected a file path for the {what}, got a directory")
    if not path.parent.is_dir():
        raise ValueError(f"{path}: the folder {path.parent} does not exist")
    atomic_write_text(path, json.dumps(document, indent=2, allow_nan=False) + "\n")
