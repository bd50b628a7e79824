"""Framework adapters (Haystack, LlamaIndex, LangChain), tested with the real packages.

Each framework's test skips with a clear reason where its extra is not installed. The central
check per framework: the demo corpus's similarity-only pool of 15 from the index, converted to
the framework's documents and reranked by the adapter, orders and scores as ``credrank search``
does over the same index (``Searcher.search(q, Searcher.spec(top_k=5))``).
"""

from __future__ import annotations

import copy
import csv
import importlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from credrank.adapters._common import OPTIONS, CredrankScorer, Passage
from credrank.demo_corpus import demo_dir
from credrank.documents import iter_documents, read_queries
from credrank.index.embed import get_embedder
from credrank.index.ingest import embedding_text
from credrank.pipeline.shortcuts import ADAPTER, CLI, check_not_with_pipeline
from credrank.pipeline.spec import PipelineSpec
from credrank.rerank import EmbeddingFallbackWarning
from credrank.searcher import Searcher
from credrank.signals.prior import load_priors

DEMO = demo_dir()
TABLE = str(DEMO / "domains.csv")
CORPUS = {d.id: d for d in iter_documents(DEMO / "corpus.jsonl")}
QUERIES = read_queries(DEMO / "queries.jsonl")
HASHING = get_embedder("hashing")
UNKNOWN_PRIOR = load_priors("current").values["unknown"]
#: the adapter options every demo comparison uses
DEMO_OPTIONS: dict[str, Any] = {"embedder": "hashing", "top_k": 5, "tables": [TABLE]}
FRAMEWORKS = {"haystack": "haystack", "llamaindex": "llama_index", "langchain": "langchain_core"}


def need(extra: str) -> None:
    """Skip unless the framework of ``extra`` is installed."""
    pytest.importorskip(FRAMEWORKS[extra],
                        reason=f"the {extra} extra is not installed "
                               f"(pip install 'credrank[{extra}]')")


@dataclass
class Case:
    """One demo query: its pool (similarity only, 15 from the index) and what search gives."""

    query: str
    pool: list[str]
    pool_scores: list[float]
    expected: list[str]
    expected_scores: np.ndarray


def demo_cases(index, embedder: str = "hashing") -> list[Case]:
    with Searcher.open(index, tables=[TABLE]) as searcher:
        cases = []
        for q in QUERIES:
            pool = searcher.search(q.text, Searcher.spec(top_k=15, fetch_k=15, priors="none"))
            expected = searcher.search(q.text, Searcher.spec(top_k=5))
            python_path = searcher.search(q.text, Searcher.spec(top_k=5, pushdown=False))
            assert list(python_path.doc_ids) == list(expected.doc_ids)
            cases.append(Case(q.text, [str(i) for i in pool.doc_ids],
                              [float(s) for s in pool.retrieval_score],
                              [str(i) for i in expected.doc_ids], expected.score))
    assert searcher.embedder.name == embedder
    return cases


@pytest.fixture(scope="session")  # read-only: once per xdist worker
def cases(demo_index_hashing) -> list[Case]:
    return demo_cases(demo_index_hashing)


def meta_of(doc_id: str) -> dict[str, Any]:
    """The metadata a user's store would hold for a demo document (plus a key of theirs)."""
    d = CORPUS[doc_id]
    return {"url": d.url, "title": d.title, "doc_id": d.id, "my_key": {"nested": [1, 2]}}


def check_same_ranking(case: Case, ids: list[str], scores: list[float]) -> None:
    assert ids == case.expected, case.query
    np.testing.assert_allclose(scores, case.expected_scores, atol=1e-6, rtol=0)


def check_breakdown(breakdown: dict[str, Any], score: float) -> None:
    assert {"rank", "score", "source_type", "host", "rule", "url",
            "score_breakdown"} <= set(breakdown)
    assert breakdown["score"] == score == breakdown["score_breakdown"]["final"]
    assert set(breakdown["score_breakdown"]) == {"retrieval_score", "prior", "final"}


# --------------------------------------------------------------------------------------------
# the package and the shared glue (no framework needed)
# --------------------------------------------------------------------------------------------
def test_adapters_package_imports_no_framework():
    code = ("import sys, credrank.adapters, credrank.adapters._common; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'haystack', 'llama_index', 'langchain_core', 'langchain'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("extra", sorted(FRAMEWORKS))
def test_missing_framework_says_which_extra_to_install(extra, monkeypatch):
    top = FRAMEWORKS[extra]
    for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, top, None)  # blocks the import even when never imported
    module = f"credrank.adapters.{extra}"
    if module in sys.modules:
        monkeypatch.delitem(sys.modules, module)
    with pytest.raises(ImportError, match=rf"pip install 'credrank\[{extra}\]'"):
        importlib.import_module(module)


def _message(fn) -> str:
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


PRIORS_ERROR = ("priors: 'no-such-preset' is neither a preset (compressed, current, aggressive) "
                "nor an existing file")


@pytest.mark.parametrize(("options", "expected"), [
    ({"priors": "no-such-preset"}, PRIORS_ERROR),
    ({"select": "bogus"}, "select: expected one of mmr, coverage, exposure, fair, got 'bogus'"),
    ({"top_k": 0}, "top_k: expected an integer in [1, 10000000], got 0"),
    ({"select": "mmr", "select_params": {"nope": 1}},
     "select_params.nope: expected one of the known keys (diversity, intent_column, "
     "min_ratio, utility_scale), got the unknown key 'nope'"),
    ({"select_params": {"diversity": 0.3}}, "select_params: only with select"),
    ({"priors_store": "s", "source_reliability": "r"},
     "priors_store: not with source_reliability (give one of them)"),
    ({"domain_scores": "yes"}, "domain_scores: expected True or False, got 'yes'"),
])
def test_scorer_shortcut_errors_name_the_adapter_parameter(options, expected):
    # the shortcuts become a spec (spec_from_options), its errors said in the adapters' words
    assert _message(lambda: CredrankScorer(**options)) == expected


