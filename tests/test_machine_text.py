"""Machine-written text (issue 25 item 2): Fast-DetectGPT's analytic criterion with SmolLM2,
stored at index time, applied as the floored factor ``machine_text``.

Fast tests need no model: the statistic on hand-made logits, the factor transform, the stage,
resumable scoring with an injected failure (a stand-in scorer), the spec and the service. The
tests marked ``slow`` load SmolLM2 (the ``lm`` extra; skipped with the reason when absent).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from cli_inprocess import run_cli
from cli_process import CREDRANK
from credrank.core.candidates import StageError
from credrank.documents.schema import Document
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.index.opener import open_store
from credrank.index.scoring import ScoreJob, key_field, pending, score_store
from credrank.machine_text.factor import machine_likeness, machine_text_factor
from credrank.machine_text.statistic import criterion_from_terms, criterion_numpy
from credrank.pipeline.catalog import CATALOG
from credrank.pipeline.shortcuts import spec_from_options
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.provenance import SourceTyper
from credrank.stages.machine_text import MachineTextFactor
from sparse_copy import copy_index
from stand_in_scorer import Injected, StandInScorer

TEXTS = [f"passage {i}: {'fever and cough ' * (1 + i % 3)}treated with rest, case {i}"
         for i in range(23)]


# -- the statistic -----------------------------------------------------------------------------

def direct_criterion(logits: np.ndarray, tokens: Sequence[int]) -> float:
    """Fast-DetectGPT's analytic criterion written out position by position (math only)."""
    num = den = 0.0
    for row, tok in zip(logits, tokens, strict=True):
        z = [float(x) for x in row]
        top = max(z)
        norm = math.log(sum(math.exp(x - top) for x in z)) + top
        logp = [x - norm for x in z]
        p = [math.exp(x) for x in logp]
        mu = sum(pi * li for pi, li in zip(p, logp, strict=True))
        second = sum(pi * li * li for pi, li in zip(p, logp, strict=True))
        num += logp[tok] - mu
        den += second - mu * mu
    return num / math.sqrt(den)


def test_criterion_equals_a_direct_computation_on_hand_made_logits() -> None:
    rng = np.random.default_rng(7)
    for t, v in ((1, 2), (5, 7), (40, 50)):
        logits = rng.normal(0, 3, size=(t, v))
        tokens = rng.integers(0, v, size=t)
        assert criterion_numpy(logits, tokens) == pytest.approx(direct_criterion(logits, tokens),
                                                                rel=1e-10)


def test_criterion_hand_values() -> None:
    # two tokens, p = (0.5, 0.5) at each position: μ = log 0.5, σ² = 0 → undefined
    assert math.isnan(criterion_numpy(np.zeros((2, 2)), [0, 1]))
    assert math.isnan(criterion_numpy(np.zeros((0, 3)), []))
    # p = (0.8, 0.2), the likely token observed twice: d = 2(log .8 − μ) / sqrt(2 σ²)
    z = np.log([[0.8, 0.2], [0.8, 0.2]])
    lp = np.log([0.8, 0.2])
    mu = 0.8 * lp[0] + 0.2 * lp[1]
    var = 0.8 * lp[0] ** 2 + 0.2 * lp[1] ** 2 - mu ** 2
    assert criterion_numpy(z, [0, 0]) == pytest.approx(2 * (lp[0] - mu) / math.sqrt(2 * var))
    assert criterion_numpy(z, [0, 0]) > 0 > criterion_numpy(z, [1, 1])  # likely = machine-like


