"""``POST /search`` and ``/rerank`` with a whole pipeline spec (issue 24): the ``pipeline``
field, the response's ``pipeline`` that replays the run, errors naming
``pipeline.stages[i].param``, files named by the names ``credrank serve --model NAME=PATH``
registered (never paths), the budget and the heavy gate on specs, and the store lock held
for retrieval only.

Most tests drive the app in this process (tests/serving.py ``in_process``); one runs a real
server with ``--model`` and ``--priors-store``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from credrank.cli import app as cli
from credrank.pipeline.shortcuts import HTTP_SEARCH, SHORTCUTS, WITH_PIPELINE, spec_from_options
from credrank.pipeline.spec import PipelineSpec
from credrank.searcher import Searcher
from credrank.serve.config import ServeConfig
from credrank.serve.models import SearchRequest
from credrank.signals.feedback import FeedbackPriors
from serving import Hold, asgi_client, in_process, running_server
from sparse_copy import copy_index
from test_file_formats_models import credibility_doc, estimate_doc, stance_doc

DEMO = Path(__file__).resolve().parents[1] / "src" / "credrank" / "data" / "demo"
TABLE = DEMO / "domains.csv"
KEY = "pipeline-test-key"
AUTH = {"X-API-Key": KEY}
QUERY = "does vitamin d prevent covid"
CLAIM = "vitamin d prevents covid"


def write_models(where: Path) -> dict[str, Path]:
    """Model files fitted on the hashing embedder (written by hand), and one fitted on
    MiniLM (does not fit the hashing index)."""
    where.mkdir(parents=True, exist_ok=True)
    minilm = credibility_doc()
    minilm["embedder"] = {"name": "minilm", "dim": 384}
    files = {"cred": credibility_doc(), "stance": stance_doc(), "estimate": estimate_doc(),
             "cred_minilm": minilm}
    out = {}
    for name, doc in files.items():
        out[name] = where / f"{name}.json"
        out[name].write_text(json.dumps(doc), encoding="utf-8")
    return out


@contextmanager
def _app_in(root: Path, index: Path) -> Iterator[tuple[Any, dict[str, Path]]]:
    """An in-process app on a copy of ``index`` under ``root`` with the models registered, a
    key and a feedback store; yields ``(app, models)``."""
    where = copy_index(index, root / "index")
    models = write_models(root / "models")
    FeedbackPriors(root / "priors", "current")
    with in_process(where, tables=(TABLE,), api_key=KEY, priors_store=root / "priors",
                    models=models) as app:
        yield app, models


@pytest.fixture
def served(demo_index_hashing: Path, tmp_path: Path) -> Iterator[tuple[Any, dict[str, Path]]]:
    """:func:`_app_in` the test's folder, on the demo index."""
    with _app_in(tmp_path, demo_index_hashing) as served:
        yield served


@pytest.fixture(scope="session")
def served_to_read(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[Any, dict[str, Path]]]:
    """:func:`served` built once per session, for the parametrized tests that only search
    and rerank (or are refused with 422): none of them writes to the index, the feedback
    store or the app's state, so each still sees the app :func:`served` gives (opening a
    copy of the index and the app per test was most of this file's time)."""
    with _app_in(tmp_path_factory.mktemp("served"), demo_index_hashing) as served:
        yield served


def run(scenario: Any) -> Any:
    return asyncio.run(scenario)


def post_all(app: Any, *requests: tuple[str, dict[str, Any]]) -> list[httpx.Response]:
    async def scenario() -> list[httpx.Response]:
        async with asgi_client(app) as c:
            return [await c.post(path, json=body, headers=AUTH) for path, body in requests]

    return run(scenario())


def ranked(doc: dict[str, Any]) -> list[tuple[str, float]]:
    return [(h["doc_id"], h["score"]) for h in doc["hits"]]


def candidates(n: int) -> list[dict[str, Any]]:
    texts = ["Vitamin D supplements did not prevent COVID-19 in a large trial.",
             "A blog says vitamin D cures covid overnight.",
             "Government guidance: vitamin D does not prevent covid infection.",
             "Vitamin D and covid: what the randomised trials show."]
    hosts = ["https://www.nih.gov/a", "https://myblog.example/b", "https://www.cdc.gov/c",
             "https://www.bbc.co.uk/d"]
    return [{"id": f"c{i}", "text": f"{texts[i % 4]} ({i})", "url": hosts[i % 4]}
            for i in range(n)]


# -- the pipeline field, equality and replay ---------------------------------------------------

FIELDS_AND_SPECS = [
    ({"top_k": 5}, {"top_k": 5}),
    ({"top_k": 4, "fetch_k": 20, "priors": "aggressive", "mode": "linear"},
     {"top_k": 4, "fetch_k": 20, "priors": "aggressive", "mode": "linear"}),
    ({"top_k": 5, "select": "mmr", "select_params": {"diversity": 0.5}, "consensus": True,
      "consensus_params": {"threshold": 0.3}},
     {"top_k": 5, "select": "mmr", "select_params": {"diversity": 0.5}, "consensus": True,
      "consensus_params": {"threshold": 0.3}}),
    ({"top_k": 3, "lexical": True, "priors": "none"},
     {"top_k": 3, "lexical": True, "priors": "none"}),
]