@pytest.mark.parametrize("name", [s.name for s in ADAPTER.shortcuts() if s.value == "bool"])
@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_flag_shortcut_is_refused_in_a_keyword_arguments_words(name, value):
    """A flag is ``True`` or ``False`` in Python: ``planted="yes"`` said "expected true or
    false" (the JSON words) while ``domain_scores`` and ``use_given_embeddings`` said "True or
    False"; ``planted=None`` turned the stage on."""
    assert _message(lambda: CredrankScorer(embedder="hashing", **{name: value})) == \
        f"{name}: expected True or False, got {value!r}"
    assert CredrankScorer(embedder="hashing", **{name: np.False_}).spec == \
        CredrankScorer(embedder="hashing").spec  # numpy's bool is a bool, as check_bool says


def test_scorer_refuses_bad_names():
    assert "embedder" in _message(lambda: CredrankScorer(embedder="bert"))
    assert "retrieval" in _message(lambda: CredrankScorer(retrieval="bm25"))
    assert _message(lambda: CredrankScorer(mode="sum")).startswith("mode: expected one of")
    with pytest.raises(TypeError, match="wrap it in a list"):
        CredrankScorer(tables=TABLE)
    with pytest.raises(TypeError, match="'prior'; expected pipeline or one of embedder"):
        CredrankScorer(prior="current")


@pytest.mark.parametrize("query", ["", "  \n"])
def test_a_blank_query_is_refused_as_searcher_rerank_refuses_it(query):
    # every adapter ranks through CredrankScorer.rank; before, a blank query was ranked
    passages = [Passage("vitamin d covid", {"url": "https://www.cdc.gov/a", "score": 0.5})]
    scorer = CredrankScorer(embedder="hashing")
    with pytest.raises(ValueError, match=r"^query: expected non-empty text, got "):
        scorer.rank(query, passages)
    with pytest.raises(TypeError, match="query: expected a string, got int"):
        scorer.rank(5, passages)  # type: ignore[arg-type]


def test_a_larger_top_k_per_call_resizes_the_default_pool():
    # CredibilityRanker(top_k=3).run(top_k=10) was refused ("fetch_k: expected an integer >=
    # top_k (10), got 9"): the pool of the configured top_k was frozen into the spec
    passages = [Passage(f"vitamin d {i}", {"url": f"https://www.cdc.gov/{i}", "score": 0.1 * i})
                for i in range(12)]
    scorer = CredrankScorer(embedder="hashing", top_k=3)
    assert len(scorer.rank("vitamin d", passages, top_k=10)) == 10
    assert scorer.spec_for(10).resolved_fetch_k == 30
    spec = CredrankScorer(embedder="hashing", pipeline={"top_k": 5, "stages": ["prior"]},
                          top_k=16).spec
    assert spec.top_k == 16 and spec.resolved_fetch_k == 48


def test_scorer_url_keys_and_unknown_without_url():
    scorer = CredrankScorer(embedder="hashing", top_k=4)
    passages = [Passage("vitamin d covid", {"url": "https://www.cdc.gov/a"}),
                Passage("vitamin d covid", {"source": "https://medium.com/@x/y"}),
                Passage("vitamin d covid", {"link": "https://www.nih.gov/b"}),
                Passage("vitamin d covid", {"source": "/home/me/notes.pdf",
                                            "source_type": "peer_reviewed"})]
    got = {r.index: r.breakdown for r in scorer.rank("vitamin d", passages)}
    assert got[0]["source_type"] == "government"
    assert got[1]["host"] == "medium.com"
    assert got[2]["source_type"] == "government"
    assert got[3]["source_type"] == "unknown"  # a file path is no URL; the claim is no type
    assert "declared source_type 'peer_reviewed'" in got[3]["conflict"]
    assert got[3]["score_breakdown"]["prior"] == UNKNOWN_PRIOR
    only = CredrankScorer(embedder="hashing", top_k=4, fields={"url": "link"})
    got = {r.index: r.breakdown for r in only.rank("vitamin d", passages[:3])}
    assert [got[i]["url"] for i in range(3)] == [None, None, "https://www.nih.gov/b"]


# --------------------------------------------------------------------------------------------
# Haystack
# --------------------------------------------------------------------------------------------
def haystack_docs(ids: list[str], scores: list[float] | None = None) -> list[Any]:
    from haystack import Document
    return [Document(id=i, content=CORPUS[i].text, meta=meta_of(i),
                     score=None if scores is None else scores[n]) for n, i in enumerate(ids)]


def test_haystack_same_ranking_as_search(cases):
    need("haystack")
    from credrank.adapters.haystack import CredibilityRanker

    ranker = CredibilityRanker(**DEMO_OPTIONS)
    ranker.warm_up()
    for case in cases:
        out = ranker.run(documents=haystack_docs(case.pool, case.pool_scores),
                         query=case.query)["documents"]
        check_same_ranking(case, [d.id for d in out], [d.score for d in out])


def test_haystack_new_documents_meta_kept_inputs_unchanged(cases):
    need("haystack")
    from credrank.adapters.haystack import CredibilityRanker

    docs = haystack_docs(cases[0].pool)
    before = copy.deepcopy(docs)
    out = CredibilityRanker(**DEMO_OPTIONS).run(documents=docs, query=cases[0].query,
                                                top_k=3)["documents"]
    assert docs == before
    assert all(d.meta == b.meta and d.score is None for d, b in zip(docs, before, strict=True))
    assert len(out) == 3
    by_id = {d.id: d for d in docs}
    for doc in out:
        original = by_id[doc.id]
        assert doc is not original and doc.meta is not original.meta
        assert doc.content == original.content
        assert {k: v for k, v in doc.meta.items() if k != "credrank"} == original.meta
        check_breakdown(doc.meta["credrank"], doc.score)
        assert doc.meta["credrank"]["url"] == original.meta["url"]


