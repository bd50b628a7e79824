"""What the fit commands of the learned stages share (``credrank credibility fit``,
``credrank stance fit``): one ``--jobs`` option — one name, one default, one validator."""

from __future__ import annotations

import os
from typing import Annotated

import typer

#: at most this many processes for ``--jobs 0``
MAX_AUTO_JOBS = 8

JobsOption = Annotated[int, typer.Option(
    "--jobs", min=0, help="processes for the cross-validation fits (0: one per CPU core, at "
                          f"most {MAX_AUTO_JOBS}; the same numbers for any value)")]


def jobs(value: int) -> int:
    """The processes ``--jobs value`` asks for: ``value``, or for ``0`` one per usable CPU
    core (at most :data:`MAX_AUTO_JOBS`)."""
    if value > 0:
        return value
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_AUTO_JOBS))