@pytest.mark.parametrize(("fields", "options"), FIELDS_AND_SPECS)
def test_pipeline_equals_the_fields_and_the_cli_path(served_to_read: Any,
                                                     demo_index_hashing: Path,
                                                     tmp_path: Path, fields: dict[str, Any],
                                                     options: dict[str, Any]) -> None:
    """The spec the CLI options make, sent as ``pipeline``, answers what the request fields
    of the same options answer, and what ``Searcher.search_json(spec)`` (``credrank search
    --json``) answers in process; each response's ``pipeline`` is that spec."""
    app, _ = served_to_read
    spec = spec_from_options(**options)
    by_fields, by_spec = post_all(app, ("/search", {"query": QUERY, **fields}),
                                  ("/search", {"query": QUERY, "pipeline": spec.to_dict()}))
    assert by_fields.status_code == 200, by_fields.text
    assert by_spec.status_code == 200, by_spec.text
    a, b = by_fields.json(), by_spec.json()
    assert ranked(a) == ranked(b) and a["settings"] == b["settings"]
    assert a["pipeline"] == b["pipeline"] == json.loads(json.dumps(spec.to_dict()))
    assert "pipeline" not in a["settings"]
    with Searcher.open(copy_index(demo_index_hashing, tmp_path / "cli"),
                       tables=[TABLE]) as searcher:
        expected = json.loads(json.dumps(searcher.search_json(QUERY, spec)))
    assert [d for d, _ in ranked(b)] == [d for d, _ in ranked(expected)]
    assert [s for _, s in ranked(b)] == pytest.approx([s for _, s in ranked(expected)],
                                                       rel=1e-12)
    assert b["settings"] == expected["settings"] and b["pipeline"] == expected["pipeline"]


def test_the_response_pipeline_replays_search_and_rerank(served: Any) -> None:
    app, _ = served
    pool = candidates(12)
    first = post_all(
        app,
        ("/search", {"query": QUERY, "pipeline": {"top_k": 6, "stages": [
            {"stage": "prior", "priors": "aggressive"},
            {"stage": "freshness", "half_life": "2y", "now": "2026-01-01",
             "undated": "penalty:0.5"},
            "consensus", {"stage": "mmr", "diversity": 0.3}]}}),
        ("/search", {"query": QUERY, "top_k": 4, "select": "fair",
                     "select_params": {"protected_column": "source_type", "p": 0.5,
                                "alpha": 0.1, "protected_value": "blog"}}),
        ("/rerank", {"query": QUERY, "candidates": pool, "pipeline": {"top_k": 3, "stages": [
            {"stage": "credibility", "model": "cred"}, "consensus"]}}),
        ("/rerank", {"query": QUERY, "candidates": pool, "top_k": 5, "priors": "compressed",
                     "consensus": True}))
    for got in first:
        assert got.status_code == 200, got.text
    again = post_all(app, *(
        (path, {"query": QUERY, "pipeline": got.json()["pipeline"],
                **({"candidates": pool} if path == "/rerank" else {})})
        for path, got in zip(("/search", "/search", "/rerank", "/rerank"), first, strict=True)))
    for before, after in zip(first, again, strict=True):
        assert after.status_code == 200, after.text
        assert ranked(after.json()) == ranked(before.json())
        assert after.json()["pipeline"] == before.json()["pipeline"]
        assert after.json()["settings"] == before.json()["settings"]
    assert [s["stage"] for s in first[0].json()["pipeline"]["stages"]] == [
        "prior", "freshness", "consensus", "combine", "mmr"]
    assert first[0].json()["settings"]["freshness"]["half_life"] == pytest.approx(730.5)
    assert first[2].json()["credrank_rerank"] == 2
    assert "credibility" in first[2].json()["hits"][0]["score_breakdown"]


def test_learned_stages_by_registered_name_and_no_path_is_shown(served: Any) -> None:
    app, models = served
    got, = post_all(app, ("/search", {"query": CLAIM, "pipeline": {"top_k": 5, "stages": [
        {"stage": "credibility", "model": "cred", "floor": 0.4},
        {"stage": "stance", "model": "stance"}, "consensus"]}}))
    assert got.status_code == 200, got.text
    doc = got.json()
    assert {"credibility", "agreement", "consensus"} <= set(doc["hits"][0]["score_breakdown"])
    assert doc["settings"]["credibility"]["floor"] == 0.4
    assert doc["settings"]["stance"]["model"] == "stance"
    assert [s.get("model") for s in doc["pipeline"]["stages"][:2]] == ["cred", "stance"]
    assert not any(str(p.parent) in got.text for p in models.values())  # no server path
    reliable, = post_all(app, ("/search", {"query": QUERY, "pipeline": {"stages": [
        {"stage": "reliability_prior", "estimate": "estimate"}]}}))
    assert reliable.status_code == 200, reliable.text
    assert str(models["estimate"]) not in reliable.text


def test_feedback_by_name_and_its_version_is_pinned_for_replay(served: Any) -> None:
    app, _ = served
    feedback = {"items": [{"source_type": "blog", "relevant": False}] * 3, "reason": "t"}
    fields, spec, updated = post_all(
        app, ("/search", {"query": QUERY, "priors_store": "feedback"}),
        ("/search", {"query": QUERY, "pipeline": {"stages": [
            {"stage": "feedback_prior", "store": "feedback"}]}}),
        ("/feedback", feedback))
    assert fields.status_code == spec.status_code == updated.status_code == 200
    assert ranked(fields.json()) == ranked(spec.json())
    used = fields.json()["info"]["feedback_prior"]["version"]
    stage = fields.json()["pipeline"]["stages"][0]
    assert stage == {"stage": "feedback_prior", "store": "feedback", "version": used}
    assert updated.json()["version"] == used + 1  # the store moved on ...
    replay, current = post_all(
        app, ("/search", {"query": QUERY, "pipeline": fields.json()["pipeline"]}),
        ("/search", {"query": QUERY, "priors_store": "feedback"}))
    assert ranked(replay.json()) == ranked(fields.json())  # ... the replay did not
    assert replay.json()["settings"]["priors"]["version"] == used
    assert current.json()["settings"]["priors"]["version"] == used + 1


# -- errors name the JSON field ----------------------------------------------------------------

