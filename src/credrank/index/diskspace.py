"""Free disk space, checked before the engine writes (issue 37, N2).

Qdrant Edge writes through memory-mapped files: when the disk fills while it writes, the
kernel answers the write to a mapped page with ``SIGBUS`` and the process dies without a
message (exit 135) — ``credrank index``, a reader that opens the index (the write-ahead log
preallocates a 32 MiB segment when a shard opens) and the whole ``credrank serve``. A signal
from a mapped page cannot be turned into a Python exception, so the space is checked *before*
each write with a margin, and a shortage is a :class:`DiskFullError` (a
:class:`~credrank.index.errors.StoreError`): the CLI exits 2 saying how much was written and
to re-run, the service answers 507 and stays up for reads.

Declared margins (measured on a tmpfs with Qdrant Edge 0.9: opening a shard for reading
crashed with 33 MiB free and worked with 40 MiB):

* :data:`OPEN_RESERVE` (48 MiB) to open a shard for reading, :data:`WRITER_RESERVE`
  (112 MiB) for writing;
* a write of ``n`` points needs :data:`OPEN_RESERVE` plus :func:`write_bytes` (each point's
  vectors, payload and indexes, counted three times over: the write-ahead log, the segment and
  room for the engine's own copies);
* optimising needs :data:`OPEN_RESERVE` plus the size of the shard's segments (a merge writes
  the merged segment before it drops the old ones).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from credrank.index.errors import StoreError

__all__ = ["OPEN_RESERVE", "WRITER_RESERVE", "DiskFullError", "folder_bytes", "free_bytes",
           "is_disk_full", "require_free", "write_bytes"]

MIB = 1 << 20
#: the free space a shard needs to open for reading (its write-ahead log preallocates a
#: 32 MiB segment)
OPEN_RESERVE = 48 * MIB
#: the free space a shard needs to open for writing (measured: opening a writer took ≈ 73 MiB:
#: two write-ahead-log segments and the segments' own growth)
WRITER_RESERVE = 112 * MIB


class DiskFullError(StoreError):
    """Not enough free disk space for what was about to be written (nothing of it was)."""


def free_bytes(path: str | Path) -> int:
    """Bytes free to an unprivileged writer on the file system holding ``path`` (its nearest
    existing ancestor when it does not exist yet)."""
    where = Path(path).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    stat = os.statvfs(where)
    return int(stat.f_bavail) * int(stat.f_frsize)


def folder_bytes(path: str | Path) -> int:
    """The bytes the files under ``path`` occupy on disk (allocated blocks: a preallocated
    sparse file counts what it holds)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:  # a file removed meanwhile
                continue
    return total


def write_bytes(points: int, dim: int, payload_bytes: int) -> int:
    """The declared estimate of the space a write of ``points`` points of ``dim`` dimensions
    and ``payload_bytes`` of payload (texts, fields) may take: ``3 × (points × (4 · dim +
    1 KiB) + payload_bytes)``."""
    return 3 * (points * (4 * dim + 1024) + payload_bytes)


def require_free(path: str | Path, need: int, what: str) -> None:
    """:class:`DiskFullError` when the file system of ``path`` has less than ``need`` bytes
    free; ``what`` says what needed them."""
    free = free_bytes(path)
    if free < need:
        raise DiskFullError(f"{path}: disk full: {_mib(free)} free, {what} needs about "
                            f"{_mib(need)}; nothing of it was written")


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says a disk is full (:class:`DiskFullError`, or an ``OSError`` with
    ``ENOSPC`` or ``EDQUOT``)."""
    if isinstance(exc, DiskFullError):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _mib(n: int) -> str:
    return f"{n / MIB:,.1f} MiB"
