"""Copies and Sybils: agreement beyond what agreement on the truth explains (chapter 35.3).

"One ballot per identity limits duplication inside that identity, not attacks using many
identities or independent-looking copies." Two sources that err independently share a wrong
answer only by chance; copies share their wrong answers too. For sources ``s, t`` and the
questions ``Q_st`` both answered that have a resolved consensus ``z(q)``:

    observed  o_st = Σ_{q ∈ Q_st} 1[A_s(q) ~ A_t(q)]
    expected  e_st = Σ_{q ∈ Q_st} [ r_s r_t + (1 − r_s)(1 − r_t) π_q ]

with ``π_q`` the probability that two independent wrong answers to ``q`` coincide, estimated as
``Σ_c p_c²`` over the shares ``p_c`` of the wrong (``≠ z(q)``) ballots on ``q`` (``π_q = 1``,
the conservative value, when ``q`` has fewer than two wrong ballots). The pair is **dependent**
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
independently elsewhere do not stand out by this test; the pairwise matrices cost O(S²) memory
(``max_sources`` guards it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from credrank.core.validation import check_int, check_probability, check_real
from credrank.reliability.estimate import (
    EncodedAnswers,
    agreement_rates,
    iterate_weighted_majority,
)
from credrank.reliability.vote import vote_matrix


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


def _components(n: int, rows: np.ndarray, cols: np.ndarray) -> list[list[int]]:
    if n == 0:
        return []
    graph = sparse.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    groups: dict[int, list[int]] = {}
    for i, lab in enumerate(labels.tolist()):
        groups.setdefault(lab, []).append(i)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def _one_hot(classes: np.ndarray) -> sparse.csr_matrix:
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
    m = np.asarray(classes)
    if questions is not None:
        m = np.where(np.asarray(questions, dtype=bool)[None, :], m, -1)
    answered = sparse.csr_matrix((m >= 0).astype(np.float64))
    overlap = (answered @ answered.T).toarray()
    x = _one_hot(m)
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
    for s, texts in documents.items():
        if s not in index:
            continue
        for text in texts:
            sh = _shingles(str(text), shingle)
            if sh:
                docs.append((index[s], sh))
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


def consensus_without_copies(encoded: EncodedAnswers, candidates: Sequence[Sequence[int]], *,
                             tol: float = 1e-6, max_iter: int = 100
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The consensus the dependence test measures against: IWMV over the sources with each
    candidate near-duplicate group collapsed into one voice.

    Returns ``(z, r, π)``: the consensus class per question (``-1`` unresolved), each source's
    agreement rate with it (0 where it answered no resolved question) and ``π_q``, the chance
    that two wrong ballots on question ``q`` coincide (``Σ p_c²`` over the collapsed wrong
    ballots; 1 where fewer than two are wrong).
    """
    m = encoded.classes
    n = m.shape[0]
    taken = {i for g in candidates for i in g}
    groups = [list(g) for g in candidates] + [[i] for i in range(n) if i not in taken]
    collapsed = collapse(encoded, groups)
    fit = iterate_weighted_majority(collapsed.classes, tol=tol, max_iter=max_iter)
    z = fit["consensus"]
    r, known, _ = agreement_rates(m, z)
    r = np.where(known, r, 0.0)
    resolved = z >= 0
    cm = collapsed.classes
    n_c = max(int(cm.max(initial=-1)) + 1, 1)
    wrong = (cm >= 0) & (cm != z[None, :]) & resolved[None, :]
    pi = np.ones(m.shape[1])
    for q in np.flatnonzero(wrong.sum(axis=0) >= 2):
        counts = np.bincount(cm[wrong[:, q], q], minlength=n_c).astype(np.float64)
        p = counts / counts.sum()
        pi[q] = float(np.sum(p * p))
    return z, r, pi


def detect_dependence(
    encoded: EncodedAnswers, *, documents: Mapping[str, Sequence[str]] | None = None,
    near_duplicate: float = 0.9, min_overlap: int = 5, min_excess: float = 0.25,
    z_min: float = 3.0, doc_threshold: float = 0.5, max_sources: int = 5000,
    tol: float = 1e-6, max_iter: int = 100,
) -> DependenceReport:
    """Find sources whose agreement exceeds what independent errors explain (chapter 35.3).

    See the module docstring for the test. Returns the dependent pairs (sorted by excess) and
    the dependence clusters (connected components), with the candidate near-duplicate groups
    that were collapsed before the consensus was computed.
    """
    near_duplicate = check_probability("near_duplicate", near_duplicate)
    min_excess = check_probability("min_excess", min_excess)
    doc_threshold = check_probability("doc_threshold", doc_threshold)
    min_overlap = check_int("min_overlap", min_overlap, 1)
    z_min = check_real("z_min", z_min)
    max_sources = check_int("max_sources", max_sources, 1)
    m = encoded.classes
    n = m.shape[0]
    if n > max_sources:
        raise ValueError(f"detect_dependence: {n} sources; the pairwise test needs O(S²) memory "
                         f"and is limited to max_sources={max_sources}")
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
    candidates = _components(n, *np.nonzero(cand))
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
    clusters = [[ids[i] for i in g] for g in _components(n, *np.nonzero(edges))]
    return DependenceReport(ids, pairs, clusters, [[ids[i] for i in g] for g in candidates])