SPEC_ERRORS = [
    ({"stages": [{"stage": "nope"}]}, "pipeline.stages[0].stage", "expected one of prior"),
    ({"stages": ["prior", {"stage": "mmr", "diversity": 0.5, "bogus": 1}]},
     "pipeline.stages[1].bogus", "unknown key 'bogus'"),
    ({"stages": [{"stage": "consensus", "threshold": 1.5}]},
     "pipeline.stages[0].threshold", "expected a finite number in [0, 1], got 1.5"),
    ({"stages": [{"stage": "mmr"}]}, "pipeline.stages[0].diversity", "the key is missing"),
    ({"stages": ["consensus", "prior"]}, "pipeline.stages[1].stage",
     "expected 'prior' before 'consensus'"),
    ({"stages": ["mmr", "fair"]}, "pipeline.stages[0].diversity", "missing"),
    ({"top_k": 10, "fetch_k": 5}, "pipeline.fetch_k", ">= top_k"),
    ({"top_k": 1001}, "pipeline.top_k", "at most 1,000"),
    ({"top_k": 100, "fetch_k": 10_001}, "pipeline.fetch_k", "at most 10,000"),
    ({"bogus": 1}, "pipeline.bogus", "unknown key"),
    ({"stages": "prior"}, "pipeline.stages", "expected a list of stages"),
    ({"stages": [{"stage": "credibility", "model": "/etc/passwd"}]},
     "pipeline.stages[0].model", "registered: cred, cred_minilm, estimate, feedback, stance"),
    ({"stages": [{"stage": "prior", "priors": "../priors.toml"}]},
     "pipeline.stages[0].priors", "expected the name of a prior file this service registered"),
    ({"stages": [{"stage": "credibility", "model": "stance"}]},
     "pipeline.stages[0].model", "'stance': not a credibility model"),
    ({"stages": [{"stage": "stance", "model": "cred"}]},
     "pipeline.stages[0].model", "'cred': not a stance model"),
    ({"stages": [{"stage": "credibility", "model": "cred_minilm"}]},
     "pipeline.stages[0].model", "fitted on an index embedded with 'minilm'"),
    ({"stages": [{"stage": "reliability_prior", "estimate": "cred"}]},
     "pipeline.stages[0].estimate", "'cred': expected the --json output"),
    ({"pushdown": True, "stages": ["prior", "consensus"]}, "pipeline.stages[1]",
     "pushdown: true cannot be honoured"),
]


@pytest.mark.parametrize(("pipeline", "field", "needle"), SPEC_ERRORS)
def test_spec_errors_name_the_pipeline_path(served_to_read: Any, pipeline: dict[str, Any],
                                            field: str, needle: str) -> None:
    app, models = served_to_read
    got, = post_all(app, ("/search", {"query": QUERY, "pipeline": pipeline}))
    assert got.status_code == 422, got.text
    body = got.json()
    assert body["error"] == "invalid_request"
    assert body["errors"][0]["field"] == field, body
    assert body["detail"].startswith(f"{field}: ") and needle in body["detail"], body["detail"]
    assert not any(str(p) in got.text for p in models.values())  # never a server path


@pytest.mark.parametrize("field", [s.name for s in HTTP_SEARCH.shortcuts()
                                   if s.name not in WITH_PIPELINE])
def test_shortcut_fields_with_a_pipeline_are_refused(served_to_read: Any, field: str) -> None:
    app, _ = served_to_read
    shortcut = SHORTCUTS[field]
    # even the default value, sent, is refused
    body = {"query": QUERY, "pipeline": {"stages": ["prior"]}, field: shortcut.default}
    requests = [("/search", body)]
    if not shortcut.retrieval:
        requests.append(("/rerank", {**body, "candidates": candidates(3)}))
    for got in post_all(app, *requests):
        assert got.status_code == 422, got.text
        assert got.json()["errors"][0]["field"] == field
        assert got.json()["detail"].startswith(f"{field}: not with pipeline (the pipeline "
                                               "comes from it")


def test_top_k_and_fetch_k_replace_the_pipelines(served: Any) -> None:
    # as `credrank search --pipeline F --top-k N` and the adapters' top_k with pipeline=
    app, _ = served
    sent = {"top_k": 3, "fetch_k": 12, "stages": ["prior"]}
    searched, reranked = post_all(
        app, ("/search", {"query": QUERY, "pipeline": sent, "top_k": 2, "fetch_k": 9}),
        ("/rerank", {"query": QUERY, "pipeline": sent, "top_k": 2,
                     "candidates": candidates(5)}))
    assert searched.status_code == 200, searched.text
    assert (searched.json()["pipeline"]["top_k"], searched.json()["pipeline"]["fetch_k"]) == (2, 9)
    assert len(searched.json()["hits"]) == 2
    assert reranked.status_code == 200, reranked.text
    assert reranked.json()["pipeline"]["top_k"] == 2 and len(reranked.json()["hits"]) == 2


def test_rerank_spec_errors(served: Any) -> None:
    app, _ = served
    pool = candidates(4)
    lineage, pushdown, bad, not_object = post_all(
        app,
        ("/rerank", {"query": QUERY, "candidates": pool, "pipeline": {"stages": [
            {"stage": "freshness", "half_life": "1y", "lineage": "cites"}]}}),
        ("/rerank", {"query": QUERY, "candidates": pool, "pipeline": {"pushdown": True}}),
        ("/rerank", {"query": QUERY, "candidates": pool, "pipeline": {"stages": [
            {"stage": "stance", "model": "stance", "floor": -1}]}}),
        ("/rerank", {"query": QUERY, "candidates": pool, "pipeline": ["prior"]}))
    assert lineage.status_code == 422
    assert lineage.json()["errors"][0]["field"] == "pipeline.stages[0].lineage"
    assert pushdown.json()["errors"][0]["field"] == "pipeline.pushdown"
    assert bad.json()["errors"][0]["field"] == "pipeline.stages[0].floor"
    assert not_object.status_code == 422
    assert not_object.json()["errors"][0]["field"] == "pipeline"
    assert "expected an object" in not_object.json()["detail"]


