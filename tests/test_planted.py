"""The planted-evidence defence: its kernels against references, its stage's policies."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from credrank.core.candidates import Candidates, StageError
from credrank.core.maths import cosine_matrix
from credrank.defences.planted import trustrag_flags
from credrank.defences.planted_math import (
    complete_link_groups,
    frequency_scores,
    grada_weights,
    outlier_ramp,
    pagerank,
    paraphrase_components,
    planted_clusters,
    ragdefender_count,
    robust_z,
    tfidf_vote,
    two_clusters_agglomerative,
    two_means,
)
from credrank.pipeline.catalog import CATALOG
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.stages.planted import MODES, PlantedEvidence
from sparse_copy import copy_index


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def attacked_pool(rng: np.random.Generator, n_clean: int = 10, n_planted: int = 5,
                  dim: int = 32) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A query, clean passages on its topic (similar to each other, cosine ≈ 0.8, and
    moderately to the query) and planted paraphrases right on the query (cosine ≈ 0.98 to
    each other): the geometry of a poisoned pool."""
    q = unit(rng.normal(size=(1, dim)))[0]
    topic = unit(rng.normal(size=(1, dim)))[0]
    clean = unit(q * 0.5 + topic * 0.8 + rng.normal(size=(n_clean, dim)) * 0.08)
    lie = unit((q + rng.normal(size=dim) * 0.1)[None, :])[0]
    planted = unit(lie + rng.normal(size=(n_planted, dim)) * 0.03)
    vocab = [f"w{i}" for i in range(400)]
    texts = [" ".join(rng.choice(vocab, 12)) for _ in range(n_clean + n_planted)]
    return q, np.vstack([clean, planted]).astype(np.float32), texts


def batch_of(q: np.ndarray, vectors: np.ndarray, texts: list[str]) -> Candidates:
    sims = vectors @ q
    return Candidates(query="q", doc_ids=np.array([f"d{i}" for i in range(len(texts))],
                                                  dtype=object),
                      retrieval_score=sims.astype(np.float64),
                      meta={"text": np.array(texts, dtype=object)}, vectors=vectors,
                      query_vector=q.astype(np.float32))


# -- kernels ----------------------------------------------------------------------------------

def test_robust_z_is_the_modified_z_score_and_ignores_the_outliers():
    x = np.array([0.50, 0.52, 0.48, 0.51, 0.49, 0.95])
    z = robust_z(x)
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    assert z == pytest.approx((x - med) / (1.4826 * mad))
    assert z[-1] > 10 and np.all(np.abs(z[:-1]) < 1.5)


def test_robust_z_policies_floor_the_scale_and_need_three_values():
    assert robust_z(np.full(6, 0.7)) == pytest.approx(np.zeros(6))
    assert robust_z(np.array([0.2, 0.9])) == pytest.approx(np.zeros(2))
    z = robust_z(np.array([0.7, 0.7, 0.7, 0.75]))  # MAD 0: the floor 0.01 is the scale
    assert z[-1] == pytest.approx(5.0)
    assert np.all(np.isfinite(z))


def test_pagerank_matches_networkx():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(3)
    w = np.maximum(rng.normal(size=(9, 9)), 0)
    np.fill_diagonal(w, 0)
    w[4, :] = 0  # a dangling node
    graph = nx.DiGraph()
    graph.add_nodes_from(range(9))
    for i, j in zip(*np.nonzero(w), strict=True):
        graph.add_edge(int(i), int(j), weight=float(w[i, j]))
    ref = nx.pagerank(graph, alpha=0.85, weight="weight", tol=1e-12, max_iter=1000)
    ours = pagerank(w, damping=0.85)
    assert ours == pytest.approx([ref[i] for i in range(9)], abs=1e-8)
    assert ours.sum() == pytest.approx(1.0)
    assert len(pagerank(np.zeros((0, 0)))) == 0


def test_grada_weights_penalise_pairs_close_to_the_query():
    sims = np.array([[1.0, 0.9, 0.6], [0.9, 1.0, 0.6], [0.6, 0.6, 1.0]])
    qs = np.array([0.9, 0.9, 0.3])
    w = grada_weights(sims, qs, alpha=0.5)
    assert w[0, 1] == pytest.approx(max(0.0, 0.9 - 0.5 * 1.8))
    assert w[0, 2] == pytest.approx(0.6 - 0.5 * 1.2)
    assert np.all(np.diag(w) == 0) and np.all(w >= 0)


