"""CrAM prompts with passage spans, the heads file, ``credrank cram`` and the LM bench (35.5)."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from typer.testing import CliRunner

from credrank.cli.cram import app
from credrank.cram.generate import cram_generate, model_info, naive_generate
from credrank.cram.headsfile import (
    HeadsFile,
    HeadsFileError,
    ModelInfo,
    load_heads,
    save_heads,
)
from credrank.cram.models import (
    LoadedModel,
    ModelUnavailableError,
    WhiteBoxError,
    load_cram_model,
    tiny_model,
)
from credrank.cram.multipliers import CramInputError
from credrank.cram.prompt import byte_tokenizer, render_prompt
from credrank_bench.experiments.cram_lm import (
    CLEAN,
    CRAM_IDEAL,
    CRAM_LABEL_FREE,
    CRAM_LEARNED,
    bench_cram_lm,
    fake_lowest,
)

runner = CliRunner()
CHAT = ("{% for m in messages %}<|user|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
PASSAGES = ["The capital of France is Paris.", "  Lyon is a city.\nIt has a river. ",
            "Ünïcode passage — «quotes» 東京"]


@pytest.fixture(scope="module")
def tiny() -> LoadedModel:
    return load_cram_model("tiny-llama")


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight CrAM-NQ-shaped records with short passages (fast on the byte tokenizer)."""
    path = tmp_path_factory.mktemp("cram") / "slice.jsonl"
    rows = []
    for i in range(8):
        docs = [{"text": f"CNN news: the answer to question {i} is wrong{i}.",
                 "is_misinformation": True}]
        docs += [{"text": f"Real passage {j} of question {i}: the answer is right{i}.",
                  "is_misinformation": False} for j in range(4)]
        rows.append({"id": f"q{i}", "question": f"what is the answer to question {i}",
                     "answers": [f"right{i}"], "wrong_answer": f"wrong{i}", "docs": docs})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _heads(info: ModelInfo, template: str, **changes: object) -> HeadsFile:
    fields: dict[str, object] = dict(
        model=info, prompt_template=template, heads=((0, 1), (1, 2)),
        ie=[[0.0] * info.n_heads for _ in range(info.n_layers)], ie_log=None,
        validation_curve=[{"n_heads": 2, "mean_p_wrong": 0.1}], n_calib=2, n_valid=2,
        data="slice.jsonl", data_sha256="0" * 64, floor=0.1, seed=0,
        calibration_ids=("q0", "q1"), validation_ids=("q2", "q3"))
    fields.update(changes)
    return HeadsFile(**fields)  # type: ignore[arg-type]


# ------------------------------------------------------------------ prompt spans


@pytest.mark.parametrize("chat", [False, True])
def test_prompt_spans_are_exact(chat: bool) -> None:
    tok = byte_tokenizer(chat_template=CHAT if chat else None)
    r = render_prompt(tok, "Which city?", PASSAGES)
    assert r.chat is chat and r.add_special_tokens is (not chat)
    assert len(r.spans) == len(PASSAGES)
    for (s, e), p in zip(r.spans, PASSAGES, strict=True):
        assert r.text[s:e] == p
    if chat:
        assert r.text.startswith("<|user|>\n") and r.template.endswith("+chat")


def test_prompt_refuses_empty_passage_and_rewriting_template() -> None:
    tok = byte_tokenizer()
    with pytest.raises(CramInputError, match="passage 1"):
        render_prompt(tok, "q?", ["ok", "   "])
    rewriting = ("{% for m in messages %}[{{ m['content'] | replace('Passage', 'Doc') }}]"
                 "{% endfor %}")
    trimming = byte_tokenizer(chat_template=rewriting)
    with pytest.raises(CramInputError, match="verbatim"):
        render_prompt(trimming, "q?", ["ok"])


