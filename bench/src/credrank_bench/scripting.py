"""What the benchmark scripts of ``bench/scripts`` share: where the shared data lives, the
CrAM NQ file read or the script stopped with where to find it, and the millisecond
arithmetic of their tables."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from credrank_bench.datasets import read_cram_nq
from credrank_bench.datasets.base import EvalSet

#: ``../shared/data`` beside the repository (``bench/src/credrank_bench`` → the repository)
SHARED_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
#: the default CrAM NQ file of the scripts that time a stage on real passages
CRAM_NQ = SHARED_DATA / "cram" / "cram_nq_1000_reconstructed.jsonl"


def cram_nq_or_exit(path: Path) -> EvalSet:
    """The CrAM NQ set at ``path``; a missing file ends the script saying where to look."""
    if not path.is_file():
        sys.exit(f"{path}: CrAM NQ file not found (give --data; see ../shared/data/SOURCES.md)")
    return read_cram_nq(path)


def ms(seconds: float) -> float:
    """``seconds`` in milliseconds."""
    return 1000.0 * seconds


def percentile_ms(seconds: list[float], q: float) -> float:
    """The ``q``-th percentile of ``seconds``, in milliseconds."""
    return ms(float(np.percentile(np.asarray(seconds), q)))


__all__ = ["CRAM_NQ", "SHARED_DATA", "cram_nq_or_exit", "ms", "percentile_ms"]