def test_haystack_serialises_in_a_pipeline(cases):
    need("haystack")
    from haystack import Pipeline

    from credrank.adapters.haystack import CredibilityRanker

    ranker = CredibilityRanker(**DEMO_OPTIONS, select="mmr", select_params={"diversity": 0.3})
    data = ranker.to_dict()
    assert data["type"] == "credrank.adapters.haystack.CredibilityRanker"
    assert data["init_parameters"]["tables"] == [TABLE]
    assert CredibilityRanker.from_dict(data).to_dict() == data

    pipe = Pipeline()
    pipe.add_component("ranker", CredibilityRanker(**DEMO_OPTIONS))
    text = pipe.dumps()
    loaded = Pipeline.loads(text, allowed_modules=["credrank.adapters.haystack"])
    assert loaded.to_dict() == pipe.to_dict()
    case = cases[1]
    out = loaded.run({"ranker": {"documents": haystack_docs(case.pool),
                                 "query": case.query}})["ranker"]["documents"]
    check_same_ranking(case, [d.id for d in out], [d.score for d in out])


def test_haystack_given_embeddings_only_when_asked_and_same_dimension():
    need("haystack")
    from haystack import Document

    from credrank.adapters.haystack import CredibilityRanker

    query = "vitamin d covid"
    q = [float(x) for x in HASHING.embed([query])[0]]
    docs = [Document(id="same", content="unrelated words entirely", embedding=q,
                     meta={"url": "https://www.cdc.gov/a"}),
            Document(id="short", content="vitamin d covid", embedding=[1.0, 0.0],
                     meta={"url": "https://www.cdc.gov/b"})]
    options = {"embedder": "hashing", "priors": "none", "top_k": 2}

    def retrieval(**extra):
        out = CredibilityRanker(**options, **extra).run(documents=docs, query=query)
        return {d.id: d.meta["credrank"]["score_breakdown"]["retrieval_score"]
                for d in out["documents"]}

    ignored = retrieval(retrieval="cosine")
    assert ignored["same"] < 0.5 and ignored["short"] == pytest.approx(1.0)
    # under the default "auto" the same-model check decides: "same"'s vector is not its text's
    with pytest.warns(EmbeddingFallbackWarning, match="not of the 'hashing' model"):
        checked = retrieval()
    assert checked == ignored
    with pytest.warns(UserWarning, match="another dimension"):
        used = retrieval(retrieval="cosine", use_given_embeddings=True)
    assert used["same"] == pytest.approx(1.0)       # the stored vector, not the text
    assert used["short"] == pytest.approx(1.0)      # 2 numbers: ignored, the text embedded


def test_haystack_no_url_is_unknown_and_given_scores():
    need("haystack")
    from haystack import Document

    from credrank.adapters.haystack import CredibilityRanker

    docs = [Document(content="vitamin d and covid", meta={"source_type": "peer_reviewed"},
                     score=0.9),
            Document(content="vitamin d and covid", meta={"url": "https://www.cdc.gov/a"},
                     score=0.4)]
    out = CredibilityRanker(embedder="hashing", retrieval="given").run(
        documents=docs, query="anything")["documents"]
    first, second = out
    assert first.meta["credrank"]["source_type"] == "unknown"
    assert first.score == pytest.approx(0.9 * UNKNOWN_PRIOR)
    assert second.meta["credrank"]["source_type"] == "government"
    assert second.meta["credrank"]["score_breakdown"]["retrieval_score"] == 0.4
    with pytest.raises(ValueError, match=r"^documents\[0\]\.score: required with "
                                         r"retrieval='given'"):
        CredibilityRanker(embedder="hashing", retrieval="given").run(
            documents=[Document(content="x")], query="q")


def test_haystack_bad_config_and_empty_input():
    need("haystack")
    from credrank.adapters.haystack import CredibilityRanker

    assert _message(lambda: CredibilityRanker(priors="no-such-preset")) == PRIORS_ERROR
    ranker = CredibilityRanker(embedder="hashing")
    assert ranker.run(documents=[], query="q") == {"documents": []}
    with pytest.raises(ValueError, match="top_k"):
        ranker.run(documents=[], query="q", top_k=0)


# --------------------------------------------------------------------------------------------
# LlamaIndex
# --------------------------------------------------------------------------------------------
def llama_nodes(ids: list[str], scores: list[float] | None = None) -> list[Any]:
    from llama_index.core.schema import NodeWithScore, TextNode
    return [NodeWithScore(node=TextNode(id_=i, text=CORPUS[i].text, metadata=meta_of(i)),
                          score=None if scores is None else scores[n])
            for n, i in enumerate(ids)]


def test_llamaindex_same_ranking_as_search(cases):
    need("llamaindex")
    from credrank.adapters.llamaindex import CredibilityPostprocessor

    post = CredibilityPostprocessor(**DEMO_OPTIONS)
    for case in cases:
        out = post.postprocess_nodes(llama_nodes(case.pool, case.pool_scores),
                                     query_str=case.query)
        check_same_ranking(case, [n.node_id for n in out], [n.score for n in out])