def test_batched_torch_terms_equal_the_reference() -> None:
    torch = pytest.importorskip("torch")
    from credrank.machine_text.statistic import token_terms_torch

    rng = np.random.default_rng(3)
    lengths = [6, 1, 9]  # scored positions of three packed passages
    logits = [rng.normal(0, 2, size=(n, 31)) for n in lengths]
    tokens = [rng.integers(0, 31, size=n) for n in lengths]
    excess, var = token_terms_torch(torch.tensor(np.concatenate(logits), dtype=torch.float32),
                                    torch.tensor(np.concatenate(tokens)))
    bounds = np.cumsum(lengths)[:-1]
    for e, v, z, tok in zip(np.split(excess.numpy(), bounds), np.split(var.numpy(), bounds),
                            logits, tokens, strict=True):
        assert criterion_from_terms(e, v) == pytest.approx(criterion_numpy(z, tok), rel=1e-4)
    # a prefix of the terms is the statistic at a shorter budget
    e0, v0 = np.split(excess.numpy(), bounds)[2], np.split(var.numpy(), bounds)[2]
    assert criterion_from_terms(e0, v0, 4) == pytest.approx(
        criterion_numpy(logits[2][:4], tokens[2][:4]), rel=1e-4)


# -- the factor --------------------------------------------------------------------------------

def test_factor_is_monotone_floored_and_finite() -> None:
    d = np.array([-np.inf, -1e300, -50, -3, -1, 0, 0.5, 1, 3, 50, 1e300, np.inf])
    for floor in (0.05, 0.5, 1.0):
        f = machine_text_factor(d, floor=floor)
        assert np.all(np.isfinite(f))
        assert np.all(np.diff(f) <= 0)  # more machine-like, never a larger factor
        assert f.min() >= floor and f.max() <= 1.0
        assert f[5] == pytest.approx(1 - (1 - floor) / 2)  # at the centre: half the demotion
    f = machine_text_factor(np.array([np.nan, 2.0]), floor=0.3)
    assert f[0] == 1.0 and 0.3 < f[1] < 1.0  # unscorable: factor 1
    assert machine_likeness(np.array([1.0]), center=1.0, scale=2.0)[0] == pytest.approx(0.5)
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="floor"):
            machine_text_factor(d, floor=bad)
    with pytest.raises(ValueError, match="scale"):
        machine_likeness(d, scale=0.0)


# -- the stage ---------------------------------------------------------------------------------

def test_stage_reads_the_stored_statistic(make_batch) -> None:
    key = "k"
    batch = make_batch([0.9, 0.8, 0.7], machine_text=[3.0, -2.0, None],
                       machine_text_key=[key, key, key])
    out = MachineTextFactor(floor=0.4)(batch)
    f = out.factors["machine_text"]
    assert f[0] < f[1] < 1.0 and f[2] == 1.0 and f.min() > 0.4
    assert out.info["machine_text"]["unscorable"] == 1
    assert out.info["machine_text"]["keys"] == [key]
    assert list(out.column("machine_text_statistic")) == [3.0, -2.0, None]
    empty = MachineTextFactor()(make_batch([]))
    assert len(empty.factors["machine_text"]) == 0


def test_stage_says_which_command_adds_missing_scores(make_batch) -> None:
    batch = make_batch([0.9, 0.8], machine_text=[1.0, None], machine_text_key=["k", None])
    with pytest.raises(StageError, match=r"credrank score machine-text --index /some/idx"):
        MachineTextFactor(index="/some/idx")(batch)
    out = MachineTextFactor(missing="neutral")(batch)
    assert out.factors["machine_text"][1] == 1.0 and out.info["machine_text"]["missing"] == 1
    with pytest.raises(ValueError, match="floor"):
        MachineTextFactor(floor=0.0)


def test_catalog_spec_and_options() -> None:
    entry = CATALOG["machine_text"]
    assert entry.kind == "signal" and entry.cls is MachineTextFactor
    spec = PipelineSpec.from_dict({"stages": [{"stage": "machine_text", "floor": 0.2}]})
    assert spec.to_dict()["stages"][0] == {"stage": "machine_text", "floor": 0.2, "center": 0.0,
                                           "scale": 1.0, "missing": "error"}
    with pytest.raises(SpecError, match=r"stages\[0\]\.missing"):
        PipelineSpec.from_dict({"stages": [{"stage": "machine_text", "missing": "ignore"}]})
    names = [s.name for s in spec_from_options(machine_text=True).stages]
    assert names.index("machine_text") < names.index("combine")