def test_fields_errors_still_speak_the_fields(served: Any) -> None:
    app, _ = served
    threshold, floor = post_all(
        app, ("/search", {"query": QUERY, "consensus": True,
                          "consensus_params": {"threshold": 2}}),
        ("/search", {"query": QUERY, "select": "fair", "select_params": {"p": 0.5}}))
    assert threshold.status_code == 422
    assert threshold.json()["detail"].startswith("consensus_params.threshold: expected")
    assert threshold.json()["errors"][0]["field"] == "consensus_params.threshold"
    assert floor.status_code == 422
    assert floor.json()["detail"].startswith("select_params.protected_column: expected")


def test_every_shortcut_of_the_cli_is_a_field(served: Any) -> None:
    # the CLI's --freshness (once refused over HTTP) is a field, as text or as an object
    app, _ = served
    text, items, bad = post_all(
        app, ("/search", {"query": QUERY, "freshness": "half_life=30d,undated=penalty:0.5"}),
        ("/search", {"query": QUERY, "freshness": {"half_life": "30d",
                                                   "undated": "penalty:0.5"}}),
        ("/search", {"query": QUERY, "freshness": "half_life=0d"}))
    assert text.status_code == 200 and items.status_code == 200, (text.text, items.text)
    stage = next(s for s in text.json()["pipeline"]["stages"] if s["stage"] == "freshness")
    assert stage["half_life"] == 30.0 and stage["undated"] == "penalty:0.5"
    # the same spec; each echo records the clock reading of its own answer (issue 36)
    assert _clockless(items.json()["pipeline"]) == _clockless(text.json()["pipeline"])
    assert stage["now"] == text.json()["info"]["freshness"]["now"]
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "freshness.half_life"
    assert bad.json()["detail"].startswith("freshness.half_life: expected a positive duration")


def _clockless(pipeline: dict[str, Any]) -> dict[str, Any]:
    """An echoed spec with the freshness stages' resolved ``now`` taken out."""
    return {**pipeline, "stages": [{**s, "now": None} if s["stage"] == "freshness" else s
                                   for s in pipeline["stages"]]}


# -- budget, gate, time limit, lock --------------------------------------------------------------

COVERAGE = {"stage": "coverage", "lambda_ilad": 0.5, "lambda_coverage": 0.5}


def test_budget_and_select_pool_apply_to_pipelines(served: Any) -> None:
    app, _ = served
    search, pool, rerank, small = post_all(
        app,
        ("/search", {"query": QUERY, "pipeline": {"top_k": 10, "fetch_k": 1000,
                                                  "stages": [COVERAGE]}}),
        ("/search", {"query": QUERY, "pipeline": {"top_k": 10, "fetch_k": 1500,
                                                  "stages": [{"stage": "mmr",
                                                              "diversity": 0.5}]}}),
        ("/rerank", {"query": QUERY, "candidates": candidates(1000),
                     "pipeline": {"stages": [COVERAGE]}}),
        ("/search", {"query": QUERY, "pipeline": {"fetch_k": 2500, "stages": ["consensus"]}}))
    assert search.status_code == 422 and search.json()["errors"][0]["field"] == "pipeline.fetch_k"
    assert "a fetch_k of at most 283" in search.json()["detail"]
    assert search.json()["cost"] == pytest.approx(24_975, abs=5)
    assert pool.status_code == 422 and pool.json()["errors"][0]["field"] == "pipeline.fetch_k"
    assert "at most 1,000 with select (mmr)" in pool.json()["detail"]
    assert rerank.status_code == 422 and rerank.json()["errors"][0]["field"] == "candidates"
    assert "send at most 283 candidates" in rerank.json()["detail"]
    assert small.status_code == 422 and "consensus (1e-4·N + 5e-4·N², N=2,500)" in \
        small.json()["detail"]


def test_heavy_gate_applies_to_pipelines(demo_index_hashing: Path, tmp_path: Path) -> None:
    where = copy_index(demo_index_hashing, tmp_path / "index")
    with in_process(where, max_heavy_requests=1, heavy_cost=0) as app:
        hold = Hold("start")
        app.state.service.hook = hold
        body = {"query": QUERY, "pipeline": {"stages": ["prior", "consensus"]}}

        async def scenario() -> None:
            async with asgi_client(app) as c:
                first = asyncio.create_task(c.post("/search", json=body))
                assert await asyncio.to_thread(hold.reached.wait, 60)
                second = await c.post("/search", json=body)
                assert second.status_code == 503 and second.headers["retry-after"] == "1"
                hold.release.set()
                assert (await first).status_code == 200

        run(scenario())


def test_coverage_time_limit_is_capped_at_the_timeout(demo_index_hashing: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import credrank.select.stages as stages

    seen: list[float] = []
    solve = stages.best_set_milp

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["time_limit"])
        return solve(*args, **kwargs)

    monkeypatch.setattr(stages, "best_set_milp", spy)
    where = copy_index(demo_index_hashing, tmp_path / "index")
    with in_process(where, timeout_s=7.0) as app:
        got, = post_all(app, ("/search", {"query": QUERY, "pipeline": {
            "top_k": 3, "fetch_k": 12, "stages": [{**COVERAGE, "time_limit": 60}]}}))
    assert got.status_code == 200, got.text
    # the solver gets what is left of the 7 s request timeout (never the spec's 60 s): the
    # stage's own limit covers intents and cosines too, so a little less than 7
    assert len(seen) == 1 and 0 < seen[0] <= 7.0
    assert got.json()["pipeline"]["stages"][-1]["time_limit"] == 60  # the spec as sent


def test_scoring_runs_outside_the_store_lock(served: Any) -> None:
    """A search held in its consensus stage (after retrieval) does not hold the store: a
    second search completes meanwhile."""
    app, _ = served
    hold = Hold("stage:consensus")
    app.state.service.hook = hold

    async def scenario() -> None:
        async with asgi_client(app) as c:
            slow = asyncio.create_task(c.post("/search", json={
                "query": QUERY, "pipeline": {"stages": ["prior", "consensus"]}}))
            assert await asyncio.to_thread(hold.reached.wait, 60)
            quick = await c.post("/search", json={"query": QUERY, "top_k": 3})
            assert quick.status_code == 200
            assert not slow.done()
            hold.release.set()
            assert (await slow).status_code == 200

    run(scenario())


