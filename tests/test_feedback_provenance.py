"""Feedback priors and provenance: a declared ``source_type`` is a claim, never the type.

One update moves the prior a document actually gets by at most ``max_change``; an item whose
type differs from its source's (the index's, or the type the store recorded it with) is
refused, naming the item; a batch ranks with one store version; a damaged store is the
server's fault (503); a pinned version out of range names its parameter; ``priors update
--request-id`` is idempotent."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import build_batch
from credrank.cli import app
from credrank.documents.schema import SOURCE_TYPES
from credrank.signals.feedback import (
    STORE_FILE,
    FeedbackPriors,
    SourceTypeMismatch,
    feedback_move,
    source_types_of,
)
from credrank.stages.feedback_prior import FeedbackPrior
from serving import asgi_client, in_process
from sparse_copy import copy_index

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
runner = CliRunner()

#: one document per (source, provenance type) pair, and one without a source per type
SOURCES = ("nejm.org", "reddit.com", "cdc.gov")
DOCS = [(f"{sid}|{t}", t, sid) for sid in SOURCES for t in SOURCE_TYPES] + [
    (f"none|{t}", t, None) for t in SOURCE_TYPES]


def _store(where: Path, **kw: Any) -> FeedbackPriors:
    return FeedbackPriors(where / "store", "current", clock=lambda: T0, **kw)


def _priors(store: FeedbackPriors) -> np.ndarray:
    """The prior each document of :data:`DOCS` gets from the stage (latest version)."""
    batch = build_batch([0.5] * len(DOCS), ids=[d[0] for d in DOCS],
                        source_type=[d[1] for d in DOCS], source_id=[d[2] for d in DOCS])
    return np.asarray(FeedbackPrior(store)(batch).factors["prior"], dtype=float)


def _prior_of(store: FeedbackPriors, doc: str) -> float:
    return float(_priors(store)[[d[0] for d in DOCS].index(doc)])


# -- finding 1: the declared type cannot move a document's prior past max_change ------------------

def test_a_relevant_item_typed_unknown_does_not_lower_a_peer_reviewed_source(tmp_path):
    s = _store(tmp_path)
    before = _prior_of(s, "nejm.org|peer_reviewed")
    s.update([("unknown", "nejm.org", True)])
    # it was 0.95 → 0.55 (the unknown type's prior, moved up): the per-source prior belongs to
    # the type it was recorded with, and the peer_reviewed documents keep their type's prior
    assert _prior_of(s, "nejm.org|peer_reviewed") == before == 0.95
    assert _prior_of(s, "nejm.org|unknown") == pytest.approx(0.55)


def test_a_non_relevant_item_typed_peer_reviewed_does_not_raise_a_forum(tmp_path):
    s = _store(tmp_path)
    s.update([("peer_reviewed", "reddit.com", False)])
    # it was 0.40 → 0.90 for the user_generated documents of reddit.com
    assert _prior_of(s, "reddit.com|user_generated") == 0.4


@settings(max_examples=40, deadline=None)
@given(rounds=st.lists(st.lists(st.tuples(st.sampled_from(SOURCE_TYPES),
                                          st.sampled_from((*SOURCES, None)), st.booleans()),
                                max_size=6), min_size=1, max_size=4),
       step=st.sampled_from((0.1, 0.5)))
def test_one_update_moves_every_documents_prior_by_at_most_max_change(tmp_path_factory, rounds,
                                                                       step):
    s = _store(tmp_path_factory.mktemp("bound"))
    before = _priors(s)
    for items in rounds:
        try:
            s.update(items, step=step)
        except SourceTypeMismatch:  # another type for a recorded source: nothing applied
            continue
        after = _priors(s)
        assert np.all(np.abs(after - before) <= s.max_change + 1e-12), (items, before, after)
        before = after


def test_a_new_source_starts_from_its_types_prior(tmp_path):
    s = _store(tmp_path)
    s.update([("government", "cdc.gov", True)], step=0.1)
    assert s.source_priors() == {"cdc.gov": pytest.approx(feedback_move(0.9, 1, 1, 0.1, 0.05,
                                                                        0.01))}
    assert s.source_types() == {"cdc.gov": "government"}
    assert s.record()["source_types"] == {"cdc.gov": "government"}


def test_another_type_for_a_recorded_source_is_refused_and_nothing_applied(tmp_path):
    s = _store(tmp_path)
    s.update([("government", "cdc.gov", True)])
    with pytest.raises(SourceTypeMismatch, match=r"^feedback\[1\] source_type: expected "
                       r"'government' \(the type source 'cdc.gov' was recorded with when "
                       r"first seen; if that type was wrong, roll the store back to a version "
                       r"before the source was first seen .*\), got 'blog'") as caught:
        s.update([("blog", None, True), ("blog", "cdc.gov", True)])
    assert caught.value.item == 1 and s.current == 1
    with pytest.raises(SourceTypeMismatch, match=r"feedback\[1\] source_type: expected 'blog' "
                       r"\(the type of an earlier item of source 'new'"):
        s.update([("blog", "new", True), ("government", "new", True)])
    assert s.current == 1


def test_known_types_refuse_a_type_the_index_does_not_give_the_source(tmp_path):
    s = _store(tmp_path)
    known = source_types_of([{"source_id": "nejm.org", "source_type": "peer_reviewed"},
                             {"source_id": None, "source_type": "blog"}])
    assert known == {"nejm.org": frozenset({"peer_reviewed"})}
    with pytest.raises(SourceTypeMismatch, match=r"feedback\[0\] source_type: expected "
                       r"'peer_reviewed' \(the type the index gives source 'nejm.org' by "
                       r"provenance\), got 'unknown'"):
        s.update([("unknown", "nejm.org", True)], known_types=known)
    assert s.current == 0
    # a source the index lacks is not checked; the one it has, with its type, is taken
    s.update([("peer_reviewed", "nejm.org", True), ("blog", "elsewhere", True)],
             known_types=known)
    assert s.source_types() == {"nejm.org": "peer_reviewed", "elsewhere": "blog"}


def test_rollback_restores_the_recorded_types(tmp_path):
    s = _store(tmp_path)
    s.update([("unknown", "nejm.org", True)])
    s.rollback(0)  # the wrong first sight is undone: the source may be typed again
    assert s.source_types() == {}
    s.update([("peer_reviewed", "nejm.org", True)])
    assert s.source_types() == {"nejm.org": "peer_reviewed"}
    s.rollback(1)
    assert FeedbackPriors(s.directory).source_types() == {"nejm.org": "unknown"}


# -- finding 4: a pinned version out of range names its parameter -------------------------------

def test_a_pinned_version_out_of_range_is_refused_when_built(tmp_path):
    s = _store(tmp_path)
    with pytest.raises(ValueError, match=r"^version: expected a version of store .*store' in "
                       r"\[0, 0\], got 3$"):
        FeedbackPrior(str(s.directory), version=3)


# -- the CLI: --index, --request-id, the pipeline's version, the batch's version ----------------

CORPUS = [{"id": "d1", "text": "vitamin d covid randomized trial",
           "url": "https://www.nejm.org/doi/10.1/x", "source_id": "nejm.org"},
          {"id": "d2", "text": "vitamin d covid cure says my uncle",
           "url": "https://www.reddit.com/r/health/1", "source_id": "reddit.com"},
          {"id": "d3", "text": "vitamin d covid guidance",
           "url": "https://www.cdc.gov/covid/vitd", "source_id": "cdc.gov"}]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("prov")
    corpus = where / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in CORPUS))
    res = runner.invoke(app, ["index", str(corpus), "--index", str(where / "idx"),
                              "--embedder", "hashing", "--no-optimize"])
    assert res.exit_code == 0, res.output
    return where / "idx"


def _invoke(*args: object) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def test_update_with_index_refuses_a_declared_type_naming_the_line(tmp_path, index):
    store, fb = tmp_path / "st", tmp_path / "fb.jsonl"
    assert _invoke("priors", "init", store).exit_code == 0
    fb.write_text('{"source_type": "user_generated", "source_id": "reddit.com", '
                  '"relevant": false}\n\n{"source_type": "unknown", "source_id": "nejm.org", '
                  '"relevant": true}\n')
    res = _invoke("priors", "update", store, fb, "--index", index)
    assert res.exit_code == 2
    assert (f"error: {fb}:3: source_type: expected 'peer_reviewed' (the type the index gives "
            "source 'nejm.org' by provenance), got 'unknown' (nothing was applied)"
            in res.output.replace("\n", " "))
    assert FeedbackPriors(store).current == 0
    # every refused line is listed, as every other bad line is (it stopped at the first)
    fb.write_text('{"source_type": "unknown", "source_id": "nejm.org", "relevant": true}\n'
                  '{"source_type": "blog", "source_id": "reddit.com", "relevant": true}\n')
    both = _invoke("priors", "update", store, fb, "--index", index)
    assert both.exit_code == 2
    assert f"{fb}:1: source_type:" in both.output and f"{fb}:2: source_type:" in both.output
    fb.write_text('{"source_type": "peer_reviewed", "source_id": "nejm.org", '
                  '"relevant": true}\n')
    assert _invoke("priors", "update", store, fb, "--index", index).exit_code == 0
    assert FeedbackPriors(store).source_types() == {"nejm.org": "peer_reviewed"}


def test_update_request_id_applies_once(tmp_path):
    store, fb, other = tmp_path / "st", tmp_path / "fb.jsonl", tmp_path / "other.jsonl"
    assert _invoke("priors", "init", store).exit_code == 0
    fb.write_text('{"source_type": "blog", "relevant": false}\n')
    other.write_text('{"source_type": "blog", "relevant": true}\n')
    first = _invoke("priors", "update", store, fb, "--request-id", "cron-7")
    again = _invoke("priors", "update", store, fb, "--request-id", "cron-7")
    assert first.exit_code == again.exit_code == 0, again.output
    assert "version 1" in first.output and "already applied" in again.output
    assert FeedbackPriors(store).current == 1
    reused = _invoke("priors", "update", store, other, "--request-id", "cron-7")
    assert reused.exit_code == 2 and "--request-id 'cron-7': already used by version 1" in (
        reused.output)
    bad = _invoke("priors", "update", store, fb, "--request-id", " x")
    assert bad.exit_code == 2 and "error: --request-id: expected 1 to 200" in bad.output
    assert FeedbackPriors(store).current == 1


def test_an_empty_feedback_file_is_said(tmp_path):
    store, fb = tmp_path / "st", tmp_path / "fb.jsonl"
    assert _invoke("priors", "init", store).exit_code == 0
    fb.write_text("")
    res = _invoke("priors", "update", store, fb)
    assert res.exit_code == 0 and "holds no feedback items" in res.output


def test_a_pinned_version_out_of_range_names_the_spec_file_and_field(tmp_path, index):
    store = _store(tmp_path).directory
    spec = tmp_path / "p.json"
    spec.write_text(json.dumps({"stages": [{"stage": "feedback_prior", "store": str(store),
                                            "version": 999}]}))
    res = _invoke("search", "vitamin", "--index", index, "--pipeline", spec)
    assert res.exit_code == 2
    said = " ".join(res.output.split())
    assert (f"--pipeline {spec}: stages[0].version: expected a version of store "
            f"'{store}' in [0, 0], got 999") in said
    res = _invoke("search", "vitamin", "--index", index, "-S", f"feedback_prior.store={store}",
                  "-S", "feedback_prior.version=99")
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "-S feedback_prior.version=99: expected a version" in said


def test_a_batch_ranks_every_query_with_the_version_of_its_start(tmp_path, index, capsys,
                                                                 monkeypatch):
    from credrank.cli.search import _run_batch
    from credrank.documents import Query
    from credrank.pipeline.spec import PipelineSpec
    from credrank.searcher import Searcher

    s = _store(tmp_path)
    s.update([("government", "cdc.gov", False)])
    spec = PipelineSpec.from_dict({"stages": [{"stage": "feedback_prior",
                                               "store": str(s.directory)}]})
    with Searcher.open(index) as searcher:
        real = searcher.search_many

        def search_then_feedback(*args: Any, **kw: Any) -> Any:  # feedback after each query
            out = list(real(*args, **kw))
            s.update([("government", "cdc.gov", False)])
            return out

        monkeypatch.setattr(searcher, "search_many", search_then_feedback)
        batch = [Query(f"q{i}", "vitamin d covid") for i in range(3)]
        assert _run_batch(searcher, batch, spec, None, "t") == 0
    captured = capsys.readouterr()
    lines = [json.loads(x) for x in captured.out.splitlines()]
    assert s.current == 4  # feedback came during the batch
    used = {(d["settings"]["priors"]["version"], d["info"]["feedback_prior"]["version"],
             d["pipeline"]["stages"][0]["version"]) for d in lines}
    assert used == {(1, 1, 1)}
    priors = [h["score_breakdown"]["prior"] for d in lines for h in d["hits"]
              if h["doc_id"] == "d3"]
    assert priors == [pytest.approx(s.source_priors(1)["cdc.gov"])] * 3
    assert "every query of the batch ranks with its version 1" in " ".join(
        captured.err.split())


def test_search_many_ranks_every_query_with_the_version_of_its_start(tmp_path, index):
    """The library's batch (what the benches call) pins the version as the CLI's batch does:
    feedback arriving between its queries does not change the priors of the later ones."""
    from credrank.pipeline.spec import PipelineSpec
    from credrank.searcher import Searcher

    s = _store(tmp_path)
    s.update([("government", "cdc.gov", False)])
    spec = PipelineSpec.from_dict({"stages": [{"stage": "feedback_prior",
                                               "store": str(s.directory)}]})

    def queries() -> Any:  # feedback arrives after each query is taken
        for i in range(3):
            yield f"q{i}", "vitamin d covid"
            s.update([("government", "cdc.gov", False)])

    with Searcher.open(index) as searcher:
        versions = [r.info["feedback_prior"]["version"]
                    for _, r in searcher.search_many(queries(), spec)]
        pinned, version = searcher.pin_feedback(spec)
    assert versions == [1, 1, 1] and s.current == 4
    assert version == 4 and pinned.stage("feedback_prior").params["version"] == 4


# -- the service: /feedback checks the index's types; a damaged store is a 503 ------------------

def test_service_refuses_a_declared_type_and_answers_a_damaged_store_503(tmp_path, index):
    where = copy_index(index, tmp_path / "idx")
    priors = FeedbackPriors(tmp_path / "priors", "current").directory
    key = {"X-API-Key": "k"}

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        with in_process(where, api_key="k", priors_store=priors) as served:
            async with asgi_client(served) as client:
                out["wrong"] = await client.post("/feedback", headers=key, json={"items": [
                    {"source_type": "blog", "relevant": True},
                    {"source_type": "unknown", "source_id": "nejm.org", "relevant": True}]})
                out["typo"] = await client.post("/feedback", headers=key, json={"items": [
                    {"source_type": "blogg", "relevant": True}]})
                out["step"] = await client.post("/feedback", headers=key, json={
                    "items": [{"source_type": "blog", "relevant": True}], "step": 0.9})
                out["right"] = await client.post("/feedback", headers=key, json={"items": [
                    {"source_type": "peer_reviewed", "source_id": "nejm.org",
                     "relevant": True}]})
                out["pinned"] = await client.post("/search", json={
                    "query": "vitamin", "pipeline": {"stages": [
                        {"stage": "feedback_prior", "store": "feedback", "version": 999}]}})
                (priors / STORE_FILE).write_text((priors / STORE_FILE).read_text()[:200])
                out["search"] = await client.post("/search", json={
                    "query": "vitamin", "priors_store": "feedback"})
                out["fresh"] = await client.post("/search", json={
                    "query": "vitamin", "top_k": 2, "priors_store": "feedback"})
        return out

    got = asyncio.run(scenario())
    wrong = got["wrong"]
    assert wrong.status_code == 422, wrong.text
    assert wrong.json()["errors"][0]["field"] == "items[1].source_type"
    assert wrong.json()["detail"].startswith("items[1].source_type: expected 'peer_reviewed'")
    # a value outside the choices says what came, as the CLI does (pydantic's wording did not)
    typo = got["typo"].json()
    assert got["typo"].status_code == 422 and typo["errors"][0]["field"] == "items[0].source_type"
    assert typo["detail"].startswith("items[0].source_type: expected one of 'peer_reviewed'")
    assert typo["detail"].endswith('got "blogg"')
    assert got["step"].json()["detail"] == "step: expected a number <= 0.5, got 0.9"
    assert got["right"].status_code == 200 and got["right"].json()["version"] == 1
    assert got["right"].json()["source_types"] == {"nejm.org": "peer_reviewed"}
    pinned = got["pinned"]
    assert pinned.status_code == 422
    assert pinned.json()["errors"][0]["field"] == "pipeline.stages[0].version"
    assert ("expected a version of store 'feedback' in [0, 1], got 999"
            in pinned.json()["detail"])
    for name in ("search", "fresh"):  # a kept stage (its refresh), a new one (its build)
        answer = got[name]
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"] == "unavailable"
        assert "'feedback'" in answer.json()["detail"] and str(priors) not in answer.text
