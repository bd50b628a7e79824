"""The pipeline spec is the only configuration (issue 35): ``credrank.search`` and its
``SearchSettings`` are gone; :meth:`Searcher.compile` builds each spec once, and the answer
of a spec is what the settings object used to give."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

import credrank
from credrank.combine import Combine
from credrank.core.hittext import SNIPPET_CHARS
from credrank.freshness.policy import parse_undated
from credrank.index.store import MAX_K
from credrank.pipeline.compile import compile_search
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.rerank import as_spec, default_spec
from credrank.searcher import Searcher
from credrank.select.topk import TopK
from credrank.signals.prior import load_priors
from credrank.stages.freshness import FreshnessDecay
from credrank.stages.prior import SourcePrior

QUERY = "does vitamin d prevent covid"
FRESHNESS = "half_life=365d,undated=penalty:0.5,now=2026-01-01"


def test_the_settings_module_is_gone() -> None:
    with pytest.raises(ImportError, match=r"credrank\.search"):
        importlib.import_module("credrank.search")
    with pytest.raises(ImportError):
        exec("import credrank.search", {})  # the statement, as a user's code writes it
    with pytest.raises(ImportError):
        exec("from credrank.search import SearchSettings", {})
    for name in ("SearchSettings", "search_settings"):
        assert name not in credrank.__all__
        with pytest.raises(AttributeError):
            getattr(credrank, name)
    # what it re-exported lives where it is made
    from credrank.pipeline.pushdown import PushdownSearch

    assert PushdownSearch.name == "pushdown"


def test_the_default_spec_is_the_default_search() -> None:
    # SearchSettings() was: prior "current", multiply, top 10 of a pool of 30
    spec = Searcher.spec()
    assert spec == default_spec() == as_spec(None) == PipelineSpec.of("prior")
    assert [s.name for s in spec.stages] == ["prior", "combine", "topk"]
    prior, combine = spec.stage("prior"), spec.stage("combine")
    assert prior is not None and prior.params["priors"] == "current"
    assert not prior.params["use_domain_scores"]
    assert combine is not None and combine.params["mode"] == "multiply"
    assert (spec.top_k, spec.resolved_fetch_k, spec.retrieval, spec.pushdown) == (
        10, 30, "dense", None)
    # SearchSettings(priors=None) was similarity only: priors="none", not None
    assert [s.name for s in Searcher.spec(priors="none").stages] == ["combine", "topk"]
    with pytest.raises(ValueError, match=r"^priors: expected a preset"):
        Searcher.spec(priors=None)


def test_resolved_fetch_k_of_the_spec() -> None:
    # what SearchSettings.resolved_fetch_k() did, on the spec
    assert Searcher.spec(top_k=5).resolved_fetch_k == 15              # 3 × top_k
    assert Searcher.spec(top_k=5, fetch_k=7).resolved_fetch_k == 7
    assert Searcher.spec(top_k=5, fetch_k=5).resolved_fetch_k == 5
    assert Searcher.spec(top_k=5).to_dict()["fetch_k"] == 15          # written out resolved
    with pytest.raises(ValueError, match=r"^fetch_k: expected an integer >= top_k \(10\), "
                                         r"got 5$"):
        Searcher.spec(top_k=10, fetch_k=5)
    with pytest.raises(SpecError, match=r"fetch_k: expected an integer >= top_k"):
        PipelineSpec.from_dict({"top_k": 10, "fetch_k": 5})


def test_resolved_fetch_k_is_capped_and_replays() -> None:
    spec = PipelineSpec.of("prior", top_k=MAX_K // 2)
    assert spec.resolved_fetch_k == MAX_K
    assert PipelineSpec.from_dict(spec.to_dict()).key == spec.key


def test_compile_is_memoised_per_equal_spec(demo_index_hashing: Path) -> None:
    with Searcher.open(demo_index_hashing) as searcher:
        spec = Searcher.spec(top_k=5)
        same = [PipelineSpec.of("prior", top_k=5),                  # built separately
                PipelineSpec.from_dict(spec.to_dict()),             # its plain data read back
                spec.to_dict()]                                     # the plain data itself
        compiled = searcher.compile(spec)
        assert all(searcher.compile(s) is compiled for s in same)
        assert searcher.compile(Searcher.spec(top_k=6)) is not compiled
        assert searcher.compile(None) is searcher.compile(Searcher.spec())  # the default spec
        searcher.forget_compiled()
        again = searcher.compile(PipelineSpec.of("prior", top_k=5))
        assert again is not compiled
        assert searcher.compile(spec) is again                      # memoised again
        assert again.settings == compiled.settings and again.spec == compiled.spec


@pytest.mark.parametrize("query", ["", "   ", "\n\t", None, 5])
def test_a_blank_query_is_refused_by_every_library_entry(demo_index_hashing: Path,
                                                        query: Any) -> None:
    """As on the command line and over HTTP (before, the library searched an empty query and
    answered hits all scored 0.0)."""
    with Searcher.open(demo_index_hashing) as searcher:
        records = [{"id": "a", "text": "vitamin d", "url": "https://nih.gov/a", "score": 0.5}]
        for call in (lambda: searcher.search(query), lambda: searcher.search_json(query),
                     lambda: list(searcher.search_many([("q1", query)])),
                     lambda: searcher.rerank(query, records),
                     lambda: searcher.rerank_json(query, records)):
            with pytest.raises(ValueError, match=r"^query: expected non-empty text, got "):
                call()
        assert searcher.search("vitamin d").hits()  # a real query still searches


def test_search_many_refuses_what_is_not_pairs_and_a_closed_searcher_says_so(
        demo_index_hashing: Path) -> None:
    # a dict was iterated by its keys: {"q1": text} searched the query "1" as id "q"
    searcher = Searcher.open(demo_index_hashing)
    with pytest.raises(TypeError, match=r"^queries: expected an iterable of \(query id, "
                                        r"text\) pairs, got dict \(pass its \.items\(\)\)"):
        searcher.search_many({"q1": "vitamin d"})
    with pytest.raises(TypeError, match=r"^queries\[0\]: expected a \(query id, text\) pair, "
                                        r"got 'ab'"):
        list(searcher.search_many(["ab"]))
    assert [qid for qid, _ in searcher.search_many([("q1", "vitamin d")])] == ["q1"]
    searcher.close()
    searcher.close()  # idempotent
    # before: "Exception: Service runtime error: Shard is not initialized" from the engine
    for call in (lambda: searcher.search("vitamin d"), lambda: searcher.search_json("x")):
        with pytest.raises(ValueError, match=r"^this Searcher is closed"):
            call()


@pytest.mark.parametrize("options,pushdown", [
    ({"top_k": 5}, True),
    ({"top_k": 4, "freshness": FRESHNESS}, True),
    ({"top_k": 4, "freshness": FRESHNESS, "pushdown": False}, False),
    ({"top_k": 3, "fetch_k": 20, "priors": "aggressive"}, True),
], ids=["default", "freshness", "freshness-python", "aggressive"])
def test_search_json_of_a_spec_is_the_settings_answer(demo_index_hashing: Path,
                                                     options: dict[str, Any],
                                                     pushdown: bool) -> None:
    spec = Searcher.spec(**options)
    top_k = options["top_k"]
    fetch_k = options.get("fetch_k", 3 * top_k)
    priors = load_priors(options.get("priors", "current"))
    freshness = (FreshnessDecay(365, now="2026-01-01", undated=parse_undated("penalty:0.5"))
                 if "freshness" in options else None)
    with Searcher.open(demo_index_hashing) as searcher:
        doc = searcher.search_json(QUERY, spec)
        # the stages the removed SearchSettings(top_k=…, priors=…, freshness=…) built
        stages = [SourcePrior(priors), *([freshness] if freshness else []),
                  Combine("multiply"), TopK(top_k)]
        by_hand = compile_search(stages, searcher.store, searcher.embedder, fetch_k=fetch_k,
                                 top_k=top_k, pushdown=options.get("pushdown"),
                                 with_text=True).search(QUERY)
        engine = searcher.store.manifest.engine
    # what describe(SearchSettings(...), store) said, and search_document added
    expected: dict[str, Any] = {"top_k": top_k, "fetch_k": fetch_k, "priors": priors.as_dict(),
                                "mode": "multiply", "retrieval": "dense", "unit": "document",
                                "pushdown": pushdown, "engine": engine, "text": "snippet",
                                "snippet_chars": SNIPPET_CHARS}
    if freshness is not None:
        expected["freshness"] = freshness.config()
    assert doc["settings"] == expected
    assert doc["pipeline"] == spec.to_dict()
    assert doc["hits"] == by_hand.hits()
    assert [h["doc_id"] for h in doc["hits"]] and len(doc["hits"]) == top_k



class _Windowed:
    """The hashing embedder with a model's window of 12 tokens (a word piece per word)."""

    def __init__(self) -> None:
        from credrank.index.embed import get_embedder

        self.inner = get_embedder("hashing")
        self.name, self.dim, self.window = self.inner.name, self.inner.dim, 12
        self.seen: list[str] = []

    def embed(self, texts: Any) -> Any:
        return self.inner.embed(texts)

    def truncated(self, texts: Any) -> list[bool]:
        self.seen.extend(texts)
        return [len(t.split()) + 2 > self.window for t in texts]


def test_a_query_longer_than_the_window_is_said(demo_index_hashing: Path) -> None:
    """A query past the model's window was embedded from its beginning only, without a word
    (its later words not searched). info.query says so, for a search and a rerank; a short
    query is not even tokenized for the check."""
    from credrank.index.opener import open_store
    from credrank.searcher import Searcher

    long = "lorem ipsum " * 10 + "does vitamin d prevent covid"
    embedder = _Windowed()
    with open_store(demo_index_hashing) as store:
        searcher = Searcher(store, embedder)  # type: ignore[arg-type]
        doc = searcher.search_json(long, Searcher.spec(top_k=2))
        assert doc["info"]["query"] == {"truncated": True, "window_tokens": 12}
        assert "query" not in searcher.search_json("vitamin d", Searcher.spec(top_k=2))["info"]
        assert embedder.seen == [long]  # the short one was not tokenized
        records = [{"id": "a", "text": "vitamin d", "url": "https://nih.gov/a"}]
        reranked = searcher.rerank(long, records, {"top_k": 1}, retrieval="cosine")
        assert reranked.info["query"]["truncated"] is True
