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
from credrank.cram.models import MODEL_NAMES, LoadedModel, load_cram_model

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="CrAM: credibility-aware attention on a white-box LM")

#: the CrAM NQ file of ``../shared/data`` beside a source checkout (pass --data elsewhere)
DEFAULT_DATA = Path("../shared/data/cram/cram_nq_1000_reconstructed.jsonl")
ModelOption = Annotated[str, typer.Option(help=" | ".join(MODEL_NAMES))]


def _model(name: str) -> LoadedModel:
    """The ``--model``, or exit 2 with the reason (unknown name, not white-box, not installed)."""
    from credrank.cram.models import WhiteBoxError

    try:
        return load_cram_model(name)
    except (ValueError, WhiteBoxError, RuntimeError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(str(exc))


def _grid(text: str) -> list[int]:
    try:
        grid = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        fail(f"--grid: expected comma-separated integers, got {text!r}")
    if not grid or grid[0] < 0:
        fail(f"--grid: expected integers >= 0, got {text!r}")
    return grid


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
        help="CrAM NQ JSONL (4 real passages + 1 fake); default: ../shared/data/cram/"
             "cram_nq_1000_reconstructed.jsonl")] = DEFAULT_DATA,
    n_calib: Annotated[int, typer.Option(help="calibration questions")] = 100,
    n_valid: Annotated[int, typer.Option(help="validation questions (choose the number "
                                               "of heads)")] = 100,
    out: Annotated[Path, typer.Option(help="the heads file to write")] = Path("heads.json"),
    seed: Annotated[int, typer.Option(
        min=0, help="seed of the calibration/validation split")] = 0,
    floor: Annotated[float, typer.Option(help="multiplier floor ε of the least credible "
                                               "passage")] = 0.1,
    grid: Annotated[str, typer.Option(help="numbers of heads tried on validation")
                    ] = "1,2,4,8,16,32",
    method: Annotated[str, typer.Option(
        help="exact: IE_h by one intervened row per (example, head), batched; attribution: "
             "first-order estimates, one forward and backward pass per example (for models "
             "whose exact search is too slow on the hardware at hand)")] = "exact",
    force: Annotated[bool, typer.Option("--force", help="overwrite --out")] = False,
    quiet: QuietOption = False,
) -> None:
    """Rank heads by indirect effect on CrAM NQ and choose how many to reweight.

    Progress (head-effect rows, then validation rows) is shown on stderr when it is a
    terminal (never with --quiet or when stderr is a file or a pipe)."""
    from credrank.core.files import file_sha256
    from credrank.cram.generate import model_info
    from credrank.cram.headsfile import HeadsFile, save_heads
    from credrank.cram.multipliers import CramInputError
    from credrank.cram.prompt import render_prompt
    from credrank.cram.questions import CramDataError, ideal_scores, read_cram_questions

    if out.exists() and not force:
        fail(f"--out {out}: exists; give --force to overwrite")
    if model not in MODEL_NAMES:
        fail(f"--model: unknown model {model!r}; expected one of {', '.join(MODEL_NAMES)}")
    if not 0 <= floor <= 1:  # 0: the paper's plain min-max (35.5)
        fail(f"--floor: expected a number in [0, 1], got {floor}")
    if method not in ("exact", "attribution"):
        fail(f"--method: expected exact or attribution, got {method!r}")
    sizes = _grid(grid)
    try:
        questions = read_cram_questions(data)
    except (CramDataError, OSError) as exc:
        fail(str(exc))
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
    try:
        from credrank.cram import heads as heads_mod
    except ImportError as exc:
        fail(f"credrank.cram.heads is not available ({exc}); calibration needs it")

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
    limit = info.n_layers * info.n_heads
    sizes = [n for n in sizes if n <= limit] or [limit]
    start = time.perf_counter()
    err.print(f"calibrating {info.name}: {len(calib)} calibration, {len(valid)} validation "
              f"questions, {limit} heads")
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
        data_sha256=file_sha256(data), floor=float(floor), seed=seed,
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
    except (OSError, ValueError) as exc:
        fail(f"--out {out}: {exc}")
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
    floor: Annotated[float | None, typer.Option(help="multiplier floor (default: the heads "
                                                      "file's)")] = None,
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
