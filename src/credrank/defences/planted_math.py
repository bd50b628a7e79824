"""Pure kernels of the planted-evidence defence (the stage is
:mod:`credrank.stages.planted`; the pool-level kernels it also calls are
:mod:`credrank.defences.planted`).

Planted passages (corpus poisoning, PoisonedRAG; GPT-written fakes, CrAM) are written *for the
query*: they are abnormally similar to it, and an attacker who plants several writes them as a
tight cluster of paraphrases. Every kernel here reads only the fetched pool — its vectors, the
query vector and the passages' words — never a label.

Each function is a pure function of arrays; the stage composes them. Shapes: ``n`` candidates,
``d`` dimensions; ``sims`` is the ``(n, n)`` cosine matrix of the pool.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: the smallest robust scale of a query-similarity z-score (cosine units): a pool whose
#: similarities agree to within it has no outlier (declared policy, see :func:`robust_z`)
MIN_SCALE = 0.01
#: 1.4826 · MAD estimates σ for normal data
MAD_TO_SIGMA = 1.4826


def robust_z(values: np.ndarray, *, min_scale: float = MIN_SCALE) -> np.ndarray:
    """The robust z-score of each value within its pool::

        z_i = (x_i − median(x)) / max(1.4826 · MAD(x), min_scale),  MAD = median |x − median(x)|

    (Iglewicz & Hoaglin 1993, the "modified z-score"). The median and MAD ignore the few
    planted values an attacker adds, so they stand out instead of moving the centre.
    **Declared policies:** the scale is floored at ``min_scale`` (a pool of near-equal
    similarities gives small z, never a division by zero); fewer than 3 values give all zeros
    (no pool to be an outlier of)."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if len(x) < 3:
        return np.zeros(len(x))
    centre = float(np.median(x))
    mad = float(np.median(np.abs(x - centre)))
    return (x - centre) / max(MAD_TO_SIGMA * mad, float(min_scale))


def pagerank(weights: np.ndarray, *, damping: float = 0.85, tol: float = 1e-10,
             max_iter: int = 200) -> np.ndarray:
    """Weighted PageRank of a non-negative ``(n, n)`` matrix (Page et al. 1999)::

        r ← (1 − δ)/n + δ · Pᵀ r,   P_ij = w_ij / Σ_j w_ij

    by power iteration until ``‖Δr‖₁ < tol`` (at most ``max_iter`` steps; the iteration is a
    contraction of factor δ, so 200 steps reach 1e-14). A node without outgoing weight
    (dangling) spreads its rank uniformly, as in networkx. ``r`` sums to 1; an empty matrix
    gives an empty vector."""
    w = np.asarray(weights, dtype=np.float64)
    n = len(w)
    if n == 0:
        return np.zeros(0)
    out = w.sum(axis=1)
    dangling = out <= 0
    p = np.divide(w, out[:, None], out=np.zeros_like(w), where=~dangling[:, None])
    r = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        nxt = (1.0 - damping) / n + damping * (p.T @ r + r[dangling].sum() / n)
        if np.abs(nxt - r).sum() < tol:
            r = nxt
            break
        r = nxt
    return r / r.sum()


def grada_weights(sims: np.ndarray, query_sims: np.ndarray, alpha: float) -> np.ndarray:
    """GRADA's passage graph (Zheng et al., EMNLP 2025, "Graph-based Reranking against
    Adversarial Documents Attack", §3)::

        w_ij = max(0, sim(d_i, d_j) − α · (sim(d_i, q) + sim(d_j, q))),  w_ii = 0

    Passages support each other by similarity; the penalty takes support away from pairs that
    are both very close to the query, which is what passages written for the query are."""
    s = np.asarray(sims, dtype=np.float64)
    q = np.asarray(query_sims, dtype=np.float64)
    w = np.maximum(s - alpha * (q[:, None] + q[None, :]), 0.0)
    np.fill_diagonal(w, 0.0)
    return w