def test_frequency_scores_count_the_top_pairs():
    sims = np.array([[1, .9, .8, .1], [.9, 1, .85, .2], [.8, .85, 1, .3], [.1, .2, .3, 1.0]])
    f = frequency_scores(sims, 3, p=2)  # C(3, 2) = 3 pairs: (0,1), (1,2), (0,2)
    assert f == pytest.approx([.81 + .64, .81 + .85 ** 2, .85 ** 2 + .64, 0.0])
    assert frequency_scores(sims, 0) == pytest.approx(np.zeros(4))
    assert frequency_scores(sims, 1) == pytest.approx([.81, .81, 0, 0])  # max(1, C(1,2))


def test_tfidf_vote_counts_passages_with_most_top_terms():
    texts = ["paris capital france", "paris capital france city", "paris capital france",
             "bananas grow on trees", "the ocean is deep"]
    assert tfidf_vote(texts, m=3) == 3
    assert tfidf_vote([], m=5) == 0
    assert tfidf_vote(["the of and", "a an"], m=5) == 0  # stop words only


def test_agglomerative_and_two_means_split_two_blobs():
    rng = np.random.default_rng(0)
    a = unit(np.array([1.0, 0, 0]) + rng.normal(size=(6, 3)) * 0.05)
    b = unit(np.array([0, 1.0, 0]) + rng.normal(size=(3, 3)) * 0.05)
    v = np.vstack([a, b])
    for labels in (two_clusters_agglomerative(v), two_means(v)):
        assert len(set(labels[:6])) == 1 and len(set(labels[6:])) == 1
        assert labels[0] != labels[6]
    assert list(two_means(v[:1])) == [0]


def test_ragdefender_count_takes_the_smaller_cluster_when_the_terms_do_not_vote():
    rng = np.random.default_rng(1)
    _q, vectors, texts = attacked_pool(rng)
    assert ragdefender_count(vectors, texts) == 5
    assert ragdefender_count(vectors[:1], texts[:1]) == 0


# -- the stage --------------------------------------------------------------------------------

#: GRADA with α = 0.5 cuts every planted–clean edge of the synthetic pool: PageRank then gives
#: each component the same mean rank, so the test graph keeps cross edges with α = 0.3
MODE_PARAMS = {"grada": {"alpha": 0.3}}


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_demotes_a_planted_cluster(mode):
    rng = np.random.default_rng(2)
    q, vectors, texts = attacked_pool(rng)
    batch = batch_of(q, vectors, texts)
    out = PlantedEvidence(mode, **MODE_PARAMS.get(mode, {})).transform(batch)
    f = out.factors["planted"]
    assert np.all(f >= 0.1) and np.all(f <= 1.0)
    assert f[10:].mean() < f[:10].mean()
    assert out.info["planted"]["applied"] is True
    assert len(out.column("planted_z")) == len(batch)


@pytest.mark.parametrize("mode", MODES)
def test_trusted_provenance_is_never_flagged(mode):
    """The same planted group, typed by provenance: from an established newsroom it is
    spared in every mode (counted), from an unknown source or with ``trusted: []`` it is
    flagged as before."""
    rng = np.random.default_rng(2)
    q, vectors, texts = attacked_pool(rng)
    params = MODE_PARAMS.get(mode, {})
    for planted_type, trusted, spared in (("established_news", None, True),
                                          ("unknown", None, False),
                                          ("established_news", [], False)):
        types = ["unknown"] * 10 + [planted_type] * 5
        batch = batch_of(q, vectors, texts).with_meta("source_type", types)
        stage = PlantedEvidence(mode, **params) if trusted is None else \
            PlantedEvidence(mode, trusted=trusted, **params)
        out = stage.transform(batch)
        f, info = out.factors["planted"], out.info["planted"]
        evidence = np.asarray(out.column("planted_evidence"), dtype=float)
        if spared:
            assert np.all(f[10:] == 1.0) and np.all(evidence[10:] == 0.0)
            assert info["spared_trusted"] > 0
        else:
            assert f[10:].mean() < f[:10].mean() and info["spared_trusted"] == 0


