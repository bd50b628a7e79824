"""Feedback-updated priors: bounds, persistence, versions, rollback, audit log, stage, oracle."""

import json
import multiprocessing
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import build_batch
from credrank.documents.schema import SOURCE_TYPES
from credrank.signals import feedback
from credrank.signals.feedback import (
    AUDIT_FILE,
    STORE_FILE,
    FeedbackPriors,
    FeedbackStoreError,
    RequestIdReused,
    feedback_move,
)
from credrank.signals.prior import preset
from credrank.stages.feedback_prior import FeedbackPrior
from credrank_bench.experiments.oracle_feedback import simulate_oracle_feedback

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def store(tmp_path, **kw):
    kw.setdefault("clock", lambda: T0)
    return FeedbackPriors(tmp_path / "store", kw.pop("base", "current"), **kw)


# -- the move ---------------------------------------------------------------------------------

def test_single_item_is_the_plain_rule():
    # λ ← λ + η (target − λ): 0.5 + 0.1 (1 − 0.5) = 0.55 (below the cap 0.1)
    assert feedback_move(0.5, 1, 1, 0.1, 0.1, 0.01) == pytest.approx(0.55)
    assert feedback_move(0.5, 0, 1, 0.1, 0.1, 0.01) == pytest.approx(0.45)


def test_n_items_equal_n_sequential_steps():
    seq = 0.3
    for _ in range(3):
        seq = seq + 0.2 * (1 - seq)
    assert feedback_move(0.3, 3, 3, 0.2, 1.0, 0.01) == pytest.approx(seq)


def test_mixed_items_move_toward_share_and_cap_binds():
    # target 0.5, η_2 = 1 − .9² = .19: 0.9 + .19 (0.5 − 0.9) = 0.824
    assert feedback_move(0.9, 1, 2, 0.1, 1.0, 0.01) == pytest.approx(0.824)
    # cap 0.05 binds: 0.9 − 0.05
    assert feedback_move(0.9, 1, 2, 0.1, 0.05, 0.01) == pytest.approx(0.85)


def test_no_items_no_move():
    assert feedback_move(0.42, 0, 0, 0.5, 0.1, 0.01) == 0.42


@settings(max_examples=200, deadline=None)
@given(prior=st.floats(0.01, 1.0), rel=st.integers(0, 30), extra=st.integers(0, 30),
       step=st.floats(1e-4, 0.5), cap=st.floats(1e-4, 1.0), eps=st.floats(1e-4, 0.01))
def test_move_never_leaves_bounds_nor_exceeds_cap(prior, rel, extra, step, cap, eps):
    n = rel + extra
    new = feedback_move(prior, rel, n, step, cap, eps)
    assert eps <= new <= 1.0
    assert abs(new - prior) <= cap + 1e-12 or prior < eps
    if n:  # moves toward the target, never past it
        target = rel / n
        assert (new - prior) * (target - prior) >= -1e-12
        assert abs(new - target) <= abs(prior - target) + 1e-12


# -- the store --------------------------------------------------------------------------------

def test_create_writes_version_zero_and_log(tmp_path):
    s = store(tmp_path)
    assert s.current == 0
    assert dict(s.table().values) == dict(preset("current").values)
    data = json.loads((tmp_path / "store" / STORE_FILE).read_text())
    assert data["current"] == 0 and data["versions"][0]["event"] == "init"
    assert data["versions"][0]["timestamp"] == T0.isoformat()
    assert [line["event"] for line in s.audit()] == ["init"]


def test_update_moves_type_and_source_and_caps(tmp_path):
    s = store(tmp_path, max_change=0.05)
    v = s.update([("blog", "blog.example", True), ("blog", None, True),
                  ("user_generated", "forum.x", False)], step=0.1, author="alice",
                 reason="query 7")
    assert v == 1
    t = s.table()
    # blog: 2 relevant, η_2 = .19, .19 × (1 − .5) = .095 → capped at .05
    assert t["blog"] == pytest.approx(0.55)
    # user_generated: 1 non-relevant, .1 × (0 − .4) = −.04
    assert t["user_generated"] == pytest.approx(0.36)
    assert t["government"] == 0.9  # untouched
    src = s.source_priors()
    assert src["blog.example"] == pytest.approx(0.55)  # starts at the blog prior .5, +.05
    assert src["forum.x"] == pytest.approx(0.36)
    rec = s.history()[1]
    assert rec["author"] == "alice" and rec["reason"] == "query 7"
    assert rec["counts"]["items"] == 3 and rec["counts"]["relevant"] == 2
    assert rec["counts"]["by_type"]["blog"] == {"relevant": 2, "non_relevant": 0}


