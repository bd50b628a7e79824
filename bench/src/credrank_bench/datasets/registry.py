"""The registry of evaluation sets: name → reader."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from credrank_bench.datasets.base import DatasetError, EvalSet
from credrank_bench.datasets.coaid import read_coaid
from credrank_bench.datasets.cram_nq import read_cram_nq
from credrank_bench.datasets.demo import read_demo
from credrank_bench.datasets.evotemp import read_evotemp
from credrank_bench.datasets.newspolluted import read_newspolluted
from credrank_bench.datasets.ramdocs import read_ramdocs
from credrank_bench.datasets.realtimeqa import read_realtimeqa
from credrank_bench.datasets.trec2019_hm import read_trec2019_hm

# ---------------------------------------------------------------- registry

Reader = Callable[[str | Path], EvalSet]

DATASETS: dict[str, Reader] = {
    "trec2019-hm": read_trec2019_hm,
    "newspolluted": read_newspolluted,
    "cram-nq": read_cram_nq,
    "evotemp": read_evotemp,
    "ramdocs": read_ramdocs,
    "coaid": read_coaid,
    "realtimeqa": read_realtimeqa,
    "demo": read_demo,
}


def load_dataset(name: str, path: str | Path) -> EvalSet:
    """Read set ``name`` from ``path`` (see :data:`DEFAULT_PATHS` for the shared files)."""
    reader = DATASETS.get(name)
    if reader is None:
        raise DatasetError(f"name: unknown dataset {name!r}; known: {sorted(DATASETS)}")
    return reader(path)