def test_llamaindex_metadata_kept_nodes_unchanged(cases):
    need("llamaindex")
    from llama_index.core.schema import MetadataMode

    from credrank.adapters.llamaindex import CredibilityPostprocessor

    nodes = llama_nodes(cases[0].pool)
    nodes[0].node.excluded_llm_metadata_keys = ["my_key"]
    before = [n.model_dump() for n in nodes]
    out = CredibilityPostprocessor(**DEMO_OPTIONS).postprocess_nodes(
        nodes, query_str=cases[0].query)
    assert [n.model_dump() for n in nodes] == before
    by_id = {n.node_id: n.node for n in nodes}
    for hit in out:
        original = by_id[hit.node_id]
        assert hit.node is not original
        assert {k: v for k, v in hit.node.metadata.items() if k != "credrank"} == \
            original.metadata
        check_breakdown(hit.node.metadata["credrank"], hit.score)
        assert "credrank" in hit.node.excluded_embed_metadata_keys
        assert "credrank" in hit.node.excluded_llm_metadata_keys
        assert set(original.excluded_llm_metadata_keys) <= \
            set(hit.node.excluded_llm_metadata_keys)
        # the text an LLM or embedding model sees is the original's
        for mode in (MetadataMode.LLM, MetadataMode.EMBED):
            assert hit.node.get_content(metadata_mode=mode) == \
                original.get_content(metadata_mode=mode)


def test_llamaindex_given_embeddings_and_config():
    need("llamaindex")
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from credrank.adapters.llamaindex import CredibilityPostprocessor

    query = "vitamin d covid"
    q = [float(x) for x in HASHING.embed([query])[0]]
    nodes = [NodeWithScore(node=TextNode(id_="a", text="unrelated words", embedding=q))]
    off = CredibilityPostprocessor(embedder="hashing", priors="none", retrieval="cosine")
    on = CredibilityPostprocessor(embedder="hashing", priors="none", retrieval="cosine",
                                  use_given_embeddings=True)
    assert off.postprocess_nodes(nodes, query_str=query)[0].score < 0.5
    hit = on.postprocess_nodes(nodes, query_bundle=QueryBundle(query))[0]
    assert hit.score == pytest.approx(1.0)
    assert hit.node.metadata["credrank"]["source_type"] == "unknown"  # no URL
    with pytest.raises(ValueError, match="query_bundle"):
        on.postprocess_nodes(nodes)
    assert PRIORS_ERROR in _message(lambda: CredibilityPostprocessor(priors="no-such-preset"))
    data = on.to_dict()
    assert CredibilityPostprocessor.from_dict(data).to_dict() == data


# --------------------------------------------------------------------------------------------
# LangChain
# --------------------------------------------------------------------------------------------
def langchain_docs(ids: list[str]) -> list[Any]:
    from langchain_core.documents import Document
    return [Document(id=i, page_content=CORPUS[i].text, metadata=meta_of(i)) for i in ids]


def hashing_embeddings() -> Any:
    """The user's embedding model as a LangChain ``Embeddings``: credrank's hashing one."""
    from langchain_core.embeddings import Embeddings

    class HashingEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return HASHING.embed(texts).astype(float).tolist()

        def embed_query(self, text: str) -> list[float]:
            return HASHING.embed([text])[0].astype(float).tolist()

    return HashingEmbeddings()


def test_langchain_compressor_same_ranking_as_search(cases):
    need("langchain")
    from credrank.adapters.langchain import CredibilityCompressor

    compressor = CredibilityCompressor(**DEMO_OPTIONS)
    for case in cases:
        out = compressor.compress_documents(langchain_docs(case.pool), case.query)
        check_same_ranking(case, [d.id for d in out],
                           [d.metadata["relevance_score"] for d in out])


def test_langchain_retriever_fetches_the_pool_itself(cases):
    need("langchain")
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    from credrank.adapters.langchain import CredibilityCompressor, CredibilityRetriever

    store = InMemoryVectorStore(hashing_embeddings())
    # the page content is what the index embedded (title\ntext): the store's pool is the index's
    store.add_documents([Document(id=d.id, page_content=embedding_text(d.title, d.text),
                                  metadata={"url": d.url, "doc_id": d.id})
                         for d in CORPUS.values()])
    compressor = CredibilityCompressor(**DEMO_OPTIONS, fields={"title": None})
    direct = CredibilityRetriever(vectorstore=store, compressor=compressor)
    assert direct.pool_size() == 15
    wrapped = CredibilityRetriever(retriever=store.as_retriever(search_kwargs={"k": 2}),
                                   compressor=compressor)
    for case in cases:
        for retriever in (direct, wrapped):
            out = retriever.invoke(case.query)
            check_same_ranking(case, [d.id for d in out],
                               [d.metadata["relevance_score"] for d in out])
    given = CredibilityRetriever(vectorstore=store, fetch_k=15, compressor=CredibilityCompressor(
        **DEMO_OPTIONS, fields={"title": None}, retrieval="given"))
    for case in cases:
        out = given.invoke(case.query)  # the store's cosine as the retrieval score
        check_same_ranking(case, [d.id for d in out],
                           [d.metadata["relevance_score"] for d in out])
        assert out[0].metadata["credrank"]["retrieval"] == "given"


def test_langchain_metadata_kept_inputs_unchanged(cases):
    need("langchain")
    from langchain_core.documents import Document

    from credrank.adapters.langchain import CredibilityCompressor, CredibilityRetriever

    docs = langchain_docs(cases[0].pool)
    docs.append(Document(page_content=cases[0].query, metadata={"source": "notes/a.txt"}))
    before = copy.deepcopy(docs)
    out = CredibilityCompressor(**DEMO_OPTIONS).compress_documents(docs, cases[0].query)
    assert docs == before
    assert out[0].metadata["credrank"]["source_type"] == "unknown"  # a file path, no URL
    for doc in out:
        original = next(d for d in docs if d.page_content == doc.page_content)
        assert doc is not original and doc.id == original.id
        kept = {k: v for k, v in doc.metadata.items() if k not in ("credrank",
                                                                   "relevance_score")}
        assert kept == original.metadata
        check_breakdown(doc.metadata["credrank"], doc.metadata["relevance_score"])
    assert PRIORS_ERROR in _message(lambda: CredibilityCompressor(priors="no-such-preset"))
    with pytest.raises(ValueError, match="exactly one of vectorstore or retriever"):
        CredibilityRetriever(compressor=CredibilityCompressor(embedder="hashing"))