def test_the_evidence_is_reported_per_hit():
    rng = np.random.default_rng(4)
    q, vectors, texts = attacked_pool(rng)
    out = PlantedEvidence().transform(batch_of(q, vectors, texts))
    clusters = out.column("planted_cluster")
    assert set(clusters[10]) == {"d11", "d12", "d13", "d14"}
    assert list(clusters[0]) == []
    z = np.array(out.column("planted_z"), dtype=float)
    assert np.all(z[10:] > z[:10].max())
    assert list(out.column("planted_graph")) == [None] * 15  # grada mode only
    grada = PlantedEvidence("grada").transform(batch_of(q, vectors, texts))
    graph = np.array(grada.column("planted_graph"), dtype=float)
    assert graph.max() == pytest.approx(1.0)
    assert out.info["planted"]["planted_estimate"] is None  # ragdefender mode only
    assert PlantedEvidence("ragdefender").transform(batch_of(q, vectors, texts)).info[
        "planted"]["planted_estimate"] == 5


def test_copies_are_one_voice_not_a_planted_cluster():
    """Syndicated copies (the same words) are not paraphrases: the cluster test skips them."""
    rng = np.random.default_rng(5)
    q, vectors, _ = attacked_pool(rng)
    texts = [f"clean {i} words about many different things t{i}" for i in range(10)]
    texts += ["the wire story as every outlet printed it word for word today"] * 5
    out = PlantedEvidence().transform(batch_of(q, vectors, texts))
    assert all(list(c) == [] for c in out.column("planted_cluster")[10:])
    assert out.info["planted"]["copies_joined"] == 10


def test_a_small_pool_is_left_unchanged_with_the_reason():
    rng = np.random.default_rng(6)
    q, vectors, texts = attacked_pool(rng, n_clean=2, n_planted=1)
    out = PlantedEvidence(min_pool=4).transform(batch_of(q, vectors, texts))
    assert list(out.factors["planted"]) == [1.0, 1.0, 1.0]
    assert out.info["planted"]["applied"] is False
    assert "min_pool" in out.info["planted"]["reason"]
    empty = PlantedEvidence().transform(Candidates.empty("q", 4))
    assert len(empty.factors["planted"]) == 0


def test_missing_vectors_text_or_query_vector_are_clear_errors():
    rng = np.random.default_rng(7)
    q, vectors, texts = attacked_pool(rng)
    batch = batch_of(q, vectors, texts)
    from dataclasses import replace
    with pytest.raises(StageError, match="vectors"):
        PlantedEvidence().transform(replace(batch, vectors=None))
    with pytest.raises(StageError, match="text"):
        PlantedEvidence().transform(replace(batch, meta={}))
    with pytest.raises(StageError, match="query vector"):
        PlantedEvidence().transform(replace(batch, query_vector=None))


def test_parameters_are_validated_once_by_the_spec():
    assert "planted" in CATALOG and CATALOG["planted"].cls is PlantedEvidence
    spec = PipelineSpec.from_dict({"stages": [{"stage": "planted", "mode": "grada",
                                               "alpha": 0.3}]})
    assert spec.to_dict()["stages"][0]["mode"] == "grada"
    with pytest.raises(SpecError, match=r"stages\[0\]\.mode"):
        PipelineSpec.from_dict({"stages": [{"stage": "planted", "mode": "nope"}]})
    with pytest.raises(SpecError, match=r"stages\[0\]\.floor"):
        PipelineSpec.from_dict({"stages": [{"stage": "planted", "floor": 1.5}]})
    with pytest.raises(SpecError, match=r"stages\[0\]\.trusted\[1\]"):
        PipelineSpec.from_dict({"stages": [{"stage": "planted",
                                            "trusted": ["government", "tabloid"]}]})
    none = PipelineSpec.from_dict({"stages": [{"stage": "planted", "trusted": []}]})
    assert none.to_dict()["stages"][0]["trusted"] == []
    with pytest.raises(ValueError, match="trusted"):
        PlantedEvidence(trusted="government")
    with pytest.raises(ValueError, match="floor"):
        PlantedEvidence(floor=0.0)
    with pytest.raises(ValueError, match="z_full"):
        PlantedEvidence(z=3.0, z_full=2.0)
    with pytest.raises(SpecError, match=r"stages\[0\]\.linkage"):
        PipelineSpec.from_dict({"stages": [{"stage": "planted", "linkage": "average"}]})
    with pytest.raises(ValueError, match="linkage"):
        PlantedEvidence(linkage="ward")
    assert PlantedEvidence(linkage="complete").config()["linkage"] == "complete"


