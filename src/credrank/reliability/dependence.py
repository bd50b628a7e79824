"""Copies and Sybils: agreement beyond what agreement on the truth explains (chapter 35.3).

"One ballot per identity limits duplication inside that identity, not attacks using many
identities or independent-looking copies." Two sources that err independently share a wrong
answer only by chance; copies share their wrong answers too. For sources ``s, t`` and the
questions ``Q_st`` both answered that have a resolved consensus ``z(q)``:

    observed  o_st = Σ_{q ∈ Q_st} 1[A_s(q) ~ A_t(q)]
    expected  e_st = Σ_{q ∈ Q_st} [ r_s r_t + (1 − r_s)(1 − r_t) π_q ]

with ``π_q`` the probability that two independent wrong answers to ``q`` coincide, estimated as
``Σ_c p_c²`` over the shares ``p_c`` of the wrong (``≠ z(q)``) ballots on ``q``, and where
``q`` has fewer than two wrong ballots by the rate pooled over the other questions, shrunk to
a declared prior (:func:`coincidence_rates`). The pair is **dependent**
when ``|Q_st| >= min_overlap``, the excess ``(o_st − e_st)/|Q_st| >= min_excess`` and the
z-score ``(o_st − e_st)/sqrt(Σ p_q(1 − p_q)) >= z_min``.

The consensus and ``r`` must not be produced by the suspects themselves (many copies *are* the
consensus): candidate copies — pairs with raw agreement ``>= near_duplicate`` on at least
``min_overlap`` co-answered questions, or whose documents are near-duplicates — are first
collapsed to one ballot each, IWMV runs on the collapsed answers, and ``r_s`` is each source's
agreement with that consensus. Dependence clusters are the connected components of dependent
pairs (plus document-duplicate pairs). :func:`collapse` turns each cluster into one ballot
(its members' plurality answer, tie rule of :mod:`~credrank.reliability.vote`).

Limits: copies that agree with each other only on a few target questions and answer
independently elsewhere do not stand out by this test. When the independent sources are so
accurate that they are near-duplicates of each other too, they are collapsed like the copies;
if no other source remains, the two voices split every question 1–1, nothing is resolved and
agreement cannot tell the farm from the honest sources (the consensus diagnostics still flag
sources that give one answer to most questions). The default ``method="blocked"``
screens all pairs in blocks (``O(S²)`` BLAS work, ``O(block·S)`` memory) and computes the
statistic exactly for the pairs that can pass; ``method="pairs"``, the reference, builds every
``S × S`` matrix (``O(S²)`` memory). ``max_sources`` guards both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from credrank.core.validation import check_choice, check_int, check_probability, check_real
from credrank.reliability.estimate import (
    EncodedAnswers,
    agreement_rates,
    iterate_weighted_majority,
)
from credrank.reliability.vote import vote_matrix

if TYPE_CHECKING:
    from scipy import sparse


@dataclass(frozen=True)
class PairDependence:
    """Evidence that two sources are not independent."""

    source_a: str
    source_b: str
    overlap: int
    observed: float
    expected: float
    excess: float
    z: float
    shared_wrong: int
    document_overlap: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "source_a", "source_b", "overlap", "observed", "expected", "excess", "z",
            "shared_wrong", "document_overlap")}


@dataclass(frozen=True)
class DependenceReport:
    """Dependent pairs and the clusters they form (members as source ids, size >= 2)."""

    source_ids: tuple[str, ...]
    pairs: list[PairDependence] = field(default_factory=list)
    clusters: list[list[str]] = field(default_factory=list)
    candidates: list[list[str]] = field(default_factory=list)

    def cluster_of(self) -> dict[str, int]:
        return {s: i for i, members in enumerate(self.clusters) for s in members}

    def groups(self) -> list[list[int]]:
        """A partition of the source indices: each cluster, then every other source alone."""
        index = {s: i for i, s in enumerate(self.source_ids)}
        grouped = [[index[s] for s in members] for members in self.clusters]
        taken = {i for g in grouped for i in g}
        return grouped + [[i] for i in range(len(self.source_ids)) if i not in taken]

    def to_dict(self) -> dict[str, Any]:
        return {"clusters": [list(c) for c in self.clusters],
                "pairs": [p.to_dict() for p in self.pairs],
                "candidates": [list(c) for c in self.candidates]}


def connected_groups(n: int, rows: np.ndarray, cols: np.ndarray) -> list[list[int]]:
    """The connected components of size >= 2 of the graph on ``n`` nodes with the edges
    ``(rows[i], cols[i])``, each sorted, ordered by their first node."""
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components
    if n == 0:
        return []
    graph = sparse.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    groups: dict[int, list[int]] = {}
    for i, lab in enumerate(labels.tolist()):
        groups.setdefault(lab, []).append(i)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def one_hot(classes: np.ndarray) -> sparse.csr_matrix:
    """The ``S × (Q·C)`` 0/1 matrix of an answer-class matrix (``-1`` = no answer): column
    ``q·C + c`` is 1 where a source gave class ``c`` to question ``q``."""
    from scipy import sparse
    m = np.asarray(classes)
    n_c = max(int(m.max(initial=-1)) + 1, 1)
    s_idx, q_idx = np.nonzero(m >= 0)
    cols = q_idx * n_c + m[s_idx, q_idx]
    return sparse.csr_matrix((np.ones(len(s_idx)), (s_idx, cols)),
                             shape=(m.shape[0], m.shape[1] * n_c))


def pairwise_agreement(classes: np.ndarray,
                       questions: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(agree, overlap)``: ``(S, S)`` counts of co-answered questions and of equal answers.

    ``questions`` optionally restricts to a boolean mask of questions.
    """
    from scipy import sparse
    m = np.asarray(classes)
    if questions is not None:
        m = np.where(np.asarray(questions, dtype=bool)[None, :], m, -1)
    answered = sparse.csr_matrix((m >= 0).astype(np.float64))
    overlap = (answered @ answered.T).toarray()
    x = one_hot(m)
    agree = (x @ x.T).toarray()
    return agree, overlap