# --------------------------------------------------------------------------------------------
# pipeline=: any spec, as Searcher.rerank runs it (every framework)
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")  # read-only: once per xdist worker
def credibility_model(demo_index_hashing, tmp_path_factory) -> Path:
    """A tiny credibility model file fitted on the demo index (hashing embedder, URL cues):
    credible iff the page's top-level domain is gov/org/int/uk (as tests/test_credibility)."""
    from credrank.credibility import Config, fit_from_labels, save_model
    from credrank.index.opener import open_store

    folder = tmp_path_factory.mktemp("adapter-credibility")
    labels = folder / "labels.csv"
    with labels.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(("doc_id", "credible", "topic"))
        for line in (DEMO / "qrels.tsv").read_text(encoding="utf-8").splitlines():
            qid, _, doc, _ = line.split()
            tld = CORPUS[doc].url.split("/")[2].rsplit(".", 1)[-1]
            writer.writerow((doc, int(tld in ("gov", "org", "int", "uk")), qid))
    with open_store(demo_index_hashing) as idx:
        result = fit_from_labels(labels, idx, get_embedder("hashing"),
                                 configs=(Config(("cues", "url"), 10.0),), n_boot=20)
    save_model(folder / "model.json", result.document)
    return folder / "model.json"


def full_spec(model: Path) -> dict[str, Any]:
    """A spec of Python-path stages: prior, learned credibility, consensus and MMR."""
    return {"top_k": 4, "stages": [
        {"stage": "prior", "priors": "aggressive"},
        {"stage": "credibility", "model": str(model), "floor": 0.2},
        {"stage": "consensus", "threshold": 0.4},
        {"stage": "mmr", "diversity": 0.3}]}


def as_form(form: str, data: dict[str, Any], tmp_path: Path) -> Any:
    """``pipeline=`` as a dict, a spec file (JSON or YAML) or a PipelineSpec."""
    if form == "dict":
        return data
    if form == "json":
        path = tmp_path / "spec.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        return str(path)
    if form == "yaml":
        import yaml
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path
    return PipelineSpec.from_dict(data)


def rerank_docs(framework: str, ids: list[str], query: str, **options: Any
                ) -> tuple[list[str], list[float], list[dict[str, Any]]]:
    """``ids`` reranked by ``framework``'s adapter: kept ids, scores and breakdowns."""
    need(framework)
    if framework == "haystack":
        from credrank.adapters.haystack import CredibilityRanker
        out = CredibilityRanker(**options).run(documents=haystack_docs(ids),
                                               query=query)["documents"]
        return [d.id for d in out], [d.score for d in out], [d.meta["credrank"] for d in out]
    if framework == "llamaindex":
        from credrank.adapters.llamaindex import CredibilityPostprocessor
        nodes = CredibilityPostprocessor(**options).postprocess_nodes(llama_nodes(ids),
                                                                      query_str=query)
        return ([n.node_id for n in nodes], [n.score for n in nodes],
                [n.node.metadata["credrank"] for n in nodes])
    from credrank.adapters.langchain import CredibilityCompressor
    docs = CredibilityCompressor(**options).compress_documents(langchain_docs(ids), query)
    return ([d.id for d in docs], [d.metadata["relevance_score"] for d in docs],
            [d.metadata["credrank"] for d in docs])


def searcher_rerank(index: Path, spec: PipelineSpec, case: Case) -> tuple[list[str], Any]:
    """What ``Searcher.rerank(query, records, spec)`` keeps of the case's pool."""
    records = [{"id": str(i), "text": CORPUS[d].text, "url": CORPUS[d].url,
                "title": CORPUS[d].title} for i, d in enumerate(case.pool)]
    with Searcher.open(index, tables=[TABLE]) as searcher:
        result = searcher.rerank(case.query, records, spec)
    return [case.pool[int(i)] for i in result.doc_ids], result


@pytest.fixture(scope="session")
def full_spec_reranks(cases, credibility_model, demo_index_hashing
                      ) -> list[tuple[list[str], Any]]:
    """:func:`searcher_rerank` of :func:`full_spec` on the first four cases: what every
    framework and form of the spec must give, computed once for the twelve of them (it
    depends on neither; the tests only read it)."""
    spec = PipelineSpec.from_dict(full_spec(credibility_model))
    return [searcher_rerank(demo_index_hashing, spec, case) for case in cases[:4]]


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
@pytest.mark.parametrize("form", ["dict", "json", "yaml", "spec"])
def test_pipeline_spec_ranks_as_searcher_rerank(framework, form, cases, credibility_model,
                                                full_spec_reranks, tmp_path):
    need(framework)
    data = full_spec(credibility_model)
    pipeline = as_form(form, data, tmp_path)
    for case, (expected, result) in zip(cases[:4], full_spec_reranks, strict=True):
        ids, scores, breakdowns = rerank_docs(framework, case.pool, case.query,
                                              pipeline=pipeline, embedder="hashing",
                                              tables=[TABLE])
        assert ids == expected and len(ids) == 4, case.query
        np.testing.assert_allclose(scores, result.score, atol=1e-9, rtol=0)
        assert {"prior", "credibility", "consensus"} <= set(breakdowns[0]["score_breakdown"])


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_shortcuts_are_the_spec_they_translate_to(framework, cases):
    need(framework)
    case = cases[2]
    shortcuts = {"priors": "aggressive", "select": "mmr", "select_params": {"diversity": 0.4},
                 "top_k": 3}
    spec = {"top_k": 3, "stages": [{"stage": "prior", "priors": "aggressive"},
                                   {"stage": "mmr", "diversity": 0.4}]}
    by_options = rerank_docs(framework, case.pool, case.query, embedder="hashing",
                             tables=[TABLE], **shortcuts)
    by_spec = rerank_docs(framework, case.pool, case.query, embedder="hashing",
                          tables=[TABLE], pipeline=spec)
    assert by_options[:2] == by_spec[:2] and len(by_spec[0]) == 3
    # top_k with pipeline= overrides the spec's (as credrank search --pipeline F --top-k N)
    fewer = rerank_docs(framework, case.pool, case.query, embedder="hashing", tables=[TABLE],
                        pipeline=spec, top_k=2)
    two = rerank_docs(framework, case.pool, case.query, embedder="hashing", tables=[TABLE],
                      pipeline={**spec, "top_k": 2})
    assert fewer[:2] == two[:2] and len(fewer[0]) == 2


