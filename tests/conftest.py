"""Shared test fixtures.

``shared_data``: the real data sets in ``../shared/data`` beside the checkout (never copied into
the repository); tests that use it are skipped with a clear message when it is absent.
``write``: writes a text or bytes file under ``tmp_path`` and returns its path.
``make_batch``: builds a :class:`~credrank.core.candidates.Candidates` batch from similarities
and metadata columns (the one factory tests use instead of building batches by hand).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from credrank.core.candidates import Candidates

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test when the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not available: expected the folder {SHARED_DATA} "
                    "(../shared/data beside the checkout, see shared/data/SOURCES.md)")
    return SHARED_DATA


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """``write(name, content)``: create ``tmp_path/name`` (str as UTF-8, bytes as is)."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
        return path

    return _write


BatchFactory = Callable[..., Candidates]


def build_batch(sims: Sequence[float], *, ids: Sequence[str] | None = None, query: str = "q",
                vectors: Sequence[Sequence[float]] | np.ndarray | None = None,
                factors: Mapping[str, Sequence[float]] | None = None,
                **columns: Sequence[Any]) -> Candidates:
    """A batch of ``len(sims)`` candidates ``d0, d1, …`` (or ``ids``) with retrieval scores
    ``sims``; each keyword is a metadata column (``source_type=[…]``, ``text=[…]``, …), each
    ``factors`` entry a factor in [0, 1]. Nothing is defaulted but the ids and the query."""
    n = len(sims)
    ids = list(ids) if ids is not None else [f"d{i}" for i in range(n)]
    for name, values in columns.items():
        if len(values) != n:
            raise ValueError(f"column {name!r}: expected {n} values, got {len(values)}")
    meta = [{name: values[i] for name, values in columns.items()} for i in range(n)]
    batch = Candidates.from_records(query, ids, list(sims), meta,
                                    vectors=None if vectors is None else np.asarray(vectors))
    for name, values in (factors or {}).items():
        batch = batch.with_factor(name, np.asarray(values, dtype=float), low=0.0, high=1.0)
    return batch


@pytest.fixture
def make_batch() -> BatchFactory:
    """:func:`build_batch` as a fixture."""
    return build_batch
