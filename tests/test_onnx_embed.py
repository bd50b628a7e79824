"""The torch-free MiniLM query path (issue 15, part 1): the ONNX artifact served by
onnxruntime + tokenizers equals sentence-transformers, is what ``get_embedder("minilm")`` gives
when it is there (torch otherwise, or when forced), and a search through the CLI with it never
imports torch.

The artifact is made by ``make install`` (``python -m credrank.index.onnx_export``); the tests
that need it are skipped, saying so, where it or onnxruntime is missing. No timing asserts.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from credrank.index import embed as embed_module
from credrank.index.embed import get_embedder, minilm_embedder, prefetch_embedder
from credrank.index.onnx_embed import (
    ARTIFACT_ENV,
    BACKEND_ENV,
    META_FILE,
    MODEL_FILE,
    TOKENIZER_FILE,
    artifact_dir,
    artifact_problem,
    mean_pool,
    token_batches,
)

DEMO = Path(__file__).resolve().parents[1] / "src" / "credrank" / "data" / "demo"
TOLERANCE = 1e-5


def _artifact_or_skip() -> Path:
    problem = artifact_problem()
    if problem is not None:
        pytest.skip(f"ONNX MiniLM not available ({problem}); `make install` makes it "
                    "(python -m credrank.index.onnx_export)")
    return artifact_dir()


@pytest.fixture(autouse=True)
def _fresh_embedders(monkeypatch):
    """Each test reads the backend settings anew (get_embedder caches per process)."""
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


def varied_texts() -> list[str]:
    """Texts of every kind the embedder meets: demo documents (texts, titles, a text standing
    in for a missing title, title + text), queries, windows of 1 to 1,500 words (around and
    past the 256-piece limit, and past 512) and edge cases — empty, whitespace, unicode,
    digits/URLs, long repetitions (truncation).

    The demo documents are one kind (56 to 87 words of English news), so a handful spread over
    their lengths (the shortest, the longest and evenly between) stands for all 120: each
    more document of the same kind repeated a check the others made (the test once embedded
    320 texts, most of them demo documents, with torch and ONNX)."""
    docs = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines()
            if line.strip()]
    queries = [json.loads(line)["text"] for line in
               (DEMO / "queries.jsonl").read_text().splitlines() if line.strip()]
    by_length = sorted(docs, key=lambda d: (len(d["text"]), d["text"]))
    spread = [by_length[round(i * (len(docs) - 1) / 7)] for i in range(8)]
    untitled = [d for d in docs if not d.get("title")][:1]  # its text[:40] stands in
    picked = spread + untitled
    texts = [d["text"] for d in picked] + [d.get("title") or d["text"][:40] for d in picked]
    texts += queries + [f"{d.get('title', '')}. {d['text']}" for d in picked[:4]]
    rng = np.random.default_rng(15)
    words = " ".join(d["text"] for d in docs).split()
    for n in (1, 3, 20, 120, 250, 300, 600, 1500):  # word counts around and past the limit
        start = int(rng.integers(0, len(words) - n))
        texts.append(" ".join(words[start:start + n]))
    texts += ["", " ", "\n\t", "a", "?", "UPPER lower MiXeD", "Ünïcödé façade naïve café",
              "東京都 の 天気 予報", "Москва и Санкт-Петербург", "مرحبا بالعالم", "🙂🙃 emoji only",
              "3.14159 2026-01-01 10:30 +44 20 7946 0000", "https://example.org/a?b=c#d",
              "word " * 700, "supercalifragilisticexpialidocious " * 100,
              "  leading and trailing spaces  ", "tab\tseparated\tvalues\nnew line"]
    return texts


SINGLES = 40  # how many of the last varied texts are embedded one at a time


@pytest.fixture(scope="module")
def onnx_singles() -> np.ndarray:
    """The last :data:`SINGLES` varied texts embedded by ONNX one text at a time (no padding),
    once for the tests that compare batched vectors with them."""
    from credrank.index.onnx_embed import OnnxMiniLMEmbedder

    emb = OnnxMiniLMEmbedder(_artifact_or_skip())
    return np.vstack([emb.embed([t]) for t in varied_texts()[-SINGLES:]])


def _max_cos_distance(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    cos = (a64 * b64).sum(1) / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))
    return float(np.max(1.0 - cos))


# -- equivalence ----------------------------------------------------------------------------

@pytest.mark.slow  # loads torch and sentence-transformers beside onnxruntime
def test_onnx_equals_sentence_transformers_on_varied_texts(onnx_singles):
    folder = _artifact_or_skip()
    pytest.importorskip("sentence_transformers", reason="the embed extra is not installed")
    from credrank.index.embed import MiniLMEmbedder
    from credrank.index.onnx_embed import OnnxMiniLMEmbedder

    texts = varied_texts()
    # batches of 16, not the default 64, on both sides: both sort a call by length and pad a
    # batch to its longest text, so one batch of all the texts padded every one to 256 pieces
    # (≈ 4 times the compute, measured) while checking nothing more; every batch of 16 still
    # mixes lengths (padding masked), and several batches check that the order is restored
    onnx = OnnxMiniLMEmbedder(folder, batch_size=16)
    # every kind is there: "" ([CLS] [SEP]), short and demo-length texts, and several cut at
    # the 256-piece limit (the test once asserted only a count, >= 300 texts)
    lengths = onnx.token_lengths(texts)
    assert min(lengths) == 2 and max(lengths) == 256 and lengths.count(256) >= 5
    assert len({n for n in lengths if 16 <= n < 256}) >= 10
    torch_emb = MiniLMEmbedder(batch_size=16)
    assert onnx.max_seq_length == torch_emb.model.max_seq_length == 256
    got, expected = onnx.embed(texts), torch_emb.embed(texts)
    assert got.shape == expected.shape == (len(texts), 384)
    assert got.dtype == np.float32
    assert _max_cos_distance(got, expected) <= TOLERANCE
    # batch composition does not matter (padding is masked): one text at a time agrees too
    assert _max_cos_distance(onnx_singles[-25:], expected[-25:]) <= TOLERANCE


def test_onnx_truncates_at_max_seq_length():
    folder = _artifact_or_skip()
    from credrank.index.onnx_embed import OnnxMiniLMEmbedder

    emb = OnnxMiniLMEmbedder(folder)
    head = "the trial found no effect of vitamin d on covid outcomes " * 40  # > 256 pieces
    a, b, short = emb.embed([head + "alpha beta gamma", head + "completely different end",
                             "the trial found"])
    assert np.allclose(a, b, atol=1e-6)  # what lies past the 256th word piece is cut
    assert not np.allclose(a, short, atol=1e-3)
    encoding = emb.tokenizer.encode(head * 3)
    assert len(encoding.ids) == emb.max_seq_length == 256
    assert encoding.ids[0] == 101 and encoding.ids[-1] == 102  # [CLS] … [SEP] kept


def test_onnx_embedder_contract():
    folder = _artifact_or_skip()
    from credrank.index.onnx_embed import OnnxMiniLMEmbedder

    emb = OnnxMiniLMEmbedder(folder, batch_size=3)
    assert (emb.name, emb.dim, emb.backend) == ("minilm", 384, "onnx")
    assert emb.embed([]).shape == (0, 384)
    texts = ["a much longer text about vaccines and autism studies in denmark", "b", "", "cc"]
    vectors = emb.embed(texts)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # length-sorted batches restore the input order
    assert np.allclose(vectors[1], emb.embed(["b"])[0], atol=1e-6)
    assert np.allclose(vectors[0], emb.embed([texts[0]])[0], atol=1e-6)
    copy = pickle.loads(pickle.dumps(emb))  # Dask / multiprocessing: reloads the artifact
    assert copy.directory == folder and np.array_equal(copy.embed(texts), vectors)


def test_onnx_token_lengths_drive_bucketed_indexing(onnx_singles):
    """``token_lengths`` counts word pieces after truncation ([CLS] and [SEP] included), the
    same count the tokenizer's own padded encoding marks in its attention mask; index
    bucketing (``text_lengths``) measures an ONNX embedder with it, not in characters."""
    folder = _artifact_or_skip()
    from credrank.index.ingest import embed_bucketed, text_lengths
    from credrank.index.onnx_embed import OnnxMiniLMEmbedder

    emb = OnnxMiniLMEmbedder(folder, batch_size=4)
    texts = varied_texts()[-SINGLES:]
    lengths = emb.token_lengths(texts)
    assert lengths == [sum(emb.tokenizer.encode(t).attention_mask) for t in texts]
    assert max(lengths) == 256 and min(lengths) == 2  # truncated; "" is [CLS] [SEP]
    assert text_lengths(emb)(texts) == lengths
    # characters are not tokens: a 3,500-character text and a 256-piece one weigh the same
    assert lengths[texts.index("word " * 700)] == 256
    # batching by tokens and padding per batch gives the vectors of one text at a time
    assert np.allclose(embed_bucketed(emb, texts, embed_batch=8), onnx_singles, atol=1e-5)
    assert np.allclose(emb.embed(texts), onnx_singles, atol=1e-5)


def test_token_batches_cap_rows_and_padded_pieces():
    lengths = [2, 5, 5, 7, 40, 90, 100, 256, 256, 256, 300]
    batches = token_batches(lengths, rows=3, tokens=256)
    # consecutive, covering every text once, in order
    assert [a for a, _ in batches] == [0, *[b for _, b in batches[:-1]]]
    assert batches[-1][1] == len(lengths)
    for start, end in batches:
        assert end > start
        size = end - start
        # within both caps once padded to the batch's longest (its last) text; a text over
        # the token cap alone, never dropped or cut
        assert size <= 3 and (size * lengths[end - 1] <= 256 or size == 1)
    assert batches == [(0, 3), (3, 5), (5, 7), (7, 8), (8, 9), (9, 10), (10, 11)]
    # each batch is as long as the caps allow (none could take its next text)
    for start, end in batches[:-1]:
        assert end - start == 3 or (end + 1 - start) * lengths[end] > 256, (start, end)
    assert token_batches([], rows=64, tokens=1024) == []
    assert token_batches([10] * 200, rows=64, tokens=10**6) == [(0, 64), (64, 128), (128, 192),
                                                               (192, 200)]


def test_onnx_batches_stay_within_the_token_cap(onnx_singles, monkeypatch):
    """A call's batches carry at most ``batch_tokens`` padded pieces, and the vectors are those
    of one text at a time (a text over the cap alone: ``token_batches`` above)."""
    folder = _artifact_or_skip()
    from credrank.index.onnx_embed import BATCH_TOKENS, OnnxMiniLMEmbedder

    emb = OnnxMiniLMEmbedder(folder)
    assert emb.batch_tokens == BATCH_TOKENS and emb.batch_size == 64
    texts = varied_texts()[-SINGLES:]
    shapes: list[tuple[int, int]] = []
    encode = emb._encode

    def spy(encodings):
        shapes.append((len(encodings), max(len(e.ids) for e in encodings)))
        return encode(encodings)

    monkeypatch.setattr(emb, "_encode", spy)
    assert np.allclose(emb.embed(texts), onnx_singles, atol=1e-5)
    assert sum(rows for rows, _ in shapes) == len(texts)
    assert all(rows * width <= BATCH_TOKENS for rows, width in shapes), shapes
    assert max(rows for rows, _ in shapes) > 2  # short texts share a batch
    assert (2, 256) in shapes  # texts cut at 256 pieces go two at a time
    copy = pickle.loads(pickle.dumps(OnnxMiniLMEmbedder(folder, batch_tokens=300)))
    assert copy.batch_tokens == 300
    for bad in ({"batch_tokens": 0}, {"batch_size": 0}):
        with pytest.raises(ValueError, match=f"{next(iter(bad))}: expected"):
            OnnxMiniLMEmbedder(folder, **bad)


def test_mean_pool_is_masked_mean():
    hidden = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    mask = np.array([[1, 1, 0], [0, 0, 0]])
    pooled = mean_pool(hidden, mask)
    assert np.allclose(pooled[0], hidden[0, :2].mean(axis=0))
    assert np.all(pooled[1] == 0.0)  # no token: the 1e-9 clamp, no division by zero


# -- which backend get_embedder gives ------------------------------------------------------

class _StubTorch:
    name, dim, backend = "minilm", 384, "torch"


def _fake_artifact(folder: Path, weights_size: int | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MODEL_FILE).write_bytes(b"not a model")
    (folder / TOKENIZER_FILE).write_text("{}")
    meta = {"format": 1, "max_seq_length": 256, "pad_id": 0, "pad_token": "[PAD]"}
    if weights_size is not None:
        meta["weights_size"] = weights_size
    (folder / META_FILE).write_text(json.dumps(meta))
    return folder


def test_fallback_to_torch_when_the_artifact_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(embed_module, "MiniLMEmbedder", _StubTorch)
    monkeypatch.setenv(ARTIFACT_ENV, str(tmp_path / "absent"))
    assert artifact_dir() == tmp_path / "absent"
    assert "no ONNX artifact" in (artifact_problem() or "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no folder at all: silent fallback
        assert isinstance(minilm_embedder(), _StubTorch)
        assert isinstance(get_embedder("minilm"), _StubTorch)
    assert get_embedder("minilm").name == "minilm"  # the manifest name is unchanged
    assert prefetch_embedder("minilm") is None  # nothing to load in the background


def test_incomplete_artifact_warns_and_falls_back(tmp_path, monkeypatch):
    monkeypatch.setattr(embed_module, "MiniLMEmbedder", _StubTorch)
    folder = tmp_path / "onnx"
    folder.mkdir()
    (folder / MODEL_FILE).write_bytes(b"x")
    monkeypatch.setenv(ARTIFACT_ENV, str(folder))
    with pytest.warns(RuntimeWarning, match="tokenizer.json missing"):
        assert isinstance(minilm_embedder(), _StubTorch)


def test_forced_backends(tmp_path, monkeypatch):
    monkeypatch.setattr(embed_module, "MiniLMEmbedder", _StubTorch)
    monkeypatch.setenv(ARTIFACT_ENV, str(tmp_path / "absent"))
    monkeypatch.setenv(BACKEND_ENV, "onnx")
    with pytest.raises(RuntimeError, match="CREDRANK_EMBED_BACKEND=onnx: no ONNX artifact") as err:
        minilm_embedder()
    assert str(err.value).count("export-onnx") == 1  # the remedy once
    with pytest.raises(RuntimeError, match="export-onnx"):
        get_embedder("minilm")
    monkeypatch.setenv(BACKEND_ENV, "TORCH")
    get_embedder.cache_clear()
    assert isinstance(get_embedder("minilm"), _StubTorch)
    monkeypatch.setenv(BACKEND_ENV, "cuda")
    with pytest.raises(ValueError, match="expected one of auto, onnx, torch, got 'cuda'"):
        minilm_embedder()
    with pytest.raises(ValueError, match="MiniLM backend"):
        minilm_embedder("gpu")


def test_torch_forced_even_with_an_artifact(tmp_path, monkeypatch):
    monkeypatch.setattr(embed_module, "MiniLMEmbedder", _StubTorch)
    monkeypatch.setenv(ARTIFACT_ENV, str(_fake_artifact(tmp_path / "onnx")))
    monkeypatch.setenv(BACKEND_ENV, "torch")
    assert isinstance(minilm_embedder(), _StubTorch)
    assert prefetch_embedder("minilm") is None


def test_artifact_problems(tmp_path, monkeypatch):
    from credrank.index.onnx_embed import packaged_model_dir

    folder = _fake_artifact(tmp_path / "onnx")
    packaged = packaged_model_dir()
    if packaged is not None:  # the size of the installed weights is checked: stale export
        size = (packaged / "model.safetensors").stat().st_size
        assert "other weights" in (artifact_problem(_fake_artifact(folder, size + 1)) or "")
        _fake_artifact(folder, size)
    if all(__import__("importlib").util.find_spec(m) for m in ("onnxruntime", "tokenizers")):
        assert artifact_problem(folder) is None
    again = f"; rerun `credrank models export-onnx --force` (with --dir {folder})"
    (folder / META_FILE).write_text("{not json")
    assert "unreadable" in (artifact_problem(folder) or "")
    assert (artifact_problem(folder) or "").endswith(again)  # each problem says its remedy
    (folder / META_FILE).write_text(json.dumps({"format": 99}))
    assert artifact_problem(folder) == f"{folder / META_FILE}: expected format 1{again}"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert artifact_problem(empty) == (f"no ONNX artifact in {empty} (model.onnx missing); "
                                       f"make it with `credrank models export-onnx` (with "
                                       f"--dir {empty})")


def test_get_embedder_serves_onnx_when_the_artifact_is_there():
    _artifact_or_skip()
    emb = get_embedder("minilm")
    assert (emb.name, emb.dim, getattr(emb, "backend", None)) == ("minilm", 384, "onnx")
    get_embedder.cache_clear()
    thread = prefetch_embedder("minilm")
    assert thread is not None
    thread.join()
    assert get_embedder("minilm") is get_embedder("minilm")
    assert prefetch_embedder("hashing") is None


# -- no torch on the query path -------------------------------------------------------------

HEAVY = ("torch", "sentence_transformers", "transformers", "matplotlib")

_SEARCH_SCRIPT = """
import json, sys
import credrank.cli
before = sorted(m for m in {heavy!r} if m in sys.modules)
commands = sorted(m for m in sys.modules if m.startswith("credrank.cli."))
sys.argv = ["credrank", "search", "vitamin d and covid", "--index", {index!r}, "--json"]
code = credrank.cli.run()
print("@@" + json.dumps({{"code": code, "before": before, "commands": commands,
                         "after": sorted(m for m in {heavy!r} if m in sys.modules)}}))