@pytest.mark.slow
def test_prompt_spans_smollm2_tokenizer() -> None:
    from credrank.generate.local import lm_available

    if lm_available() is not None:
        pytest.skip(lm_available())
    from credrank.cram.multipliers import prompt_token_multipliers

    lm = load_cram_model("smollm2")
    r = render_prompt(lm.tokenizer, "Which city?", PASSAGES)
    assert r.chat
    for (s, e), p in zip(r.spans, PASSAGES, strict=True):
        assert r.text[s:e] == p
    pm = prompt_token_multipliers(lm.tokenizer, r.text, r.spans, [0.0, 1.0, 0.5],
                                  add_special_tokens=r.add_special_tokens)
    assert len(pm.token_spans) == 3


# ------------------------------------------------------------------ heads file


def test_heads_file_round_trip_and_refusals(tmp_path: Path) -> None:
    info = ModelInfo("tiny-llama", "llama", 2, 4)
    hf = _heads(info, "credrank-cram-qa-v1")
    path = save_heads(tmp_path / "h.json", hf)
    back = load_heads(path, model=info, prompt_template="credrank-cram-qa-v1")
    assert back == hf
    other = ModelInfo("smollm2", "llama", 30, 9)
    with pytest.raises(HeadsFileError, match=r"'tiny-llama'.*'smollm2'"):
        load_heads(path, model=other)
    with pytest.raises(HeadsFileError, match=r"2 layers × 4 heads.*2 layers × 8 heads"):
        load_heads(path, model=ModelInfo("tiny-llama", "llama", 2, 8))
    with pytest.raises(HeadsFileError, match="prompt template"):
        load_heads(path, prompt_template="other")
    doc = json.loads(path.read_text())
    del doc["floor"]
    path.write_text(json.dumps(doc))
    with pytest.raises(HeadsFileError, match=r"h\.json: floor: expected a finite number in "
                                              r"\[0, 1\), got nothing \(the key is missing\)"):
        load_heads(path)
    doc["floor"] = 1  # every multiplier 1: CrAM off, refused rather than run silently
    path.write_text(json.dumps(doc))
    with pytest.raises(HeadsFileError, match=r"floor: expected a finite number in \[0, 1\), "
                                              r"got 1"):
        load_heads(path)
    doc["floor"] = 0.1
    doc["heads"] = [[5, 0]]
    path.write_text(json.dumps(doc))
    with pytest.raises(HeadsFileError, match=r"h\.json: heads\[0\]: expected a \(layer, head\) "
                                              r"pair within 2 layers × 4 heads, got \[5, 0\]"):
        load_heads(path)


# ------------------------------------------------------------------ generation


def test_cram_generate_and_naive(tiny: LoadedModel) -> None:
    r = render_prompt(tiny.tokenizer, "Which city?", PASSAGES)
    text, report = cram_generate(tiny.model, tiny.tokenizer, r.text, r.spans, [0.0, 1.0, 1.0],
                                 [(0, 1), (1, 2)], max_new_tokens=3,
                                 add_special_tokens=r.add_special_tokens)
    assert isinstance(text, str) and report.new_tokens <= 3
    assert report.documents is not None and report.documents.values[0] == pytest.approx(0.1)
    assert report.cram.rows > 0
    _, base = naive_generate(tiny.model, tiny.tokenizer, r.text, max_new_tokens=3)
    assert base.cram.rows == 0 and base.heads == ()
    with pytest.raises(WhiteBoxError, match="CrAM needs white-box attention"):
        model_info(object(), "x")


