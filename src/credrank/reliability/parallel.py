"""The pairwise dependence test on a Dask cluster, in blocks of source pairs.

:func:`detect_dependence_parallel` returns the same :class:`~credrank.reliability.dependence.
DependenceReport` as :func:`~credrank.reliability.dependence.detect_dependence` — the same
pairs with the same floats, in the same order, and the same clusters. What costs there is the
two ``S × S`` passes (``O(S²·Q)`` sparse products and ``S²`` element-wise arrays: raw agreement
for the candidate copies, then observed/expected agreement, z-scores and shared wrong answers);
here each pass is split into blocks of rows ``i0 ≤ i < i1`` (the pairs ``(i, j)``, ``j > i``)
computed on the workers, which return only the pairs that pass. The cheap ``O(S·Q)`` steps in
between (collapsing candidate copies, the IWMV consensus, ``r`` and ``π_q``) run here, once.

Why identical: every entry ``(i, j)`` is computed by the same operations on the same inputs.
The sparse products of a row block are the rows of the full product, summed in the same order
(a CSR row keeps its column order when sliced), and the rest is element-wise; the pairs are
sorted by the same key and the clusters are connected components, which do not depend on the
order the blocks come back in. No ``S × S`` matrix is ever built in one place, so the memory
of the test is spread over the workers too (the ``max_sources`` guard stays, so that the
result, including a refusal, is the single-process one).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from credrank.core.cluster import dask_client
from credrank.core.validation import check_int, check_probability, check_real
from credrank.reliability.dependence import (
    DependenceReport,
    PairDependence,
    connected_groups,
    consensus_without_copies,
    document_overlap,
    one_hot,
)
from credrank.reliability.estimate import (
    EncodedAnswers,
)

__all__ = ["detect_dependence_parallel"]


def _agreement_rows(m: np.ndarray, i0: int, i1: int,
                    questions: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``i0:i1``, columns ``i0:`` of :func:`~credrank.reliability.dependence.
    pairwise_agreement` (``agree``, ``overlap``), computed from the same full matrices."""
    from scipy import sparse
    if questions is not None:
        m = np.where(np.asarray(questions, dtype=bool)[None, :], m, -1)
    answered = sparse.csr_matrix((m >= 0).astype(np.float64))
    overlap = (answered[i0:i1] @ answered[i0:].T).toarray()
    x = one_hot(m)
    agree = (x[i0:i1] @ x[i0:].T).toarray()
    return agree, overlap


def _upper(i0: int, i1: int, n: int) -> np.ndarray:
    """``j > i`` for rows ``i0:i1`` and columns ``i0:n``."""
    return np.arange(i0, n)[None, :] > np.arange(i0, i1)[:, None]