def test_the_query_is_embedded_before_the_store_lock(served: Any) -> None:
    """A search held while it embeds its query does not hold the store: the lock is free
    and another search completes; the held one then answers the same hits."""
    app, _ = served
    state = app.state.service
    hold = Hold("embed")
    state.hook = hold

    async def scenario() -> None:
        async with asgi_client(app) as c:
            slow = asyncio.create_task(c.post("/search", json={"query": QUERY, "top_k": 5}))
            assert await asyncio.to_thread(hold.reached.wait, 60)
            assert state.store_lock.acquire(blocking=False)
            state.store_lock.release()
            quick = await c.post("/search", json={"query": QUERY, "top_k": 5})
            assert quick.status_code == 200 and not slow.done()
            hold.release.set()
            held = await slow
            assert held.status_code == 200 and ranked(held.json()) == ranked(quick.json())

    run(scenario())
    embeds = [p for p, _ in hold.points if p == "embed"]
    assert len(embeds) == 2  # one query embedding per search, none under the lock


def _searches_by_thread(state: Any, entered: threading.Event | None = None) -> list[str]:
    """The thread names that run the service's searches from now on (the endpoint looks
    ``state.search`` up per request); ``entered`` is set as each starts."""
    names: list[str] = []
    search = state.search

    def spy(token: Any, *args: Any) -> Any:
        names.append(threading.current_thread().name)
        if entered is not None:
            entered.set()
        return search(token, *args)

    state.search = spy
    return names


def test_a_cheap_search_runs_on_the_event_loop_and_a_priced_one_in_a_worker(served: Any
                                                                             ) -> None:
    """The default search of the hashing index is priced under INLINE_UNITS with its query:
    it runs where the app runs, with no hop to a worker thread; one priced over it (MMR over
    a pool of 300: 1e-4·N² = 9 units) goes to a worker; both answer as before."""
    app, _ = served
    state = app.state.service
    names = _searches_by_thread(state)
    here = threading.current_thread().name
    cheap, priced = post_all(app, ("/search", {"query": QUERY, "top_k": 5}),
                             ("/search", {"query": QUERY, "top_k": 5, "fetch_k": 300,
                                          "select": "mmr", "select_params": {
                                              "diversity": 0.5}}))
    assert cheap.status_code == 200 and priced.status_code == 200, (cheap.text, priced.text)
    assert names[0] == here and names[1].startswith("credrank-serve"), names
    state.hook = lambda point, token: None  # a test's hook: never inline
    threaded, = post_all(app, ("/search", {"query": QUERY, "top_k": 5}))
    assert names[2].startswith("credrank-serve"), names
    assert threaded.status_code == 200 and ranked(threaded.json()) == ranked(cheap.json())


def test_a_request_shape_keeps_its_plan_and_its_estimate(served: Any) -> None:
    """A request without ``pipeline`` is planned and priced once per shape (its fields but the
    query and text): the same plan and estimate again, for another query too; another shape
    gets its own; a request that sends its ``pipeline`` is planned anew every time; a rerank's
    estimate, which counts the passages it embeds, is never kept."""
    from credrank.serve.models import RerankRequest
    from credrank.serve.work import MAX_CACHED_PLANS

    app, _ = served
    state = app.state.service
    first = state.plan(SearchRequest(query=QUERY, top_k=5))
    again = state.plan(SearchRequest(query="another query", top_k=5, text="none"))
    assert again is first and first.shape is not None
    assert state.budget(again) is state.budget(first)
    other = state.plan(SearchRequest(query=QUERY, top_k=6))
    assert other is not first and other.spec.top_k == 6
    assert state.budget(other).total != state.budget(first).total
    sent = {"query": QUERY, "pipeline": {"top_k": 5, "stages": []}}
    one, two = (state.plan(SearchRequest.model_validate(sent)) for _ in range(2))
    assert one is not two and one.shape is None and one.spec == two.spec
    rerank = RerankRequest.model_validate({"query": QUERY, "candidates": [{"id": "a",
                                                                            "text": "x"}]})
    plan = state.plan(rerank, pool=1, pool_field="candidates")
    assert state.budget(plan, embed_lengths=[1]) is not state.budget(plan, embed_lengths=[1])
    for top_k in range(1, MAX_CACHED_PLANS + 2):  # the oldest shapes go
        state.plan(SearchRequest(query=QUERY, top_k=top_k))
    assert state.plan(SearchRequest(query=QUERY, top_k=5)) is not first


def test_a_model_query_embedding_is_never_inline(served: Any) -> None:
    """Embedding a query with a model is priced at 50 units per 1,000 characters: a search
    with a model embedder goes to a worker even with the cheapest pipeline."""
    app, _ = served
    state = app.state.service
    cost = state.budget(state.plan(SearchRequest(query=QUERY)))
    assert state._cheap(cost, len(QUERY))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(state.searcher.embedder, "name", "all-minilm-l6-v2")
        assert not state._cheap(cost, len(QUERY))
        assert state._cheap(cost, 0)  # a rerank that sends its query_vector embeds nothing


def test_a_cheap_search_waits_for_a_write_in_a_worker_and_the_loop_keeps_answering(
        served: Any) -> None:
    """While a write holds the store, a cheap search is not run on the event loop (that would
    stop every request until the write ends): it waits in a worker thread, /healthz answers
    meanwhile, and the search answers once the store is free."""
    app, _ = served
    state = app.state.service
    entered, held, release = threading.Event(), threading.Event(), threading.Event()
    names = _searches_by_thread(state, entered)

    def writer() -> None:
        with state.store_lock:
            held.set()
            release.wait(60)

    async def scenario() -> None:
        async with asgi_client(app) as c:
            thread = threading.Thread(target=writer)
            thread.start()
            assert await asyncio.to_thread(held.wait, 60)
            search = asyncio.create_task(c.post("/search", json={"query": QUERY}))
            # it has started (in a worker: the store is held) and waits there for the store
            assert await asyncio.to_thread(entered.wait, 60)
            health = await c.get("/healthz")
            assert health.status_code == 200 and not search.done()
            release.set()
            assert (await search).status_code == 200
            await asyncio.to_thread(thread.join, 60)

    run(scenario())
    assert len(names) == 1 and names[0].startswith("credrank-serve"), names


