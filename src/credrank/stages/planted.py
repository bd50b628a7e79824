"""``PlantedEvidence``: a label-free defence against passages planted for the query.

Corpus poisoning (PoisonedRAG, Zou et al. 2024) and generated fakes (CrAM, NewsPolluted) share
a structure the retrieved pool shows without any label or LLM: a planted passage is written
*for the query*, so it is abnormally similar to it, and an attacker who plants several writes
them as a tight cluster of paraphrases. The stage reads the fetched pool (its vectors, the query
vector and the passages' words; fetch at least 2 × top_k, the seed's 3 × top_k by default) and
adds one factor, ``planted``::

    f_d = floor + (1 − floor) · (1 − p_d),   p_d ∈ [0, 1] the planted evidence of d,  floor > 0

so a flagged passage is demoted, never removed (``floor`` > 0: it can still win when nothing
else answers). Per hit it reports its evidence in the meta columns ``planted_z`` (the robust
z-score of its query similarity), ``planted_graph`` (its GRADA PageRank, scaled so the pool's
best is 1; in ``grada`` mode only, ``null`` in the others: GRADA's graph weighs all pairs of
the pool, the others need only the close ones), ``planted_cluster`` (the ids of the other
members of its paraphrase component) and ``planted_evidence`` (``p_d``);
``batch.info["planted"]`` holds the estimate of how many pool members are planted and the
policy that applied.

Modes (each with its formula and source in :mod:`credrank.defences.planted_math`):

* ``grada`` — GRADA (Zheng et al., EMNLP 2025): PageRank over the passage graph
  ``w_ij = max(0, s_ij − α(s_iq + s_jq))``; ``p_d = 1 − PR_d / max PR``.
* ``ragdefender`` — RAGDefender (Kim et al., ACSAC 2025), single-hop: ``N_adv`` from two
  agglomerative clusters and the TF-IDF vote, then the ``N_adv`` passages of highest frequency
  score over the most similar pairs get ``p_d = 1``.
* ``trustrag`` — TrustRAG stage 1 (Zhou et al. 2025): k-means with k = 2 on the embeddings; a
  cluster of ≥ 2 members whose mean pairwise cosine is ≥ ``cluster_cosine`` is flagged
  (``p_d = 1``); its near-copy check uses word-n-gram Jaccard (deviation, declared: TrustRAG
  uses ROUGE-L).
* ``planted`` (default) — credrank's combination, chosen on the development sets
  (docs/results.md, "Planted evidence"): a passage is flagged (``p_d = 1``) as a member of a
  paraphrase component of at least ``min_cluster`` passages (cosine ≥ ``cluster_cosine``, word
  copies excluded) whose median query-similarity z-score is ≥ ``cluster_z``
  (:func:`~credrank.defences.planted_math.planted_clusters`). It acts on several planted texts
  for one query and costs nothing measurable on clean pools; it does not see a single fake.
  ``linkage`` says what a component is: ``single`` (default: connected through paraphrase
  pairs) or ``complete`` (every pair a paraphrase,
  :func:`~credrank.defences.planted_math.complete_link_groups`), which with ``cluster_cosine
  0.7, min_cluster 4`` catches more loosely worded plants at a measured clean cost
  (docs/results.md).
* ``outlier`` — the query-similarity outlier alone, ``p_d = clip((z_d − z)/(z_full − z), 0,
  1)`` (:func:`~credrank.defences.planted_math.outlier_ramp`): it does see single fakes, and
  it demotes the best genuine passage of many clean pools too (measured cost in
  docs/results.md); an opt-in.

**Provenance before geometry** (``trusted``). A candidate whose source type — derived from
its provenance (URL, host, registry tables; the payload's ``source_type``), never from what its
text says — is one of ``trusted`` (default: ``peer_reviewed``, ``government``,
``established_news``, the types the seed's priors rate ≥ 0.8) gets no planted evidence in any
mode (``p = 0``, counted in ``info.planted.spared_trusted``): three rewrites of one story by an
established newsroom on the day it broke are coverage, not a campaign (RealTimeQA, where they
are common). The threat these defences address is texts injected into the corpus (PoisonedRAG,
CrAM's fakes: passages without a source or from sources no rule rates); a writer who can
publish on an established outlet is outside it, and ``trusted: []`` turns the exemption off.

**Cost.** The pool is compared block by block (:mod:`credrank.defences.planted_graph`), never
as an ``N × N`` matrix: the paraphrase pairs are screened in float32 and confirmed in float64,
word copies tested on those pairs only, complete linkage run per paraphrase component, GRADA's
graph built as a sparse matrix of its positive weights (``grada`` mode). The ``N²·dim``
multiply-adds of the comparison remain; pools over :attr:`max_pool` run with a
:class:`~credrank.select.budget.PoolSizeWarning` (``info.planted.warnings``), and the service
prices the stage per mode (:data:`credrank.pipeline.catalog.PLANTED`). A request's
cancellation is checked after every block.

**Declared policies.** A pool of fewer than ``min_pool`` candidates (default 4: no robust
centre exists) is left unchanged, the factor 1, ``info.planted.applied = false`` with the
reason. A batch without vectors, text or a query vector (lexical retrieval) is a
configuration error naming what is missing (the stage compares passages with each other and
with the query: retrieve densely, with vectors and text). The ``ragdefender`` estimate is
computed in that mode only (``planted_estimate`` is ``null`` otherwise: it reads every word).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates, StageError, declare_hit_columns
from credrank.core.maths import cosine_matrix
from credrank.core.params import parameters
from credrank.core.pipeline import Stage
from credrank.core.schema import Integer, ListOf, Number, Text
from credrank.defences.planted import copy_pairs
from credrank.defences.planted_graph import (
    complete_groups,
    grada_graph,
    paraphrase_pairs,
    sparse_pagerank,
    trustrag_flags_sparse,
    unit_rows,
)
from credrank.defences.planted_graph import components as graph_components
from credrank.defences.planted_math import (
    frequency_scores,
    outlier_ramp,
    planted_clusters,
    ragdefender_count,
    robust_z,
    two_means,
)
from credrank.documents.schema import SOURCE_TYPES
from credrank.select.budget import pool_warnings

MODES = ("planted", "grada", "ragdefender", "trustrag", "outlier")
#: the per-hit evidence of the stage (module docstring), on every hit it ranked
EVIDENCE = ("planted_z", "planted_graph", "planted_cluster", "planted_evidence")
declare_hit_columns(*EVIDENCE)
#: how the ``planted`` mode forms its groups from paraphrase pairs (module docstring)
LINKAGES = ("single", "complete")
#: source types never flagged by default (provenance before geometry, module docstring)
TRUSTED = ("peer_reviewed", "government", "established_news")


def _z_full_above_z(params: dict[str, Any]) -> None:
    """``z_full > z``: the outlier ramp rises from ``z`` to full at ``z_full``."""
    if params["z_full"] <= params["z"]:
        raise ValueError(f"z_full: expected a number > z ({params['z']:g}), got "
                         f"{params['z_full']!r}")


class PlantedEvidence(Stage):
    """Adds the factor ``planted`` (module docstring).

    Args:
        mode: ``planted`` | ``grada`` | ``ragdefender`` | ``trustrag`` | ``outlier``.
        floor: the factor of a passage with full planted evidence, in ``(0, 1]``.
        z: the query-similarity robust z-score from which a passage is suspect (``outlier``).
        z_full: the z-score at which the suspicion is full (``outlier``; > ``z``).
        cluster_cosine: the cosine from which two passages are paraphrases of each other
            (``planted``; ``trustrag``: the mean cosine of a flagged cluster).
        min_cluster: the smallest paraphrase component ``planted`` flags.
        linkage: ``single`` (a component: connected through paraphrase pairs) or
            ``complete`` (every pair of a group a paraphrase) — ``planted`` mode.
        cluster_z: the median query-similarity z-score from which a component is planted.
        copy_jaccard: the word-3-gram Jaccard from which two passages are copies (syndication:
            copies are one voice, not a planted cluster).
        alpha: GRADA's query penalty α. damping: PageRank's δ.
        min_pool: the smallest pool the stage acts on.
        trusted: source types whose candidates get no planted evidence (module docstring).
    """

    name = "planted"
    reads = frozenset({"vectors", "text"})
    #: a planted group is of documents (the passages of one page are no group)
    counts_documents = True
    #: the largest pool handled within the budget (≈ 0.2 s at 2,000 in the default mode;
    #: bench/scripts/bench_planted.py --synthetic); larger pools run with a PoolSizeWarning
    max_pool = 2_000

    def formula_term(self) -> str:
        return "needs the Python path (it compares the pool's passages with each other)"

    # floor > 0: a planted passage is demoted, never removed
    @parameters(mode=Text(choices=MODES), floor=Number(0.0, 1.0, open_low=True),
                z=Number(0.0, 100.0), z_full=Number(0.0, 100.0),
                cluster_cosine=Number(0.0, 1.0), min_cluster=Integer(2, 100_000),
                linkage=Text(choices=LINKAGES), cluster_z=Number(-100.0, 100.0),
                copy_jaccard=Number(0.0, 1.0), alpha=Number(0.0, 10.0),
                damping=Number(0.0, 1.0), min_pool=Integer(2, 100_000),
                trusted=ListOf(Text(choices=SOURCE_TYPES), unique=True),
                together=_z_full_above_z)
    def __init__(self, mode: str = "planted", *, floor: float = 0.1, z: float = 2.0,
                 z_full: float = 4.0, cluster_cosine: float = 0.85, min_cluster: int = 3,
                 linkage: str = "single", cluster_z: float = 0.5, copy_jaccard: float = 0.5,
                 alpha: float = 0.5, damping: float = 0.85, min_pool: int = 4,
                 trusted: Sequence[str] = TRUSTED, name: str = "planted"):
        self.mode, self.floor, self.z, self.z_full = mode, floor, z, z_full
        self.cluster_cosine, self.min_cluster, self.linkage = cluster_cosine, min_cluster, linkage
        self.cluster_z, self.copy_jaccard = cluster_z, copy_jaccard
        self.alpha, self.damping, self.min_pool = alpha, damping, min_pool
        self.trusted = tuple(trusted)
        self.name = name

    # -- evidence ------------------------------------------------------------------------------

    def _query_sims(self, batch: Candidates) -> np.ndarray:
        assert batch.vectors is not None
        if batch.query_vector is None:
            raise StageError("planted: the batch has no query vector (lexical retrieval?); "
                             "the stage compares each passage's similarity to the query: "
                             "retrieve densely")
        v = np.asarray(batch.vectors, dtype=np.float64)
        q = np.asarray(batch.query_vector, dtype=np.float64).reshape(-1)
        norms = np.linalg.norm(v, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
        return np.divide(v @ q, norms, out=np.zeros(len(v)), where=norms > 0)

    def transform(self, batch: Candidates) -> Candidates:
        n = len(batch)
        info: dict[str, Any] = {"mode": self.mode, "floor": self.floor, "pool": n}
        if n < self.min_pool:
            info.update(applied=False, planted_estimate=0,
                        reason=f"pool of {n} < min_pool {self.min_pool}: no robust centre; "
                               "factor 1")
            return self._out(batch, np.ones(n), np.zeros(n),
                             np.ones(n) if self.mode == "grada" else None,
                             [[] for _ in range(n)], np.zeros(n), info)
        if batch.vectors is None:
            raise StageError("planted: the batch has no embedding vectors; retrieve with "
                             "vectors (the stage compares the pool's passages)")
        texts = batch.column("text")
        missing = [str(batch.doc_ids[i]) for i in range(n) if not isinstance(texts[i], str)]
        if missing:
            raise StageError(f"planted: {len(missing)} candidate(s) without text (first: "
                             f"{missing[0]!r}); retrieve with text")
        words = [str(t) for t in texts]
        qs = self._query_sims(batch)
        z = robust_z(qs)
        notes = pool_warnings(self.name, n, self.max_pool, "the pool's neighbour graph: "
                              "N²·dim multiply-adds and its edges")
        # block by block, never an N × N matrix (credrank.defences.planted_graph): the
        # paraphrase pairs; GRADA's graph in its mode only (all pairs: O(N²) edges)
        ii, jj, s_pairs = paraphrase_pairs(batch.vectors, self.cluster_cosine)
        graph: np.ndarray | None = None
        if self.mode == "grada":
            graph = sparse_pagerank(grada_graph(batch.vectors, qs, self.alpha),
                                    damping=self.damping)
            graph = graph / graph.max() if graph.max() > 0 else np.ones(n)
        copy = copy_pairs(words, ii, jj, self.copy_jaccard)
        copies = int(copy.sum())
        pi, pj, ps = ii[~copy], jj[~copy], s_pairs[~copy]
        components = complete_groups(n, pi, pj, ps) if self.linkage == "complete" \
            else graph_components(n, pi, pj)
        ids = [str(d) for d in batch.doc_ids]
        labels = components.tolist()
        members: dict[int, list[str]] = {}
        for i, c in enumerate(labels):
            members.setdefault(c, []).append(ids[i])
        clusters = [[d for d in members[c] if d != ids[i]] if len(members[c]) > 1 else []
                    for i, c in enumerate(labels)]
        estimate = ragdefender_count(batch.vectors, words) if self.mode == "ragdefender" \
            else None
        if self.mode == "grada":
            assert graph is not None
            p = 1.0 - graph
        elif self.mode == "ragdefender":
            p = np.zeros(n)
            assert estimate is not None
            if 0 < estimate < n:  # its top pairs are over all pairs (priced as such)
                f = frequency_scores(cosine_matrix(batch.vectors), estimate)
                p[np.lexsort((np.arange(n), -f))[:estimate]] = 1.0
        elif self.mode == "trustrag":
            p = trustrag_flags_sparse(unit_rows(batch.vectors), two_means(batch.vectors),
                                      self.cluster_cosine)
        elif self.mode == "outlier":
            p = outlier_ramp(z, self.z, self.z_full)
        else:
            p = planted_clusters(components, z, min_size=self.min_cluster,
                                 cluster_z=self.cluster_z)
        p = np.clip(p, 0.0, 1.0)
        spared = self.trusted_rows(batch) & (p > 0)
        p[spared] = 0.0
        f = self.floor + (1.0 - self.floor) * (1.0 - p)
        info.update(applied=True, planted_estimate=estimate,
                    flagged=int(np.count_nonzero(p > 0)), copies_joined=copies,
                    spared_trusted=int(spared.sum()))
        if notes:
            info["warnings"] = notes
        return self._out(batch, f, z, graph, clusters, p, info)

    def trusted_rows(self, batch: Candidates) -> np.ndarray:
        """Whether each candidate's provenance-derived ``source_type`` is trusted (a batch
        without the column: none is)."""
        n = len(batch)
        if not self.trusted or "source_type" not in batch.meta:
            return np.zeros(n, dtype=bool)
        types = batch.column("source_type")
        return np.array([types[i] in self.trusted for i in range(n)], dtype=bool)

    def _out(self, batch: Candidates, f: np.ndarray, z: np.ndarray, graph: np.ndarray | None,
             clusters: list[list[str]], p: np.ndarray, info: dict[str, Any]) -> Candidates:
        out = batch.with_factor(self.name, f, 0.0, 1.0)
        out = out.with_meta("planted_z", [float(x) for x in z])
        out = out.with_meta("planted_graph", [None] * len(batch) if graph is None
                            else [float(x) for x in graph])
        out = out.with_meta("planted_cluster", clusters)
        out = out.with_meta("planted_evidence", [float(x) for x in p])
        return out.with_info(planted=info)
