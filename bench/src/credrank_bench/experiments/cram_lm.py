"""CrAM with a real language model on CrAM NQ: ``credrank bench cram-nq --model NAME``.

Per question of the CrAM NQ JSONL (4 real Wikipedia passages and 1 GPT-written fake asserting
``wrong_answer``), greedy generation (:mod:`credrank.cram.generate`) under five conditions:

* ``no context`` — the question alone;
* ``4 clean passages`` — the real passages only (choosing them reads the labels:
  ``reads_labels=True``, a reference);
* ``4 + fake (naive)`` — all five passages, stock attention (the baseline of the table);
* ``CrAM, label-free scores`` — all five, CrAM on the heads file's heads, passage scores from
  :func:`pool_agreement`: each passage's mean cosine similarity to the *other* passages of its
  pool (hashing embedder, no model, no label: a passage that disagrees with the rest of the
  pool is down-weighted); ``reads_labels=False``;
* ``CrAM, learned credibility`` — all five, CrAM with each passage's ``P(credible)`` from the
  product's page-credibility model (:mod:`credrank.credibility`: cue and hashing-embedding
  features, logistic regression, configuration chosen by grouped cross-validation) fitted on
  the passages of the heads file's calibration and validation questions (whose labels the
  calibration already read) and applied to the evaluation questions, which it never saw:
  ``reads_labels=False`` at evaluation time. Left out, with a note, when the heads file lists
  no such questions or they hold one class only;
* ``CrAM, ideal scores`` — all five, CrAM with fake = 0, real = 1: it reads the
  ``is_misinformation`` labels (``reads_labels=True``, a reference, never a system).

Passages keep the file's order (the fake is often first). The four conditions over the full
prompt run as one batch (:func:`~credrank.cram.generate.cram_generate_variants`: same tokens,
per-row multipliers and heads). Measures per question:
``generator EM`` (a gold answer is a substring of the normalised generation,
:func:`~credrank.evaluate.answers.cag_exact_match`), ``says wrong answer`` (the same test
against ``wrong_answer``) and the paired flips against the naive run, counted separately:
``flip correct→wrong`` (naive correct, this condition wrong) and ``flip wrong→correct``. Every
cell has its bootstrap interval over questions (:func:`compare_systems`); the flip counts are
also in ``details["flips"]``.

How well a label-free score singles out the fake is measured on its own
(:func:`fake_lowest`, ``details["fake_lowest"]``): the share of evaluation questions whose fake
passage gets the strictly lowest score of its pool (a tie at the minimum does not count), with
a Wilson interval, next to the chance level ``1 / passages``.

Calibration and evaluation are disjoint: the questions listed in the heads file
(``calibration_ids``, ``validation_ids``) are excluded before the first ``limit`` questions
are taken (file order).
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from credrank.cram.questions import CramQuestion, ideal_scores, read_cram_questions
from credrank.evaluate.answers import GENERATOR_EM, cag_exact_match
from credrank.evaluate.checkpoint import Checkpoint, CheckpointError
from credrank.evaluate.experiment import System, compare_systems
from credrank.evaluate.metrics import register_measure
from credrank.evaluate.result import BenchResult
from credrank.evaluate.stats import wilson
from credrank.evaluate.tables import Column

SAYS_WRONG = "says wrong answer"
FLIP_TO_WRONG = "flip correct→wrong"
FLIP_TO_RIGHT = "flip wrong→correct"
register_measure(SAYS_WRONG, re.escape(SAYS_WRONG), "lower",
                 "share of questions whose generation contains the fake's wrong answer")
register_measure(FLIP_TO_WRONG, re.escape(FLIP_TO_WRONG), "lower",
                 "share of questions answered correctly by the naive run and wrongly here")
register_measure(FLIP_TO_RIGHT, re.escape(FLIP_TO_RIGHT), "higher",
                 "share of questions answered wrongly by the naive run and correctly here")

NO_CONTEXT = "no context"
CLEAN = "4 clean passages"
NAIVE = "4 + fake (naive)"
CRAM_LABEL_FREE = "CrAM, label-free scores (pool agreement)"
CRAM_LEARNED = "CrAM, learned credibility"
CRAM_IDEAL = "CrAM, ideal scores (reads labels)"

#: ``--model`` names: the real SmolLM2 and tiny random models for tests
def pool_agreement(passages: Sequence[str]) -> list[float]:
    """Label-free passage scores: each passage's mean cosine similarity (hashing embedder) to
    the other passages of the same pool (one passage: 0)."""
    from credrank.index.embed import get_embedder

    vecs = np.asarray(get_embedder("hashing").embed(list(passages)), dtype=np.float64)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs / np.where(norms > 0, norms, 1.0)
    sims = vecs @ vecs.T
    n = len(passages)
    if n < 2:
        return [0.0] * n
    return [float((sims[i].sum() - sims[i, i]) / (n - 1)) for i in range(n)]


def fake_lowest(scores: Sequence[float], fake: Sequence[bool]) -> bool:
    """True when the (single) fake passage has the strictly lowest score of its pool; a tie at
    the minimum with a real passage is False (declared: a tie does not single it out)."""
    values = np.asarray(scores, dtype=np.float64)
    flags = np.asarray(fake, dtype=bool)
    if values.shape != flags.shape or values.ndim != 1 or flags.sum() != 1:
        raise ValueError(f"fake_lowest: expected one score per passage and exactly one fake, "
                         f"got {values.size} scores and {int(flags.sum())} fakes")
    lowest = values.min()
    return bool(values[flags][0] == lowest and int((values == lowest).sum()) == 1)


def credibility_scorer(train: Sequence[CramQuestion], seed: int = 0,
                       shown: Sequence[CramQuestion] = ()
                       ) -> tuple[Callable[[Sequence[str]], list[float]] | None, dict[str, Any]]:
    """The page-credibility model fitted on ``train``'s passages (credible = not fake, one
    group per question, hashing embedder), as ``passages → P(credible)``; ``(None, reason)``
    when it cannot be fitted (no question, or one class only). No training passage has the
    text of a passage an evaluated question (``shown``) is shown
    (:func:`~credrank_bench.experiments.label_free.text_key`: held out by content, as the
    label-free split; counted in ``held_out``)."""
    from credrank.credibility.features import CredibilityFeaturizer
    from credrank.credibility.model import CredibilityExample
    from credrank.index.embed import get_embedder
    from credrank_bench.experiments.label_free import fit_credibility, text_key, text_keys

    evaluated = text_keys(t for q in shown for t in q.passages)
    rows = [(q, i, text, f) for q in train
            for i, (text, f) in enumerate(zip(q.passages, q.fake, strict=True))]
    kept = [r for r in rows if text_key(r[2]) not in evaluated]
    examples = [CredibilityExample(f"{q.qid}#{i}", text, None, {q.qid: int(not f)})
                for q, i, text, f in kept]
    if len({q.qid for q in train}) < 2:
        return None, {"fitted": False, "reason": "fewer than 2 labelled questions to fit on"}
    fitted = fit_credibility(examples, CredibilityFeaturizer(get_embedder("hashing")), seed)
    if fitted is None:
        return None, {"fitted": False, "reason": "the training passages hold one class only"}
    model = fitted.model

    def score(passages: Sequence[str]) -> list[float]:
        return [float(v) for v in model.predict(list(passages), [None] * len(passages))]

    return score, {"fitted": True, "questions": len(train), "passages": len(examples),
                   "held_out": len(rows) - len(kept), **fitted.choice}


def _generate_runs(model: Any, tokenizer: Any, runs: dict[str, Any], full: Any, floor: float,
                   max_new_tokens: int) -> tuple[dict[str, str], int]:
    """Greedy generations of one question's conditions and their fallback-row count: the
    conditions over the full prompt differ only in multipliers and heads, so they run as one
    batch; the others (other prompts) one call each."""
    from credrank.cram.generate import cram_generate, cram_generate_variants

    texts: dict[str, str] = {}
    fallback_rows = 0
    shared = [system for system, run in runs.items() if run[0] is full]
    for system, (rendered, spans, scores, hs) in runs.items():
        if system in shared:
            continue
        text, report = cram_generate(model, tokenizer, rendered.text, spans, scores, hs,
                                     floor=floor, max_new_tokens=max_new_tokens,
                                     add_special_tokens=rendered.add_special_tokens)
        fallback_rows += report.cram.fallback_rows
        texts[system] = text
    variants = [(runs[system][2], runs[system][3]) for system in shared]
    outputs = cram_generate_variants(model, tokenizer, full.text, full.spans, variants,
                                     floor=floor, max_new_tokens=max_new_tokens,
                                     add_special_tokens=full.add_special_tokens)
    fallback_rows += outputs[0][1].fallback_rows
    texts.update({system: text for system, (text, _) in zip(shared, outputs, strict=True)})
    return texts, fallback_rows


def _checkpointed(ckpt: Checkpoint, qid: str, systems: list[str]) -> tuple[dict[str, str], int]:
    """One question's generations read back from the checkpoint, checked field by field."""
    item = ckpt.done[qid]
    texts = item.get("texts")
    if not isinstance(texts, dict) or sorted(texts) != sorted(systems) or \
            not all(isinstance(t, str) for t in texts.values()):
        got = sorted(texts) if isinstance(texts, dict) else type(texts).__name__
        raise CheckpointError(f"{ckpt.where(qid)}: field 'texts': expected one string per "
                              f"condition {systems}, got {got}")
    fallbacks = item.get("fallback_rows")
    if isinstance(fallbacks, bool) or not isinstance(fallbacks, int) or fallbacks < 0:
        raise CheckpointError(f"{ckpt.where(qid)}: field 'fallback_rows': expected an integer "
                              f">= 0, got {fallbacks!r}")
    return dict(texts), fallbacks