def adapter_classes() -> dict[str, Any]:
    out: dict[str, Any] = {}
    if importlib.util.find_spec("haystack"):
        from credrank.adapters.haystack import CredibilityRanker
        out["haystack"] = CredibilityRanker
    if importlib.util.find_spec("llama_index"):
        from credrank.adapters.llamaindex import CredibilityPostprocessor
        out["llamaindex"] = CredibilityPostprocessor
    if importlib.util.find_spec("langchain_core"):
        from credrank.adapters.langchain import CredibilityCompressor
        out["langchain"] = CredibilityCompressor
    return out


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_every_adapter_takes_every_option_and_pipeline(framework):
    need(framework)
    import inspect

    cls = adapter_classes()[framework]
    names = (set(inspect.signature(cls.__init__).parameters) if framework == "haystack"
             else set(cls.model_fields))
    assert {*OPTIONS, "pipeline"} <= names, {*OPTIONS, "pipeline"} - names
    given = cls(embedder="hashing", use_given_embeddings=True, fields={"title": None},
                score_threshold=0.5)
    scorer = given._scorer
    assert scorer.use_given_embeddings is True and scorer.fields == {"title": None}
    assert scorer.score_threshold == 0.5


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_flags_and_integers_are_taken_as_every_door_takes_them(framework):
    """LlamaIndex's and LangChain's pydantic read ``consensus=0`` and ``smoothing="false"``
    as false and ``top_k=True`` as 1; Haystack (and the library) turned a truthy value on.
    Every adapter refuses them."""
    need(framework)
    cls = adapter_classes()[framework]
    for options in ({"consensus": 0}, {"smoothing": "false"}, {"top_k": True}):
        with pytest.raises((ValueError, TypeError)):
            cls(embedder="hashing", **options)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_pipeline_errors_name_the_adapter_parameter(framework, tmp_path):
    need(framework)
    cls = adapter_classes()[framework]
    spec = {"stages": [{"stage": "prior"}]}
    message = _message(lambda: cls(embedder="hashing", pipeline=spec, priors="aggressive"))
    assert "priors: not with pipeline=" in message
    message = _message(lambda: cls(embedder="hashing", pipeline=spec,
                                   select_params={"diversity": 0.3}))
    assert "select_params: not with pipeline=" in message
    bad = {"stages": [{"stage": "prior"}, {"stage": "mmr", "diversity": 1.5}]}
    assert ("pipeline: stages[1].diversity: expected a finite number in [0, 1], got 1.5"
            in _message(lambda: cls(embedder="hashing", pipeline=bad)))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    assert (f"pipeline {path}: stages[1].diversity: expected a finite number"
            in _message(lambda: cls(embedder="hashing", pipeline=str(path))))
    cites = {"stages": [{"stage": "freshness", "half_life": "365d", "lineage": "cites"}]}
    message = _message(lambda: cls(embedder="hashing", pipeline=cites))
    assert "pipeline: stages[0].lineage: 'cites' reads citation chains from an index" in \
        message
    missing = {"stages": [{"stage": "credibility", "model": str(tmp_path / "none.json")}]}
    message = _message(lambda: cls(embedder="hashing", pipeline=missing))
    assert "pipeline: stages[0]" in message and "credibility model does not exist" in message
    assert "pipeline: " in _message(lambda: cls(embedder="hashing",
                                                pipeline=str(tmp_path / "none.toml")))
    with pytest.raises(TypeError, match="pipeline: expected a PipelineSpec, a spec dict"):
        cls(embedder="hashing", pipeline=42)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
@pytest.mark.parametrize(("name", "value"), [("priors", "current"), ("mode", "multiply"),
                                             ("planted", False), ("select", None)])