def test_priors_stay_in_epsilon_one_under_many_updates(tmp_path):
    s = store(tmp_path, epsilon=0.05, max_change=0.2)
    for _ in range(30):
        s.update([("ai_generated", "bad.ai", False)] * 5, step=0.5)
        s.update([("peer_reviewed", None, True)] * 5, step=0.5)
    t = s.table()
    assert t["ai_generated"] == 0.05 and s.source_priors()["bad.ai"] == 0.05
    assert t["peer_reviewed"] == 1.0
    for rec in s.history():
        assert all(0.05 <= v <= 1 for v in rec["types"].values())
        assert all(0.05 <= v <= 1 for v in rec["sources"].values())
    # each update changed each prior by at most the cap
    for before, after in zip(s.history(), s.history()[1:], strict=False):
        for key in SOURCE_TYPES:
            assert abs(after["types"][key] - before["types"][key]) <= 0.2 + 1e-12


def test_reload_from_disk(tmp_path):
    s = store(tmp_path, epsilon=0.02, max_change=0.1)
    s.update([("blog", "b1", False)], step=0.3)
    again = FeedbackPriors(tmp_path / "store")
    assert again.current == 1
    assert dict(again.table().values) == dict(s.table().values)
    assert again.source_priors() == s.source_priors()
    assert again.epsilon == 0.02 and again.max_change == 0.1
    again.update([("blog", None, True)], step=0.1)
    assert FeedbackPriors(tmp_path / "store").current == 2


def test_reopen_with_conflicting_settings_is_refused(tmp_path):
    store(tmp_path)
    with pytest.raises(FeedbackStoreError, match="different base"):
        FeedbackPriors(tmp_path / "store", "aggressive")
    with pytest.raises(FeedbackStoreError, match="epsilon"):
        FeedbackPriors(tmp_path / "store", epsilon=0.2)
    FeedbackPriors(tmp_path / "store", "current")  # same base is fine


def test_missing_store_without_base(tmp_path):
    with pytest.raises(FeedbackStoreError, match="base="):
        FeedbackPriors(tmp_path / "nowhere")


def test_corrupt_store_file(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / STORE_FILE).write_text("{not json")
    with pytest.raises(FeedbackStoreError, match="cannot read"):
        FeedbackPriors(d)


def test_rollback_restores_and_is_itself_a_version(tmp_path):
    s = store(tmp_path)
    s.update([("blog", "b1", True)], step=0.5)
    after_one = dict(s.table().values), s.source_priors()
    s.update([("blog", "b2", False), ("government", None, False)], step=0.5)
    v = s.rollback(1, author="bob", reason="bad batch")
    assert v == 3
    assert (dict(s.table().values), s.source_priors()) == after_one
    assert "b2" not in s.source_priors()
    assert dict(s.table(0).values) == dict(preset("current").values)  # old versions readable
    rec = s.history()[3]
    assert rec["event"] == "rollback" and rec["restored_from"] == 1 and rec["author"] == "bob"
    # rollback to the initial version, then reload
    s.rollback(0)
    assert dict(FeedbackPriors(tmp_path / "store").table().values) == dict(
        preset("current").values)


def test_audit_log_is_append_only_one_line_per_event(tmp_path):
    s = store(tmp_path)
    s.update([("blog", None, True)], step=0.1, author="a", reason="r1")
    first_lines = (tmp_path / "store" / AUDIT_FILE).read_text().splitlines()
    s.rollback(0)
    lines = (tmp_path / "store" / AUDIT_FILE).read_text().splitlines()
    assert lines[:2] == first_lines  # earlier lines untouched
    events = [json.loads(x) for x in lines]
    assert [e["event"] for e in events] == ["init", "update", "rollback"]
    assert [e["version"] for e in events] == [0, 1, 2]
    assert events[1]["changes"]["types"]["blog"] == [0.5, pytest.approx(0.55)]
    assert events[1]["author"] == "a" and events[1]["reason"] == "r1"
    assert events[1]["timestamp"] == T0.isoformat()
    assert events[2]["restored_from"] == 0
    assert events[2]["changes"]["types"]["blog"] == [pytest.approx(0.55), 0.5]


@pytest.mark.parametrize("step", [0, -0.1, 0.51, float("nan"), "0.1", True])
def test_step_validated(tmp_path, step):
    s = store(tmp_path)
    with pytest.raises(ValueError, match="feedback step"):
        s.update([("blog", None, True)], step=step)
    assert s.current == 0  # nothing written