# -- registration ------------------------------------------------------------------------------

def test_readyz_lists_the_registered_names_not_paths(served: Any) -> None:
    app, models = served
    app.state.service.ready = True

    async def scenario() -> httpx.Response:
        async with asgi_client(app) as c:
            return await c.get("/readyz")

    got = run(scenario())
    assert got.status_code == 200
    assert got.json()["models"] == ["cred", "cred_minilm", "estimate", "feedback", "stance"]
    assert "consensus" in got.json()["stages"] and "mmr" in got.json()["stages"]
    assert not any(str(p) in got.text for p in models.values())


@pytest.mark.parametrize(("item", "needle"), [
    ("cred=missing.json", "no such file or directory"),
    ("cred", "expected NAME=PATH"),
    ("=x.json", "expected NAME=PATH"),
    ("feedback={models}/cred.json", "reserved"),
    ("current={models}/cred.json", "reserved"),
    ("bad name={models}/cred.json", "expected a name"),
])
def test_model_option_errors_at_start(tmp_path: Path, item: str, needle: str) -> None:
    write_models(tmp_path / "models")
    value = item.format(models=tmp_path / "models")
    got = CliRunner().invoke(cli, ["serve", "--index", str(tmp_path / "index"),
                                   "--model", value])
    assert got.exit_code == 2, got.output
    assert got.output.lstrip().startswith("error: --model") and needle in got.output


def test_model_option_given_twice_and_config_checks(tmp_path: Path) -> None:
    models = write_models(tmp_path / "models")
    got = CliRunner().invoke(cli, ["serve", "--index", str(tmp_path / "index"), "--model",
                                   f"m={models['cred']}", "--model", f"m={models['stance']}"])
    assert got.exit_code == 2 and "registered twice" in got.output
    with pytest.raises(ValueError, match=r"models: m=.*: no such file"):
        ServeConfig(models={"m": tmp_path / "none.json"})
    with pytest.raises(ValueError, match="reserved"):
        ServeConfig(models={"feedback": models["cred"]})
    assert ServeConfig(models={"m": models["cred"]}, priors_store=tmp_path).resources == {
        "m": models["cred"], "feedback": tmp_path}


def test_openapi_models_the_pipeline(served: Any) -> None:
    app, _ = served
    schema = app.openapi()
    components = schema["components"]["schemas"]
    for name in ("SearchRequest", "RerankRequest"):
        field = components[name]["properties"]["pipeline"]
        spec = next(s for s in field["anyOf"] if s.get("type") == "object")
        assert {"top_k", "fetch_k", "stages"} <= set(spec["properties"])
        items = spec["properties"]["stages"]["items"]["anyOf"]
        assert any(i.get("required") == ["stage"] for i in items)
    for name in ("SearchResponse", "RerankResponse"):
        assert "pipeline" in components[name]["required"]
    PipelineSpec.from_dict({"stages": ["prior"]})  # what the schema describes is a spec


# -- a real server -----------------------------------------------------------------------------

def test_real_server_with_models_and_the_cli_replays_its_pipeline(
        demo_index_hashing: Path, tmp_path: Path) -> None:
    where = copy_index(demo_index_hashing, tmp_path / "index")
    models = write_models(tmp_path / "models")
    args = [a for name in ("cred", "stance") for a in ("--model", f"{name}={models[name]}")]
    with running_server(where, "--table", str(TABLE), "--priors-store",
                        str(tmp_path / "priors"), *args) as server:
        ready = httpx.get(server.url + "/readyz", timeout=60).json()
        assert ready["models"] == ["cred", "feedback", "stance"]
        body = {"query": CLAIM, "pipeline": {"top_k": 5, "stages": [
            {"stage": "feedback_prior", "store": "feedback"},
            {"stage": "credibility", "model": "cred"},
            {"stage": "stance", "model": "stance"}]}}
        first = httpx.post(server.url + "/search", json=body, timeout=60)
        assert first.status_code == 200, first.text
        replay = httpx.post(server.url + "/search", timeout=60,
                            json={"query": CLAIM, "pipeline": first.json()["pipeline"]})
        assert ranked(replay.json()) == ranked(first.json())
        path = httpx.post(server.url + "/search", timeout=60, json={"query": CLAIM, "pipeline": {
            "stages": [{"stage": "credibility", "model": str(models["cred"])}]}})
        assert path.status_code == 422
        assert path.json()["errors"][0]["field"] == "pipeline.stages[0].model"
        assert "registered: cred, feedback, stance" in path.json()["detail"]
        # a guessed path that is a registered file's is answered as any other path: no oracle
        # (issue 37, N16)
        other = httpx.post(server.url + "/search", timeout=60, json={"query": CLAIM, "pipeline": {
            "stages": [{"stage": "credibility", "model": "/srv/not/registered.json"}]}})
        assert other.status_code == 422 and other.json() == path.json()
        assert "got a file path or other text" in path.json()["detail"]
    # the CLI replays the server's run from its "pipeline" (names → the same files, here
    # given as paths, which the CLI may read)
    spec = first.json()["pipeline"]
    for item in spec["stages"]:
        if item["stage"] in ("credibility", "stance"):
            item["model"] = str(models[item["model"]])
        if item["stage"] == "feedback_prior":
            item["store"] = str(tmp_path / "priors")
    (tmp_path / "spec.json").write_text(json.dumps({"pipeline": spec}), encoding="utf-8")
    got = CliRunner().invoke(cli, ["search", CLAIM, "--index", str(where), "--pipeline",
                                   str(tmp_path / "spec.json"), "--json"])
    assert got.exit_code == 0, got.output
    cli_doc = json.loads(got.stdout)  # stdout only: a warning goes to stderr
    assert [d for d, _ in ranked(cli_doc)] == [d for d, _ in ranked(first.json())]
    assert [s for _, s in ranked(cli_doc)] == pytest.approx(
        [s for _, s in ranked(first.json())], rel=1e-9)