def top_pairs(sims: np.ndarray, n_pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_pairs`` most similar pairs ``i < j`` (ties by row, then column order)."""
    n = len(sims)
    iu, ju = np.triu_indices(n, k=1)
    if n_pairs <= 0 or len(iu) == 0:
        return iu[:0], ju[:0]
    values = np.asarray(sims)[iu, ju]
    order = np.lexsort((ju, iu, -values))[:n_pairs]
    return iu[order], ju[order]


def frequency_scores(sims: np.ndarray, n_adv: int, p: float = 2.0) -> np.ndarray:
    """RAGDefender's frequency score (Kim et al., ACSAC 2025, §4.2, Eq. 4–6): over the
    ``N_pairs = max(1, C(N_adv, 2))`` most similar pairs ``P``,
    ``f_i = Σ_{(i,j) ∈ P} sgn(s_ij) · |s_ij|^p``; the ``N_adv`` passages of highest ``f`` are
    taken as adversarial."""
    n = len(sims)
    f = np.zeros(n)
    if n_adv <= 0 or n < 2:
        return f
    i, j = top_pairs(sims, max(1, math.comb(n_adv, 2)))
    s = np.asarray(sims)[i, j]
    weight = np.sign(s) * np.abs(s) ** p
    np.add.at(f, i, weight)
    np.add.at(f, j, weight)
    return f


def two_clusters_agglomerative(vectors: np.ndarray) -> np.ndarray:
    """Labels (0/1) of Ward agglomerative clustering into two groups (scikit-learn's
    ``AgglomerativeClustering(n_clusters=2)``, as RAGDefender §4.1 uses), computed with
    :func:`scipy.cluster.hierarchy.ward`. Fewer than 2 rows: all zeros."""
    v = np.asarray(vectors, dtype=np.float64)
    if len(v) < 2:
        return np.zeros(len(v), dtype=np.int64)
    from scipy.cluster.hierarchy import fcluster, ward
    labels = fcluster(ward(v), t=2, criterion="maxclust") - 1
    return labels.astype(np.int64)


STOP_WORDS = frozenset(
    "a about above after again against all am an and any are as at be because been before "
    "being below between both but by can could did do does doing down during each few for "
    "from further had has have having he her here hers herself him himself his how i if in "
    "into is it its itself just me more most my myself no nor not now of off on once only or "
    "other our ours ourselves out over own same she should so some such than that the their "
    "theirs them themselves then there these they this those through to too under until up "
    "very was we were what when where which while who whom why will with would you your yours "
    "yourself yourselves".split())


def words(text: str) -> list[str]:
    """Lower-case word tokens of two or more letters or digits (scikit-learn's default
    ``token_pattern``, ``(?u)\\b\\w\\w+\\b``)."""
    import re
    return re.findall(r"(?u)\b\w\w+\b", str(text).lower())


def tfidf_vote(texts: Sequence[str], m: int = 5) -> int:
    """RAGDefender's term vote (§4.1, Eq. 1): the ``m`` terms of highest summed TF-IDF over
    the pool (English stop words removed; smooth idf ``ln((1+n)/(1+df)) + 1``, rows
    ℓ2-normalised, as scikit-learn's ``TfidfVectorizer``); the number of passages that
    contain more than ``⌊m'/2⌋`` of them (``m'`` the terms found, at most ``m``).

    Deviation, declared: presence is tested on word tokens; the reference tests substring
    presence in the raw text (``"war" in "software"`` counts there)."""
    docs = [[w for w in words(t) if w not in STOP_WORDS] for t in texts]
    n = len(docs)
    vocab: dict[str, int] = {}
    for doc in docs:
        for w in doc:
            vocab.setdefault(w, len(vocab))
    if n == 0 or not vocab:
        return 0
    tf = np.zeros((n, len(vocab)))
    for r, doc in enumerate(docs):
        for w in doc:
            tf[r, vocab[w]] += 1
    df = (tf > 0).sum(axis=0)
    x = tf * (np.log((1 + n) / (1 + df)) + 1.0)
    norms = np.linalg.norm(x, axis=1)
    x = np.divide(x, norms[:, None], out=np.zeros_like(x), where=norms[:, None] > 0)
    totals = x.sum(axis=0)
    top = np.lexsort((np.arange(len(totals)), -totals))[:m]
    present = (tf[:, top] > 0).sum(axis=1)
    return int(np.count_nonzero(present > len(top) // 2))


def ragdefender_count(vectors: np.ndarray, texts: Sequence[str], m: int = 5) -> int:
    """RAGDefender's estimate of how many pool members are adversarial (§4.1, Eq. 2, the
    single-hop "clustering-based grouping")::

        N_adv = n_min        if N_tfidf ≤ ⌊|R|/2⌋
              = |R| − n_min  otherwise

    ``n_min`` the smaller of the two agglomerative clusters
    (:func:`two_clusters_agglomerative`), ``N_tfidf`` the term vote (:func:`tfidf_vote`).
    As in the reference implementation, one cluster holding every passage gives the larger
    count, ``|R|``."""
    n = len(texts)
    if n < 2:
        return 0
    labels = two_clusters_agglomerative(vectors)
    ones = int(labels.sum())
    if ones > 0 and tfidf_vote(texts, m) <= n // 2:
        return min(ones, n - ones)
    return max(ones, n - ones)


def two_means(vectors: np.ndarray, *, max_iter: int = 100) -> np.ndarray:
    """Labels of k-means with k = 2 on unit-normalised rows (Lloyd's algorithm; deterministic
    start: the row farthest from the pool mean and the row farthest from it). Fewer than 2
    rows: all zeros."""
    v = np.asarray(vectors, dtype=np.float64)
    n = len(v)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    norms = np.linalg.norm(v, axis=1)
    v = v / np.where(norms > 0, norms, 1.0)[:, None]
    a = int(np.argmax(((v - v.mean(axis=0)) ** 2).sum(axis=1)))
    b = int(np.argmax(((v - v[a]) ** 2).sum(axis=1)))
    centres = v[[a, b]]
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(max_iter):
        d = ((v[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        new = np.argmin(d, axis=1)
        if np.all(new == labels) and _ > 0:
            break
        labels = new
        for c in (0, 1):
            if np.any(labels == c):
                centres[c] = v[labels == c].mean(axis=0)
    return labels


def mean_offdiagonal(sims: np.ndarray, members: np.ndarray) -> float:
    """Mean similarity over the pairs of ``members`` (0 for fewer than 2)."""
    idx = np.flatnonzero(members)
    if len(idx) < 2:
        return 0.0
    block = np.asarray(sims)[np.ix_(idx, idx)]
    return float((block.sum() - np.trace(block)) / (len(idx) * (len(idx) - 1)))


def first_seen_labels(labels: np.ndarray) -> np.ndarray:
    """Group labels renumbered 0, 1, … in order of each group's first member, so that a
    labelling does not depend on the clustering routine's own numbering."""
    first: dict[int, int] = {}
    return np.array([first.setdefault(int(x), len(first)) for x in labels], dtype=np.int64)