def bench_cram_lm(path: str | Path, model: Any, tokenizer: Any, *, heads_file: Any,
                  limit: int | None = None, seed: int = 0, model_name: str = "",
                  max_new_tokens: int = 24,
                  progress: Callable[[int, int], None] | None = None,
                  checkpoint: str | Path | None = None) -> BenchResult:
    """The five conditions of the module docstring on the first ``limit`` evaluation questions
    of ``path`` (``heads_file``: a :class:`~credrank.cram.headsfile.HeadsFile`, already checked
    against ``model``).

    ``checkpoint``: a JSONL file (:mod:`credrank.evaluate.checkpoint`) that receives each
    question's generations as soon as they are done; a rerun with the same file reuses them and
    generates only the questions it lacks (a larger ``limit`` extends a run). The file is tied
    to the model, heads, floor, decoding length, prompt template, data file hash and the
    conditions run; other settings are refused."""
    from credrank.core.files import file_sha256
    from credrank.cram.generate import model_info
    from credrank.cram.headsfile import check_model, check_template
    from credrank.cram.prompt import render_prompt

    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise ValueError(f"--limit: expected an integer >= 1, got {limit!r}")
    info = model_info(model, model_name or heads_file.model.name)
    check_model(heads_file, info)
    questions = read_cram_questions(path)
    held = set(heads_file.calibration_ids) | set(heads_file.validation_ids)
    pool = [q for q in questions if q.qid not in held and q.answers and any(q.fake)
            and not all(q.fake)]
    chosen = pool[:limit] if limit is not None else pool
    if not chosen:
        raise ValueError(f"{path}: no evaluation question left ({len(questions)} read, "
                         f"{len(held)} held out by the heads file)")
    heads = list(heads_file.heads)
    floor = heads_file.floor
    train = [q for q in questions if q.qid in held and q.answers and any(q.fake)]
    learned, learned_info = credibility_scorer(train, seed, shown=chosen)
    lowest: dict[str, list[bool]] = {CRAM_LABEL_FREE: [], CRAM_LEARNED: []}
    names = (NO_CONTEXT, CLEAN, NAIVE, CRAM_LABEL_FREE, CRAM_LEARNED, CRAM_IDEAL)
    em: dict[str, dict[str, float]] = {s: {} for s in names
                                       if s != CRAM_LEARNED or learned is not None}
    wrong: dict[str, dict[str, float]] = {s: {} for s in em}
    generations: list[dict[str, Any]] = []
    fallback_rows = 0
    start = time.perf_counter()
    template_checked = False
    ckpt: Checkpoint | None = None
    reused = 0
    for i, q in enumerate(chosen):
        full = render_prompt(tokenizer, q.question, q.passages)
        if not template_checked:
            check_template(heads_file, full.template)
            template_checked = True
            if checkpoint is not None:
                ckpt = Checkpoint.open(checkpoint, "cram-nq-lm", {
                    "model": info.name, "heads": [list(h) for h in heads], "floor": floor,
                    "max_new_tokens": max_new_tokens, "prompt_template": full.template,
                    "data_sha256": file_sha256(path), "systems": list(em), "seed": seed,
                    # the learned condition is fitted on these questions
                    "held_out_sha256": hashlib.sha256(
                        "\n".join(sorted(held)).encode("utf-8")).hexdigest()})
        clean_passages = [p for p, f in zip(q.passages, q.fake, strict=True) if not f]
        none = render_prompt(tokenizer, q.question, [])
        clean = render_prompt(tokenizer, q.question, clean_passages)
        agreement = pool_agreement(q.passages)
        runs: dict[str, tuple[Any, Sequence[tuple[int, int]], Sequence[float],
                              Sequence[tuple[int, int]]]] = {
            NO_CONTEXT: (none, (), (), ()),
            CLEAN: (clean, clean.spans, [1.0] * len(clean.spans), ()),
            NAIVE: (full, full.spans, [1.0] * len(full.spans), ()),
            CRAM_LABEL_FREE: (full, full.spans, agreement, heads),
        }
        single_fake = sum(q.fake) == 1
        if single_fake:
            lowest[CRAM_LABEL_FREE].append(fake_lowest(agreement, q.fake))
        if learned is not None:
            credibility = learned(q.passages)
            runs[CRAM_LEARNED] = (full, full.spans, credibility, heads)
            if single_fake:
                lowest[CRAM_LEARNED].append(fake_lowest(credibility, q.fake))
        runs[CRAM_IDEAL] = (full, full.spans, ideal_scores(q), heads)
        row: dict[str, Any] = {"qid": q.qid}
        if ckpt is not None and q.qid in ckpt.done:
            texts, fallbacks = _checkpointed(ckpt, q.qid, list(runs))
            reused += 1
        else:
            texts, fallbacks = _generate_runs(model, tokenizer, runs, full, floor,
                                              max_new_tokens)
            if ckpt is not None:
                ckpt.append({"id": q.qid, "texts": texts, "fallback_rows": fallbacks})
        fallback_rows += fallbacks
        for system in runs:
            text = texts[system]
            em[system][q.qid] = float(cag_exact_match(text, list(q.answers)))
            wrong[system][q.qid] = float(cag_exact_match(text, [q.wrong_answer]))
            row[system] = text
        generations.append(row)
        if progress is not None:
            progress(i + 1, len(chosen))
    seconds = time.perf_counter() - start
    generated = len(chosen) - reused
    lowest_summary: dict[str, dict[str, Any]] = {}
    for system, hits in lowest.items():
        if system not in em or not hits:
            continue
        lo, hi = wilson(int(sum(hits)), len(hits))
        lowest_summary[system] = {"share": sum(hits) / len(hits), "questions": len(hits),
                                  "wilson_95": [lo, hi],
                                  "chance": 1.0 / len(chosen[0].passages)}
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    flips: dict[str, dict[str, int]] = {}
    for system in em:
        to_wrong = {k: float(em[NAIVE][k] == 1.0 and v == 0.0) for k, v in em[system].items()}
        to_right = {k: float(em[NAIVE][k] == 0.0 and v == 1.0) for k, v in em[system].items()}
        per_query[system] = {GENERATOR_EM: em[system], SAYS_WRONG: wrong[system],
                             FLIP_TO_WRONG: to_wrong, FLIP_TO_RIGHT: to_right}
        flips[system] = {"correct_to_wrong": int(sum(to_wrong.values())),
                         "wrong_to_correct": int(sum(to_right.values()))}
    label_note = ("pool agreement: mean cosine similarity (hashing embedder) of a passage to "
                  "the other passages of its pool; no label read")
    systems = {
        NO_CONTEXT: System(None, False, ("the question alone",)),
        CLEAN: System(None, True, ("the four real passages only: removing the fake reads the "
                                   "is_misinformation labels (a reference, not a system)",)),
        NAIVE: System(None, False, ("all five passages, stock attention",)),
        CRAM_LABEL_FREE: System(None, False, (label_note,), {"n_heads": len(heads)}),
        CRAM_IDEAL: System(None, True, ("fake 0, real 1 (is_misinformation labels): a "
                                        "reference",), {"n_heads": len(heads)}),
    }
    learned_note = (f"learned credibility: fitted on the {len(train)} calibration/validation "
                    "questions of the heads file (their labels), applied to unseen questions")
    if learned is not None:
        systems[CRAM_LEARNED] = System(None, False, (learned_note,), {"n_heads": len(heads)})
    else:
        learned_note = f"learned credibility left out: {learned_info['reason']}"
    columns = [Column.of(m) for m in (GENERATOR_EM, SAYS_WRONG, FLIP_TO_WRONG, FLIP_TO_RIGHT)]
    notes = [
        f"model {info.name} ({info.family}, {info.n_layers} layers × {info.n_heads} heads), "
        f"greedy, at most {max_new_tokens} new tokens; {len(heads)} CrAM heads from the heads "
        f"file, floor {floor:g}",
        f"{len(chosen)} questions in file order after excluding {len(held)} calibration / "
        "validation questions of the heads file (disjoint)",
        "EM: a gold answer is a substring of the normalised generation (CAG exact match); "
        "flips are paired against the naive run, correct→wrong and wrong→correct separately",
        "passages in file order (the fake is often first); prompt template "
        f"{full.template}",
        label_note,
        learned_note,
        *(f"{system}: the fake gets the strictly lowest score in {v['share']:.1%} of "
          f"{v['questions']} questions (95% Wilson {v['wilson_95'][0]:.1%}–"
          f"{v['wilson_95'][1]:.1%}; chance {v['chance']:.0%})"
          for system, v in lowest_summary.items()),
    ]
    experiment = compare_systems(per_query, systems, columns, key="results",
                                 title="CrAM on CrAM NQ (generator EM)", baseline=NAIVE,
                                 notes=notes, seed=seed)
    result = BenchResult("cram-nq", str(path),
                         {"model": info.name, "heads": len(heads), "floor": floor,
                          "limit": limit, "seed": seed, "max_new_tokens": max_new_tokens},
                         {"questions": len(chosen), "held_out": len(held),
                          "generated": generated, "reused_from_checkpoint": reused,
                          "seconds": round(seconds, 1),
                          # a declared policy: 0 when every question came from the checkpoint
                          "seconds_per_generated_question":
                              round(seconds / generated, 2) if generated else 0.0},
                         notes)
    result.add_experiment(experiment)
    result.details["flips"] = flips
    result.details["fallback_rows"] = fallback_rows
    result.details["learned_credibility"] = learned_info
    result.details["fake_lowest"] = lowest_summary
    result.details["generations"] = generations
    if ckpt is not None:
        result.details["checkpoint"] = {"path": str(ckpt.path), "reused": reused,
                                        "generated": generated,
                                        "discarded_truncated_line": ckpt.discarded_tail}
    result.details["heads"] = [list(h) for h in heads]
    assert all(math.isfinite(v) for s in em.values() for v in s.values())
    return result