def test_trustrag_flags_only_a_tight_cluster():
    rng = np.random.default_rng(8)
    spread = unit(rng.normal(size=(8, 16)))
    sims = cosine_matrix(spread)
    assert trustrag_flags(sims, spread, 0.8).sum() == 0
    assert math.isfinite(float(sims.sum()))


def test_planted_clusters_need_size_and_query_side():
    labels = np.array([0, 0, 0, 1, 1, 2])
    z = np.array([1.0, 2.0, 0.6, 5.0, 6.0, 9.0])
    p = planted_clusters(labels, z, min_size=3, cluster_z=0.5)
    assert list(p) == [1, 1, 1, 0, 0, 0]  # a pair and a lone outlier are not a campaign
    assert list(planted_clusters(labels, z, min_size=3, cluster_z=1.5)) == [0] * 6
    assert list(planted_clusters(labels, z, min_size=2, cluster_z=0.5)) == [1, 1, 1, 1, 1, 0]
    assert list(paraphrase_components(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], bool))) == \
        [0, 0, 1]
    assert outlier_ramp(np.array([1.0, 3.0, 9.0]), 2.0, 4.0) == pytest.approx([0, 0.5, 1])


def test_complete_link_groups_need_every_pair():
    """A chain a ~ b ~ c (a, c unrelated) is one single-link component, but two complete-link
    groups; a clique stays one group; no pair: every passage alone."""
    sims = np.array([[1.0, 0.9, 0.2, 0.1], [0.9, 1.0, 0.9, 0.1], [0.2, 0.9, 1.0, 0.1],
                     [0.1, 0.1, 0.1, 1.0]])
    para = np.triu(sims >= 0.8, k=1)
    assert list(paraphrase_components(para)) == [0, 0, 0, 1]
    chain = complete_link_groups(sims, para)
    assert chain[0] != chain[2] and len(set(chain.tolist())) == 3
    assert chain[1] in (chain[0], chain[2])  # b joins one end of the chain
    clique = np.full((4, 4), 0.9)
    np.fill_diagonal(clique, 1.0)
    assert list(complete_link_groups(clique, np.triu(clique >= 0.8, k=1))) == [0, 0, 0, 0]
    assert list(complete_link_groups(sims, np.zeros((4, 4), bool))) == [0, 1, 2, 3]
    # a pair the word-copy test removed cannot be inside a group
    cut = np.triu(clique >= 0.8, k=1)
    cut[0, 1] = False
    groups = complete_link_groups(clique, cut)
    assert groups[0] != groups[1]


def test_complete_linkage_in_the_stage():
    """The planted group is flagged with either linkage; a chain of loosely related passages
    on the query side — each close only to its neighbours — is flagged by single linkage and
    left alone by complete linkage."""
    rng = np.random.default_rng(2)
    q, vectors, texts = attacked_pool(rng)
    out = PlantedEvidence(linkage="complete").transform(batch_of(q, vectors, texts))
    f = out.factors["planted"]
    assert np.all(f[10:] == pytest.approx(0.1)) and np.all(f[:10] == 1.0)
    assert set(out.column("planted_cluster")[10]) == {"d11", "d12", "d13", "d14"}
    # a chain: 5 passages along an arc through the query side, neighbours at cosine ≈ 0.87,
    # the ends far apart; 10 unrelated background passages
    dim = 32
    qv = unit(rng.normal(size=(1, dim)))[0]
    side = unit(rng.normal(size=(1, dim)))[0]
    side = unit((side - (side @ qv) * qv)[None, :])[0]
    angles = np.linspace(-1.0, 1.0, 5)
    chain = np.array([np.cos(a) * qv + np.sin(a) * side for a in angles])
    background = unit(rng.normal(size=(10, dim)))
    vecs = np.vstack([background, chain]).astype(np.float32)
    words = [f"passage {i} " + " ".join(f"w{i}_{k}" for k in range(12)) for i in range(15)]
    batch = batch_of(qv, vecs, words)
    single = PlantedEvidence(cluster_cosine=0.85).transform(batch).factors["planted"]
    complete = PlantedEvidence(cluster_cosine=0.85, linkage="complete").transform(batch)
    assert np.all(single[10:] < 1.0)  # the chain is one component of 5
    assert np.all(complete.factors["planted"] == 1.0)  # no 3 of them are all alike
    assert complete.info["planted"]["flagged"] == 0