def _candidate_block(m: np.ndarray, i0: int, i1: int, min_overlap: int,
                     near_duplicate: float, docs: np.ndarray | None,
                     doc_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Pass 1 on a worker: the candidate-copy pairs ``(i, j)`` with ``i0 <= i < i1``."""
    n = m.shape[0]
    agree_all, overlap_all = _agreement_rows(m, i0, i1)
    upper = _upper(i0, i1, n)
    raw = np.divide(agree_all, overlap_all, out=np.zeros_like(agree_all),
                    where=overlap_all > 0)
    cand = upper & (overlap_all >= min_overlap) & (raw >= near_duplicate)
    if docs is not None:
        cand |= upper & (docs >= doc_threshold)
    rows, cols = np.nonzero(cand)
    return rows + i0, cols + i0


def _pair_block(m: np.ndarray, i0: int, i1: int, z: np.ndarray, r: np.ndarray,
                pi: np.ndarray, ids: Sequence[str], docs: np.ndarray | None,
                min_overlap: int, min_excess: float, z_min: float, doc_threshold: float
                ) -> tuple[list[PairDependence], np.ndarray, np.ndarray]:
    """Pass 2 on a worker: the dependent pairs with ``i0 <= i < i1`` and their edges."""
    from scipy import sparse
    n = m.shape[0]
    resolved = z >= 0
    upper = _upper(i0, i1, n)
    agree, overlap = _agreement_rows(m, i0, i1, resolved)
    b = sparse.csr_matrix(((m >= 0) & resolved[None, :]).astype(np.float64))
    bt = b[i0:].T
    sum_pi = ((b @ sparse.diags(pi))[i0:i1] @ bt).toarray()
    sum_pi2 = ((b @ sparse.diags(pi * pi))[i0:i1] @ bt).toarray()
    a = np.outer(r[i0:i1], r[i0:])
    bb = np.outer(1 - r[i0:i1], 1 - r[i0:])
    expected = a * overlap + bb * sum_pi
    var = a * (1 - a) * overlap + bb * (1 - 2 * a) * sum_pi - bb * bb * sum_pi2
    excess = np.divide(agree - expected, overlap, out=np.zeros_like(agree), where=overlap > 0)
    zscore = np.divide(agree - expected, np.sqrt(np.maximum(var, 1e-12)))
    flagged = upper & (overlap >= min_overlap) & (excess >= min_excess) & (zscore >= z_min)
    doc_block = np.zeros_like(agree) if docs is None else docs
    edges = flagged | (upper & (doc_block >= doc_threshold))
    shared_wrong, _ = _agreement_rows(np.where((m != z[None, :]) & resolved[None, :], m, -1),
                                      i0, i1)
    rows, cols = np.nonzero(edges)
    pairs = [
        PairDependence(ids[i + i0], ids[j + i0], int(overlap[i, j]),
                       float(agree[i, j] / max(overlap[i, j], 1)),
                       float(expected[i, j] / max(overlap[i, j], 1)), float(excess[i, j]),
                       float(zscore[i, j]), int(shared_wrong[i, j]), float(doc_block[i, j]))
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True)]
    return pairs, rows + i0, cols + i0


def _blocks(n: int, n_blocks: int) -> list[tuple[int, int]]:
    """Row ranges covering ``0:n`` with about the same number of pairs ``j > i`` each (the
    upper triangle: early rows hold more pairs, so early blocks are shorter)."""
    n_blocks = max(1, min(n_blocks, n))
    bounds = [0]
    total = n * (n - 1) / 2
    for k in range(1, n_blocks):
        # rows before i hold i·n − i(i+1)/2 pairs; solve for k/n_blocks of the total
        target = total * k / n_blocks
        i = math.floor(n - 0.5 - math.sqrt(max((n - 0.5) ** 2 - 2 * target, 0.0)))
        if bounds[-1] < i < n:
            bounds.append(i)
    bounds.append(n)
    return list(itertools.pairwise(bounds))


def detect_dependence_parallel(
    encoded: EncodedAnswers, *, client: Any = None, workers: int = 0,
    blocks: int | None = None, documents: Mapping[str, Sequence[str]] | None = None,
    near_duplicate: float = 0.9, min_overlap: int = 5, min_excess: float = 0.25,
    z_min: float = 3.0, doc_threshold: float = 0.5, max_sources: int = 5000,
    tol: float = 1e-6, max_iter: int = 100,
) -> DependenceReport:
    """:func:`~credrank.reliability.dependence.detect_dependence` with its two pairwise passes
    in blocks of rows on Dask workers; the report is identical (module docstring).

    ``client`` is a ``distributed.Client`` or a scheduler address; without one a local cluster
    of ``workers`` processes is started and closed. ``blocks``: how many row blocks per pass
    (default: four per worker thread). The other arguments are those of ``detect_dependence``.
    """
    near_duplicate = check_probability("near_duplicate", near_duplicate)
    min_excess = check_probability("min_excess", min_excess)
    doc_threshold = check_probability("doc_threshold", doc_threshold)
    min_overlap = check_int("min_overlap", min_overlap, 1)
    z_min = check_real("z_min", z_min)
    max_sources = check_int("max_sources", max_sources, 1)
    if blocks is not None:
        blocks = check_int("blocks", blocks, 1)
    m = encoded.classes
    n = m.shape[0]
    if n > max_sources:
        raise ValueError(f"detect_dependence: {n} sources; the pairwise test needs O(S²) memory "
                         f"and is limited to max_sources={max_sources}")
    ids = encoded.source_ids
    docs = document_overlap(ids, documents) if documents else None
    with dask_client(workers, client) as dc:
        ranges = _blocks(n, blocks or 4 * max(1, sum(dc.nthreads().values())))
        m_remote = dc.scatter(m, broadcast=True, hash=False)

        def doc_rows(i0: int, i1: int) -> np.ndarray | None:
            return None if docs is None else docs[i0:i1, i0:]

        futures = [dc.submit(_candidate_block, m_remote, i0, i1, min_overlap, near_duplicate,
                             doc_rows(i0, i1), doc_threshold, pure=False)
                   for i0, i1 in ranges]
        found = dc.gather(futures)
        rows = np.concatenate([f[0] for f in found]) if found else np.zeros(0, dtype=int)
        cols = np.concatenate([f[1] for f in found]) if found else np.zeros(0, dtype=int)
        candidates = connected_groups(n, rows, cols)
        z, r, pi = consensus_without_copies(encoded, candidates, tol=tol, max_iter=max_iter)
        futures = [dc.submit(_pair_block, m_remote, i0, i1, z, r, pi, ids, doc_rows(i0, i1),
                             min_overlap, min_excess, z_min, doc_threshold, pure=False)
                   for i0, i1 in ranges]
        done = dc.gather(futures)
    pairs = [p for block in done for p in block[0]]
    pairs.sort(key=lambda p: (-p.excess, p.source_a, p.source_b))
    e_rows = np.concatenate([b[1] for b in done]) if done else np.zeros(0, dtype=int)
    e_cols = np.concatenate([b[2] for b in done]) if done else np.zeros(0, dtype=int)
    clusters = [[ids[i] for i in g] for g in connected_groups(n, e_rows, e_cols)]
    return DependenceReport(ids, pairs, clusters, [[ids[i] for i in g] for g in candidates])