# -- index-time scoring: resumable -------------------------------------------------------------

def build_index(where: Path, texts: Sequence[str] = TEXTS) -> Path:
    docs = [Document(id=f"doc{i:02d}", text=t, url=f"https://example.org/{i}")
            for i, t in enumerate(texts)]
    emb = get_embedder("hashing")
    with open_store(where, embedder=emb.name, dim=emb.dim, create=True) as idx:
        index_documents(docs, idx, emb, SourceTyper([]))
    return where


class StandIn(StandInScorer):
    """A deterministic scorer (value = a function of the text) that records what it scored
    and fails on its call number ``fail_at`` (0-based)."""

    key = "stand-in/v1"

    @staticmethod
    def value(text: str) -> float:
        return len(text) / 10.0 if "case 17" not in text else np.nan


def stored(where: Path) -> dict[str, tuple]:
    with open_store(where) as idx:
        rows = idx.read_payloads(None, fields=("doc_id", "text", "machine_text",
                                               key_field("machine_text")))
    return {r["doc_id"]: (r["text"], r["machine_text"], r[key_field("machine_text")])
            for r in rows}


def test_interrupted_scoring_resumes_without_scoring_twice_or_losing(tmp_path: Path) -> None:
    where = build_index(tmp_path / "idx")
    first = StandIn(fail_at=2)  # two chunks of 5 written, the third fails
    with open_store(where, create=True) as idx, pytest.raises(Injected):
        score_store(idx, ScoreJob("machine_text", first.key, first), chunk=5)
    after_failure = stored(where)  # reopened: what the failed run wrote is on disk
    written = {d for d, (_, v, k) in after_failure.items() if k == first.key}
    assert len(written) == 10 and written == {f"doc{i:02d}" for i in range(10)}
    second = StandIn()
    with open_store(where, create=True) as idx:
        report = score_store(idx, ScoreJob("machine_text", second.key, second), chunk=5)
    assert report.already == 10 and report.scored == 13 and report.total == 23
    assert set(first.scored).isdisjoint(second.scored)  # no passage scored twice
    assert sorted(first.scored + second.scored) == sorted(TEXTS)  # none lost
    final = stored(where)
    for text, value, key in final.values():
        assert key == StandIn.key
        if "case 17" in text:
            assert value is None  # unscorable: stored as null, counted
        else:
            assert value == pytest.approx(len(text) / 10.0)
    assert report.unscorable == 1
    third = StandIn()  # nothing left: a third run scores nothing
    with open_store(where, create=True) as idx:
        assert score_store(idx, ScoreJob("machine_text", third.key, third)).scored == 0
        assert pending(idx, "machine_text", "another/key")[0] == sorted(final)  # a new key
    assert third.scored == []


def test_reindexing_a_changed_document_drops_its_score(tmp_path: Path) -> None:
    where = build_index(tmp_path / "idx", TEXTS[:4])
    with open_store(where, create=True) as idx:
        score_store(idx, ScoreJob("machine_text", StandIn.key, StandIn()))
    build_index(where, [*TEXTS[:3], "a changed passage"])
    with open_store(where, create=True) as idx:
        todo, already = pending(idx, "machine_text", StandIn.key)
    assert todo == ["doc03"] and already == 3


def test_scores_on_the_in_memory_store() -> None:
    from credrank.index.memory import InMemoryIndex

    emb = get_embedder("hashing")
    idx = InMemoryIndex.create(emb.name, emb.dim)
    docs = [Document(id=f"m{i}", text=t) for i, t in enumerate(TEXTS[:6])]
    index_documents(docs, idx, emb, SourceTyper([]))
    report = score_store(idx, ScoreJob("machine_text", StandIn.key, StandIn()), chunk=4)
    assert report.scored == 6
    got = idx.search_dense("q", emb.embed(["fever"])[0], 6)
    assert all(k == StandIn.key for k in got.column("machine_text_key"))
    assert MachineTextFactor()(got).factors["machine_text"].shape == (6,)