def paraphrase_components(paraphrase: np.ndarray) -> np.ndarray:
    """Component labels of the symmetric boolean "paraphrase" graph (single link: connected
    components, :func:`scipy.sparse.csgraph.connected_components`), numbered in order of their
    first member so that the labelling is deterministic."""
    from scipy.sparse.csgraph import connected_components

    adj = np.asarray(paraphrase, dtype=bool)
    n = len(adj)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    _, labels = connected_components(adj | adj.T, directed=False)
    return first_seen_labels(labels)


def complete_link_groups(sims: np.ndarray, paraphrase: np.ndarray) -> np.ndarray:
    """Group labels where every pair of a group is a paraphrase pair (``linkage =
    "complete"`` of the ``planted`` mode; credrank's, docs/results.md "Other ways of forming
    the groups")::

        D_ij = 1 − s_ij  if (i, j) is a paraphrase pair,  2 otherwise
        groups = complete-linkage clusters of D cut at the largest paraphrase distance

    i.e. agglomerative clustering (:func:`scipy.cluster.hierarchy.linkage`, ``complete``)
    merges two groups only while *all* their cross pairs are paraphrases, so a chain ``a ~ b
    ~ c`` with ``a`` and ``c`` unrelated — what single linkage (:func:`paraphrase_components`)
    joins — stays apart. ``paraphrase``: the symmetric (or upper-triangular) boolean
    paraphrase graph (cosine ≥ threshold, word copies excluded). Labels numbered in order of
    their first member; ``O(n²)`` memory."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    adj = np.asarray(paraphrase, dtype=bool)
    adj = adj | adj.T
    n = len(adj)
    if n < 2 or not adj.any():
        return np.arange(n, dtype=np.int64)
    dist = np.where(adj, 1.0 - np.asarray(sims, dtype=np.float64), 2.0)
    dist = np.clip(dist, 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    cut = float(dist[adj].max())
    return first_seen_labels(
        fcluster(linkage(squareform(dist, checks=False), "complete"), cut, "distance"))


def planted_clusters(labels: np.ndarray, z: np.ndarray, *, min_size: int,
                     cluster_z: float) -> np.ndarray:
    """The ``planted`` mode's evidence (credrank's combination, chosen on the development
    sets: docs/results.md, "Planted evidence")::

        p_d = 1  if d's paraphrase component C has |C| ≥ min_size and median_{c∈C} z_c ≥ cluster_z
        p_d = 0  otherwise

    A *paraphrase* pair is cosine ≥ ``cluster_cosine`` without being a word copy (3-gram
    Jaccard ≥ ``copy_jaccard``: syndicated copies are one voice, not a campaign); ``z`` is the
    robust z-score of the query similarity (:func:`robust_z`). So a passage is flagged only as
    a member of a group of several differently worded passages that say the same thing *and*
    sit on the query side of the pool — what an attacker who plants several texts for one
    question produces (PoisonedRAG's five per target), and what a single fake does not."""
    labels = np.asarray(labels, dtype=np.int64)
    z = np.asarray(z, dtype=np.float64)
    p = np.zeros(len(labels))
    _, inverse, sizes = np.unique(labels, return_inverse=True, return_counts=True)
    for g in np.flatnonzero(sizes >= min_size):  # only groups large enough: O(N) overall
        members = inverse == g
        if float(np.median(z[members])) >= cluster_z:
            p[members] = 1.0
    return p


def outlier_ramp(z: np.ndarray, z0: float, z1: float) -> np.ndarray:
    """The ``outlier`` mode's evidence: ``p_d = clip((z_d − z0) / (z1 − z0), 0, 1)`` — full
    suspicion from the robust z-score ``z1`` of the query similarity, none below ``z0``.
    Catches a single passage written for the query (a CrAM fake, one PoisonedRAG text), but
    the most relevant genuine passage of a clean pool is often as far out (its measured cost
    on clean data is in docs/results.md): an opt-in for pools where planting is likely."""
    return np.clip((np.asarray(z, dtype=np.float64) - z0) / (z1 - z0), 0.0, 1.0)