def test_a_genuine_topic_cluster_is_not_flagged_by_default():
    """Clean pool: the passages on the query's topic are similar to each other, but none is
    planted for the query; the default mode leaves every factor at 1."""
    rng = np.random.default_rng(11)
    q, vectors, texts = attacked_pool(rng, n_planted=0)
    out = PlantedEvidence().transform(batch_of(q, vectors, texts))
    assert np.all(out.factors["planted"] == 1.0)
    assert out.info["planted"]["flagged"] == 0


def test_our_ragdefender_mode_drops_what_the_reference_package_drops():
    pytest.importorskip("ragdefender", reason="the reference package (the baselines extra)")
    from credrank_bench.experiments.ragdefender_baseline import RAGDefenderReference

    for seed in range(10):
        rng = np.random.default_rng(seed)
        q, vectors, texts = attacked_pool(rng)
        batch = batch_of(q, vectors, texts)
        ours = PlantedEvidence("ragdefender").transform(batch).factors["planted"] < 1
        ref = RAGDefenderReference().transform(batch).factors["ragdefender_ref"] < 1
        assert list(np.flatnonzero(ours)) == list(np.flatnonzero(ref)), seed


# -- the front doors ---------------------------------------------------------------------------

def searcher_free_hits(index):
    """The hits of a search without the planted stage."""
    from credrank.searcher import Searcher

    with Searcher.open(index) as searcher:
        return searcher.search_json("does vitamin c prevent colds", PipelineSpec.of(
            "prior", top_k=5))["hits"]


def test_library_search_with_planted(demo_index_hashing):
    from credrank.searcher import Searcher

    spec = PipelineSpec.of("prior", {"stage": "planted", "mode": "grada"}, top_k=5)
    with Searcher.open(demo_index_hashing) as searcher:
        doc = searcher.search_json("does vitamin c prevent colds", spec)
    assert doc["pipeline"]["stages"][1]["stage"] == "planted"
    assert doc["info"]["planted"]["mode"] == "grada"
    assert all("planted" in h["score_breakdown"] for h in doc["hits"])
    # the per-hit evidence docs/json.md promises (no door returned it): on every hit, JSON
    for hit in doc["hits"]:
        assert isinstance(hit["planted_z"], float) and isinstance(hit["planted_graph"], float)
        assert isinstance(hit["planted_cluster"], list)
        assert 0.0 <= hit["planted_evidence"] <= 1.0
    json.dumps(doc, allow_nan=False)
    plain = searcher_free_hits(demo_index_hashing)
    assert not any(k.startswith("planted_") for h in plain for k in h)


