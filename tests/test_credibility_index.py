"""The learned credibility scored at index time, read by search and pushed into the engine
(issue 26, part 1): `credrank score credibility`, `credrank index --credibility-model`, the
stored vector as the embedding feature (a refit rescores without the embedder), the stage's
missing-score policies and the engine formula's equivalence with the Python path."""

from __future__ import annotations

import csv
import importlib.util
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cli_inprocess import run_cli
from credrank.core.candidates import StageError
from credrank.core.ties import compare_rankings
from credrank.credibility import Config, fit_from_labels, load_model, save_model
from credrank.credibility.indexed import (
    FIELD,
    KEY_FIELD,
    coverage,
    credibility_job,
    score_index,
)
from credrank.demo_corpus import demo_dir
from credrank.documents import iter_documents
from credrank.index.embed import HashingEmbedder, get_embedder
from credrank.index.ingest import index_documents
from credrank.index.opener import open_store
from credrank.index.scoring import ScoreJob, score_store
from credrank.pipeline.spec import PipelineSpec
from credrank.provenance import SourceTyper
from credrank.searcher import Searcher
from credrank.stages.credibility import UnscoredCredibilityWarning
from sparse_copy import copy_index

CREDIBLE_TLDS = ("gov", "org", "int", "uk")
QUERIES = ("vitamin c cold", "vaccine autism", "statin muscle pain", "sunscreen cancer",
           "fluoride water children", "melatonin sleep", "antibiotics virus", "sugar diabetes")
pytestmark = pytest.mark.filterwarnings("ignore:Failed to obtain server version")


class Counting:
    """The index's hashing embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        self.inner = get_embedder("hashing")
        self.name, self.dim = self.inner.name, self.inner.dim
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += list(texts)
        return self.inner.embed(texts)


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="session")  # read-only: once per xdist worker
def labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each judged demo page, credible iff its TLD is one of :data:`CREDIBLE_TLDS`."""
    docs = {d["id"]: d for d in map(json.loads, (demo_dir() / "corpus.jsonl").read_text(
        encoding="utf-8").splitlines())}
    path = tmp_path_factory.mktemp("labels") / "labels.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(("doc_id", "credible", "topic"))
        for line in (demo_dir() / "qrels.tsv").read_text(encoding="utf-8").splitlines():
            qid, _, doc, _ = line.split()
            tld = docs[doc]["url"].split("/")[2].rsplit(".", 1)[-1]
            w.writerow((doc, int(tld in CREDIBLE_TLDS), qid))
    return path


def fit(index: Path, labels: Path, out: Path, l2: float, source: str = "document") -> Path:
    with open_store(index) as idx:
        result = fit_from_labels(labels, idx, get_embedder("hashing"), n_boot=20,
                                 configs=(Config(("cues", "url", "embedding"), l2),),
                                 embedding_source=source)
    save_model(out, result.document)
    return out


