"""The pool-level kernels of the planted-evidence defence that the stage
(:class:`~credrank.stages.planted.PlantedEvidence`) combines: the paraphrase graph of a pool
(cosine and word-copy edges, :func:`paraphrase_graph`), the word-copy test
(:func:`copy_pairs`, over the first :data:`COPY_WORDS` words) and TrustRAG's flags
(:func:`trustrag_flags`). The formulas of every mode are in
:mod:`credrank.defences.planted_math`."""

from __future__ import annotations

from typing import Any

import numpy as np

from credrank.consensus.duplicates import jaccard_pairs
from credrank.core.maths import cosine_matrix
from credrank.defences.planted_math import (
    complete_link_groups,
    frequency_scores,
    grada_weights,
    mean_offdiagonal,
    outlier_ramp,
    pagerank,
    paraphrase_components,
    planted_clusters,
    ragdefender_count,
    robust_z,
    two_means,
)

#: words of each passage the word-copy test reads (see :func:`copy_pairs`)
COPY_WORDS = 300


def paraphrase_graph(sims: np.ndarray, words: list[str], cluster_cosine: float,
                     copy_jaccard: float) -> tuple[np.ndarray, int]:
    """The upper-triangular boolean graph of paraphrase pairs — cosine ≥ ``cluster_cosine``
    and not a word copy (:func:`copy_pairs` at ``copy_jaccard``) — and the number of close
    pairs the copy test removed. The word test runs only where the cosine could make a
    paraphrase (few pairs)."""
    n = len(sims)
    ii, jj = np.nonzero(np.triu(np.asarray(sims) >= cluster_cosine, k=1))
    copy = copy_pairs(words, ii, jj, copy_jaccard)
    paraphrase = np.zeros((n, n), dtype=bool)
    paraphrase[ii[~copy], jj[~copy]] = True
    return paraphrase, int(copy.sum())


def copy_pairs(words: list[str], ii: np.ndarray, jj: np.ndarray, threshold: float
               ) -> np.ndarray:
    """Whether each pair ``(ii[k], jj[k])`` is a word copy: 3-gram Jaccard ≥ ``threshold``
    over the first :data:`COPY_WORDS` words of each passage (declared bound: a syndicated copy
    shows in its opening; whole web pages of thousands of words would cost more than the rest
    of the stage), the copy test of consensus
    (:func:`~credrank.consensus.duplicates.jaccard_pairs`, exact, prefix-filtered), run on the
    passages these pairs involve only. ``threshold`` 0: every pair is a copy."""
    if len(ii) == 0:
        return np.zeros(0, dtype=bool)
    if threshold <= 0:
        return np.ones(len(ii), dtype=bool)
    involved = np.unique(np.concatenate([ii, jj]))
    local = {int(d): k for k, d in enumerate(involved)}
    heads = [" ".join(words[int(d)].split(maxsplit=COPY_WORDS)[:COPY_WORDS])
             for d in involved]
    ci, cj, _ = jaccard_pairs(heads, threshold)
    n = int(involved.max()) + 1
    a, b = involved[np.asarray(ci, dtype=np.int64)], involved[np.asarray(cj, dtype=np.int64)]
    found = np.minimum(a, b) * n + np.maximum(a, b)  # a pair as one integer key, i < j
    assert all(int(i) in local for i in ii)
    return np.isin(np.minimum(ii, jj) * n + np.maximum(ii, jj), found)


def trustrag_flags(sims: np.ndarray, vectors: np.ndarray, threshold: float) -> np.ndarray:
    """TrustRAG stage 1 (Zhou et al. 2025, §3.2 "clean retrieval"): k-means (k = 2) on the
    embeddings; a cluster of at least two members whose mean pairwise cosine is at least
    ``threshold`` — the tighter one when both are — is flagged (1), the rest 0."""
    labels = two_means(vectors)
    tight = [mean_offdiagonal(sims, labels == c) for c in (0, 1)]
    best = int(np.argmax(tight))
    out = np.zeros(len(labels))
    if tight[best] >= threshold:
        out[labels == best] = 1.0
    return out


def dense_evidence(stage: Any, batch: Any) -> dict[str, np.ndarray]:
    """The planted stage's evidence computed the way it was before issue 37 (the pool's full
    ``N × N`` cosine matrix, dense GRADA weights and PageRank, the dense paraphrase mask,
    complete linkage over the whole pool): the reference that tests/test_planted.py and
    bench/scripts/bench_planted.py compare the block-wise path
    (:mod:`credrank.defences.planted_graph`) with. ``stage``: a
    :class:`~credrank.stages.planted.PlantedEvidence`; returns ``graph`` (PageRank scaled to
    its max), ``components``, ``p`` (before the trusted exemption) and ``copies``."""
    n = len(batch)
    words = [str(t) for t in batch.column("text")]
    sims = cosine_matrix(batch.vectors)
    qs = stage._query_sims(batch)
    z = robust_z(qs)
    graph = pagerank(grada_weights(sims, qs, stage.alpha), damping=stage.damping)
    graph = graph / graph.max() if graph.max() > 0 else np.ones(n)
    paraphrase, copies = paraphrase_graph(sims, words, stage.cluster_cosine, stage.copy_jaccard)
    comps = complete_link_groups(sims, paraphrase) if stage.linkage == "complete" \
        else paraphrase_components(paraphrase)
    if stage.mode == "grada":
        p = 1.0 - graph
    elif stage.mode == "ragdefender":
        p = np.zeros(n)
        estimate = ragdefender_count(batch.vectors, words)
        if 0 < estimate < n:
            f = frequency_scores(sims, estimate)
            p[np.lexsort((np.arange(n), -f))[:estimate]] = 1.0
    elif stage.mode == "trustrag":
        p = trustrag_flags(sims, batch.vectors, stage.cluster_cosine)
    elif stage.mode == "outlier":
        p = outlier_ramp(z, stage.z, stage.z_full)
    else:
        p = planted_clusters(comps, z, min_size=stage.min_cluster, cluster_z=stage.cluster_z)
    return {"graph": graph, "components": comps, "p": np.clip(p, 0.0, 1.0),
            "copies": np.array(copies)}