def test_half_life_and_rrf_k_have_sane_ranges_over_http(served: Any) -> None:
    # issue 37 N14: half_life 1e-320 zeroed every score; rrf_k 1e308 gave scores of 2e-308
    app, _ = served
    tiny, huge, k, shortest = post_all(
        app, ("/search", {"query": QUERY, "freshness": {"half_life": 1e-320}}),
        ("/search", {"query": QUERY, "freshness": "half_life=1001y"}),
        ("/search", {"query": QUERY, "pipeline": {"stages": [
            {"stage": "combine", "mode": "rrf", "rrf_k": 1e308}]}}),
        ("/search", {"query": QUERY, "pipeline": {"stages": [
            {"stage": "freshness", "half_life": 1 / 86400, "now": "2026-01-01"}]}}))
    for bad, field in ((tiny, "freshness.half_life"), (huge, "freshness.half_life"),
                       (k, "pipeline.stages[0].rrf_k")):
        assert bad.status_code == 422, bad.text
        assert bad.json()["errors"][0]["field"] == field
    assert "between 1 second" in tiny.json()["detail"]
    assert "(0, 1000000]" in k.json()["detail"]
    # the shortest half-life is served; no score is NaN, infinite or denormal
    assert shortest.status_code == 200, shortest.text
    scores = [h["score"] for h in shortest.json()["hits"]]
    assert all(s == 0.0 or 2.2250738585072014e-308 <= abs(s) < float("inf") for s in scores)


def test_a_huge_top_k_is_refused_by_its_own_name(served: Any) -> None:
    # issue 37 N12: the service's limit names top_k, never a fetch_k nobody wrote
    app, _ = served
    spec, field = post_all(app, ("/search", {"query": QUERY, "pipeline": {"top_k": 10_000_000}}),
                           ("/search", {"query": QUERY, "top_k": 10_000_000}))
    assert spec.status_code == 422 and spec.json()["errors"][0]["field"] == "pipeline.top_k"
    assert field.status_code == 422 and field.json()["errors"][0]["field"] == "top_k"
    assert "fetch_k" not in spec.text + field.text


def test_get_priors_answers_the_source_table_in_pages(served: Any) -> None:
    # issue 37 N17: GET /priors (public) answered the whole, ever-growing source table
    app, _ = served
    items = [{"source_type": "government", "source_id": f"src-{i:02d}", "relevant": True}
             for i in range(5)]

    async def scenario() -> list[httpx.Response]:
        async with asgi_client(app) as c:
            fed = await c.post("/feedback", json={"items": items}, headers=AUTH)
            assert fed.status_code == 200, fed.text
            return [await c.get("/priors", params=p) for p in (
                {}, {"limit": 2}, {"offset": 4, "limit": 2}, {"limit": 1001}, {"offset": -1},
                {"verison": 0}, [("limit", 1), ("limit", 2)])]

    whole, first, last, over, negative, misspelt, twice = run(scenario())
    # a query parameter the route does not read, or one given twice, was ignored (the
    # current version, the last limit): now a 422 naming it
    assert misspelt.status_code == 422 and misspelt.json()["errors"][0]["field"] == "verison"
    assert misspelt.json()["detail"] == ("verison: no such query parameter of GET /priors "
                                         "(expected version, offset, limit)")
    assert twice.status_code == 422
    assert twice.json()["detail"] == "limit: given 2 times; give it once"
    assert whole.status_code == 200, whole.text
    names = sorted(whole.json()["sources"])
    assert whole.json()["sources_total"] == len(names) >= 5
    assert (whole.json()["offset"], whole.json()["limit"]) == (0, 1000)
    assert list(first.json()["sources"]) == names[:2] and first.json()["limit"] == 2
    assert list(last.json()["sources"]) == names[4:6]
    assert first.json()["types"] == whole.json()["types"]
    for bad, field in ((over, "limit"), (negative, "offset")):
        assert bad.status_code == 422, bad.text
        assert field in bad.json()["detail"]


def test_an_error_never_shows_the_index_folder(served_to_read: Any) -> None:
    # a stage's hint named the server's index path: "add the scores with `credrank score
    # machine-text --index /srv/…/index`"
    app, _ = served_to_read
    [got] = post_all(app, ("/search", {"query": QUERY, "top_k": 3, "machine_text": True}))
    assert got.status_code == 422, got.text
    detail = got.json()["detail"]
    assert "credrank score machine-text --index '<the served index>'" in detail, detail
    assert "/index" not in detail.replace("--index", "")


def test_candidate_errors_name_their_field(served_to_read: Any) -> None:
    # a 422 of /rerank's candidate checks had no "errors" (json.md: one {"field"} a problem)
    app, _ = served_to_read
    twice, vector, qv = post_all(
        app, ("/rerank", {"query": "q", "candidates": [{"id": "a", "text": "x"},
                                                       {"id": "a", "text": "y"}]}),
        ("/rerank", {"query": "q", "candidates": [{"id": "a", "text": "x", "vector": "x"}]}),
        ("/rerank", {"query": "q", "candidates": [{"id": "a", "text": "x"}],
                     "query_vector": [1e300] * 256}))
    for got, field in ((twice, "candidates[1].id"), (vector, "candidates[0].vector"),
                       (qv, "query_vector")):
        assert got.status_code == 422, got.text
        assert got.json()["errors"][0]["field"] == field, got.json()