@pytest.mark.parametrize("item,match", [
    (("website", None, True), "source_type"),
    (("blog", "", True), "source_id"),
    (("blog", None, "yes"), "relevant"),
    (("blog", True), "expected"),
])
def test_bad_feedback_items_named(tmp_path, item, match):
    with pytest.raises(ValueError, match=match):
        store(tmp_path).update([item])


@pytest.mark.parametrize("kw,match", [({"epsilon": 0}, "epsilon"), ({"epsilon": 1.0}, "epsilon"),
                                      ({"max_change": 0}, "max_change"),
                                      ({"epsilon": 0.45}, "below epsilon")])
def test_store_parameters_validated(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        store(tmp_path, **kw)


def test_bad_version(tmp_path):
    s = store(tmp_path)
    with pytest.raises(ValueError, match="version"):
        s.table(5)
    with pytest.raises(ValueError, match="version"):
        s.rollback(-1)


# -- the stage --------------------------------------------------------------------------------

def _batch(rows, query="q"):
    return build_batch([r[3] for r in rows], ids=[r[0] for r in rows], query=query,
                       source_type=[r[1] for r in rows], source_id=[r[2] for r in rows])


def test_stage_prefers_source_then_type(tmp_path):
    s = store(tmp_path)
    s.update([("blog", "good.blog", True)], step=0.5)  # source .5 → .55 (cap), type too
    s.update([("blog", None, False)], step=0.5)  # type .55 → .5; source stays .55
    b = _batch([("a", "blog", "good.blog", 0.9), ("b", "blog", "other.blog", 0.9),
                ("c", None, None, 0.9), ("d", "government", "good.blog", 0.9)])
    out = FeedbackPrior(s)(b)
    # d: good.blog's prior belongs to its recorded type (blog); a government document of that
    # source takes the government prior, counted and warned
    np.testing.assert_allclose(out.factors["prior"], [0.55, 0.5, 0.5, 0.9])
    info = out.info["feedback_prior"]
    assert (info["version"], info["source_hits"], info["type_mismatches"]) == (2, 1, 1)
    assert len(info["warnings"]) == 1 and "'d'" in info["warnings"][0]
    pinned = FeedbackPrior(s, version=0)(b)
    np.testing.assert_allclose(pinned.factors["prior"], [0.5, 0.5, 0.5, 0.9])


def test_an_echoed_pipeline_replays_the_store_version_it_ranked_with(tmp_path):
    # the echo said {"stage": "feedback_prior", "version": null}: replayed after more
    # feedback, it ranked with the newer priors (the search and the rerank documents alike)
    from typer.testing import CliRunner

    from credrank.cli import app
    from credrank.searcher import Searcher

    runner = CliRunner()
    corpus, idx, priors = tmp_path / "c.jsonl", tmp_path / "idx", tmp_path / "store"
    corpus.write_text("".join(json.dumps({"id": i, "text": f"vitamin d report {i}",
                                          "url": url}) + "\n"
                              for i, url in (("g", "https://www.cdc.gov/a"),
                                             ("b", "https://x.blogspot.com/b"))))
    assert runner.invoke(app, ["index", str(corpus), "--index", str(idx),
                               "--embedder", "hashing"]).exit_code == 0
    s = store(tmp_path)
    s.update([("government", None, False)], step=0.5)
    first = runner.invoke(app, ["search", "vitamin d report", "--index", str(idx), "--json",
                                "--priors-store", str(priors)])
    assert first.exit_code == 0, first.output
    echo = json.loads(first.stdout)
    assert echo["pipeline"]["stages"][0] == {"stage": "feedback_prior",
                                             "store": str(priors), "version": 1}
    s.update([("government", None, False)], step=0.5)  # version 2: the government prior moves
    spec = tmp_path / "run.json"
    spec.write_text(first.stdout, encoding="utf-8")
    again = runner.invoke(app, ["search", "vitamin d report", "--index", str(idx), "--json",
                                "--pipeline", str(spec)])
    assert again.exit_code == 0, again.output
    scores = [[(h["doc_id"], h["score"]) for h in json.loads(doc)["hits"]]
              for doc in (first.stdout, again.stdout)]
    assert scores[0] == scores[1]
    with Searcher.open(idx) as searcher:
        records = [{"id": "g", "text": "vitamin d", "url": "https://www.cdc.gov/a", "score": 1}]
        doc = searcher.rerank_json("vitamin d", records,
                                   {"stages": [{"stage": "feedback_prior", "store": str(priors)}]})
    assert doc["pipeline"]["stages"][0]["version"] == 2


# -- oracle simulation ------------------------------------------------------------------------

def test_oracle_feedback_changes_later_rankings(tmp_path):
    s = store(tmp_path, max_change=0.2)
    # in both queries a user_generated doc (λ .4) is relevant and a blog doc (λ .5) is not,
    # with equal similarities; the oracle teaches user_generated up and blog down.
    q1 = _batch([("u1", "user_generated", None, 0.9), ("b1", "blog", None, 0.9)])
    q2 = _batch([("u2", "user_generated", None, 0.9), ("b2", "blog", None, 0.9)])
    qrels = {"q1": {"u1": 1, "b1": 0}, "q2": {"u2": 1}}
    res = simulate_oracle_feedback([("q1", q1), ("q2", q2)], qrels, s, step=0.5, k=1)
    first, second = res["queries"]
    assert first["top_k"] == ["b1"] and first["relevant_in_top_k"] == 0
    # after q1: blog .5 → .3 (η .5 × −.5 = −.25, capped −.2); user_generated untouched
    assert s.table(1)["blog"] == pytest.approx(0.3)
    assert second["top_k"] == ["u2"] and second["precision_at_k"] == 1.0
    assert second["version_used"] == 1 and res["final_version"] == 2
    assert set(res["run"]["q2"]) == {"u2", "b2"}
    json.dumps(res)


def test_oracle_requires_judgements(tmp_path):
    with pytest.raises(ValueError, match="qrels"):
        simulate_oracle_feedback({"qx": _batch([("a", "blog", None, 0.5)])}, {}, store(tmp_path))


# -- concurrency, durability and validation of stored parameters (reliability hardening) ------

def _run_together(n, job):
    """Start ``n`` forked processes that wait at one barrier, then all go at once (no sleep);
    ``job(barrier, errors, i)`` gives process ``i``'s ``(target, args)``. Asserts all exit 0."""
    ctx = multiprocessing.get_context("fork")
    barrier, errors = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=target, args=args)
             for target, args in (job(barrier, errors, i) for i in range(n))]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0] * n, errors.get_nowait()


