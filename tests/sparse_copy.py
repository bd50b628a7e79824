"""Copy a file keeping its holes, for tests that copy an index (not a test file).

A Qdrant Edge index preallocates its write-ahead log and vector pages as sparse files: the
120-document demo index holds 1.3 MB of data in 225 MB of file length. ``shutil.copytree``
copies with ``shutil.copy2``, which writes the holes out as zeros, so every copy of that index
took 225 MB of disk, and the test suite's copies ≈ 26 GB of ``/tmp`` per run (pytest keeps
three runs). :func:`sparse_copy` copies only the data regions (``os.SEEK_DATA`` /
``os.SEEK_HOLE``) and sets the length, so a copy takes what the original takes;
:func:`copy_index` copies an index folder with it (its lock file left behind)::

    copy_index(src, dst)  # or shutil.copytree(src, dst, copy_function=sparse_copy)

Where the platform or file system cannot report holes it copies the whole file, as
``shutil.copy2`` does.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

_CHUNK = 1 << 20


def _data_regions(fd: int, size: int) -> list[tuple[int, int]] | None:
    """``[(start, end)]`` of the data of the open file ``fd``; ``None`` where holes cannot be
    asked for."""
    if not hasattr(os, "SEEK_DATA"):
        return None
    regions, pos = [], 0
    try:
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data after pos: the rest is a hole
                    break
                raise
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            regions.append((start, end))
            pos = end
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return None
        raise
    return regions


def sparse_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> str:
    """Copy ``src`` to ``dst`` (data, length, then metadata as ``shutil.copy2``), writing
    only its data regions so that its holes stay holes; returns ``dst``."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size = os.fstat(fin.fileno()).st_size
        regions = _data_regions(fin.fileno(), size)
        for start, end in [(0, size)] if regions is None else regions:
            fin.seek(start)
            fout.seek(start)
            left = end - start
            while left > 0:
                chunk = fin.read(min(left, _CHUNK))
                if not chunk:  # the file shrank while it was copied
                    break
                fout.write(chunk)
                left -= len(chunk)
        fout.truncate(size)
    shutil.copystat(src, dst)
    return str(dst)



def copy_index(src: Path, dst: Path) -> Path:
    """The index folder ``src`` copied to ``dst`` (returned) with its holes kept and without
    its ``.credrank.lock``, so that the copy opens as a fresh index of its own."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".credrank.lock"),
                    copy_function=sparse_copy)
    return Path(dst)