def collapse(encoded: EncodedAnswers, groups: Sequence[Sequence[int]]) -> EncodedAnswers:
    """One ballot per group: the members' plurality answer per question (tie: lowest class id;
    all members abstain → abstain). Ballot ids: the first member's id, ``+k`` for k copies."""
    m = encoded.classes
    rows = []
    ids = []
    for g in groups:
        g = list(g)
        if not g:
            raise ValueError("groups: expected non-empty groups of source indices")
        if len(g) == 1:
            rows.append(m[g[0]])
            ids.append(encoded.source_ids[g[0]])
            continue
        winner, _ = vote_matrix(m[g], np.ones(len(g)))
        rows.append(winner)
        ids.append(f"{encoded.source_ids[g[0]]}+{len(g) - 1}")
    classes = np.vstack(rows) if rows else np.zeros((0, m.shape[1]), dtype=np.int64)
    return EncodedAnswers(tuple(ids), encoded.question_ids, classes.astype(np.int64),
                          encoded.labels)


def _shingles(text: str, size: int) -> set[int]:
    words = text.casefold().split()
    grams = [" ".join(words[i:i + size]) for i in range(max(len(words) - size + 1, 1))]
    return {int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little")
            for g in grams if g}


def document_overlap(source_ids: Sequence[str], documents: Mapping[str, Sequence[str]], *,
                     shingle: int = 5, jaccard: float = 0.8) -> np.ndarray:
    """``D[s, t]`` = share of the documents of ``s`` or of ``t`` (the larger of the two shares)
    that have a near-duplicate (word ``shingle``-gram Jaccard ``>= jaccard``) in the other's
    documents. Sources without documents get 0."""
    index = {s: i for i, s in enumerate(source_ids)}
    docs: list[tuple[int, set[int]]] = []
    for source, texts in documents.items():
        if source not in index:
            continue
        for text in texts:
            sh = _shingles(str(text), shingle)
            if sh:
                docs.append((index[source], sh))
    n = len(source_ids)
    out = np.zeros((n, n))
    postings: dict[int, list[int]] = {}
    for d, (_, sh) in enumerate(docs):
        for h in sh:
            postings.setdefault(h, []).append(d)
    matched: dict[tuple[int, int], set[int]] = {}
    for d, (s, sh) in enumerate(docs):
        counts: dict[int, int] = {}
        for h in sh:
            for e in postings[h]:
                if e != d:
                    counts[e] = counts.get(e, 0) + 1
        for e, inter in counts.items():
            t, sh_e = docs[e]
            if t != s and inter / (len(sh) + len(sh_e) - inter) >= jaccard:
                matched.setdefault((s, t), set()).add(d)
    n_docs = np.bincount([s for s, _ in docs], minlength=n)
    for (s, t), ds in matched.items():
        out[s, t] = max(out[s, t], len(ds) / n_docs[s])
    return np.maximum(out, out.T)