def test_a_shortcut_given_beside_a_pipeline_is_refused_even_at_its_default(framework, name,
                                                                          value):
    """``priors="current"`` beside ``pipeline=`` was accepted (and ignored) while ``--priors
    current`` beside ``--pipeline`` and a ``"priors"`` field beside ``"pipeline"`` are
    refused: an option written says something, whatever its value. ``top_k`` replaces the
    spec's, as ``--top-k`` does."""
    need(framework)
    cls = adapter_classes()[framework]
    spec = {"top_k": 4, "stages": [{"stage": "prior", "priors": "aggressive"}]}
    message = _message(lambda: cls(embedder="hashing", pipeline=spec, **{name: value}))
    assert f"{name}: not with pipeline= (the pipeline comes from it" in message
    with pytest.raises(ValueError, match=f"^{CLI.say(name)}: not with --pipeline p.toml"):
        check_not_with_pipeline({name: value}, CLI, "--pipeline p.toml", present=True)
    adapter = cls(embedder="hashing", pipeline=spec, top_k=2)
    assert adapter.spec.top_k == 2
    if framework != "haystack":  # a field assigned later is given too, and refused
        with pytest.raises(ValueError, match=f"^{name}: not with pipeline="):
            setattr(adapter, name, value)
        assert adapter.spec.stages[0].params["priors"] == "aggressive"
        assert cls(embedder="hashing", **{name: value}).spec == \
            cls(embedder="hashing").spec  # without a pipeline, the default says nothing


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_serialised_config_carries_the_pipeline(framework, credibility_model):
    need(framework)
    cls = adapter_classes()[framework]
    spec = PipelineSpec.from_dict(full_spec(credibility_model))
    adapter = cls(embedder="hashing", tables=[TABLE], pipeline=spec)
    shortcut = cls(embedder="hashing", priors="compressed", top_k=3)
    for one, expected in ((adapter, spec), (shortcut, PipelineSpec.of(
            {"stage": "prior", "priors": "compressed"}, top_k=3))):
        if framework == "haystack":
            data = one.to_dict()
            params = data["init_parameters"]
            again = cls.from_dict(data).to_dict()
        elif framework == "llamaindex":
            data = params = one.to_dict()
            again = cls.from_dict(data).to_dict()
        else:
            data = params = one.model_dump()
            again = cls(**data).model_dump()
        assert params["pipeline"] == expected.to_dict()
        assert json.loads(json.dumps(data)) == data  # plain JSON values
        assert again == data
        assert not {"priors", "mode", "select", "top_k"} & set(params)  # in the pipeline


def test_langchain_retriever_pool_is_the_spec_fetch_k():
    need("langchain")
    from langchain_core.vectorstores import InMemoryVectorStore

    from credrank.adapters.langchain import CredibilityCompressor, CredibilityRetriever

    store = InMemoryVectorStore(hashing_embeddings())
    compressor = CredibilityCompressor(embedder="hashing",
                                       pipeline={"top_k": 4, "fetch_k": 9, "stages": []})
    assert CredibilityRetriever(vectorstore=store, compressor=compressor).pool_size() == 9
    with pytest.raises(ValueError, match="fetch_k"):
        CredibilityRetriever(vectorstore=store, compressor=compressor, fetch_k=3)