def test_variants_batch_equals_one_call_each() -> None:
    """One batch of (scores, heads) variants over the same prompt gives each variant's own
    greedy answer (a different model seed per check: the token choices vary)."""
    import torch

    from credrank.cram.generate import cram_generate_variants

    for seed in (0, 1, 2):
        lm = load_cram_model("tiny-llama")
        torch.manual_seed(seed)
        for p in lm.model.parameters():
            p.data.normal_(0.0, 0.3)
        r = render_prompt(lm.tokenizer, "Which city?", PASSAGES)
        variants = [([1.0, 1.0, 1.0], []), ([0.0, 1.0, 1.0], [(0, 1), (1, 2)]),
                    ([1.0, 0.0, 0.5], [(0, 0), (0, 3), (1, 1)])]
        batched = cram_generate_variants(lm.model, lm.tokenizer, r.text, r.spans, variants,
                                         max_new_tokens=6,
                                         add_special_tokens=r.add_special_tokens)
        for (scores, heads), (text, _) in zip(variants, batched, strict=True):
            single, _ = cram_generate(lm.model, lm.tokenizer, r.text, r.spans, scores, heads,
                                      max_new_tokens=6,
                                      add_special_tokens=r.add_special_tokens)
            assert text == single, (seed, heads)
    with pytest.raises(ValueError, match="at least one"):
        cram_generate_variants(lm.model, lm.tokenizer, r.text, r.spans, [])


# ------------------------------------------------------------------ CLI


