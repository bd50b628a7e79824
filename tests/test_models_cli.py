"""``credrank models``: what ``info`` checks of the ONNX artifact (a damaged ``model.onnx``),
the backend selection's answer to an artifact onnxruntime cannot load, and ``export-onnx`` on a
full disk; and the progress line of ``credrank optimize``.

In process (:mod:`cli_inprocess`); no export is run (torch is never imported here): the
export's writing step is replaced where a full disk is simulated. The tests that need the
installed artifact (its tokenizer and ``meta.json``) skip, saying so, where it is missing.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli_inprocess import run_cli
from credrank.index import embed as embed_module
from credrank.index.onnx_embed import (
    ARTIFACT_ENV,
    BACKEND_ENV,
    META_FILE,
    MODEL_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    ArtifactWarning,
    artifact_dir,
    artifact_problem,
    packaged_model_dir,
)


def _installed_artifact() -> Path:
    problem = artifact_problem()
    if problem is not None:
        pytest.skip(f"ONNX MiniLM not available ({problem}); `make install` makes it")
    return artifact_dir()


def _damaged_copy(folder: Path, keep_bytes: int = 1000) -> Path:
    """The installed artifact with its ``model.onnx`` cut to ``keep_bytes`` bytes (what
    ``truncate -s 1000 model.onnx`` makes of a copy), its ``meta.json`` without the size and
    hash an export records (as an artifact exported before they were): what is checked is
    the load itself, whichever export made the installed artifact."""
    source = _installed_artifact()
    folder.mkdir(parents=True)
    shutil.copyfile(source / TOKENIZER_FILE, folder / TOKENIZER_FILE)
    meta = json.loads((source / META_FILE).read_text(encoding="utf-8"))
    for recorded in ("model_size", "model_sha256"):
        meta.pop(recorded, None)
    (folder / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    with (source / MODEL_FILE).open("rb") as fh:
        (folder / MODEL_FILE).write_bytes(fh.read(keep_bytes))
    return folder


class _StubTorch:
    name, dim, backend = "minilm", 384, "torch"


@pytest.fixture(autouse=True)
def _fresh_embedders(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    embed_module.get_embedder.cache_clear()  # type: ignore[attr-defined]
    yield
    embed_module.get_embedder.cache_clear()  # type: ignore[attr-defined]


# ---------------------------------------------------------------- models info

def test_info_says_a_truncated_model_cannot_serve(tmp_path: Path) -> None:
    """``status: ready`` for a ``model.onnx`` cut to 1,000 bytes; ``search`` then crashed
    with onnxruntime's InvalidProtobuf traceback."""
    folder = _damaged_copy(tmp_path / "copy")
    env = {ARTIFACT_ENV: str(folder)}
    done = run_cli("models", "info", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    status = next(line for line in done.stdout.splitlines() if line.startswith("status:"))
    assert status.startswith(f"status: {folder / MODEL_FILE}: ")
    assert "export-onnx --force" in status
    assert "MiniLM embeds with torch" in done.stdout  # auto: what the embedder then does
    doc = json.loads(run_cli("models", "info", "--json", env=env).stdout)
    assert doc["ready"] is False and doc["minilm_backend"] == "torch"
    assert doc["problem"].startswith(f"{folder / MODEL_FILE}: ")
    forced = json.loads(run_cli("models", "info", "--json",
                                env={**env, BACKEND_ENV: "onnx"}).stdout)
    assert forced["minilm_backend"] == "error"


def test_info_checks_the_size_and_hash_meta_records(tmp_path: Path) -> None:
    """An export records ``model_size`` (checked at every start) and ``model_sha256``
    (checked by ``models info``); an artifact without them is loaded instead."""
    if not all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers")):
        pytest.skip("onnxruntime or tokenizers not installed")
    folder = tmp_path / "art"
    folder.mkdir()
    model = b"stands for a model"
    (folder / MODEL_FILE).write_bytes(model)
    (folder / TOKENIZER_FILE).write_text("{}")
    meta: dict[str, Any] = {"format": 1, "max_seq_length": 256, "pad_id": 0,
                            "model_size": len(model) + 1,
                            "model_sha256": hashlib.sha256(model).hexdigest()}
    packaged = packaged_model_dir()
    if packaged is not None:  # the weights it was exported from are checked too
        meta["weights_size"] = (packaged / WEIGHTS_FILE).stat().st_size
    (folder / META_FILE).write_text(json.dumps(meta))
    cheap = artifact_problem(folder) or ""
    assert cheap.startswith(f"{folder / MODEL_FILE}: {len(model)} bytes, but meta.json "
                            f"records {len(model) + 1} (a truncated or replaced file)")
    meta["model_size"] = len(model)
    (folder / META_FILE).write_text(json.dumps(meta))
    assert artifact_problem(folder) is None  # the size is all a start checks
    assert artifact_problem(folder, verify=True) is None  # the recorded hash matches
    meta["model_sha256"] = "0" * 64
    (folder / META_FILE).write_text(json.dumps(meta))
    assert artifact_problem(folder) is None
    assert (artifact_problem(folder, verify=True) or "").startswith(
        f"{folder / MODEL_FILE}: its SHA-256 differs from the one meta.json records")
    # no hash recorded: the file is loaded, and this one is no model
    del meta["model_sha256"], meta["model_size"]
    (folder / META_FILE).write_text(json.dumps(meta))
    loaded = artifact_problem(folder, verify=True) or ""
    assert "cannot load it" in loaded and str(folder) in loaded


# ---------------------------------------------------------------- the backend selection

def test_a_model_onnxruntime_cannot_load_falls_back_or_names_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` promises sentence-transformers when the artifact cannot serve: a truncated
    ``model.onnx`` passed the checks and the load raised InvalidProtobuf. ``onnx`` forced: one
    error naming the file."""
    folder = _damaged_copy(tmp_path / "copy")
    monkeypatch.setattr(embed_module, "MiniLMEmbedder", _StubTorch)
    monkeypatch.setenv(ARTIFACT_ENV, str(folder))
    with pytest.warns(ArtifactWarning) as caught:
        assert isinstance(embed_module.minilm_embedder(), _StubTorch)
    (warning,) = caught
    assert str(warning.message).startswith(f"{folder / MODEL_FILE}: onnxruntime cannot load it")
    assert str(warning.message).endswith("MiniLM falls back to sentence-transformers (torch)")
    monkeypatch.setenv(BACKEND_ENV, "onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError) as info:
            embed_module.minilm_embedder()
    message = str(info.value)
    assert message.startswith(f"CREDRANK_EMBED_BACKEND=onnx: {folder / MODEL_FILE}: onnxruntime "
                              "cannot load it (")
    assert message.count("export-onnx") == 1 and "\n" not in message


def test_search_with_a_truncated_model_is_one_error_line(tmp_path: Path) -> None:
    """The search of a MiniLM index with the artifact damaged and ``onnx`` forced: a 100-line
    InvalidProtobuf traceback; now one line naming the model file."""
    folder = _damaged_copy(tmp_path / "copy")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": f"page {i} on measles"})
                              + "\n" for i in range(3)), encoding="utf-8")
    index = tmp_path / "idx"
    built = run_cli("index", str(corpus), "--index", str(index), "-q")
    assert built.returncode == 0, built.stderr
    done = run_cli("search", "measles", "--index", str(index),
                   env={ARTIFACT_ENV: str(folder), BACKEND_ENV: "onnx"})
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: CREDRANK_EMBED_BACKEND=onnx: {folder / MODEL_FILE}: "
                           "onnxruntime cannot load it")


# ---------------------------------------------------------------- export-onnx

def test_export_on_a_full_disk_exits_1_and_installs_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``models export-onnx --dir`` on a full disk was a traceback (OSError ENOSPC, from
    torch.onnx.export); now one line naming the folder, exit 1, the staging folder removed
    and an earlier folder left as it was."""
    from credrank.index import onnx_export

    packaged = packaged_model_dir()
    if packaged is None or not (packaged / WEIGHTS_FILE).is_file() or not all(
            importlib.util.find_spec(m) for m in ("onnx", "onnxruntime")):
        pytest.skip("the export needs the packaged weights, onnx and onnxruntime")

    def full_disk(tmp: Path, model_dir: Path, say: Callable[[str], None]) -> float:
        (tmp / MODEL_FILE).write_bytes(b"half a model")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(onnx_export, "_export_into", full_disk)
    target = tmp_path / "onnx"
    target.mkdir()
    (target / MODEL_FILE).write_bytes(b"an earlier build")  # cannot serve: export proceeds
    done = run_cli("models", "export-onnx", "--dir", str(target))
    assert done.returncode == 1, done.stderr
    assert done.stderr == (f"error: {target}: writing the ONNX artifact failed: No space left "
                           "on device; nothing was installed\n")
    assert [p.name for p in tmp_path.iterdir()] == ["onnx"]  # no staging folder left
    assert [p.name for p in target.iterdir()] == [MODEL_FILE]
    assert (target / MODEL_FILE).read_bytes() == b"an earlier build"


# ---------------------------------------------------------------- optimize's progress line

def test_optimize_log_line_says_what_it_counts(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """In a log, ``(5,455 of 10,914 vectors indexed): 0, elapsed 0:01``: the ``0`` was the
    count of a task that counts nothing. The line now counts the vectors indexed."""
    from credrank.cli.optimize import build_graph

    class Store:
        def optimize(self, on_progress: Callable[[int, int], None]) -> bool:
            on_progress(5_455, 10_914)
            on_progress(10_914, 10_914)
            return True

    monkeypatch.setenv("CREDRANK_PROGRESS_INTERVAL", "0")
    did, _ = build_graph(Store(), "idx")  # type: ignore[arg-type]
    assert did
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("idx: building the search graph, vectors indexed (of 10,914): "
                               "5,455, ")
    assert lines[-1].startswith("idx: building the search graph, vectors indexed (of 10,914): "
                                "10,914, ")
    assert all(": 0," not in line for line in lines)