def test_a_registered_prior_file_is_said_by_its_registered_name(demo_index_hashing: Path,
                                                                 tmp_path: Path) -> None:
    # settings.priors.name said the file's stem ("internal_q3_secret"), part of its path,
    # while the echoed pipeline said the registered name
    secret = tmp_path / "internal_q3_secret.toml"
    secret.write_text("peer_reviewed = 0.9\ngovernment = 0.9\nestablished_news = 0.7\n"
                      "blog = 0.2\nuser_generated = 0.2\nai_generated = 0.1\nunknown = 0.3\n",
                      encoding="utf-8")
    where = copy_index(demo_index_hashing, tmp_path / "index")
    with in_process(where, tables=(TABLE,), models={"mypri": secret}) as app:
        [got] = post_all(app, ("/search", {"query": QUERY, "top_k": 2, "priors": "mypri"}))
    assert got.status_code == 200, got.text
    doc = got.json()
    assert doc["settings"]["priors"]["name"] == "mypri"
    assert doc["pipeline"]["stages"][0]["priors"] == "mypri"
    assert "internal_q3_secret" not in got.text


def test_a_union_field_refusing_nan_is_one_error_at_its_path(served_to_read: Any) -> None:
    # five errors at select_params.diversity.bool, .int, .float, .str, .list[union[…]]
    app, _ = served_to_read

    async def scenario() -> list[httpx.Response]:
        async with asgi_client(app) as c:
            return [await c.post(path, content=body, headers={
                        **AUTH, "content-type": "application/json"})
                    for path, body in (
                        ("/search", b'{"query":"v","select":"mmr",'
                                    b'"select_params":{"diversity":NaN}}'),
                        ("/rerank", b'{"query":"q","candidates":[{"id":"a","text":"x",'
                                    b'"vector":[NaN]}]}'))]

    search, rerank = run(scenario())
    for got, field in ((search, "select_params.diversity"), (rerank, "candidates[0].vector")):
        assert got.status_code == 422, got.text
        [error] = got.json()["errors"]
        assert error["field"] == field and error["msg"] == "expected a finite number, got NaN"


def test_a_stage_parameter_refused_at_run_time_names_its_field(served_to_read: Any) -> None:
    # "version: expected an integer in [0, 0], got 999" had no errors / field
    app, _ = served_to_read
    version, group = post_all(
        app, ("/search", {"query": QUERY, "pipeline": {"stages": [
            {"stage": "feedback_prior", "store": "feedback", "version": 999}]}}),
        ("/search", {"query": QUERY, "select": "exposure",
                     "select_params": {"group_column": "bogus"}}))
    assert version.status_code == 422, version.text
    assert version.json()["errors"][0]["field"] == "pipeline.stages[0].version"
    assert group.status_code == 422, group.text
    assert group.json()["errors"][0]["field"] == "select_params.group_column"


def test_a_stage_error_names_the_stage_as_the_request_wrote_it(served_to_read: Any) -> None:
    """A spec of a selector alone holds the implied ``combine`` before it: an error at the
    selector named ``pipeline.stages[1]`` (``[2]`` after a prior), a stage the request never
    had; it names the index the request wrote."""
    app, _ = served_to_read
    bad = {"stage": "mmr", "diversity": 0.5, "intent_column": "nope"}
    alone, after = post_all(app, ("/search", {"query": QUERY, "pipeline": {"stages": [bad]}}),
                            ("/search", {"query": QUERY, "pipeline": {
                                "stages": ["prior", bad], "top_k": 3}}))
    for got, at in ((alone, 0), (after, 1)):
        assert got.status_code == 422, got.text
        assert got.json()["errors"][0]["field"] == f"pipeline.stages[{at}].intent_column"
        assert "expected one of the candidates' columns (" in got.json()["detail"]


def test_written_indexes_survive_the_implied_stages_and_a_new_top_k() -> None:
    spec = PipelineSpec.from_dict({"stages": ["prior", {"stage": "mmr", "diversity": 0.5}]})
    assert [s.name for s in spec.stages] == ["prior", "combine", "mmr"]
    assert [spec.written(i) for i in range(3)] == ["stages[0]", "the combine stage",
                                                   "stages[1]"]
    assert spec.param_path("diversity: expected …") == "stages[1].diversity"
    assert spec.param_path("mode: …") is None  # the implied combine's: not written
    assert spec.replace_top(top_k=3).written(2) == "stages[1]"


def test_a_selectors_default_pool_over_the_limit_names_top_k(served_to_read: Any) -> None:
    """A request that sent no fetch_k was refused naming ``fetch_k`` ("at most 1,000 with
    select (mmr), got 1,200"): its pool is the default 3 × top_k, so it names ``top_k`` and
    the largest that fits; a sent fetch_k is still named as sent."""
    app, _ = served_to_read
    mmr = {"query": QUERY, "select": "mmr", "select_params": {"diversity": 0.5}}
    default, sent = post_all(app, ("/search", {**mmr, "top_k": 400}),
                             ("/search", {**mmr, "top_k": 10, "fetch_k": 1_200}))
    assert default.status_code == 422 and default.json()["errors"][0]["field"] == "top_k"
    assert default.json()["detail"] == (
        "top_k: with select (mmr) the pool is at most 1,000 candidates, and the default "
        "fetch_k (3 × top_k) of this top_k is 1,200: send a top_k of at most 333, or a fetch_k "
        "of at most 1,000")
    assert sent.status_code == 422 and sent.json()["errors"][0]["field"] == "fetch_k"
    # a sent pipeline's default pool: its top_k (the spec's, else the request's field)
    spec = {"top_k": 400, "stages": [{"stage": "mmr", "diversity": 0.5}]}
    in_spec, beside = post_all(app, ("/search", {"query": QUERY, "pipeline": spec}),
                               ("/search", {"query": QUERY, "top_k": 400, "pipeline": {
                                   "stages": [{"stage": "mmr", "diversity": 0.5}]}}))
    assert in_spec.status_code == 422, in_spec.text
    assert in_spec.json()["errors"][0]["field"] == "pipeline.top_k"
    assert beside.status_code == 422 and beside.json()["errors"][0]["field"] == "top_k"