def _worker(directory, barrier, proc, k, errors):
    try:
        s = FeedbackPriors(directory)  # opened before the start: must re-read under the lock
        barrier.wait()
        for i in range(k):
            s.update([("blog", f"src{proc}", i % 2 == 0)], step=0.1, author=f"p{proc}",
                     reason=f"{proc}-{i}")
    except BaseException as exc:  # reported to the parent, which fails the test
        errors.put(f"{proc}: {exc!r}")
        raise


def test_concurrent_writers_lose_no_update_and_never_repeat_a_version(tmp_path):
    n, k = 6, 8
    store(tmp_path)
    _run_together(n, lambda barrier, errors, p: (
        _worker, (tmp_path / "store", barrier, p, k, errors)))
    s = FeedbackPriors(tmp_path / "store")
    assert s.current == n * k
    updates = [r for r in s.history() if r["event"] == "update"]
    assert sorted(r["reason"] for r in updates) == sorted(
        f"{p}-{i}" for p in range(n) for i in range(k))
    # each process's own updates are in its order
    for p in range(n):
        assert [r["reason"] for r in updates if r["author"] == f"p{p}"] == [
            f"{p}-{i}" for i in range(k)]
    versions = [e["version"] for e in s.audit()]
    assert versions == list(range(n * k + 1))
    assert [e["parent"] for e in s.audit()][1:] == list(range(n * k))
    assert not list((tmp_path / "store").glob("*.tmp"))


def test_two_handles_on_one_store_see_each_others_updates(tmp_path):
    a = store(tmp_path)
    b = FeedbackPriors(tmp_path / "store")
    assert a.update([("blog", None, True)], step=0.1) == 1
    assert b.update([("blog", None, True)], step=0.1) == 2  # re-read: starts from version 1
    assert b.table()["blog"] == pytest.approx(0.55 + 0.045)
    assert a.rollback(0) == 3
    assert [e["version"] for e in a.audit()] == [0, 1, 2, 3]
    assert FeedbackPriors(tmp_path / "store").current == 3


def _creator(directory, barrier, errors):
    try:
        barrier.wait()
        FeedbackPriors(directory, "current")
    except BaseException as exc:
        errors.put(repr(exc))
        raise


def test_concurrent_creation_makes_one_version_zero(tmp_path):
    n = 6
    _run_together(n, lambda barrier, errors, p: (
        _creator, (tmp_path / "store", barrier, errors)))
    s = FeedbackPriors(tmp_path / "store")
    assert s.current == 0
    assert [e["event"] for e in s.audit()] == ["init"]