def test_cram_answer_end_to_end(tiny: LoadedModel, demo_index_hashing: Path,
                                tmp_path: Path) -> None:
    heads = save_heads(tmp_path / "h.json",
                       _heads(model_info(tiny.model, "tiny-llama"), "credrank-cram-qa-v1"))
    res = runner.invoke(app, ["answer", "does vitamin C cure colds", "--index",
                              str(demo_index_hashing), "--heads", str(heads), "--signal",
                              "prior", "--top-k", "3", "--max-new-tokens", "3", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["model"] == "tiny-llama" and len(doc["passages"]) == 3
    assert all(0 < p["multiplier"] <= 1 for p in doc["passages"])
    assert doc["report"]["cram"]["rows"] > 0
    res = runner.invoke(app, ["answer", "q", "--index", str(demo_index_hashing), "--heads",
                              str(heads), "--signal", "nonsense"])
    assert res.exit_code == 2 and "available" in res.output
    res = runner.invoke(app, ["answer", "q", "--index", str(demo_index_hashing), "--heads",
                              str(heads), "--model", "tiny-qwen2"])
    assert res.exit_code == 2 and "calibrated for model 'tiny-llama'" in res.output


def test_unknown_model_and_not_white_box(tmp_path: Path, slice_file: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "h.json"
    res = runner.invoke(app, ["calibrate", "--model", "gpt-5", "--data", str(slice_file),
                              "--n-calib", "2", "--n-valid", "2", "--out", str(out)])
    assert res.exit_code == 2
    assert "unknown model 'gpt-5'" in res.output and "smollm2" in res.output

    def opaque(name: str) -> LoadedModel:
        from credrank.cram.models import check_white_box

        check_white_box(tiny_model("gpt2", reorder_and_upcast_attn=True))
        raise AssertionError("unreachable")

    monkeypatch.setattr("credrank.cli.cram.load_cram_model", opaque)
    res = runner.invoke(app, ["calibrate", "--model", "tiny-gpt2", "--data", str(slice_file),
                              "--n-calib", "2", "--n-valid", "2", "--out", str(out)])
    assert res.exit_code == 2 and "CrAM needs white-box attention" in res.output


def test_empty_calibration_set(tmp_path: Path, slice_file: Path) -> None:
    out = tmp_path / "h.json"
    res = runner.invoke(app, ["calibrate", "--model", "tiny-llama", "--data", str(slice_file),
                              "--n-calib", "0", "--out", str(out)])
    assert res.exit_code == 2 and "calibration set is empty" in res.output
    no_fakes = tmp_path / "none.jsonl"
    rec = {"id": "1", "question": "q", "answers": ["a"], "wrong_answer": "b",
           "docs": [{"text": "t", "is_misinformation": False}]}
    no_fakes.write_text(json.dumps(rec) + "\n")
    res = runner.invoke(app, ["calibrate", "--model", "tiny-llama", "--data", str(no_fakes),
                              "--out", str(out)])
    assert res.exit_code == 2 and "calibration set is empty" in res.output
    assert not out.exists()


def test_calibrate_end_to_end(tmp_path: Path, slice_file: Path) -> None:
    """The default grid is the library's (0 included: "no heads" can win validation), cut
    at the model's 8 heads; a stderr that is a file gets plain progress lines (the help)."""
    out = tmp_path / "h.json"
    res = runner.invoke(app, ["calibrate", "--model", "tiny-llama", "--data", str(slice_file),
                              "--n-calib", "2", "--n-valid", "2", "--out", str(out)],
                        env={"CREDRANK_PROGRESS_INTERVAL": "0"})
    assert res.exit_code == 0, res.output
    assert "grid 0,1,2,4,8" in res.output
    assert re.search(r"head effects \(rows\): \d+/18 ", res.output), res.output
    hf = load_heads(out, model=ModelInfo("tiny-llama", "llama", 2, 4))
    assert hf.n_calib == 2 and hf.n_valid == 2 and len(hf.heads) in (0, 1, 2, 4, 8)
    assert not set(hf.calibration_ids) & set(hf.validation_ids)
    assert len(hf.ie) == 2 and len(hf.ie[0]) == 4
    assert hf.extra["grid"] == [0, 1, 2, 4, 8]
    assert [c["n_heads"] for c in hf.validation_curve] == [0, 1, 2, 4, 8]


def _flat(text: str) -> str:
    """``text`` on one line, the help panels' box lines dropped: a help text wrapped inside a
    panel reads as it was written, whatever width the help was rendered at (typer reads
    TERMINAL_WIDTH once, when the first test imports it)."""
    return " ".join(re.sub(r"[\u2500-\u257f]", " ", text).split())


def _no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a model fails the test: the refusals below come before it."""
    def loaded(name: str) -> LoadedModel:
        raise AssertionError(f"the model {name} was loaded")

    monkeypatch.setattr("credrank.cli.cram.load_cram_model", loaded)


def _calibrate(*args: str, **kw: object) -> object:
    return runner.invoke(app, ["calibrate", "--model", "tiny-llama", *args], **kw)


def test_calibrate_checks_out_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--out is checked before the data is read and the model loads (a missing folder was
    found only after the whole calibration)."""
    _no_model(monkeypatch)
    missing_data = str(tmp_path / "missing.jsonl")  # never read: --out fails first
    old = tmp_path / "old.json"
    old.write_text("{}", encoding="utf-8")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    cases = [(tmp_path / "nodir" / "h.json", [], "the folder .*nodir does not exist"),
             (tmp_path, ["--force"], "exists and is a folder, not a regular file"),
             (fifo, ["--force"], "exists and is a device, a pipe or a socket"),
             (old, [], "exists; give --force to overwrite")]
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        cases.append((locked / "h.json", [], "the folder .*locked is not writable"))
    for out, extra, message in cases:
        res = _calibrate("--data", missing_data, "--out", str(out), *extra)
        assert res.exit_code == 2, res.output
        assert re.search(f"error: --out {re.escape(str(out))}: {message}", _flat(res.output)), \
            res.output
    assert old.read_text(encoding="utf-8") == "{}"


@pytest.mark.parametrize("floor", ["1", "1.5", "-0.1", "nan"])
def test_floor_outside_0_1_refused_up_front(floor: str, tmp_path: Path, slice_file: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """--floor 1 makes every multiplier 1 (CrAM off; heads then ranked by rounding noise):
    calibrate and answer accept [0, 1) and say so before anything is read or loaded."""
    _no_model(monkeypatch)
    res = _calibrate("--data", str(slice_file), "--floor", floor, "--out",
                     str(tmp_path / "h.json"))
    assert res.exit_code == 2, res.output
    assert "error: --floor: expected a number in [0, 1)" in _flat(res.output)
    res = runner.invoke(app, ["answer", "q", "--index", str(tmp_path), "--heads",
                              str(tmp_path / "nope.json"), "--floor", floor])
    assert res.exit_code == 2, res.output
    assert "error: --floor: expected a number in [0, 1)" in _flat(res.output)
    assert "nope.json" not in res.output  # the heads file was not read


def test_answer_checks_options_before_reading_or_loading(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    _no_model(monkeypatch)
    for extra, message in (
            (["--max-new-tokens", "0"], "error: --max-new-tokens: expected an integer >= 1, "
                                        "got 0"),
            (["--floor", "2"], "error: --floor: expected a number in [0, 1)"),
            (["--model", "gpt-5"], "error: --model: unknown model 'gpt-5'")):
        res = runner.invoke(app, ["answer", "q", "--index", str(tmp_path), "--heads",
                                  str(tmp_path / "nope.json"), *extra])
        assert res.exit_code == 2, res.output
        assert message in _flat(res.output) and "nope.json" not in res.output


def test_calibrate_data_errors_name_the_option(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _no_model(monkeypatch)
    out = str(tmp_path / "h.json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n', encoding="utf-8")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    for data, message in ((tmp_path, f"--data {tmp_path}: expected a CrAM NQ JSONL file, "
                                     "got a folder"),
                          (tmp_path / "nope.jsonl", f"--data {tmp_path / 'nope.jsonl'}: no "
                                                    "such file"),
                          (bad, f"--data: {bad}, line 1: field 'question'"),
                          (binary, f"--data {binary}: not UTF-8 text")):
        res = _calibrate("--data", str(data), "--out", out)
        assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
        assert f"error: {message}" in _flat(res.output), res.output
    # the default is relative to the current folder, and the error says so
    monkeypatch.chdir(tmp_path)
    res = _calibrate("--out", out)
    assert res.exit_code == 2
    assert ("error: --data ../shared/data/cram/cram_nq_1000_reconstructed.jsonl: no such file "
            f"(the default, relative to the current folder {tmp_path})") in _flat(res.output)
    res = _calibrate("--data", "/dev/null", "--out", out)
    assert res.exit_code == 2
    assert "error: --data /dev/null: expected a CrAM NQ JSONL file, got a device" \
        in _flat(res.output)


def test_missing_torch_is_the_install_hint_for_every_model(tmp_path: Path, slice_file: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Without torch a tiny model gave a ModuleNotFoundError traceback (exit 1) where smollm2
    gave the install hint (exit 2): every model now gives the same one-line hint."""
    from credrank.generate.local import INSTALL_HINT

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as if absent
    for name in ("tiny-llama", "tiny-qwen2", "tiny-gpt2"):
        with pytest.raises(ModelUnavailableError) as got:
            load_cram_model(name)
        assert str(got.value) == f"{name}: the module 'torch' is missing; {INSTALL_HINT}"
    res = _calibrate("--data", str(slice_file), "--n-calib", "2", "--n-valid", "2", "--out",
                     str(tmp_path / "h.json"))
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert (f"error: tiny-llama: the module 'torch' is missing; {INSTALL_HINT}"
            in _flat(res.output))
    monkeypatch.delitem(sys.modules, "torch")

    def no_gguf(name: str) -> LoadedModel:  # an ImportError from deeper down, any model
        raise ModuleNotFoundError("No module named 'gguf'", name="gguf")

    monkeypatch.setattr("credrank.cli.cram.load_cram_model", no_gguf)
    res = _calibrate("--data", str(slice_file), "--n-calib", "2", "--n-valid", "2", "--out",
                     str(tmp_path / "h.json"))
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert (f"error: tiny-llama: the module 'gguf' is missing; {INSTALL_HINT}"
            in _flat(res.output))


def test_grid_values_over_the_model_heads_refused_before_calibrating(
        tmp_path: Path, slice_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--grid 100 on a model of 8 heads silently became 8; it is refused as soon as the
    model's shape is known, before any head effect is computed."""
    def never(*args: object, **kw: object) -> None:
        raise AssertionError("calibration ran")

    monkeypatch.setattr("credrank.cram.heads.head_effects", never)
    res = _calibrate("--data", str(slice_file), "--n-calib", "2", "--n-valid", "2", "--grid",
                     "0,4,100", "--out", str(tmp_path / "h.json"))
    assert res.exit_code == 2, res.output
    assert ("error: --grid: 100 is more than the model's 8 heads (2 layers × 4 heads); "
            "expected numbers of heads <= 8") in _flat(res.output)
    _no_model(monkeypatch)
    for grid, message in (("0", "expected at least one number of heads >= 1"),
                          ("1,x", "expected comma-separated integers"),
                          ("-1,2", "expected integers >= 0")):
        res = _calibrate("--data", str(slice_file), "--grid", grid, "--out",
                         str(tmp_path / "h.json"))
        assert res.exit_code == 2 and f"error: --grid: {message}" in _flat(res.output)


def test_fit_grid_counts_only_reweightable_heads(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from credrank.cli.cram import fit_grid

    assert fit_grid(None, 2, 4, 8) == [0, 1, 2, 4, 8]
    assert fit_grid(None, 30, 9, 270)[-1] == 256
    assert fit_grid([0, 3], 2, 4, 4) == [0, 3]
    with pytest.raises(typer.Exit):
        fit_grid([5], 2, 4, 4)
    assert ("--grid: 5 is more than the model's 4 heads (2 layers × 4 heads, 4 of them in "
            "full-attention layers)") in _flat(capsys.readouterr().err)


def test_calibrate_help_tells_the_truth() -> None:
    res = runner.invoke(app, ["calibrate", "--help"], env={"TERMINAL_WIDTH": "200"})
    assert res.exit_code == 0
    text = _flat(res.output)
    # progress: the help said "never ... when stderr is a file or a pipe", but a log gets
    # plain lines (test_calibrate_end_to_end)
    assert "never with --quiet" not in text
    assert "unless --quiet: bars in a terminal, a plain line every 30 s in a log or a pipe" \
        in text
    assert "N·(1 + L·H)" in text and "117 s and 195 s" in text  # the cost
    assert "relative to the current folder" in text
    assert "[default: (0,1,2,4,8,16,32,64,128,256, the values up to the model's heads)]" in text
    assert "[0, 1)" in text


# ------------------------------------------------------------------ bench


def test_bench_cram_lm_tiny(tiny: LoadedModel, slice_file: Path, tmp_path: Path) -> None:
    from credrank_bench.experiments.benches import BenchOptions, run_bench

    info = model_info(tiny.model, "tiny-llama")
    hf = _heads(info, "credrank-cram-qa-v1")
    result = bench_cram_lm(slice_file, tiny.model, tiny.tokenizer, heads_file=hf, limit=3,
                           model_name="tiny-llama", max_new_tokens=4)
    assert result.summary["questions"] == 3
    held = {"q0", "q1", "q2", "q3"}
    assert not held & {g["qid"] for g in result.details["generations"]}
    table = result.table("results")
    # removing the fake and the ideal scores both read the labels: references, not systems
    assert [r.system for r in table.rows if r.reads_labels] == [CLEAN, CRAM_IDEAL]
    for row in table.rows:
        for cell in row.metrics.values():
            assert cell.mean is not None and math.isfinite(cell.mean)
    assert set(result.details["flips"][CRAM_IDEAL]) == {"correct_to_wrong", "wrong_to_correct"}
    # the learned credibility model is fitted on the heads file's held-out questions only
    assert CRAM_LEARNED in [r.system for r in table.rows]
    learned = result.details["learned_credibility"]
    assert learned["fitted"] and learned["questions"] == 4 and learned["passages"] == 20
    for system in (CRAM_LABEL_FREE, CRAM_LEARNED):
        lowest = result.details["fake_lowest"][system]
        assert lowest["questions"] == 3 and 0.0 <= lowest["share"] <= 1.0
        assert lowest["wilson_95"][0] <= lowest["share"] <= lowest["wilson_95"][1]
        assert lowest["chance"] == pytest.approx(0.2)
    result.to_json()
    path = save_heads(tmp_path / "h.json", hf)
    via = run_bench("cram-nq", BenchOptions(slice_file, model="tiny-llama", heads=path,
                                            limit=1))
    assert via.summary["questions"] == 1
    with pytest.raises(ValueError, match="need --model"):
        run_bench("cram-nq", BenchOptions(slice_file, heads=path))
    with pytest.raises(ValueError, match="need --model"):
        run_bench("cram-nq", BenchOptions(slice_file, checkpoint=tmp_path / "c.jsonl"))
    with pytest.raises(ValueError, match="--checkpoint is only used by cram-nq"):
        run_bench("demo", BenchOptions(checkpoint=tmp_path / "c.jsonl"))


def test_bench_cram_lm_checkpoint_resumes(tiny: LoadedModel, slice_file: Path,
                                           tmp_path: Path) -> None:
    from credrank.evaluate.checkpoint import CheckpointError

    info = model_info(tiny.model, "tiny-llama")
    hf = _heads(info, "credrank-cram-qa-v1")
    kw = dict(heads_file=hf, model_name="tiny-llama", max_new_tokens=4)
    plain = bench_cram_lm(slice_file, tiny.model, tiny.tokenizer, limit=3, **kw)
    ckpt = tmp_path / "gen.jsonl"
    first = bench_cram_lm(slice_file, tiny.model, tiny.tokenizer, limit=2, checkpoint=ckpt, **kw)
    assert first.details["checkpoint"]["generated"] == 2
    assert len(ckpt.read_text(encoding="utf-8").splitlines()) == 3  # header + 2 questions
    # a larger limit extends the run: two questions reused, one generated
    resumed = bench_cram_lm(slice_file, tiny.model, tiny.tokenizer, limit=3, checkpoint=ckpt,
                            **kw)
    assert resumed.summary["reused_from_checkpoint"] == 2 and resumed.summary["generated"] == 1
    assert resumed.details["generations"] == plain.details["generations"]
    assert resumed.table("results").to_json() == plain.table("results").to_json()
    # a checkpoint written with other settings is refused, naming the field
    with pytest.raises(CheckpointError, match="max_new_tokens"):
        bench_cram_lm(slice_file, tiny.model, tiny.tokenizer, limit=3, checkpoint=ckpt,
                      heads_file=hf, model_name="tiny-llama", max_new_tokens=5)
    # a tampered item is an error naming its line and field
    lines = ckpt.read_text(encoding="utf-8").splitlines()
    item = json.loads(lines[2])
    item["texts"].pop(CLEAN)
    ckpt.write_text("\n".join([*lines[:2], json.dumps(item), *lines[3:]]) + "\n",
                    encoding="utf-8")
    with pytest.raises(CheckpointError, match="line 3: field 'texts'"):
        bench_cram_lm(slice_file, tiny.model, tiny.tokenizer, limit=3, checkpoint=ckpt, **kw)


def test_fake_lowest() -> None:
    assert fake_lowest([0.9, 0.1, 0.5], [False, True, False])
    assert not fake_lowest([0.1, 0.1, 0.5], [False, True, False])  # a tie does not single it out
    assert not fake_lowest([0.9, 0.3, 0.2], [False, True, False])
    with pytest.raises(ValueError, match="exactly one fake"):
        fake_lowest([0.9, 0.3], [True, True])
