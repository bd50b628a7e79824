"""``credrank cram calibrate`` and ``credrank cram answer``: CrAM with a white-box LM (35.5).

``calibrate`` selects the attention heads to reweight on CrAM NQ questions: for each
calibration question the prompt holds the 4 real passages and the fake, scored with the
*ideal* scores (fake 0, real 1 — the ``is_misinformation`` labels are read here, for
calibration only); heads are ranked by their indirect effect on the fake's wrong answer
(:mod:`credrank.cram.heads`) and their number is chosen on disjoint validation questions. The
result is a heads file (:mod:`credrank.cram.headsfile`).

``answer`` retrieves passages from a credrank index, scores them with one factor of the ranked
batch (``--signal``, no label) and answers with CrAM on the heads file's heads.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from credrank.cli.common import Bars, QuietOption, check_text_argument, err, fail, show_progress
from credrank.cram.heads import DEFAULT_GRID
from credrank.cram.models import MODEL_NAMES, LoadedModel, load_cram_model

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="CrAM: credibility-aware attention on a white-box LM")

#: the CrAM NQ file of ``../shared/data`` beside a source checkout, relative to the current
#: folder (pass --data elsewhere)
DEFAULT_DATA = Path("../shared/data/cram/cram_nq_1000_reconstructed.jsonl")
ModelOption = Annotated[str, typer.Option(help=" | ".join(MODEL_NAMES))]
#: the numbers of heads tried on validation unless --grid says otherwise: the library's
#: default (:data:`credrank.cram.heads.DEFAULT_GRID`; 0 = no heads, stock attention)
DEFAULT_GRID_TEXT = ",".join(str(n) for n in DEFAULT_GRID)


def _model(name: str) -> LoadedModel:
    """The ``--model``, or exit 2 with the reason (unknown name, not white-box, not installed:
    the same one-line install hint for every model)."""
    from credrank.cram.models import WhiteBoxError, missing_module

    try:
        return load_cram_model(name)
    except ImportError as exc:  # a module the model needs, whatever the model
        fail(str(missing_module(name, exc)))
    except (ValueError, WhiteBoxError, RuntimeError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(str(exc))


def check_floor(floor: float) -> None:
    """Exit 2 unless ``--floor`` is in ``[0, 1)``: 1 would make every multiplier 1 (CrAM
    off), so that heads would be chosen by rounding noise."""
    if not 0 <= floor < 1:  # 0: the paper's plain min-max (35.5); NaN fails too
        fail(f"--floor: expected a number in [0, 1) (0: the paper's plain min-max; 1 would "
             f"turn CrAM off), got {floor:g}")


def check_out(out: Path, force: bool) -> None:
    """Exit 2 unless the heads file ``--out`` can be written: no folder, device or pipe
    there (:func:`credrank.core.files.replaceable`), no file without ``--force``, and its
    folder exists and is writable — checked before any model is loaded."""
    import os

    from credrank.core.files import replaceable

    try:
        target = replaceable(out)
    except OSError as exc:
        fail(f"--out {out}: {exc.strerror or exc}")
    if target.exists() and not force:
        fail(f"--out {out}: exists; give --force to overwrite")
    folder = target.parent
    if not folder.is_dir():
        fail(f"--out {out}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        fail(f"--out {out}: the folder {folder} is not writable")


def parse_grid(text: str | None) -> list[int] | None:
    """``--grid`` as sorted distinct integers >= 0, at least one of them >= 1 (``None``:
    not given, the library's default)."""
    if text is None:
        return None
    try:
        grid = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        fail(f"--grid: expected comma-separated integers, got {text!r}")
    if not grid or grid[0] < 0:
        fail(f"--grid: expected integers >= 0, got {text!r}")
    if grid[-1] < 1:
        fail(f"--grid: expected at least one number of heads >= 1 (0 alone: no head is ever "
             f"reweighted), got {text!r}")
    return grid


def fit_grid(grid: list[int] | None, n_layers: int, n_heads: int, eligible: int
             ) -> list[int]:
    """The numbers of heads to try on a model of ``n_layers`` × ``n_heads`` of which
    ``eligible`` can be reweighted: ``--grid`` as given (exit 2 naming it when a value
    exceeds ``eligible``), or the default grid's values up to ``eligible``."""
    where = f"{n_layers} layers × {n_heads} heads"
    if eligible < n_layers * n_heads:
        where += f", {eligible} of them in full-attention layers"
    if grid is None:
        return [n for n in DEFAULT_GRID if n <= eligible]
    over = [n for n in grid if n > eligible]
    if over:
        fail(f"--grid: {', '.join(map(str, over))} {'is' if len(over) == 1 else 'are'} more "
             f"than the model's {eligible} heads ({where}); expected numbers of heads <= "
             f"{eligible}")
    return grid


def _data_path(data: Path) -> None:
    """Exit 2 naming ``--data`` unless it is a regular file; a relative path is read from the
    current folder (the default too), and the message says so."""
    import stat

    where = ""
    if not data.is_absolute():
        default = "the default, " if data == DEFAULT_DATA else ""
        where = f" ({default}relative to the current folder {Path.cwd()})"
    try:
        mode = data.stat().st_mode
    except FileNotFoundError:
        fail(f"--data {data}: no such file{where}")
    except OSError as exc:
        fail(f"--data {data}: {exc.strerror or exc}{where}")
    if stat.S_ISDIR(mode):
        fail(f"--data {data}: expected a CrAM NQ JSONL file, got a folder")
    if not stat.S_ISREG(mode):
        fail(f"--data {data}: expected a CrAM NQ JSONL file, got a device, a pipe or a socket")


def split_questions(n_usable: int, n_calib: int, n_valid: int, seed: int
                    ) -> tuple[list[int], list[int]]:
    """Disjoint calibration and validation positions: a seeded permutation
    (``numpy.random.default_rng(seed)``) of the usable questions, the first ``n_calib`` for
    calibration, the next ``n_valid`` for validation."""
    if n_calib < 1:
        raise ValueError(f"--n-calib {n_calib}: the calibration set is empty; expected >= 1")
    if n_valid < 1:
        raise ValueError(f"--n-valid {n_valid}: the validation set is empty; expected >= 1")
    if n_usable < n_calib + n_valid:
        raise ValueError(f"--n-calib {n_calib} + --n-valid {n_valid} exceed the {n_usable} "
                         "usable questions (a gold answer and exactly one fake)")
    perm = np.random.default_rng(seed).permutation(n_usable).tolist()
    return perm[:n_calib], perm[n_calib:n_calib + n_valid]


@app.command()
def calibrate(
    model: ModelOption,
    data: Annotated[Path, typer.Option(
        help="CrAM NQ JSONL (4 real passages + 1 fake); the default is relative to the "
             "current folder (a source checkout beside ../shared)")] = DEFAULT_DATA,
    n_calib: Annotated[int, typer.Option(help="calibration questions")] = 100,
    n_valid: Annotated[int, typer.Option(help="validation questions (choose the number "
                                               "of heads)")] = 100,
    out: Annotated[Path, typer.Option(help="the heads file to write (checked before the "
                                           "model loads)")] = Path("heads.json"),
    seed: Annotated[int, typer.Option(
        min=0, help="seed of the calibration/validation split")] = 0,
    floor: Annotated[float, typer.Option(help="multiplier floor ε in [0, 1) of the least "
                                               "credible passage (0: the paper's plain "
                                               "min-max)")] = 0.1,
    grid: Annotated[str | None, typer.Option(
        show_default=f"{DEFAULT_GRID_TEXT}, the values up to the model's heads",
        help="numbers of heads tried on validation, comma-separated, each at most the "
             "model's heads (layers × heads); 0 is stock attention, so it wins when no head "
             "count lowers P(wrong answer)")] = None,
    method: Annotated[str, typer.Option(
        help="exact: IE_h by one intervened row per (example, head), batched; attribution: "
             "first-order estimates, one forward and backward pass per example (for models "
             "whose exact search is too slow on the hardware at hand)")] = "exact",
    force: Annotated[bool, typer.Option("--force", help="overwrite --out")] = False,
    quiet: QuietOption = False,
) -> None:
    """Rank heads by indirect effect on CrAM NQ and choose how many to reweight.

    Cost: the exact method evaluates N·(1 + L·H) prompts for N calibration questions on a
    model of L layers × H heads (8 heads for the tiny models, 270 for smollm2), H per
    forward pass; attribution one forward and one backward pass per question; validation
    adds one prompt per validation question and grid value. CrAM NQ prompts are 2–3k tokens:
    on 2 CPU cores tiny-llama with 3 + 3 questions took 2–3 min (exact; 117 s and 195 s in
    two runs), and the exact search on smollm2 was not affordable there (docs/results.md
    calibrated it with attribution: 100 + 40 questions, 85 min on a shared machine).

    Progress (head-effect rows, then validation rows) goes to stderr unless --quiet: bars
    in a terminal, a plain line every 30 s in a log or a pipe."""
    from credrank.core.files import file_sha256
    from credrank.cram import heads as heads_mod
    from credrank.cram.generate import model_info
    from credrank.cram.headsfile import HeadsFile, save_heads
    from credrank.cram.models import check_white_box
    from credrank.cram.multipliers import CramInputError
    from credrank.cram.prompt import render_prompt
    from credrank.cram.questions import CramDataError, ideal_scores, read_cram_questions

    # every check of the options before the data is read and the model loads
    check_out(out, force)
    if model not in MODEL_NAMES:
        fail(f"--model: unknown model {model!r}; expected one of {', '.join(MODEL_NAMES)}")
    check_floor(floor)
    if method not in ("exact", "attribution"):
        fail(f"--method: expected exact or attribution, got {method!r}")
    asked = parse_grid(grid)
    _data_path(data)
    try:
        questions = read_cram_questions(data)
        data_sha256 = file_sha256(data)
    except CramDataError as exc:
        fail(f"--data: {exc}")
    except UnicodeDecodeError as exc:
        fail(f"--data {data}: not UTF-8 text (byte {exc.start}: {exc.reason})")
    except OSError as exc:
        fail(f"--data {data}: {exc.strerror or exc}")
    usable = [q for q in questions if q.answers and sum(q.fake) == 1]
    if not usable:
        fail(f"--data {data}: the calibration set is empty: no question with a gold answer and "
             f"exactly one fake ({len(questions)} records read)")
    try:
        calib_pos, valid_pos = split_questions(len(usable), n_calib, n_valid, seed)
    except ValueError as exc:
        fail(str(exc))
    lm = _model(model)
    info = model_info(lm.model, lm.name)
    box = check_white_box(lm.model)
    eligible = info.n_heads * sum(t == "full_attention" for t in box.layer_types)
    sizes = fit_grid(asked, info.n_layers, info.n_heads, eligible)

    special = [True]

    def examples(positions: list[int]) -> tuple[list[Any], str]:
        made, template = [], ""
        for pos in positions:
            q = usable[pos]
            rendered = render_prompt(lm.tokenizer, q.question, q.passages)
            template, special[0] = rendered.template, rendered.add_special_tokens
            # a plain prompt ends "Answer:", so the answer carries its leading space; a chat
            # prompt ends with the assistant header and the answer starts the turn
            lead = "" if rendered.chat else " "
            made.append(heads_mod.CalibrationExample(
                prompt=rendered.text, doc_char_spans=list(rendered.spans),
                doc_scores=ideal_scores(q), answer_wrong=lead + q.wrong_answer,
                answer_right=lead + q.answers[0]))
        return made, template

    try:
        calib, template = examples(calib_pos)
        valid, _ = examples(valid_pos)
    except CramInputError as exc:
        fail(str(exc))
    start = time.perf_counter()
    err.print(f"calibrating {info.name}: {len(calib)} calibration, {len(valid)} validation "
              f"questions, {eligible} heads, grid {','.join(map(str, sizes))}")
    try:
        with Bars(show_progress(quiet)) as bars:
            if method == "exact":
                effects = heads_mod.head_effects(
                    lm.model, lm.tokenizer, calib, floor=floor, add_special_tokens=special[0],
                    on_progress=bars.counter("head effects (rows)"))
            else:
                effects = heads_mod.head_attributions(
                    lm.model, lm.tokenizer, calib, floor=floor, add_special_tokens=special[0],
                    on_progress=bars.counter("head attributions (examples)"))
            ranked = heads_mod.rank_heads(effects)
            n_best, curve = heads_mod.choose_n_heads(
                lm.model, lm.tokenizer, ranked, valid, grid=sizes, floor=floor,
                rows_per_pass=info.n_heads, add_special_tokens=special[0],
                on_progress=bars.counter("validation: number of heads (rows)"))
    except ValueError as exc:  # HeadSelectionError, CramInputError
        fail(str(exc))
    seconds = time.perf_counter() - start
    ie_log = getattr(effects, "ie_log", None)
    heads_file = HeadsFile(
        model=info, prompt_template=template,
        heads=tuple((int(a), int(b)) for a, b in ranked[:n_best]),
        ie=np.asarray(effects.ie, dtype=float).tolist(),
        ie_log=None if ie_log is None else np.asarray(ie_log, dtype=float).tolist(),
        validation_curve=[{"n_heads": int(n), "mean_p_wrong": float(v)}
                          for n, v in sorted(dict(curve).items())],
        n_calib=len(calib), n_valid=len(valid), data=str(data),
        data_sha256=data_sha256, floor=float(floor), seed=seed,
        calibration_ids=tuple(usable[p].qid for p in calib_pos),
        validation_ids=tuple(usable[p].qid for p in valid_pos),
        extra={"grid": sizes, "method": method,
               "ranked": [list(map(int, h)) for h in ranked],
               "passes": getattr(effects, "passes", None),
               "fallback_rows": getattr(effects, "fallback_rows", None),
               "effects_seconds": getattr(effects, "seconds", None),
               "seconds": round(seconds, 2),
               "labels": "calibration and validation read the is_misinformation labels "
                         "(ideal scores: fake 0, real 1); evaluation must use other questions"})
    try:
        save_heads(out, heads_file)
    except (OSError, ValueError) as exc:  # checked up front: a full disk, a race
        fail(f"--out {out}: {exc}", code=1)
    err.print(f"{n_best} heads selected in {seconds:.1f} s; heads file written to {out}")
    print(json.dumps({"heads": [list(h) for h in heads_file.heads], "n_heads": n_best,
                      "seconds": round(seconds, 2), "out": str(out)}))


def _scores(batch: Any, signal: str) -> np.ndarray:
    if signal in ("retrieval_score", "score"):
        return np.asarray(getattr(batch, signal), dtype=np.float64)
    if signal not in batch.factors:
        have = ", ".join(["retrieval_score", "score", *batch.factors])
        raise ValueError(f"--signal {signal!r}: the ranked batch has no such factor; available: "
                         f"{have} (credibility needs --credibility-model, consensus "
                         "--consensus on the search)")
    return np.asarray(batch.factors[signal], dtype=np.float64)


@app.command()
def answer(
    question: Annotated[str, typer.Argument(help="the question")],
    index: Annotated[Path, typer.Option(help="the credrank index to retrieve from")],
    heads: Annotated[Path, typer.Option(help="heads file from `credrank cram calibrate`")],
    model: Annotated[str | None, typer.Option(
        help=f"{' | '.join(MODEL_NAMES)} (default: the heads file's model)")] = None,
    signal: Annotated[str, typer.Option(
        help="passage score: a factor of the ranked batch (prior, credibility, consensus, "
             "freshness, ...) or retrieval_score / score")] = "prior",
    top_k: Annotated[int, typer.Option(help="passages in the prompt")] = 4,
    priors: Annotated[str, typer.Option(help="search priors preset (as credrank search)")
                      ] = "current",
    consensus: Annotated[bool, typer.Option("--consensus", help="add the consensus factor")
                         ] = False,
    credibility_model: Annotated[Path | None, typer.Option(
        help="credibility model file (adds the factor credibility)")] = None,
    floor: Annotated[float | None, typer.Option(help="multiplier floor in [0, 1) (default: "
                                                      "the heads file's)")] = None,
    max_new_tokens: Annotated[int, typer.Option(help="generated tokens at most")] = 32,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output")] = False,
) -> None:
    """Retrieve, score the passages with --signal and answer with CrAM."""
    from credrank.cram.generate import cram_generate, model_info
    from credrank.cram.headsfile import HeadsFileError, check_model, check_template, load_heads
    from credrank.cram.multipliers import CramInputError
    from credrank.cram.prompt import render_prompt
    from credrank.searcher import Searcher

    check_text_argument("question", question)
    if top_k < 1:
        fail(f"--top-k: expected an integer >= 1, got {top_k}")
    if max_new_tokens < 1:
        fail(f"--max-new-tokens: expected an integer >= 1, got {max_new_tokens}")
    if floor is not None:
        check_floor(floor)
    if model is not None and model not in MODEL_NAMES:
        fail(f"--model: unknown model {model!r}; expected one of {', '.join(MODEL_NAMES)}")
    if not index.is_dir():
        fail(f"--index {index}: not a directory")
    try:
        hf = load_heads(heads)
    except HeadsFileError as exc:
        fail(str(exc))
    lm = _model(model or hf.model.name)
    try:
        check_model(hf, model_info(lm.model, lm.name), str(heads))
    except HeadsFileError as exc:
        fail(str(exc))
    try:
        searcher = Searcher.open(index)
        try:
            spec = Searcher.spec(top_k=top_k, priors=priors, consensus=consensus,
                                 credibility_model=credibility_model)
            batch = searcher.search(question, spec, text="full")  # the prompt's passages
        finally:
            searcher.store.close()
        if len(batch) == 0:
            fail(f"--index {index}: the search returned no passage")
        scores = _scores(batch, signal)
        texts = [str(t) if t is not None else "" for t in batch.column("text")]
        missing = [str(d) for d, t in zip(batch.doc_ids, texts, strict=True) if not t.strip()]
        if missing:
            fail(f"--index {index}: passages without text: {', '.join(missing[:5])}")
        rendered = render_prompt(lm.tokenizer, question, texts)
        check_template(hf, rendered.template, str(heads))
        text, report = cram_generate(lm.model, lm.tokenizer, rendered.text, rendered.spans,
                                     scores.tolist(), hf.heads,
                                     floor=hf.floor if floor is None else floor,
                                     max_new_tokens=max_new_tokens,
                                     add_special_tokens=rendered.add_special_tokens)
    except (ValueError, CramInputError, RuntimeError, OSError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(str(exc))
    mult = report.documents.values if report.documents else [1.0] * len(texts)
    passages: list[dict[str, Any]] = [
        {"rank": i + 1, "doc_id": str(batch.doc_ids[i]), signal: float(scores[i]),
         "multiplier": float(mult[i]), "text": texts[i]} for i in range(len(texts))]
    doc: dict[str, Any] = {"question": question, "answer": text, "model": lm.name, "signal": signal,
           "heads": [list(h) for h in hf.heads], "passages": passages,
           "report": report.to_json()}
    if as_json:
        print(json.dumps(doc, indent=2))
        return
    print(f"answer: {text}")
    print(f"model {lm.name}, {len(hf.heads)} CrAM heads, signal {signal}")
    for p in passages:
        print(f"  {p['rank']}. {p['doc_id']}  {signal}={p[signal]:.3f}  "
              f"multiplier={p['multiplier']:.3f}  {p['text'][:80]!r}")
    print(report.cram.summary())
    print(f"policy: {doc['report']['policy']}; {report.prompt_tokens} prompt tokens, "
          f"{report.new_tokens} new, {report.seconds:.2f} s")