"""


def test_cli_search_with_onnx_does_not_import_torch(tmp_path):
    _artifact_or_skip()
    from credrank.documents import iter_documents
    from credrank.index.ingest import index_documents
    from credrank.index.opener import open_store
    from credrank.provenance import SourceTyper

    emb = get_embedder("minilm")
    corpus = tmp_path / "corpus.jsonl"
    lines = (DEMO / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:30]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open_store(tmp_path / "idx", embedder=emb.name, dim=emb.dim, create=True) as idx:
        report = index_documents(iter_documents(corpus), idx, emb, SourceTyper())
    assert report.indexed == 30
    script = _SEARCH_SCRIPT.format(heavy=HEAVY, index=str(tmp_path / "idx"))
    env = {k: v for k, v in os.environ.items() if k != BACKEND_ENV}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    marker = [line for line in proc.stdout.splitlines() if line.startswith("@@")]
    assert marker, proc.stdout + proc.stderr
    result = json.loads(marker[-1][2:])
    assert result["code"] == 0, proc.stderr
    assert result["before"] == [] and result["commands"] == []  # `import credrank.cli`: lazy
    assert result["after"] == [], f"the ONNX query path imported {result['after']}"
    hits = json.loads(proc.stdout[:proc.stdout.index("@@")])["hits"]
    assert len(hits) == 10 and hits[0]["rank"] == 1


# -- the CLI -------------------------------------------------------------------------------

def test_models_info_reports_a_missing_artifact(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from credrank.cli.models import app

    monkeypatch.setenv(ARTIFACT_ENV, str(tmp_path / "none"))
    result = CliRunner().invoke(app, ["info", "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["ready"] is False and doc["minilm_backend"] == "torch"
    assert doc["artifact"] == str(tmp_path / "none")
    assert next(iter(doc)) == "credrank_models_info"  # the marker every document carries


def test_every_command_is_listed_without_importing_it():
    code = ("import sys, credrank.cli as c; "
            "print(sorted(m for m in sys.modules if m.startswith('credrank.cli.')), "
            "list(c.COMMANDS)[:2])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.strip() == "[] ['index', 'search']", proc.stderr


# -- threads ---------------------------------------------------------------------------------

def test_threads_follow_omp_num_threads_as_torch_does(monkeypatch: pytest.MonkeyPatch) -> None:
    from credrank.index.onnx_embed import OnnxMiniLMEmbedder, threads_from_env

    assert threads_from_env({}) == 0 and threads_from_env({"OMP_NUM_THREADS": " "}) == 0
    assert threads_from_env({"OMP_NUM_THREADS": "3"}) == 3
    assert threads_from_env({"OMP_NUM_THREADS": "4,2"}) == 4  # OpenMP's nested list
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(ValueError, match=r"OMP_NUM_THREADS: expected a positive integer"):
            threads_from_env({"OMP_NUM_THREADS": bad})
    folder = _artifact_or_skip()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert OnnxMiniLMEmbedder(folder).threads == 1
    assert OnnxMiniLMEmbedder(folder, threads=2).threads == 2  # an explicit count wins
    monkeypatch.delenv("OMP_NUM_THREADS")
    default = OnnxMiniLMEmbedder(folder)
    assert default.threads == 0  # onnxruntime's default
    # the pool spins only while a run is active, never on after it
    options = default.session.get_session_options()
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"