# --------------------------------------------------------------------------------------------
# MiniLM (the default embedder): one pass over all three frameworks
# --------------------------------------------------------------------------------------------
def memoise_embed(embedder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``embedder.embed`` answer a batch it has embedded before from memory (a copy of
    the same array). The three adapters embed the same 15-passage pools and the same queries
    (which the searches of :func:`demo_cases` embed three times each); the model's output for
    a batch is fixed, so running it once per batch instead of once per caller changes no
    score the test checks, and each adapter still goes its own way to the embedder
    (retrieval='auto')."""
    inner = embedder.embed
    memo: dict[tuple[str, ...], np.ndarray] = {}

    def embed(texts):
        key = tuple(texts)
        if key not in memo:
            memo[key] = np.asarray(inner(texts))
        return memo[key].copy()

    monkeypatch.setattr(embedder, "embed", embed)


@pytest.mark.slow
def test_adapters_same_ranking_with_minilm(demo_index_minilm, monkeypatch):
    memoise_embed(get_embedder("minilm"), monkeypatch)  # also the 3 searches of each query
    minilm_cases = demo_cases(demo_index_minilm, "minilm")
    options = {**DEMO_OPTIONS, "embedder": "minilm"}
    ran = []
    if importlib.util.find_spec("haystack"):
        from credrank.adapters.haystack import CredibilityRanker
        ranker = CredibilityRanker(**options)
        for case in minilm_cases:
            out = ranker.run(documents=haystack_docs(case.pool), query=case.query)["documents"]
            check_same_ranking(case, [d.id for d in out], [d.score for d in out])
        ran.append("haystack")
    if importlib.util.find_spec("llama_index"):
        from credrank.adapters.llamaindex import CredibilityPostprocessor
        post = CredibilityPostprocessor(**options)
        for case in minilm_cases:
            out = post.postprocess_nodes(llama_nodes(case.pool), query_str=case.query)
            check_same_ranking(case, [n.node_id for n in out], [n.score for n in out])
        ran.append("llamaindex")
    if importlib.util.find_spec("langchain_core"):
        from credrank.adapters.langchain import CredibilityCompressor
        compressor = CredibilityCompressor(**options)
        for case in minilm_cases:
            out = compressor.compress_documents(langchain_docs(case.pool), case.query)
            check_same_ranking(case, [d.id for d in out],
                               [d.metadata["relevance_score"] for d in out])
        ran.append("langchain")
    if not ran:
        pytest.skip("no framework extra installed (pip install 'credrank[haystack]' …)")


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_pydantic_adapters_refuse_unknown_options_and_follow_assignments(framework):
    """LlamaIndex's and LangChain's adapters ignored a misspelt option (``tpo_k=3`` ran with
    top_k 10, ``freshnes=…`` without freshness), and an option assigned after construction
    changed the attribute but neither what ran nor what was saved."""
    need(framework)
    cls = adapter_classes()[framework]
    with pytest.raises(TypeError, match=r"unexpected option\(s\) 'freshnes', 'tpo_k'"):
        cls(embedder="hashing", tpo_k=3, freshnes="half_life=30d")
    adapter = cls(embedder="hashing", top_k=3)
    adapter.top_k = 1
    adapter.priors = "aggressive"
    assert adapter.spec.top_k == 1 and adapter._scorer.spec.top_k == 1
    assert adapter.spec.to_dict()["stages"][0]["priors"] == "aggressive"
    saved = adapter.to_dict() if framework == "llamaindex" else adapter.model_dump()
    again = (cls.from_dict(saved) if framework == "llamaindex" else cls(**saved))
    assert again.spec.top_k == 1  # what is saved follows too
    with pytest.raises(ValueError, match=r"^top_k: expected an integer in \[1, 10000000\], "
                                         r"got 0"):
        adapter.top_k = 0
    assert adapter.top_k == 1 and adapter.spec.top_k == 1  # refused: nothing changed
    copy = adapter.model_copy(update={"top_k": 2})
    assert copy.spec.top_k == 2 and adapter.spec.top_k == 1
    with pytest.raises(TypeError, match="unexpected field"):
        adapter.model_copy(update={"tpo_k": 2})
    with pytest.raises(TypeError, match="unexpected option 'tpo_k'"):  # as construction says
        adapter.tpo_k = 2
    # the library's words, not pydantic's, for a value of the wrong type
    assert "top_k: expected an integer in [1, 10000000], got 2.5" in _message(
        lambda: cls(embedder="hashing", top_k=2.5))


def test_langchain_retriever_refuses_unknown_fields_and_a_text_fetch_k():
    need("langchain")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from credrank.adapters.langchain import CredibilityCompressor, CredibilityRetriever

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    compressor = CredibilityCompressor(embedder="hashing")
    with pytest.raises(ValueError, match="fetchk"):
        CredibilityRetriever(vectorstore=store, compressor=compressor, fetchk=50)
    with pytest.raises(ValueError,
                       match=r"fetch_k: expected an integer in \[1, 10000000\], got '40'"):
        CredibilityRetriever(vectorstore=store, compressor=compressor, fetch_k="40")


def test_langchain_retriever_checks_a_fetch_k_assigned_later():
    need("langchain")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from credrank.adapters.langchain import CredibilityCompressor, CredibilityRetriever

    retriever = CredibilityRetriever(
        vectorstore=InMemoryVectorStore(DeterministicFakeEmbedding(size=16)),
        compressor=CredibilityCompressor(embedder="hashing"), fetch_k=20)
    for bad in ("x", 1):  # accepted, and the search then failed on it
        with pytest.raises(ValueError, match=r"fetch_k: expected an integer "):
            retriever.fetch_k = bad
    retriever.fetch_k = 40
    assert retriever.pool_size() == 40


def test_langchain_retriever_fetch_k_is_checked_by_the_spec():
    """The retriever's ``fetch_k`` had a validator of its own (>= top_k, no upper bound:
    ``fetch_k=10**9`` was asked of the store); the spec's (``Searcher.spec(fetch_k=…)``,
    ``--fetch-k``) checks it now, also after the compressor's ``top_k`` has grown."""
    need("langchain")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from credrank.adapters.langchain import CredibilityCompressor, CredibilityRetriever

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    compressor = CredibilityCompressor(embedder="hashing", top_k=5)
    for bad in (10**9, True):
        with pytest.raises(ValueError) as raised:
            CredibilityRetriever(vectorstore=store, compressor=compressor, fetch_k=bad)
        assert f"fetch_k: expected an integer in [1, 10000000], got {bad!r}" in \
            str(raised.value)
    retriever = CredibilityRetriever(vectorstore=store, compressor=compressor, fetch_k=6)
    compressor.top_k = 8
    with pytest.raises(ValueError, match=r"^fetch_k: expected an integer >= top_k \(8\), "
                                         r"got 6$"):
        retriever.pool_size()


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_an_adapter_can_be_deep_copied(framework):
    """``copy.deepcopy`` (and LlamaIndex's and LangChain's ``model_copy(deep=True)``) failed
    on the scorer's lock ("cannot pickle '_thread.lock'")."""
    import copy

    need(framework)
    cls = adapter_classes()[framework]
    adapter = cls(embedder="hashing", top_k=3, priors="aggressive")
    twin = copy.deepcopy(adapter)
    assert twin._scorer is not adapter._scorer
    assert twin.spec.to_dict() == adapter.spec.to_dict()
    if framework != "haystack":
        assert adapter.model_copy(deep=True).spec.to_dict() == adapter.spec.to_dict()


def test_the_selectors_report_reaches_the_adapter_and_a_shortfall_is_said():
    """An adapter dropped info.select: a FA*IR shortfall passed without a word, and an
    exposure list's draw was lost (it could not be replayed). The breakdown's select is the
    call's report, and a shortfall is a SelectionWarning at every door."""
    from credrank.select.stages import SelectionWarning

    passages = [Passage(text=f"vitamin d and covid study {i}", metadata={"url": url},
                        score=1.0 - i / 10)
                for i, url in enumerate(["https://www.nih.gov/a", "https://x.blogspot.com/b",
                                         "https://www.reuters.com/c", "https://reddit.com/d",
                                         "https://medium.com/e"])]
    fair = CredrankScorer(embedder="hashing", top_k=5, retrieval="given", select="fair",
                          select_params={"protected_column": "source_type",
                                         "protected_value": "government", "p": 0.9,
                                         "alpha": 0.1})
    with pytest.warns(SelectionWarning, match=r"fair: the prefix minimums are not met from "
                                              r"position \d+: the pool holds 1 protected"):
        ranked = fair.rank("vitamin d covid", passages)
    reports = [r.breakdown["select"] for r in ranked]
    assert all(r is reports[0] for r in reports)
    assert reports[0]["satisfied"] is False and reports[0]["shortfall_at"] >= 1
    exposure = CredrankScorer(embedder="hashing", top_k=3, retrieval="given",
                              select="exposure", select_params={"group_column": "source_type"})
    first = exposure.rank("vitamin d covid", passages)
    draw = first[0].breakdown["select"]["draw"]
    again = CredrankScorer(embedder="hashing", top_k=3, retrieval="given", select="exposure",
                           select_params={"group_column": "source_type", "draw": draw})
    assert [r.index for r in again.rank("vitamin d covid", passages)] == \
        [r.index for r in first]