@pytest.fixture(scope="session")  # read-only: once per xdist worker
def models(demo_index_hashing: Path, labels: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> dict[str, Path]:
    """A model (stored-vector embedding), its refit (another L2: new weights, a new key) and
    an old-style model that embeds each page's head."""
    root = tmp_path_factory.mktemp("models")
    return {"a": fit(demo_index_hashing, labels, root / "a.json", 10.0),
            "b": fit(demo_index_hashing, labels, root / "b.json", 100.0),
            "head": fit(demo_index_hashing, labels, root / "head.json", 10.0, "head")}


def spec(model: Path, **params: Any) -> PipelineSpec:
    pushdown = params.pop("pushdown", None)
    return PipelineSpec.from_dict({"top_k": 10, "pushdown": pushdown, "stages": [
        "prior", {"stage": "credibility", "model": str(model), **params}]})


def stored(where: Path) -> dict[str, tuple[Any, Any]]:
    with open_store(where) as idx:
        rows = idx.read_payloads(None, fields=("doc_id", FIELD, KEY_FIELD))
    return {r["doc_id"]: (r[FIELD], r[KEY_FIELD]) for r in rows}


# -- scoring ----------------------------------------------------------------------------------

def test_cli_scores_every_document_once(demo_index_hashing: Path, models, tmp_path: Path):
    where = copy_index(demo_index_hashing, tmp_path / "idx")
    model = load_model(models["a"])
    res = run_cli("score", "credibility", "--index", where, "--model", models["a"], "--json")
    assert res.returncode == 0, res.stderr
    run = json.loads(res.stdout)
    assert run["score"] == "credibility" and run["key"] == model.key
    assert (run["documents"], run["scored"], run["already_scored"]) == (120, 120, 0)
    assert run["embedding_source"] == "document" and run["documents_per_s"] > 0
    assert model.key.startswith("credibility/document/hashing/")
    values = stored(where)
    assert {k for _, k in values.values()} == {model.key}
    with open_store(where) as idx:  # the stored p is the model's p of the stored document
        rows = idx.read_payloads(["d001", "d050", "d100"],
                                 fields=("doc_id", "text", "url", "title"))
        vectors = idx.read_vectors(["d001", "d050", "d100"])
        assert coverage(idx, model.key) == (120, 120)
    p = model([r["text"] for r in rows], [r["url"] for r in rows],
              titles=[r["title"] for r in rows], vectors=[vectors[r["doc_id"]] for r in rows])
    np.testing.assert_allclose([values[r["doc_id"]][0] for r in rows], p, rtol=0, atol=1e-12)
    again = run_cli("score", "credibility", "--index", where, "--model", models["a"])
    assert again.returncode == 0, again.stderr
    assert "scored 0, 120 already scored" in words(again.stdout)
    bad = run_cli("score", "credibility", "--index", where, "--model", tmp_path / "none.json")
    assert bad.returncode == 2 and "none.json: the credibility model does not exist" in \
        words(bad.stderr)


def test_interrupted_scoring_resumes_without_scoring_twice(demo_index_hashing: Path, models,
                                                          tmp_path: Path):
    where = copy_index(demo_index_hashing, tmp_path / "idx")
    model = load_model(models["a"])
    job = credibility_job(model)
    assert job.score_records is not None
    seen: list[list[str]] = []

    def recording(records):
        seen.append([str(r["doc_id"]) for r in records])
        return job.score_records(records)

    counted = ScoreJob(job.name, job.key, score_records=recording, fields=job.fields,
                       vectors=job.vectors)

    class Stop(Exception):
        pass

    def stop_after_first(n: int) -> None:
        raise Stop(f"interrupted after a chunk of {n}")

    with open_store(where, create=True) as idx, pytest.raises(Stop):
        score_store(idx, counted, chunk=16, on_chunk=stop_after_first)
    first = list(seen[0])
    assert len(seen) == 1 and len(first) == 16
    after = stored(where)
    assert {d for d, (_, k) in after.items() if k == model.key} == set(first)
    seen.clear()
    with open_store(where, create=True) as idx:
        report = score_store(idx, counted, chunk=16)
    second = [d for chunk in seen for d in chunk]
    assert report.already == 16 and report.scored == 104
    assert set(first).isdisjoint(second)  # no document scored twice
    assert sorted(first + second) == sorted(after)  # none lost
    assert {k for _, k in stored(where).values()} == {model.key}


def test_refit_rescores_without_the_embedder(demo_index_hashing: Path, models,
                                             tmp_path: Path):
    where = copy_index(demo_index_hashing, tmp_path / "idx")
    a, b = load_model(models["a"]), load_model(models["b"])
    assert a.key != b.key  # a refit: new weights, a new key
    first, second = Counting(), Counting()
    with open_store(where, create=True) as idx:
        assert score_index(idx, a, embedder=first).scored == 120
        report = score_index(idx, b, embedder=second)
        assert report.scored == 120 and report.already == 0  # every document re-scored
        assert coverage(idx, a.key) == (0, 120) and coverage(idx, b.key) == (120, 120)
    assert first.texts == [] and second.texts == []  # the stored vector is the feature
    # a model of the older kind (embedding of each page's head) embeds every document
    head, counting = load_model(models["head"]), Counting()
    assert head.embedding_source == "head" and head.key != a.key
    with open_store(where, create=True) as idx:
        assert score_index(idx, head, embedder=counting).scored == 120
    assert len(counting.texts) == 120


def test_index_command_scores_after_the_load(models, tmp_path: Path):
    where = tmp_path / "idx"
    res = run_cli("index", demo_dir() / "corpus.jsonl", "--index", where, "--embedder", "hashing",
                  "--credibility-model", models["a"], "--no-optimize")
    assert res.returncode == 0, res.stderr
    assert "credibility scores of" in words(res.stderr) and "scored 120" in words(res.stderr)
    assert {k for _, k in stored(where).values()} == {load_model(models["a"]).key}
    other = run_cli("index", demo_dir() / "corpus.jsonl", "--index", tmp_path / "other",
                    "--embedder", "minilm", "--credibility-model", models["a"])
    assert other.returncode == 2 and "embedded with 'hashing'; this index uses 'minilm'" in \
        words(other.stderr)
    assert not (tmp_path / "other").exists()  # refused before anything was indexed


# -- search -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def scored(demo_index_hashing: Path, models, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo index with model ``a``'s scores."""
    where = copy_index(demo_index_hashing, tmp_path_factory.mktemp("scored") / "idx")
    with open_store(where, create=True) as idx:
        score_index(idx, load_model(models["a"]))
    return where


def test_search_on_a_scored_index_embeds_only_the_query(scored: Path, models):
    counting = Counting()
    with open_store(scored) as idx, warnings.catch_warnings():
        warnings.simplefilter("error", UnscoredCredibilityWarning)
        searcher = Searcher(idx, counting)
        for pushdown in (None, False):
            counting.texts.clear()
            doc = searcher.search_json("vitamin c cold", spec(models["a"], pushdown=pushdown))
            assert counting.texts == ["vitamin c cold"]
            assert doc["settings"]["pushdown"] is (pushdown is None)
            info = doc["info"]["credibility_prior"]
            assert info["stored"] == info["n"] > 0 and info["scored_now"] == 0


def test_unscored_index_scores_now_with_the_stored_vectors(demo_index_hashing: Path, models):
    """The default policy (``score``) keeps an unscored index working: candidates are scored
    at query time, from their stored vectors (no embedder call), with one warning."""
    counting = Counting()
    with open_store(demo_index_hashing) as idx:
        searcher = Searcher(idx, counting)
        with pytest.warns(UnscoredCredibilityWarning, match="credrank score credibility"):
            doc = searcher.search_json("vitamin c cold", spec(models["a"]))
            scored_now = searcher.search_json("vitamin c cold",
                                              spec(models["a"], pushdown=False))
    assert counting.texts == ["vitamin c cold"] * 2
    assert doc["settings"]["pushdown"] is False
    info = doc["info"]["credibility_prior"]
    assert info["scored_now"] == 30 and info["stored"] == 0 and info["warnings"]
    assert [h["doc_id"] for h in doc["hits"]] == [h["doc_id"] for h in scored_now["hits"]]


def test_the_cli_says_the_unscored_warning_as_its_own_warning_line(demo_index_hashing: Path,
                                                                   models, tmp_path: Path):
    # it printed Python's "…/core/pipeline.py:165: UnscoredCredibilityWarning: …" and the
    # source line "return self.transform(batch)"
    where = copy_index(demo_index_hashing, tmp_path / "index")
    got = run_cli("search", "vitamin c cold", "--index", where, "--credibility-model",
                  models["a"], "--json")
    assert got.returncode == 0, got.stderr
    lines = got.stderr.splitlines()
    said = [line for line in lines if "credrank score credibility" in line]
    assert said and said[0].startswith("warning: "), got.stderr
    assert "UnscoredCredibilityWarning" not in got.stderr
    assert "transform(batch)" not in got.stderr


def test_missing_scores_error_names_the_command(demo_index_hashing: Path, scored: Path,
                                                models):
    with open_store(demo_index_hashing) as idx, pytest.raises(
            StageError, match=r"credrank score credibility --index \S+ --model \S+a\.json"):
        Searcher(idx, get_embedder("hashing")).search(
            "flu", spec(models["a"], missing="error"))
    res = run_cli("search", "flu", "--index", demo_index_hashing, "--credibility-model",
                  models["a"], "-S", "credibility.missing=error")
    assert res.returncode == 2
    assert f"credrank score credibility --index {demo_index_hashing} --model {models['a']}" \
        in words(res.stderr)
    # scored with another model (a refit): not scored for this one, said so
    with open_store(scored) as idx, pytest.raises(StageError, match="another model"):
        Searcher(idx, get_embedder("hashing")).search(
            "flu", spec(models["b"], missing="error"))


def test_cli_search_reports_pushdown_and_the_stored_factor(scored: Path, models):
    res = run_cli("search", "vitamin c cold", "--index", scored, "--credibility-model",
                  models["a"], "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["settings"]["pushdown"] is True
    assert doc["settings"]["credibility"]["stored_scores"] == {"documents": 120,
                                                              "scored": 120}
    assert doc["info"]["credibility_prior"]["stored"] == len(doc["hits"]) == 10
    for h in doc["hits"]:
        b = h["score_breakdown"]
        assert 0.3 <= b["credibility"] <= 1.0
        assert b["final"] == pytest.approx(max(b["retrieval_score"], 0) * b["prior"]
                                           * b["credibility"], abs=1e-6)


def test_rerank_candidates_from_elsewhere_are_scored_now(scored: Path, models):
    records = [{"id": f"r{i}", "text": t, "url": u} for i, (t, u) in enumerate([
        ("A randomized clinical trial and a systematic review found evidence.",
         "https://www.nih.gov/x"),
        ("BUY NOW!!! Miracle cure, order now for only $19.99!", "http://cheap.biz/buy.php"),
    ])]
    with open_store(scored) as idx, warnings.catch_warnings():
        warnings.simplefilter("error", UnscoredCredibilityWarning)  # no warning: not an index
        out = Searcher(idx, get_embedder("hashing")).rerank("cure", records, spec(models["a"]),
                                                            retrieval="cosine")
    assert out.info["credibility_prior"]["scored_now"] == 2
    assert set(out.factors) >= {"prior", "credibility"}


# -- the engine formula -----------------------------------------------------------------------

def engines() -> list[str]:
    return ["edge", "qdrant"] if importlib.util.find_spec("qdrant_client") else ["edge"]


@pytest.fixture(scope="module", params=engines())
def engine_store(request, models, tmp_path_factory):
    """The demo corpus in each formula-capable engine, scored with model ``a`` except the
    documents of one source (d1xx)."""
    root = tmp_path_factory.mktemp(request.param)
    emb = get_embedder("hashing")
    options: dict[str, Any] = ({"qdrant_path": root / "qdrant-data"}
                               if request.param == "qdrant" else {})
    with open_store(root / "idx", request.param, embedder=emb.name, dim=emb.dim, create=True,
                    **options) as store:
        index_documents(iter_documents(demo_dir() / "corpus.jsonl"), store, emb,
                        SourceTyper([demo_dir() / "domains.csv"]))
        yield store


def _assert_same(pushed, python) -> None:
    assert compare_rankings(pushed, python) != "real", (list(pushed.doc_ids),
                                                         list(python.doc_ids))
    by_id = {d: i for i, d in enumerate(python.doc_ids)}
    for i, d in enumerate(pushed.doc_ids):
        if d in by_id:
            j = by_id[d]
            assert pushed.score[i] == pytest.approx(python.score[j], abs=1e-6)
            for name in ("prior", "credibility"):
                assert pushed.factors[name][i] == pytest.approx(python.factors[name][j],
                                                                abs=1e-9)


def test_pushdown_equals_the_python_path(engine_store, models):
    model = load_model(models["a"])
    emb = get_embedder("hashing")
    searcher = Searcher(engine_store, emb)
    partial = [d for d in sorted(r["doc_id"] for r in engine_store.read_payloads(
        None, fields=("doc_id",)))][:100]
    job = credibility_job(model)
    assert job.score_records is not None
    # scored in part: the Python path (a count says so), with the command to complete it
    from credrank.index.scoring import _records, set_fields

    records = _records(engine_store, partial, job.fields, job.vectors)
    values = job.score_records([records[d] for d in partial])
    set_fields(engine_store, {d: {FIELD: float(v), KEY_FIELD: model.key}
                              for d, v in zip(partial, values, strict=True)})
    compiled = searcher.compile(spec(models["a"]))
    assert not compiled.pushdown.fused
    assert "100 of 120 documents" in str(compiled.pushdown.reason)
    assert "credrank score credibility" in str(compiled.pushdown.reason)
    # neutral: pushed down all the same (the engine gives an unscored point p = 0.5)
    for top_k in (10, 3):
        neutral = spec(models["a"], missing="neutral").replace_top(top_k=top_k)
        fused = searcher.compile(neutral)
        assert fused.pushdown.fused and fused.pushdown.credibility is not None
        python = spec(models["a"], missing="neutral", pushdown=False).replace_top(top_k=top_k)
        for q in QUERIES:
            _assert_same(searcher.search(q, neutral, text="none"),
                         searcher.search(q, python, text="none"))
    # every document scored: pushed down whatever the policy, the same ranking and scores
    score_index(engine_store, model)
    for policy in ("score", "error"):
        fused = searcher.compile(spec(models["a"], missing=policy))
        assert fused.pushdown.fused
        for q in QUERIES:
            pushed = searcher.search(q, spec(models["a"], missing=policy), text="none")
            python = searcher.search(q, spec(models["a"], missing=policy, pushdown=False),
                                     text="none")
            assert len(pushed) == len(python) == 10
            _assert_same(pushed, python)
            assert pushed.info["credibility_prior"]["stored"] == 10
    # with freshness in the formula too
    fresh = PipelineSpec.from_dict({"top_k": 5, "stages": [
        "prior", {"stage": "credibility", "model": str(models["a"])},
        {"stage": "freshness", "half_life": "365d", "now": "2024-01-01T00:00:00+00:00",
         "undated": "neutral:0.5"}]})
    assert searcher.compile(fresh).pushdown.fused
    slow = PipelineSpec.from_dict({**fresh.to_dict(), "pushdown": False})
    for q in QUERIES[:4]:
        _assert_same(searcher.search(q, fresh, text="none"),
                     searcher.search(q, slow, text="none"))


def test_formula_text_documents_the_credibility_term():
    from credrank.index.formula import CREDIBILITY_FORMULA, CredibilityFormula

    assert "$payload.credibility" in CREDIBILITY_FORMULA and "floor" in CREDIBILITY_FORMULA
    spec_ = CredibilityFormula("k", 0.3)
    assert spec_.fields == ("credibility", "credibility_key") and spec_.neutral == 0.5
    with pytest.raises(ValueError, match="floor: expected a number in"):
        CredibilityFormula("k", 1.5)


def test_featurizer_document_source_uses_given_vectors_else_title_and_text():
    emb = HashingEmbedder(32)
    counting = Counting()
    counting.inner, counting.dim = emb, emb.dim
    from credrank.credibility import CredibilityFeaturizer

    f = CredibilityFeaturizer(counting, embedding_source="document")
    texts, urls, titles = ["one two three", "four five"], ["http://a.org", None], ["T", None]
    given = f.features(texts, urls, vectors=emb.embed(["T\none two three", "four five"]))
    assert counting.texts == []
    computed = f.features(texts, urls, titles=titles)
    assert counting.texts == ["T\none two three", "four five"]
    np.testing.assert_allclose(given, computed, atol=1e-6)
    assert f.config()["embedding_source"] == "document"
    with pytest.raises(ValueError, match="embedding_source: expected one of head, document"):
        CredibilityFeaturizer(emb, embedding_source="page")


#: ``credrank`` with each chunk of credibility scores held after it is written (16 documents a
#: chunk) until stdin has a line: a marker on stderr says a chunk is written, so the test can
#: interrupt the run there without a timing guess
HELD_RUN = """
import signal
import sys
# Ctrl-C semantics whatever the disposition this process inherited (a background job of a
# shell without job control starts with SIGINT ignored; see INDEXER_SCRIPT in conftest.py)
signal.signal(signal.SIGINT, signal.default_int_handler)
import credrank.credibility.indexed as indexed
original = indexed.score_index
def held(store, model, **kw):
    inner = kw.pop("on_chunk")
    def on_chunk(n):
        inner(n)
        print("CHUNK-WRITTEN", file=sys.stderr, flush=True)
        sys.stdin.readline()
    return original(store, model, **{**kw, "chunk": 16, "on_chunk": on_chunk})
indexed.score_index = held
from credrank.cli import main
main()
"""


def test_an_interrupted_scoring_run_says_what_it_kept(demo_index_hashing, models, tmp_path):
    # issue 37 N15: Ctrl-C during `credrank score credibility` exited with no message
    import os
    import signal
    import subprocess
    import sys

    where = copy_index(demo_index_hashing, tmp_path / "idx")
    env = {k: v for k, v in os.environ.items() if k != "CREDRANK_EMBED_BACKEND"}
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_RUN, "score", "credibility", "--index", str(where),
         "--model", str(models["a"]), "--quiet"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # until the first chunk is written, then interrupt it there
        seen.append(line)
        if line.strip() == "CHUNK-WRITTEN":
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, (seen, out, err)
    assert "Traceback" not in err, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"interrupted: {where}: 16 credibility scores written and kept "
                               "(0 were already there, 120 documents); 104 left"), err
    assert "re-run the same command" in lines[0]
    # and re-running completes it: the 16 are skipped
    done = run_cli("score", "credibility", "--index", where, "--model", models["a"], "--json",
                   "--quiet", timeout=600)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["already_scored"], doc["scored"]) == (16, 104)


def test_an_interrupt_before_any_score_says_so(tmp_path):
    from credrank.cli.score import Tally, interrupted

    assert interrupted(Tally(), tmp_path, "machine-text").exit_code == 130
    tally = Tally()
    tally.start(10, 12)
    tally.advance(4)
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        interrupted(tally, tmp_path, "machine-text")
    assert err.getvalue() == (f"interrupted: {tmp_path}: 4 machine-text scores written and kept "
                              "(2 were already there, 12 documents); 6 left; re-run the same "
                              "command to score the rest (documents already scored are "
                              "skipped)\n")