def test_failed_write_leaves_store_and_object_unchanged(tmp_path, monkeypatch):
    import os

    s = store(tmp_path)
    log = (tmp_path / "store" / AUDIT_FILE).read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match=r"priors\.json: cannot write: disk full"):
        s.update([("blog", None, True)])
    monkeypatch.undo()
    assert s.current == 0 and FeedbackPriors(tmp_path / "store").current == 0
    assert (tmp_path / "store" / AUDIT_FILE).read_bytes() == log  # its line taken back
    assert not list((tmp_path / "store").glob("*.tmp"))
    assert s.update([("blog", None, True)]) == 1


@pytest.mark.parametrize("field,value", [("epsilon", 2), ("epsilon", 0), ("max_change", 7),
                                         ("max_change", 0), ("epsilon", "0.01"),
                                         ("max_change", True)])
def test_out_of_range_stored_parameters_are_refused(tmp_path, field, value):
    store(tmp_path)
    path = tmp_path / "store" / STORE_FILE
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    with pytest.raises(FeedbackStoreError, match=field):
        FeedbackPriors(tmp_path / "store")


@pytest.mark.parametrize("kw,match", [({"epsilon": 2}, "epsilon"),
                                      ({"max_change": 7}, "max_change"),
                                      ({"max_change": 1.5}, "max_change"),
                                      ({"epsilon": float("nan")}, "epsilon"),
                                      ({"max_change": "0.05"}, "max_change")])