#: prior coincidence rate of two independent wrong answers when no question has two
#: independent wrong ballots to measure it on (see :func:`coincidence_rates`)
PI_PRIOR = 0.5


def coincidence_rates(collapsed: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``π_q``, the chance that two independent wrong answers to ``q`` coincide (35.3 test).

    Measured on the wrong (``≠ z(q)``) ballots of ``collapsed``, the answers with every
    candidate copy group collapsed to one voice (copies must not measure their own
    coincidence):

    * a question with ``w_q >= 2`` wrong ballots: ``π_q = Σ_c p_c²`` over their shares;
    * any other question (also unresolved ones): the pooled rate
      ``π̄ = (Σ_{q: w_q >= 2} π_q + π₀) / (#{q: w_q >= 2} + 1)``, the mean over the measured
      questions shrunk by one pseudo-question at the prior :data:`PI_PRIOR` ``π₀ = 1/2``, the
      coincidence of two uniform draws from two wrong answers (the one seen and one unseen).
      With no measured question, ``π̄ = π₀``.

    The pooled rate replaces the former ``π_q = 1`` for questions with fewer than two wrong
    ballots: with accurate independent sources almost every question has at most one wrong
    voice, and ``π = 1`` made the expected agreement of two always-wrong copies
    ``0·0 + 1·1·1 = 1``, equal to what they showed, so a content farm whose every answer is
    wrong could never be flagged (copies with ``r < 0.15`` or ``> 0.85`` never reached the
    default excess). Two sources with ``r = 0`` and independent errors on open questions agree
    on about ``π̄`` of them, not on all. On a small shared label set (yes/no) the measured
    questions give ``π_q = 1`` and ``π̄`` follows them.
    """
    cm = np.asarray(collapsed)
    zz = np.asarray(z).reshape(-1)
    n_c = max(int(cm.max(initial=-1)) + 1, 1)
    wrong = (cm >= 0) & (cm != zz[None, :]) & (zz >= 0)[None, :]
    measured = np.flatnonzero(wrong.sum(axis=0) >= 2)
    measured_pi = np.empty(len(measured))
    for k, q in enumerate(measured.tolist()):
        counts = np.bincount(cm[wrong[:, q], q], minlength=n_c).astype(np.float64)
        p = counts / counts.sum()
        measured_pi[k] = float(np.sum(p * p))
    pooled = (float(measured_pi.sum()) + PI_PRIOR) / (len(measured) + 1)
    pi = np.full(cm.shape[1], pooled)
    pi[measured] = measured_pi
    return pi


def consensus_without_copies(encoded: EncodedAnswers, candidates: Sequence[Sequence[int]], *,
                             tol: float = 1e-6, max_iter: int = 100
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The consensus the dependence test measures against: IWMV over the sources with each
    candidate near-duplicate group collapsed into one voice.

    Returns ``(z, r, π)``: the consensus class per question on ``𝒬_res`` (``-1`` unresolved,
    tied or answered by fewer than two voices, :func:`~credrank.reliability.estimate.
    resolved_consensus`), each source's agreement rate with it (0 where it answered no
    resolved question) and ``π_q`` (:func:`coincidence_rates`).
    """
    m = encoded.classes
    n = m.shape[0]
    taken = {i for g in candidates for i in g}
    groups = [list(g) for g in candidates] + [[i] for i in range(n) if i not in taken]
    collapsed = collapse(encoded, groups)
    fit = iterate_weighted_majority(collapsed.classes, tol=tol, max_iter=max_iter)
    z = np.where(fit["resolved"], fit["consensus"], -1)
    r, known, _ = agreement_rates(m, z)
    r = np.where(known, r, 0.0)
    return z, r, coincidence_rates(collapsed.classes, z)


#: implementations of :func:`detect_dependence`: ``"blocked"`` (default) and ``"pairs"`` (the
#: reference: every ``S × S`` matrix built whole)
DEPENDENCE_METHODS: tuple[str, ...] = ("blocked", "pairs")
#: pair entries (rows × columns) of one block of the blocked method: 16 MiB per float32 array
_BLOCK_PAIRS = 1 << 22
#: largest dense one-hot ``(source, (question, class))`` matrix (entries); sparse above it
_DENSE_ONE_HOT = 1 << 25
#: pairs verified exactly per chunk (each chunk gathers ``2 × chunk × Q`` class ids)
_VERIFY_CHUNK = 4096


def _document_pairs(source_ids: Sequence[str], documents: Mapping[str, Sequence[str]] | None
                    ) -> dict[tuple[int, int], float]:
    """The non-zero upper-triangle entries ``(i < j) → D[i, j]`` of :func:`document_overlap`."""
    if not documents:
        return {}
    dense = document_overlap(source_ids, documents)
    rows, cols = np.nonzero(np.triu(dense, k=1))
    return {(int(i), int(j)): float(dense[i, j]) for i, j in zip(rows, cols, strict=True)}


def _check_options(near_duplicate: float, min_overlap: int, min_excess: float, z_min: float,
                   doc_threshold: float, max_sources: int
                   ) -> tuple[float, int, float, float, float, int]:
    return (check_probability("near_duplicate", near_duplicate),
            check_int("min_overlap", min_overlap, 1),
            check_probability("min_excess", min_excess),
            check_real("z_min", z_min),
            check_probability("doc_threshold", doc_threshold),
            check_int("max_sources", max_sources, 1))


def detect_dependence(
    encoded: EncodedAnswers, *, documents: Mapping[str, Sequence[str]] | None = None,
    near_duplicate: float = 0.9, min_overlap: int = 5, min_excess: float = 0.25,
    z_min: float = 3.0, doc_threshold: float = 0.5, max_sources: int = 5000,
    tol: float = 1e-6, max_iter: int = 100, method: str = "blocked",
    block_size: int | None = None,
) -> DependenceReport:
    """Find sources whose agreement exceeds what independent errors explain (chapter 35.3).

    See the module docstring for the test. Returns the dependent pairs (sorted by excess) and
    the dependence clusters (connected components), with the candidate near-duplicate groups
    that were collapsed before the consensus was computed.

    ``method="blocked"`` (default) screens the source pairs in blocks of rows and verifies the
    survivors with the exact statistic (:func:`_detect_blocked`); ``method="pairs"`` builds
    every ``S × S`` matrix whole (the reference, kept for tests and benchmarks). Both return
    the same report, float for float. ``block_size``: rows per block of the blocked method
    (default: about 4M pairs per block).
    """
    near_duplicate, min_overlap, min_excess, z_min, doc_threshold, max_sources = _check_options(
        near_duplicate, min_overlap, min_excess, z_min, doc_threshold, max_sources)
    method = check_choice("method", method, DEPENDENCE_METHODS)
    if block_size is not None:
        block_size = check_int("block_size", block_size, 1)
    n = encoded.classes.shape[0]
    if n > max_sources:
        need = ("O(S²) memory" if method == "pairs"
                else "O(S²·Q) time (O(block·S) memory)")
        raise ValueError(f"detect_dependence: {n} sources; the pairwise test needs {need} "
                         f"and is limited to max_sources={max_sources}")
    options: dict[str, Any] = {
        "near_duplicate": near_duplicate, "min_overlap": min_overlap, "min_excess": min_excess,
        "z_min": z_min, "doc_threshold": doc_threshold, "tol": tol, "max_iter": max_iter}
    if method == "pairs":
        return _detect_pairs(encoded, documents, **options)
    with _one_blas_thread():
        return _detect_blocked(encoded, documents, block_size=block_size, **options)


def _detect_pairs(encoded: EncodedAnswers, documents: Mapping[str, Sequence[str]] | None, *,
                  near_duplicate: float, min_overlap: int, min_excess: float, z_min: float,
                  doc_threshold: float, tol: float, max_iter: int) -> DependenceReport:
    """The reference implementation: every pairwise matrix built whole (``O(S²)`` memory)."""
    from scipy import sparse
    m = encoded.classes
    n = m.shape[0]
    ids = encoded.source_ids
    agree_all, overlap_all = pairwise_agreement(m)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    raw = np.divide(agree_all, overlap_all, out=np.zeros_like(agree_all),
                    where=overlap_all > 0)
    cand = upper & (overlap_all >= min_overlap) & (raw >= near_duplicate)
    docs = np.zeros((n, n))
    if documents:
        docs = document_overlap(ids, documents)
        cand |= upper & (docs >= doc_threshold)
    candidates = connected_groups(n, *np.nonzero(cand))
    z, r, pi = consensus_without_copies(encoded, candidates, tol=tol, max_iter=max_iter)
    resolved = z >= 0
    agree, overlap = pairwise_agreement(m, resolved)
    b = sparse.csr_matrix(((m >= 0) & resolved[None, :]).astype(np.float64))
    sum_pi = (b @ sparse.diags(pi) @ b.T).toarray()
    sum_pi2 = (b @ sparse.diags(pi * pi) @ b.T).toarray()
    a = np.outer(r, r)
    bb = np.outer(1 - r, 1 - r)
    expected = a * overlap + bb * sum_pi
    var = a * (1 - a) * overlap + bb * (1 - 2 * a) * sum_pi - bb * bb * sum_pi2
    excess = np.divide(agree - expected, overlap, out=np.zeros_like(agree), where=overlap > 0)
    zscore = np.divide(agree - expected, np.sqrt(np.maximum(var, 1e-12)))
    flagged = upper & (overlap >= min_overlap) & (excess >= min_excess) & (zscore >= z_min)
    edges = flagged | (upper & (docs >= doc_threshold))
    shared_wrong, _ = pairwise_agreement(np.where((m != z[None, :]) & resolved[None, :], m, -1))
    pairs = [
        PairDependence(ids[i], ids[j], int(overlap[i, j]),
                       float(agree[i, j] / max(overlap[i, j], 1)),
                       float(expected[i, j] / max(overlap[i, j], 1)), float(excess[i, j]),
                       float(zscore[i, j]), int(shared_wrong[i, j]), float(docs[i, j]))
        for i, j in zip(*np.nonzero(edges), strict=True)]
    pairs.sort(key=lambda p: (-p.excess, p.source_a, p.source_b))
    clusters = [[ids[i] for i in g] for g in connected_groups(n, *np.nonzero(edges))]
    return DependenceReport(ids, pairs, clusters, [[ids[i] for i in g] for g in candidates])


# -- the blocked method -----------------------------------------------------------------------

def _class_matrix(m: np.ndarray) -> tuple[np.ndarray | sparse.csr_matrix, np.ndarray]:
    """One-hot ``(source, (question, class))`` matrix over the classes that occur (float32,
    dense when it is small enough) and the question of each column."""
    from scipy import sparse
    n = m.shape[0]
    s_idx, q_idx = np.nonzero(m >= 0)
    n_c = max(int(m.max(initial=-1)) + 1, 1)
    key = q_idx.astype(np.int64) * n_c + m[s_idx, q_idx]
    used = np.bincount(key, minlength=m.shape[1] * n_c) > 0
    keys = np.flatnonzero(used)
    col = (np.cumsum(used) - 1)[key]
    width = len(keys)
    if n * width <= _DENSE_ONE_HOT:
        x = np.zeros((n, width), dtype=np.float32)
        x[s_idx, col] = 1.0
        return x, keys // n_c
    return (sparse.csr_matrix((np.ones(len(s_idx), dtype=np.float32), (s_idx, col)),
                              shape=(n, width)), keys // n_c)


def _gram(x: np.ndarray | sparse.csr_matrix, i0: int, i1: int,
          y: np.ndarray | sparse.csr_matrix | None = None) -> np.ndarray:
    """Rows ``i0:i1`` against rows ``i0:`` of ``x · yᵀ`` (``y = x`` by default), dense."""
    from scipy import sparse
    y = x if y is None else y
    if sparse.issparse(x):
        return np.asarray((x[i0:i1] @ y[i0:].T).toarray(), dtype=np.float32)
    return x[i0:i1] @ y[i0:].T


def _screen(answered: Any, left: Any, right: Any, ranges: Any, min_overlap: int,
            slack: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per row block ``[i0, i1)``: the upper-triangle pairs with overlap ``>= min_overlap``
    and screening score ``left·rightᵀ >= −slack`` (the proven float32 error bound)."""
    found = []
    for i0, i1 in ranges:
        o = _gram(answered, i0, i1)
        g = _gram(left, i0, i1, right)
        found.append(_upper_nonzero((o >= min_overlap) & (g >= -slack), i0))
    return found


def _upper_nonzero(keep: np.ndarray, i0: int) -> tuple[np.ndarray, np.ndarray]:
    """Global ``(i, j)`` with ``j > i`` of the true entries of a block (rows ``i0:``, columns
    ``i0:``)."""
    rows, cols = np.nonzero(keep)
    upper = cols > rows
    return rows[upper] + i0, cols[upper] + i0


def _row_ranges(n: int, block_size: int | None) -> list[tuple[int, int]]:
    """Row blocks ``i0:i1``; each is multiplied against the columns ``i0:`` (the upper
    triangle), so about eight blocks skip nearly half of the square."""
    size = block_size or min(max(64, _BLOCK_PAIRS // max(n, 1)), max(128, -(-n // 8)))
    return [(i0, min(i0 + size, n)) for i0 in range(0, n, size)]


def _side_by_side(parts: Sequence[np.ndarray | sparse.csr_matrix]
                  ) -> np.ndarray | sparse.csr_matrix:
    """Columns of ``parts`` side by side (float32; sparse if any part is)."""
    from scipy import sparse
    if any(sparse.issparse(part) for part in parts):
        return sparse.hstack([sparse.csr_matrix(part) for part in parts], format="csr",
                             dtype=np.float32)
    return np.hstack([np.asarray(part, dtype=np.float32) for part in parts])


def _float32_error(width: int, total: float) -> float:
    """Bound on the error of a float32 dot product of ``width`` terms (inputs rounded to
    float32 too) whose absolute values sum to at most ``total``: ``γ_{width+3}·total``."""
    k = (width + 3) * 2.0 ** -24
    return k / (1 - k) * total


def _exact_pair_sums(bd: sparse.csr_matrix, b: sparse.csr_matrix, rows: np.ndarray,
                     cols: np.ndarray) -> np.ndarray:
    """``(bd @ b.T)[rows, cols]`` computed as the reference's whole product computes it: entry
    ``(i, j)`` of a CSR product adds ``bd[i, k]·b[j, k]`` in the stored order of row ``i`` of
    ``bd``, which row and column subsets keep, so the floats are identical."""
    ru, ri = np.unique(rows, return_inverse=True)
    cu, ci = np.unique(cols, return_inverse=True)
    prod = (bd[ru] @ b[cu].T).tocsr()
    return np.asarray(prod[ri, ci], dtype=np.float64).reshape(-1)


def _counts(m: np.ndarray, rows: np.ndarray, cols: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Co-answered and equal-answer counts (float64) of the pairs ``(rows[k], cols[k])``."""
    overlap = [np.zeros(0)]
    agree = [np.zeros(0)]
    for k0 in range(0, len(rows), _VERIFY_CHUNK):
        mi, mj = m[rows[k0:k0 + _VERIFY_CHUNK]], m[cols[k0:k0 + _VERIFY_CHUNK]]
        overlap.append(((mi >= 0) & (mj >= 0)).sum(axis=1).astype(np.float64))
        agree.append(((mi == mj) & (mi >= 0)).sum(axis=1).astype(np.float64))
    return np.concatenate(overlap), np.concatenate(agree)


def _verify(m: np.ndarray, z: np.ndarray, r: np.ndarray, pi: np.ndarray, rows: np.ndarray,
            cols: np.ndarray) -> dict[str, np.ndarray]:
    """The reference statistic, exactly (the same float operations), for the pairs
    ``(rows[k], cols[k])``: overlap, agree, expected, excess, z-score and shared wrong answers
    on the resolved questions."""
    from scipy import sparse
    resolved = z >= 0
    mr = np.where(resolved[None, :], m, -1)
    wrong = np.where((m != z[None, :]) & resolved[None, :], m, -1)
    b = sparse.csr_matrix(((m >= 0) & resolved[None, :]).astype(np.float64))
    bd1 = (b @ sparse.diags(pi)).tocsr()
    bd2 = (b @ sparse.diags(pi * pi)).tocsr()
    out: dict[str, list[np.ndarray]] = {k: [] for k in (
        "overlap", "agree", "expected", "excess", "zscore", "shared_wrong")}
    for k0 in range(0, len(rows), _VERIFY_CHUNK):
        i = rows[k0:k0 + _VERIFY_CHUNK]
        j = cols[k0:k0 + _VERIFY_CHUNK]
        overlap, agree = _counts(mr, i, j)
        sum_pi = _exact_pair_sums(bd1, b, i, j)
        sum_pi2 = _exact_pair_sums(bd2, b, i, j)
        a = r[i] * r[j]
        bb = (1 - r)[i] * (1 - r)[j]
        expected = a * overlap + bb * sum_pi
        var = a * (1 - a) * overlap + bb * (1 - 2 * a) * sum_pi - bb * bb * sum_pi2
        excess = np.divide(agree - expected, overlap, out=np.zeros_like(agree),
                           where=overlap > 0)
        zscore = np.divide(agree - expected, np.sqrt(np.maximum(var, 1e-12)))
        wi, wj = wrong[i], wrong[j]
        shared_wrong = ((wi == wj) & (wi >= 0)).sum(axis=1)
        for key, value in (("overlap", overlap), ("agree", agree), ("expected", expected),
                           ("excess", excess), ("zscore", zscore),
                           ("shared_wrong", shared_wrong)):
            out[key].append(value)
    empty = {"shared_wrong": np.zeros(0, dtype=np.int64)}
    return {k: np.concatenate(v) if v else empty.get(k, np.zeros(0)) for k, v in out.items()}


def _one_blas_thread() -> AbstractContextManager[Any]:
    """One BLAS thread for the block products (threadpoolctl, when installed): on a shared or
    busy machine a contended BLAS thread pool makes the many mid-sized products several
    times slower (measured: 0.35 s against 1.4–2.1 s at S = 2,000 on two busy cores). The
    screen is sound whatever the summation order, so the results are the same."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it the products only run slower
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _detect_blocked(encoded: EncodedAnswers, documents: Mapping[str, Sequence[str]] | None, *,
                    near_duplicate: float, min_overlap: int, min_excess: float, z_min: float,
                    doc_threshold: float, tol: float, max_iter: int,
                    block_size: int | None = None) -> DependenceReport:
    """The test of :func:`_detect_pairs` without any ``S × S`` matrix: screen, then verify.

    Two passes over row blocks ``i0 <= i < i1`` against the columns ``j >= i0`` (the upper
    triangle), each block two float32 matrix products (BLAS) of ``O(block·S)`` memory: the
    co-answered count ``o`` (an integer, exact in float32) and one bilinear form ``G`` that
    is positive for every pair the exact test can pick. A pair survives when
    ``o >= min_overlap`` and ``G >= −ε``, where ``ε = γ_{K+3}·T`` bounds the float32 error
    of a ``K``-term dot product whose terms sum to at most ``T`` in absolute value (inputs
    rounded to float32 included), so no pair is lost to rounding:

    1. *near-duplicate candidates* (all questions): with ``p(q)`` the most common class of
       question ``q``, two equal answers are both ``p(q)`` or both another class, so
       ``a <= a⁺ = Σ_q [both p(q)] + [both ≠ p(q)]``; ``G = a⁺ − (near_duplicate − 10⁻⁶)·o``
       (``3Q`` columns). A candidate has ``a/o >= near_duplicate`` (up to float64 rounding),
       hence ``G >= 10⁻⁶·o > 0``. Survivors are re-checked with the exact counts and the
       reference's float64 ``a / o >= near_duplicate``.
    2. *dependent pairs* (resolved questions): ``G = a − r_s r_t o − (1 − r_s)(1 − r_t)
       Σ π_q − (min_excess − 10⁻³)·o`` (the one-hot classes plus ``2Q`` columns), which is
       ``>= 10⁻³·o > 0`` for a pair whose excess (35.3) reaches ``min_excess``.

    The survivors (and the document-duplicate pairs) are then verified with the reference
    arithmetic (:func:`_verify`): the same counts, the same sparse sums in the same order, the
    same element-wise float64 expressions, so pairs, floats and clusters are identical to
    ``method="pairs"``. Cost: the screen still touches every pair (``O(S²·(D + 4Q))`` flops
    for ``D`` answer classes in all, at BLAS speed, ``O(block·S)`` memory); the exact
    statistic costs ``O(Q)`` per survivor. On answers where every pair of sources shares
    answers (the usual dense calibration set) any exact test must look at every pair; the
    screen makes that look cheap, not sub-quadratic. Survivors of pass 2 are about the
    dependent pairs; pass 1 also keeps pairs of sources that almost never give the most
    common answer (``a⁺`` is loose for them), which only costs their exact re-check.
    """
    m = np.asarray(encoded.classes)
    n, n_q = m.shape
    ids = encoded.source_ids
    doc_pairs = _document_pairs(ids, documents)
    # pairs that are edges by their documents; with doc_threshold = 0 every pair is (a pair
    # without documents has D = 0), as in the reference
    doc_edges = ({(i, j) for i in range(n) for j in range(i + 1, n)} if doc_threshold <= 0.0
                 else {p for p, v in doc_pairs.items() if v >= doc_threshold})
    doc_cands = doc_edges if documents else set()
    ranges = _row_ranges(n, block_size)
    answered = (m >= 0).astype(np.float32)
    x, col_q = _class_matrix(m)
    # pass 1, near-duplicate candidates. With p(q) the most common class of question q, two
    # equal answers are both p(q) or both not p(q), so a <= a⁺ = Σ [both p] + Σ [both not p];
    # one product gives G = a⁺ − (near_duplicate − 10⁻⁶)·o, which is > 0 for every candidate
    n_c = max(int(m.max(initial=-1)) + 1, 1)
    s_idx, q_idx = np.nonzero(m >= 0)
    votes = np.bincount(q_idx * n_c + m[s_idx, q_idx], minlength=n_q * n_c)
    top = votes.reshape(n_q, n_c).argmax(axis=1) if n_q else np.zeros(0, dtype=np.int64)
    on_top = ((m == top[None, :]) & (m >= 0)).astype(np.float32)
    off_top = answered - on_top
    left = _side_by_side([on_top, off_top, -(near_duplicate - 1e-6) * answered])
    right = _side_by_side([on_top, off_top, answered])
    slack = _float32_error(left.shape[1], 2.0 * n_q)
    found = _screen(answered, left, right, ranges, min_overlap, slack)
    none = np.zeros(0, dtype=np.int64)
    rows = np.concatenate([none, *(f[0] for f in found)])
    cols = np.concatenate([none, *(f[1] for f in found)])
    oo, aa = _counts(m, rows, cols)
    raw = np.divide(aa, oo, out=np.zeros_like(aa), where=oo > 0)
    ok = (oo >= min_overlap) & (raw >= near_duplicate)
    cand_rows = [rows[ok], np.array([p[0] for p in doc_cands], dtype=np.int64)]
    cand_cols = [cols[ok], np.array([p[1] for p in doc_cands], dtype=np.int64)]
    candidates = connected_groups(n, np.concatenate(cand_rows), np.concatenate(cand_cols))
    z, r, pi = consensus_without_copies(encoded, candidates, tol=tol, max_iter=max_iter)

    # pass 2, dependent pairs on the resolved questions: one product gives
    # G = a − r_s r_t o − (1 − r_s)(1 − r_t) Σ π_q − (min_excess − 10⁻³)·o
    resolved = z >= 0
    answered_r = answered * resolved[None, :].astype(np.float32)
    keep_cols = resolved[col_q]
    x_r = x[:, keep_cols] if isinstance(x, np.ndarray) else x.tocsc()[:, keep_cols].tocsr()
    # the per-question term r_s r_t + (1 − r_s)(1 − r_t) π_q + c (c = min_excess − 10⁻³) is
    # the bilinear form (r_s, 1 − r_s) [[1 + c, c], [c, π_q + c]] (r_t, 1 − r_t)ᵀ: 2Q columns
    rc = r[:, None]
    c = min_excess - 1e-3
    left = _side_by_side([x_r, -(rc * (1 + c) + (1 - rc) * c) * answered_r,
                          -(rc * c + (1 - rc) * (pi[None, :] + c)) * answered_r])
    right = _side_by_side([x_r, rc * answered_r, (1 - rc) * answered_r])
    # |terms| summed: a <= o, and each of the two others <= (1 + |c|)·o <= 2o
    slack = _float32_error(left.shape[1], 5.0 * n_q)
    screened = _screen(answered_r, left, right, ranges, min_overlap, slack)
    pair_set = {(int(i), int(j)) for rows, cols in screened
                for i, j in zip(rows.tolist(), cols.tolist(), strict=True)} | doc_edges
    ordered = sorted(pair_set)
    rows = np.array([p[0] for p in ordered], dtype=np.int64)
    cols = np.array([p[1] for p in ordered], dtype=np.int64)
    stats = _verify(m, z, r, pi, rows, cols)
    docv = np.array([doc_pairs.get(p, 0.0) for p in ordered], dtype=np.float64)
    flagged = ((stats["overlap"] >= min_overlap) & (stats["excess"] >= min_excess)
               & (stats["zscore"] >= z_min))
    edges = flagged | (docv >= doc_threshold)
    pairs = []
    for k in np.flatnonzero(edges).tolist():
        overlap = stats["overlap"][k]
        pairs.append(PairDependence(
            ids[rows[k]], ids[cols[k]], int(overlap),
            float(stats["agree"][k] / max(overlap, 1)),
            float(stats["expected"][k] / max(overlap, 1)), float(stats["excess"][k]),
            float(stats["zscore"][k]), int(stats["shared_wrong"][k]), float(docv[k])))
    pairs.sort(key=lambda p: (-p.excess, p.source_a, p.source_b))
    clusters = [[ids[i] for i in g] for g in connected_groups(n, rows[edges], cols[edges])]
    return DependenceReport(ids, pairs, clusters, [[ids[i] for i in g] for g in candidates])