def test_scores_on_a_qdrant_server_store() -> None:
    """The qdrant-client backend (its local mode stands in for a server)."""
    pytest.importorskip("qdrant_client")
    from credrank.index.qdrant_server import QdrantServerIndex

    emb = get_embedder("hashing")
    with QdrantServerIndex.in_memory(emb.name, emb.dim) as idx:
        index_documents([Document(id=f"q{i}", text=t) for i, t in enumerate(TEXTS[:5])], idx,
                        emb, SourceTyper([]))
        report = score_store(idx, ScoreJob("machine_text", StandIn.key, StandIn()), chunk=2)
        assert report.scored == 5
        rows = idx.read_payloads(None, fields=("doc_id", "text", "machine_text"))
        assert all(r["machine_text"] == pytest.approx(len(r["text"]) / 10) for r in rows)
        got = idx.search_dense("q", emb.embed(["fever"])[0], 5)
        assert set(got.column("machine_text_key")) == {StandIn.key}


# -- search, the service, the CLI --------------------------------------------------------------

def scored_copy(src: Path, dest: Path) -> Path:
    copy_index(src, dest)
    with open_store(dest, create=True) as idx:
        score_store(idx, ScoreJob("machine_text", StandIn.key, StandIn()))
    return dest


def test_search_reads_the_stored_score(demo_index_hashing: Path, tmp_path: Path) -> None:
    from credrank.searcher import Searcher

    where = scored_copy(demo_index_hashing, tmp_path / "idx")
    spec = PipelineSpec.from_dict({"top_k": 5, "stages": ["prior", {"stage": "machine_text",
                                                                     "floor": 0.3}]})
    with Searcher.open(where) as searcher:
        doc = searcher.search_json("vitamin d covid", spec)
    assert doc["pipeline"]["stages"][1]["stage"] == "machine_text"
    for hit in doc["hits"]:
        f = hit["score_breakdown"]["machine_text"]
        assert 0.3 < f <= 1.0
    assert doc["info"]["machine_text"]["keys"] == [StandIn.key]