def test_cli_search_planted_as_a_user_runs_it(demo_index_hashing, tmp_path):
    import json

    from cli_inprocess import run_cli

    index = tmp_path / "idx"
    copy_index(demo_index_hashing, index)
    proc = run_cli("search", "does vitamin c prevent colds", "--index", index, "--planted",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [s["stage"] for s in doc["pipeline"]["stages"]].count("planted") == 1
    assert doc["info"]["planted"]["applied"] is True
    bad = run_cli("search", "q", "--index", index, "--planted", "--pipeline", "nosuch.toml")
    assert bad.returncode == 2 and "--planted" in bad.stderr and "Traceback" not in bad.stderr
    complete = run_cli("search", "does vitamin c prevent colds", "--index", index, "--planted",
                       "-S", "planted.linkage=complete", "--json")
    assert complete.returncode == 0, complete.stderr
    stages = json.loads(complete.stdout)["pipeline"]["stages"]
    assert [s.get("linkage") for s in stages if s["stage"] == "planted"] == ["complete"]
    wrong = run_cli("search", "q", "--index", index, "--planted", "-S",
                    "planted.linkage=average")
    assert wrong.returncode == 2 and "linkage" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_http_search_with_planted(demo_index_hashing, tmp_path):
    pytest.importorskip("fastapi")

    import httpx

    from serving import running_server

    index = tmp_path / "index"
    copy_index(demo_index_hashing, index)
    with running_server(index) as server:
        ok = httpx.post(server.url + "/search", json={"query": "does vitamin c prevent colds",
                                                       "top_k": 3, "planted": True}, timeout=60)
        assert ok.status_code == 200, ok.text
        body = ok.json()
        assert body["info"]["planted"]["applied"] is True
        assert [s["stage"] for s in body["pipeline"]["stages"]].count("planted") == 1
        spec = {"top_k": 3, "stages": [{"stage": "planted", "mode": "nope"}]}
        bad = httpx.post(server.url + "/search", json={"query": "q", "pipeline": spec},
                         timeout=60)
        assert bad.status_code == 422 and "mode" in bad.text
        both = httpx.post(server.url + "/search", json={"query": "q", "planted": True,
                                                         "pipeline": {"top_k": 3}}, timeout=60)
        assert both.status_code == 422 and "planted" in both.text


# -- the block-wise graph gives the dense path's numbers (issue 37, N1) ------------------------

def random_pool(seed: int, n: int, dim: int = 24) -> Candidates:
    """A pool with topic clusters, planted paraphrases, word copies and a zero vector."""
    rng = np.random.default_rng(seed)
    q = unit(rng.normal(size=(1, dim)))[0]
    centres = unit(rng.normal(size=(4, dim)) + q * rng.uniform(0, 1.5, size=(4, 1)))
    rows = unit(centres[rng.integers(0, 4, n)] + rng.normal(size=(n, dim))
                * rng.uniform(0.05, 0.6, size=(n, 1)))
    rows[rng.integers(0, n)] = 0.0
    vocab = [f"w{i}" for i in range(60)]
    texts = [" ".join(rng.choice(vocab, 15)) for _ in range(n)]
    for a in rng.integers(0, n, size=n // 8):  # word copies of close passages
        texts[(int(a) + 1) % n] = texts[int(a)]
    return batch_of(q, rows.astype(np.float32), texts)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("params", [
    {"mode": "planted"}, {"mode": "planted", "linkage": "complete"},
    {"mode": "planted", "linkage": "complete", "cluster_cosine": 0.7, "min_cluster": 4},
    {"mode": "grada"}, {"mode": "trustrag"}, {"mode": "outlier"}, {"mode": "ragdefender"},
    {"mode": "planted", "cluster_cosine": 0.6, "copy_jaccard": 0.3}])
def test_blockwise_graph_equals_the_dense_path(seed: int, params: dict[str, Any]) -> None:
    from credrank.defences.planted import dense_evidence

    batch = random_pool(seed, n=[7, 40, 130, 300, 61, 257][seed])
    stage = PlantedEvidence(trusted=[], **params)
    old = dense_evidence(stage, batch)
    new = stage.transform(batch)
    if stage.mode == "grada":
        np.testing.assert_allclose(new.column("planted_graph").astype(float), old["graph"],
                                   rtol=0, atol=1e-12)
    else:  # GRADA's all-pairs graph is computed in its mode only
        assert list(new.column("planted_graph")) == [None] * len(batch)
    p = new.column("planted_evidence").astype(float)
    np.testing.assert_allclose(p, old["p"], rtol=0, atol=1e-12)  # grada: 1 − PageRank
    assert ((p > 0.5) == (old["p"] > 0.5)).all()  # the same passages flagged
    assert new.info["planted"]["copies_joined"] == int(old["copies"])
    groups = {}
    for i, c in enumerate(old["components"]):
        groups.setdefault(int(c), []).append(f"d{i}")
    want = [sorted(d for d in groups[int(c)] if d != f"d{i}")
            for i, c in enumerate(old["components"])]
    assert [sorted(x) for x in new.column("planted_cluster")] == want


def test_a_pool_over_max_pool_runs_with_the_pool_size_warning() -> None:
    from credrank.select.budget import PoolSizeWarning

    rng = np.random.default_rng(4)
    q, vectors, texts = attacked_pool(rng)
    stage = PlantedEvidence()
    assert stage.max_pool == 2_000
    stage.max_pool = 10  # the 15-passage pool is over it
    with pytest.warns(PoolSizeWarning, match="planted: 15 candidates exceed the 10"):
        out = stage.transform(batch_of(q, vectors, texts))
    assert out.info["planted"]["warnings"][0].startswith("planted: 15 candidates exceed")
    assert out.info["planted"]["flagged"] == 5  # it still runs
    assert "warnings" not in PlantedEvidence().transform(batch_of(q, vectors, texts)).info[
        "planted"]