def test_out_of_range_parameters_refused_at_creation(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        store(tmp_path, **kw)
    assert not (tmp_path / "store" / STORE_FILE).exists()


@pytest.mark.parametrize("kw,match", [({"author": ""}, "author"), ({"author": 3}, "author"),
                                      ({"reason": None}, "reason")])
def test_update_author_and_reason_validated(tmp_path, kw, match):
    s = store(tmp_path)
    with pytest.raises(ValueError, match=match):
        s.update([("blog", None, True)], **kw)
    assert FeedbackPriors(tmp_path / "store").current == 0


def test_corrupt_audit_line_is_named(tmp_path):
    s = store(tmp_path)
    with (tmp_path / "store" / AUDIT_FILE).open("a") as log:
        log.write("{truncated\n")
    with pytest.raises(FeedbackStoreError, match=r"audit\.jsonl:2"):
        s.audit()


# -- the delta format, old stores, request ids, the shared cache (issue 23) --------------------

def _v1_document(s):
    """``s``'s history as the format-1 file wrote it (a full per-source table per version)."""
    data = json.loads((s.directory / STORE_FILE).read_text())
    versions = []
    for rec in s.history():
        rec = {k: v for k, v in rec.items() if k != "request_id"}
        versions.append(rec)
    return {**data, "format": "credrank-feedback-priors/1", "versions": versions}


def test_versions_store_only_the_sources_they_changed(tmp_path):
    s = store(tmp_path)
    for round_ in range(20):
        s.update([("blog", f"src-{round_}-{i}", True) for i in range(500)], step=0.1)
    data = json.loads((tmp_path / "store" / STORE_FILE).read_text())
    assert data["format"] == "credrank-feedback-priors/3"
    assert [len(v["sources_set"]) for v in data["versions"]] == [0] + [500] * 20
    assert [len(v["source_types_set"]) for v in data["versions"]] == [0] + [500] * 20
    assert len(s.source_priors()) == 10_000
    v1_size = len(json.dumps(_v1_document(s), indent=1))
    size = (tmp_path / "store" / STORE_FILE).stat().st_size
    assert size * 5 < v1_size  # the full-table format: 21 tables of up to 10,000 sources
    # rollback removes the sources the target did not have, as a new version (a delta)
    v = s.rollback(3)
    assert s.source_priors() == s.source_priors(3) and len(s.source_priors()) == 1_500
    last = json.loads((tmp_path / "store" / STORE_FILE).read_text())["versions"][v]
    assert len(last["sources_removed"]) == 8_500 and last["sources_set"] == {}


@pytest.mark.parametrize("old", ["credrank-feedback-priors/1", "credrank-feedback-priors/2"])
def test_a_store_of_a_format_without_source_types_is_refused_saying_how_to_restart(tmp_path,
                                                                                    old):
    s = store(tmp_path)
    s.update([("blog", "b1", True)], step=0.3)
    data = json.loads((s.directory / STORE_FILE).read_text())
    (s.directory / STORE_FILE).write_text(json.dumps({**data, "format": old}))
    with pytest.raises(FeedbackStoreError, match=r"priors\.json: format .* records no source "
                       r"type per source.*priors init NEW_DIR --base current"):
        FeedbackPriors(s.directory)


def test_a_set_source_without_a_recorded_type_is_refused_naming_the_field(tmp_path):
    s = store(tmp_path)
    s.update([("blog", "b1", True)], step=0.3)
    data = json.loads((s.directory / STORE_FILE).read_text())
    data["versions"][1]["source_types_set"] = {}
    (s.directory / STORE_FILE).write_text(json.dumps(data))
    with pytest.raises(FeedbackStoreError, match=r"versions\[1\]\.source_types_set: expected "
                       r"the type of every source the version sets \(missing for 'b1'\)"):
        FeedbackPriors(s.directory)


def test_an_unknown_store_format_names_the_file(tmp_path):
    store(tmp_path)
    path = tmp_path / "store" / STORE_FILE
    data = json.loads(path.read_text())
    data["format"] = "credrank-feedback-priors/9"
    path.write_text(json.dumps(data))
    with pytest.raises(FeedbackStoreError, match=r"priors\.json.*credrank-feedback-priors/9"):
        FeedbackPriors(tmp_path / "store")


def test_request_ids_make_writes_idempotent_across_handles(tmp_path, monkeypatch):
    s = store(tmp_path)
    assert s.update_once([("blog", "b1", True)], request_id="r1") == (1, True)
    again = FeedbackPriors(tmp_path / "store")  # a restarted process
    assert again.update_once([("blog", "b1", True)], request_id="r1") == (1, False)
    assert again.update([("blog", "b1", True)], request_id="r1") == 1 and again.current == 1
    with pytest.raises(RequestIdReused, match=r"r1.*version 1"):
        again.update([("blog", "b1", False)], request_id="r1")
    assert again.rollback_once(0, request_id="r1") == (2, True)  # ids are per event
    assert again.rollback_once(0, request_id="r1") == (2, False)
    assert again.record(1)["request_id"] == "r1" and again.find_request("r1") == 1
    assert [e.get("request_id") for e in again.audit()] == [None, "r1", "r1"]
    with pytest.raises(ValueError, match="request_id"):
        again.update([], request_id=" padded ")
    # only the last REQUEST_IDS ids are remembered: an older one applies again
    monkeypatch.setattr(feedback, "REQUEST_IDS", 2)
    for rid in ("r2", "r3"):
        FeedbackPriors(tmp_path / "store").update([("blog", None, True)], request_id=rid)
    old = FeedbackPriors(tmp_path / "store")
    assert old.find_request("r2") == 3 and old.find_request("r1") is None


def test_on_commit_can_stop_a_write_before_anything_is_written(tmp_path):
    s = store(tmp_path)
    before = (tmp_path / "store" / STORE_FILE).read_text()

    def refuse():
        raise RuntimeError("cancelled")

    with pytest.raises(RuntimeError, match="cancelled"):
        s.update_once([("blog", None, True)], on_commit=refuse)
    assert (tmp_path / "store" / STORE_FILE).read_text() == before
    assert s.current == 0 and FeedbackPriors(tmp_path / "store").current == 0


def test_opening_an_unchanged_store_reads_nothing(tmp_path, monkeypatch):
    s = store(tmp_path)
    s.update([("blog", "b1", True)])
    FeedbackPriors(tmp_path / "store")  # parsed once
    reads = []
    real = feedback.Path.read_text

    def counted(self, *args, **kw):
        reads.append(self.name)
        return real(self, *args, **kw)

    monkeypatch.setattr(feedback.Path, "read_text", counted)
    for _ in range(3):
        assert FeedbackPriors(tmp_path / "store").source_priors() == s.source_priors()
    assert reads == []
    other = FeedbackPriors(tmp_path / "store")
    other.update([("blog", "b2", False)])  # a write in this process shares what it wrote
    assert reads == [] and FeedbackPriors(tmp_path / "store").current == 2
    # another process's write replaces the file: the next open reads it
    path = tmp_path / "store" / STORE_FILE
    data = json.loads(real(path))
    data["versions"][2]["reason"] = "written elsewhere"
    (tmp_path / "store" / "next.json").write_text(json.dumps(data))
    (tmp_path / "store" / "next.json").replace(path)
    assert FeedbackPriors(tmp_path / "store").record()["reason"] == "written elsewhere"
    assert reads == [STORE_FILE]


# -- a failed write changes nothing; the audit log's damage; hand-edited stores (issue 41) ----

def _files(tmp_path):
    d = tmp_path / "store"
    return (d / STORE_FILE).read_bytes(), (d / AUDIT_FILE).read_bytes()


def test_a_failed_audit_append_changes_nothing_and_names_the_file(tmp_path, monkeypatch):
    # the store file was replaced first and the append failed after: an error was reported,
    # yet the version was saved (a retry applied the feedback twice), and a partial append
    # left a torn line that made the history unreadable for ever
    import errno
    import os

    from credrank.index.diskspace import is_disk_full

    s = store(tmp_path)
    before = _files(tmp_path)

    def half_then_full(fd, data):
        os.write(fd, data[:len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(feedback, "_write_all", half_then_full)
    with pytest.raises(feedback.FeedbackWriteError) as caught:
        s.update([("blog", None, True)], reason="first try")
    monkeypatch.undo()
    assert str(caught.value).startswith(str(tmp_path / "store" / AUDIT_FILE) + ": ")
    assert "No space left on device" in str(caught.value)
    assert caught.value.errno == errno.ENOSPC and is_disk_full(caught.value)  # 507 served
    assert _files(tmp_path) == before  # the partial line is gone, the store untouched
    assert s.current == 0 and FeedbackPriors(tmp_path / "store").current == 0
    assert s.update([("blog", None, True)], reason="retry") == 1  # applied once
    assert [(e["version"], e["reason"]) for e in s.audit()] == [(0, "initial priors"),
                                                               (1, "retry")]


def test_an_audit_log_that_is_a_folder_fails_the_write_and_changes_nothing(tmp_path):
    s = store(tmp_path)
    log = tmp_path / "store" / AUDIT_FILE
    log.unlink()
    log.mkdir()
    before = (tmp_path / "store" / STORE_FILE).read_bytes()
    with pytest.raises(OSError, match=r"audit\.jsonl: cannot write: Is a directory"):
        s.update([("blog", None, True)])
    assert (tmp_path / "store" / STORE_FILE).read_bytes() == before
    assert FeedbackPriors(tmp_path / "store").current == 0


def test_a_failed_store_write_takes_the_audit_line_back(tmp_path, monkeypatch):
    s = store(tmp_path)
    before = _files(tmp_path)

    def full(path, text):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(feedback, "atomic_write_text", full)
    with pytest.raises(feedback.FeedbackWriteError,
                       match=r"priors\.json: cannot write: No space left on device"):
        s.rollback(0)
    monkeypatch.undo()
    assert _files(tmp_path) == before and s.current == 0


def test_the_audit_line_a_crash_left_is_replaced_by_the_next_write(tmp_path, monkeypatch):
    # a crash between the append and the store write: the log holds an entry for version 1,
    # the store does not; the next write of version 1 removes it before appending its own
    s = store(tmp_path)
    s.update([("blog", None, True)], reason="kept 1")

    def crash(path, text):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(feedback, "atomic_write_text", crash)
    monkeypatch.setattr(feedback, "_truncate", lambda fd, size: None)  # as if killed
    with pytest.raises(OSError):
        s.update([("blog", None, False)], reason="lost")
    monkeypatch.undo()
    assert [e["reason"] for e in s.audit()] == ["initial priors", "kept 1", "lost"]
    assert FeedbackPriors(tmp_path / "store").update([("government", None, True)],
                                                     reason="kept 2") == 2
    assert [(e["version"], e["reason"]) for e in s.audit()] == [
        (0, "initial priors"), (1, "kept 1"), (2, "kept 2")]


def test_a_torn_last_audit_line_does_not_swallow_the_next_entry(tmp_path):
    s = store(tmp_path)
    s.update([("blog", None, True)])
    log = tmp_path / "store" / AUDIT_FILE
    log.write_bytes(log.read_bytes()[:-20])  # a partial last line, no newline
    assert s.update([("blog", None, True)], reason="after the tear") == 2
    with pytest.raises(FeedbackStoreError, match=r"audit\.jsonl:2: corrupt audit entry"):
        s.audit()  # the torn line is named, honestly
    last = json.loads(log.read_text().split("\n")[-2])
    assert last["version"] == 2 and last["reason"] == "after the tear"  # intact


def test_a_missing_audit_log_is_reported_and_the_new_log_says_where_it_starts(tmp_path):
    # it read as an empty history, exit 0, though the store held every version
    s = store(tmp_path)
    s.update([("blog", None, True)])
    (tmp_path / "store" / AUDIT_FILE).unlink()
    assert s.audit_log_lost()
    with pytest.raises(FeedbackStoreError, match=r"audit\.jsonl: the audit log is missing or "
                                                 r"empty, though the store holds versions 0 "
                                                 r"to 1"):
        s.audit()
    assert s.update([("blog", None, False)]) == 2
    (entry,) = s.audit()
    assert entry["version"] == 2 and "starts here; versions 0 to 1" in entry["note"]
    assert not s.audit_log_lost()
    assert "note" not in json.loads(json.dumps(s.record()))  # the store's record has none


@pytest.mark.parametrize("line", ['{"version": 99, "counts": {"x": NaN}}',
                                  '{"version": 99, "counts": {"x": -Infinity}}'])
def test_non_finite_numbers_in_the_audit_log_are_refused(tmp_path, line):
    s = store(tmp_path)
    with (tmp_path / "store" / AUDIT_FILE).open("a") as log:
        log.write(line + "\n")
    with pytest.raises(FeedbackStoreError, match=r"audit\.jsonl:2: corrupt audit entry: .*"
                                                 r"expected a finite number"):
        s.audit()


def _edited(tmp_path, edit):
    s = store(tmp_path)
    s.update([("blog", "b1", True)])
    s.update([("blog", "b2", False)])
    s.rollback(1)
    path = tmp_path / "store" / STORE_FILE
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("edit,said", [
    (lambda d: d["versions"][2].pop("timestamp"),
     "versions[2].timestamp: expected an ISO 8601 timestamp string, got nothing"),
    (lambda d: d["versions"][1].pop("event"), "versions[1].event: expected one of init, "),
    (lambda d: d["versions"][2].__setitem__("timestamp", "yesterday"),
     "versions[2].timestamp: expected an ISO 8601 timestamp string, got 'yesterday'"),
    (lambda d: d["versions"][1].__setitem__("version", True),
     "versions[1].version: expected an integer >= 0, got True"),
    (lambda d: (d["versions"][1].__setitem__("version", 2),
                d["versions"][2].__setitem__("version", 1)),
     "versions[1].version: expected 1 (versions are numbered 0, 1, 2, … in order), got 2"),
    (lambda d: d.__setitem__("current", 7), "current: expected 3 (the number of the last "
                                            "version), got 7"),
    (lambda d: d.__setitem__("current", True), "current: expected an integer >= 0, got True"),
    (lambda d: d["base"]["values"].__setitem__("blog", float("nan")),
     "base.values.blog: expected a finite number in [0.01, 1], got nan"),
    (lambda d: d["base"]["values"].__setitem__("blog", "abc"),
     "base.values.blog: expected a finite number in [0.01, 1], got 'abc'"),
    (lambda d: d["base"]["values"].__setitem__("blog", 0.001),
     "base.values.blog: expected a finite number in [0.01, 1], got 0.001"),
    (lambda d: d["versions"][3].pop("types"), "versions[3].types: expected a table"),
    (lambda d: d["versions"][2].pop("sources_set"), "versions[2].sources_set: expected a table"),
    (lambda d: d["versions"][2]["types"].__setitem__("blog", 0.001),
     "versions[2].types.blog: expected a finite number in [0.01, 1], got 0.001"),
    (lambda d: d["versions"][2]["types"].__setitem__("blog", float("inf")),
     "versions[2].types.blog: expected a finite number in [0.01, 1], got inf"),
    (lambda d: d["versions"][1]["sources_set"].__setitem__("b1", 0.0),
     "versions[1].sources_set.b1: expected a finite number in [0.01, 1], got 0.0"),
    (lambda d: d["versions"][1]["counts"].__setitem__("step", float("nan")),
     "versions[1].counts.step: expected a finite number, got nan"),
    (lambda d: d["versions"][2].__setitem__("sources_removed", "b1"),
     "versions[2].sources_removed: expected a list"),
    (lambda d: d["versions"][3].pop("restored_from"),
     "versions[3].restored_from: expected the version a rollback restored"),
    (lambda d: d["versions"][2].__setitem__("parent", 0),
     "versions[2].parent: expected 1 (the version before), got 0"),
    (lambda d: d["versions"][1].__setitem__("colour", "red"),
     "versions[1].colour: expected one of the known keys"),
])
def test_a_hand_edited_store_is_refused_naming_the_field(tmp_path, edit, said):
    # a missing field was a KeyError later (a 500, a traceback); NaN was accepted and written
    path = _edited(tmp_path, edit)
    with pytest.raises(FeedbackStoreError) as caught:
        FeedbackPriors(tmp_path / "store")
    assert str(caught.value).startswith(f"{path}: {said}"), str(caught.value)


def test_a_store_path_that_is_a_file_is_said_to_be_one(tmp_path):
    (tmp_path / "fb1.jsonl").write_text("{}\n")
    for base in (None, "current"):
        with pytest.raises(FeedbackStoreError, match=r"fb1\.jsonl: expected a feedback store "
                                                     r"folder, got a file"):
            FeedbackPriors(tmp_path / "fb1.jsonl", base)