def test_service_search_with_the_stage(demo_index_hashing: Path, tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from serving import asgi_client, in_process

    unscored = copy_index(demo_index_hashing, tmp_path / "plain")
    where = scored_copy(demo_index_hashing, tmp_path / "idx")
    body = {"query": "vitamin d covid", "pipeline": {"top_k": 3, "stages": [
        "prior", {"stage": "machine_text", "floor": 0.5}]}}

    async def post(app, payload):
        async with asgi_client(app) as c:
            return await c.post("/search", json=payload)

    for folder, expect in ((where, 200), (unscored, 422)):
        with in_process(folder) as app:
            got = asyncio.run(post(app, body))
            shortcut = asyncio.run(post(app, {"query": "vitamin d covid", "top_k": 3,
                                              "machine_text": True}))
        assert got.status_code == expect, got.text
        assert shortcut.status_code == expect, shortcut.text
        if expect == 200:
            assert all("machine_text" in h["score_breakdown"] for h in got.json()["hits"])
            assert "machine_text" in [s["stage"] for s in shortcut.json()["pipeline"]["stages"]]
        else:
            assert "credrank score machine-text" in got.text


def test_rerank_and_adapters_take_the_stage() -> None:
    """Candidates from elsewhere carry no stored score: ``missing`` decides (the error says
    how to score them now); their metadata is never read as evidence."""
    from credrank.rerank import rerank

    records = [{"id": "a", "score": 0.9, "text": "fever and cough",
                "metadata": {"machine_text": 9.0}},
               {"id": "b", "score": 0.8, "text": "rest and fluids"}]
    with pytest.raises(StageError, match="missing"):
        rerank("fever", records, "hashing", {"stages": [{"stage": "machine_text"}]})
    out = rerank("fever", records, "hashing",
                 {"stages": [{"stage": "machine_text", "missing": "neutral"}]})
    assert list(out.factors["machine_text"]) == [1.0, 1.0]
    assert out.info["machine_text"]["missing"] == 2
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document as LCDocument

    from credrank.adapters.langchain import CredibilityCompressor

    compressor = CredibilityCompressor(embedder="hashing", pipeline={"stages": [
        {"stage": "machine_text", "missing": "neutral"}]})
    kept = compressor.compress_documents([LCDocument(page_content="fever and cough"),
                                          LCDocument(page_content="rest and fluids")], "fever")
    assert all("machine_text" in str(d.metadata) for d in kept)


def test_cli_score_command_resumes_and_reports(tmp_path: Path, monkeypatch) -> None:
    """``credrank score machine-text`` with a stand-in for the model: a failing run exits 2
    keeping nothing half-written, the next run scores all, a third finds nothing to do."""
    from typer.testing import CliRunner

    from credrank.cli import app
    from credrank.machine_text import scorer as scorer_module

    where = build_index(tmp_path / "idx", TEXTS[:7])
    stand_in = StandIn(fail_at=0)
    monkeypatch.setattr(scorer_module.FastDetectScorer, "load", lambda self: None)
    monkeypatch.setattr(scorer_module.FastDetectScorer, "score",
                        lambda self, texts, on_batch=None: stand_in(texts))
    runner = CliRunner()
    args = ["score", "machine-text", "--index", str(where), "--json", "--max-tokens", "32"]
    failed = runner.invoke(app, args)
    assert failed.exit_code == 2 and "re-run the same command" in failed.output
    stand_in.fail_at = None
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["scored"] == 7 and report["already_scored"] == 0
    assert report["key"].endswith("/t32")
    again = json.loads(runner.invoke(app, args).stdout)
    assert again["scored"] == 0 and again["already_scored"] == 7
    other = json.loads(runner.invoke(app, [*args[:-2], "--max-tokens", "16"]).stdout)
    assert other["scored"] == 7  # another budget: another key, every passage again


@pytest.mark.skipif(not CREDRANK.exists(), reason="the credrank console script is not installed")
def test_cli_search_on_an_unscored_index_names_the_command(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                              for i, t in enumerate(TEXTS[:5])), encoding="utf-8")
    made = run_cli("index", corpus, "--index", "idx", "--embedder", "hashing", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    proc = run_cli("search", "fever", "--index", "idx", "--machine-text", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "credrank score machine-text --index idx" in proc.stderr


# -- with SmolLM2 (slow) -----------------------------------------------------------------------

def lm_or_skip() -> None:
    from credrank.generate.local import lm_available

    missing = lm_available()
    if missing is not None:
        pytest.skip(f"SmolLM2 is not available: {missing}")


@pytest.mark.slow
def test_scorer_equals_the_reference_on_the_models_own_logits() -> None:
    """Packing, padding and truncation change nothing: each passage's ``d`` from a padded,
    length-sorted batch equals the numpy reference on that passage's own full logits."""
    lm_or_skip()
    import torch

    from credrank.machine_text.scorer import FastDetectScorer, _model

    texts = ["The quick brown fox jumps over the lazy dog near the river bank.",
             "Vitamin D", "x",
             "In conclusion, regular exercise offers numerous benefits for overall health "
             "and well-being, including improved cardiovascular fitness and mood."]
    scorer = FastDetectScorer(max_tokens=12, batch_size=3, precision="float32")
    got = scorer.score(texts)
    tok, model = _model()
    for text, d in zip(texts, got, strict=True):
        ids = tok(text, add_special_tokens=False, truncation=True, max_length=12)["input_ids"]
        if len(ids) < 2:
            assert math.isnan(d)
            continue
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].double().numpy()
        assert d == pytest.approx(criterion_numpy(logits, ids[1:]), abs=1e-3)


@pytest.mark.slow
def test_bfloat16_scores_agree_with_float32_and_leave_the_shared_model_alone() -> None:
    """``precision="bfloat16"`` runs a bfloat16 copy: its ``d`` ranks passages as float32
    does (passages further apart than 0.5 keep their order; values within 0.25 — 0.1 was
    measured on 64 CrAM passages, 0.2 on these short texts), and the process's
    float32 model — shared with the generator — stays float32."""
    lm_or_skip()
    import torch

    from credrank.machine_text.scorer import FastDetectScorer, _model

    texts = ["The committee met on Tuesday and agreed to postpone the vote until the budget "
             "figures for the coming year are available.",
             "In conclusion, regular exercise offers numerous benefits for overall health and "
             "well-being, including improved cardiovascular fitness and mood.",
             "lol no way that game last night was insane, cant believe the ref missed that",
             "Paris is the capital and most populous city of France, with an estimated "
             "population of two million residents.",
             "Add the flour slowly, stirring all the time, then let the dough rest for an hour "
             "before you roll it out thin.",
             "Quantum entanglement zebra marmalade the of seven purple arguments sleeps."]
    f32 = FastDetectScorer(max_tokens=48, precision="float32").score(texts)
    bf16_scorer = FastDetectScorer(max_tokens=48, precision="bfloat16")
    bf16 = bf16_scorer.score(texts)
    assert bf16_scorer.key.endswith("-bf16/t48") and np.isfinite(bf16).all()
    assert np.max(np.abs(bf16 - f32)) < 0.25
    apart = [(i, j) for i in range(6) for j in range(6) if f32[i] - f32[j] > 0.5]
    assert apart and all(bf16[i] > bf16[j] for i, j in apart)  # clear orders are kept
    assert next(_model()[1].parameters()).dtype == torch.float32


@pytest.mark.slow
def test_end_to_end_index_score_search(tmp_path: Path) -> None:
    """``credrank index … --score machine-text`` → ``credrank score machine-text`` (nothing
    left to score) → ``credrank search --machine-text``: the real commands, the real model."""
    lm_or_skip()
    if not CREDRANK.exists():
        pytest.skip("the credrank console script is not installed")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                              for i, t in enumerate(TEXTS[:6])), encoding="utf-8")
    made = run_cli("index", corpus, "--index", "idx", "--embedder", "hashing", "--score",
                   "machine-text", cwd=tmp_path, timeout=600)
    assert made.returncode == 0, made.stderr
    assert "scored 6" in made.stderr
    again = run_cli("score", "machine-text", "--index", "idx", "--json", cwd=tmp_path,
                    timeout=600)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["scored"] == 0 and report["already_scored"] == 6
    assert again.stderr.strip() == ""  # no TTY: no progress bar
    found = run_cli("search", "fever", "--index", "idx", "--machine-text", "--json",
                    cwd=tmp_path, timeout=600)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert hits and all(0.5 < h["score_breakdown"]["machine_text"] <= 1 for h in hits)


def test_the_shortcut_is_refused_where_candidates_come_from_elsewhere(
        demo_index_hashing: Path, tmp_path: Path) -> None:
    """``machine_text: true`` on /rerank (and the adapters) failed every call, after the
    candidates were read, with a message naming a command of the index: candidates from
    elsewhere never carry an index-time score. It is refused up front, naming the field and
    the pipeline stage that scores them."""
    from credrank.pipeline.shortcuts import ADAPTER, spec_from_options
    from serving import asgi_client, in_process
    from sparse_copy import copy_index

    with pytest.raises(ValueError, match=r'"missing": "score"'):
        spec_from_options(door=ADAPTER, machine_text=True)

    async def post(app):
        async with asgi_client(app) as c:
            return await c.post("/rerank", json={"query": "fever", "machine_text": True,
                                                 "candidates": [{"id": "a", "text": "fever"}]})

    with in_process(copy_index(demo_index_hashing, tmp_path / "index")) as app:
        got = asyncio.run(post(app))
    assert got.status_code == 422, got.text
    assert got.json()["errors"][0]["field"] == "machine_text"
