"""``credrank bench stress-cram | stress-news | stress-poisonedrag``: contamination stress tests
(chapter 35.2, "One bad document among many good ones").

The chapter's arithmetic (:func:`contamination_loss`): a drop from 82% to 62%–52% correct on
1,000 questions is 200–300 fewer correct answers *net*; only when no initially incorrect answer
improves is that 200–300 correct→incorrect flips, 24.390244%–36.585366% of the initially
correct. The aggregate rates do not determine the flips; paired outputs do
(:func:`paired_flips`). This bench measures them.

**Design.** For every evaluated question the *clean pool* is its ``fetch_k`` nearest clean
documents (exact cosine over the whole clean corpus: every document that is not a contaminant
of any question). The *contaminated pool* is the same list with ``count`` contaminants of that
question added (:func:`inject`; nothing clean is removed) at a controlled ``position``:

* ``first`` / ``middle`` / ``last``: the contaminants occupy consecutive slots of the top
  ``top_k`` context of the candidate list — ranks 1..c, the centred ranks
  ``(k − c)//2 + 1 ..``, or ranks ``k − c + 1 .. k``. Each contaminant takes the retrieval
  score of the clean document it displaces (ties keep list order: sorts are stable), so
  similarity only ranks it exactly at that slot and the generator reads it there; every other
  system reranks the same list. This is a controlled stress: the contaminant's own cosine is
  replaced.
* ``natural``: the contaminants keep their own cosine (the list is sorted by it), i.e. how often
  they enter the top k by themselves.

Contaminants are *correlated* when ``count > 1``: several texts for the same false claim of one
question (PoisonedRAG: up to 5 adversarial texts per target; NewsPolluted: the 3 LLM-written
fakes of a question, which assert the same wrong story in different styles). CrAM NQ holds one
fake per question and no paraphrase of it, so its only count is 1.

**Systems** (every one reranks the same pools and keeps ``top_k``): similarity only (the
baseline); answer consensus with the three copy-collapse rules of
:mod:`credrank_bench.experiments.poisoning` (dependence-aware agreement: near-duplicates count as
one voice); the learned credibility prior (:mod:`credrank_bench.experiments.label_free`'s model,
fitted on development questions disjoint from the evaluated ones, and held out by content: no
training row's normalised text, :func:`~credrank_bench.experiments.label_free.text_key`, is
that of a document an evaluated question is shown, its clean pool or its contaminants) alone
and × consensus; on CrAM the
GPT truthfulness prior shipped with the data; the label-free planted-evidence defence
(:mod:`credrank_bench.experiments.defences`, its default combination); and the reference that
removes the contaminants by their label (``reads_labels`` true: an upper bound, not a result).
A caller may add pipeline specs as rows (``bench_stress(pipelines=…)``: the audit's audited
pipeline, :mod:`credrank.audit.robustness`) and run only some rows (``rows=…``, the baseline
always included).

**Measures** per question (each table: one position and count; mean with a 95% percentile
bootstrap over questions, seeded; Δ paired with similarity only in the same condition):
``adversarial-hit@1`` / ``@k`` (a contaminant in the system's top 1 / top k),
``correct-clean`` / ``correct-contaminated`` (the generator's answer over the system's top k
contains a gold answer and no wrong answer, clean resp. contaminated pool: CrAM's fakes
often name the gold answer while asserting the wrong one, so containment alone would count
reading a fake as correct), ``flip-correct-to-incorrect`` and
``flip-incorrect-to-correct`` (the paired outcomes, counted separately), and
``misled-contaminated`` (the answer contains the contaminant's wrong answer). The table
``flips`` lists every system and condition with flip counts and Wilson 95% intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from credrank.combine import Combine
from credrank.consensus.duplicates import JACCARD
from credrank.consensus.readers import extractive_answers
from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.pipeline import FunctionStage, Pipeline
from credrank.core.progress import Counter, OnProgress, one_step, step
from credrank.core.validation import check_int
from credrank.credibility import CredibilityFeaturizer
from credrank.evaluate.answers import squad_normalize
from credrank.evaluate.experiment import PerQuery, System, compare_systems
from credrank.evaluate.metrics import ranked_docs, register_measure, run_from_batches
from credrank.evaluate.result import BenchResult
from credrank.evaluate.stats import wilson
from credrank.evaluate.tables import Cell, Column, ResultTable, Row
from credrank.generate.llm import ExtractiveReader, Generator, build_prompt
from credrank.pipeline.spec import PipelineSpec
from credrank.select.topk import TopK
from credrank.stages.consensus import AnswerConsensus
from credrank.stages.credibility import LearnedCredibilityPrior
from credrank_bench.datasets import (
    EvalSet,
    contains_answer,
    load_dataset,
    poisoned_corpus,
    read_cram_nq,
    read_poisonedrag,
)
from credrank_bench.experiments.bench import (
    BASELINE,
    GPT_SYSTEM,
    GPT_TRUTH,
    baseline_system,
    bench_settings,
    gpt_prior_system,
    prepare,
    require_usable,
    search_spec,
    signal_count,
)
from credrank_bench.experiments.defences import DEFAULT_ROW, defence_systems
from credrank_bench.experiments.label_free import (
    CREDIBILITY_FLOOR,
    SET_NAMES,
    credibility_examples,
    fake_pair_duplicates,
    fit_credibility,
    gold_answers,
    leaked_documents,
    memoized,
    reading_with,
    split_questions,
    text_key,
    text_keys,
    wrong_answers,
)
from credrank_bench.experiments.machine_text_rows import MachineTextOption, machine_text_systems
from credrank_bench.experiments.poisoning import CONSENSUS_COLLAPSE, poison_copies

T = TypeVar("T")

#: the sources of the stress benches
SOURCES = ("cram", "newspolluted", "poisonedrag")
#: controlled positions (see the module docstring); ``natural`` keeps the contaminant's cosine
POSITIONS = ("first", "middle", "last", "natural")
DEFAULT_POSITIONS = {"cram": ("first", "middle", "last"),
                     "newspolluted": ("first", "middle", "last"),
                     "poisonedrag": ("natural", "first", "middle", "last")}
#: PoisonedRAG's default counts (every count from 1 to 5 is allowed)
POISONEDRAG_COUNTS = (1, 3, 5)
N_RESAMPLES = 10_000
MAX_TOKENS = 64
ORACLE = "reference: contaminants removed by label (reads labels)"
LEARNED = "learned credibility"
LEARNED_CONSENSUS = "learned credibility × consensus (text copy collapse)"

ADV_HIT = "adversarial-hit"
CORRECT_CLEAN = "correct-clean"
CORRECT_CONTAMINATED = "correct-contaminated"
FLIP_C2I = "flip-correct-to-incorrect"
FLIP_I2C = "flip-incorrect-to-correct"
MISLED = "misled-contaminated"

for _family, _pattern, _direction, _text in (
    (f"{ADV_HIT}@k", rf"{ADV_HIT}@\d+", "lower",
     "share of questions with at least one injected contaminant in the system's top k"),
    (CORRECT_CLEAN, CORRECT_CLEAN, "higher",
     "share of questions whose generator answer over the clean pool's top k is correct"),
    (CORRECT_CONTAMINATED, CORRECT_CONTAMINATED, "higher",
     "share of questions whose generator answer over the contaminated pool's top k is correct"),
    (FLIP_C2I, FLIP_C2I, "lower",
     "share of questions correct on the clean pool and incorrect on the contaminated pool"),
    (FLIP_I2C, FLIP_I2C, "higher",
     "share of questions incorrect on the clean pool and correct on the contaminated pool"),
    (MISLED, MISLED, "lower",
     "share of questions whose answer over the contaminated pool contains the wrong answer"),
):
    register_measure(_family, _pattern, _direction, _text)  # type: ignore[arg-type]


# -- pure functions ---------------------------------------------------------------------------

def contamination_loss(n: int, acc_before: float, acc_after: float) -> dict[str, float]:
    """The chapter's contamination arithmetic (35.2, "Contamination experiment").

    ``n`` questions answered with accuracy ``acc_before`` on clean evidence and ``acc_after``
    with a contaminant: ``fewer_correct = n · (acc_before − acc_after)`` in *net*. Only if no
    initially incorrect answer improves does that equal the correct→incorrect flips; then they
    are ``share_of_questions = acc_before − acc_after`` of all questions and
    ``share_of_initially_correct = fewer_correct / (n · acc_before)`` of the initially correct.
    35.2's example: 82% → 62% and 52% on 1,000 questions are 200 and 300 fewer correct,
    ≈ 24.390244% and 36.585366% of the 820 initially correct. With improvements there are more
    losses for the same net decline: the aggregate rates do not determine the flips
    (:func:`paired_flips` counts them from paired outputs).

    ``ValueError`` unless ``n ≥ 1``, both accuracies are in [0, 1] and ``acc_after ≤
    acc_before`` (the rule describes a loss), and ``acc_before > 0``.
    """
    n = check_int("n", n, 1)
    for name, value in (("acc_before", acc_before), ("acc_after", acc_after)):
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"contamination_loss: {name} expected a share in [0, 1]; got "
                             f"{value!r}")
    if acc_after > acc_before:
        raise ValueError(f"contamination_loss: acc_after {acc_after!r} exceeds acc_before "
                         f"{acc_before!r}; the rule describes a loss")
    if acc_before == 0:
        raise ValueError("contamination_loss: acc_before is 0; no answer was correct to lose")
    before = round(n * float(acc_before), 9)
    after = round(n * float(acc_after), 9)
    fewer = round(before - after, 9)
    return {"n": n, "correct_before": before, "correct_after": after, "fewer_correct": fewer,
            "share_of_questions": fewer / n, "share_of_initially_correct": fewer / before}


def _slot(position: str, count: int, length: int, context: int | None) -> int:
    k = length + count if context is None else min(context, length + count)
    if position == "first":
        return 0
    if position == "middle":
        return max(k - count, 0) // 2
    return max(k - count, 0)


def inject(pool: Sequence[T], contaminants: Sequence[T], position: str, count: int, *,
           context: int | None = None) -> list[T]:
    """``pool`` with the first ``count`` of ``contaminants`` inserted as one block at
    ``position`` (nothing removed; the result has ``len(pool) + count`` items).

    Slots are counted in the first ``context`` items (the top-k context handed on; default:
    the whole list): ``first`` = the block starts at the top; ``middle`` = it is centred,
    starting at ``(k − count) // 2``; ``last`` = it ends at slot ``k`` (``k = min(context,
    len(pool) + count)``). ``ValueError`` for an unknown position, ``count < 1``, more than
    ``len(contaminants)``, or more than ``context``."""
    if position not in POSITIONS[:3]:
        raise ValueError(f"inject: unknown position {position!r}; expected one of "
                         f"{', '.join(POSITIONS[:3])}")
    count = check_int("count", count, 1)
    if count > len(contaminants):
        raise ValueError(f"inject: count {count} is larger than the {len(contaminants)} "
                         "contaminants available")
    if context is not None:
        context = check_int("context", context, 1)
        if count > context:
            raise ValueError(f"inject: count {count} does not fit a context of {context} "
                             "slots")
    at = _slot(position, count, len(pool), context)
    pool = list(pool)
    return pool[:at] + list(contaminants[:count]) + pool[at:]


@dataclass(frozen=True)
class Flips:
    """Paired outcomes of one system on the same questions, clean vs contaminated."""

    n: int
    correct_before: int
    correct_after: int
    correct_to_incorrect: int
    incorrect_to_correct: int

    @property
    def net(self) -> int:
        """``correct_after − correct_before`` (= i→c − c→i)."""
        return self.correct_after - self.correct_before

    def to_dict(self) -> dict[str, Any]:
        """Counts, shares and Wilson 95% intervals: each flip direction as a share of all
        questions and of the questions that could flip that way."""
        wrong_before = self.n - self.correct_before
        c2i, i2c = self.correct_to_incorrect, self.incorrect_to_correct
        return {
            "n": self.n, "correct_before": self.correct_before,
            "correct_after": self.correct_after, "net": self.net,
            "correct_to_incorrect": c2i, "incorrect_to_correct": i2c,
            "correct_to_incorrect_share": c2i / self.n if self.n else None,
            "correct_to_incorrect_wilson_95": list(wilson(c2i, self.n)),
            "incorrect_to_correct_share": i2c / self.n if self.n else None,
            "incorrect_to_correct_wilson_95": list(wilson(i2c, self.n)),
            "correct_to_incorrect_of_initially_correct":
                c2i / self.correct_before if self.correct_before else None,
            "correct_to_incorrect_of_initially_correct_wilson_95":
                list(wilson(c2i, self.correct_before)),
            "incorrect_to_correct_of_initially_incorrect":
                i2c / wrong_before if wrong_before else None,
            "incorrect_to_correct_of_initially_incorrect_wilson_95":
                list(wilson(i2c, wrong_before)),
        }


def paired_flips(clean_correct: Sequence[bool] | Mapping[str, bool],
                 contaminated_correct: Sequence[bool] | Mapping[str, bool]) -> Flips:
    """Count correct→incorrect and incorrect→correct flips between paired outcomes (chapter
    35.2; two sequences in the same question order, or two mappings with the same keys);
    values are bools or 0/1. ``ValueError`` when they are not paired or not 0/1."""
    if isinstance(clean_correct, Mapping) or isinstance(contaminated_correct, Mapping):
        if not (isinstance(clean_correct, Mapping) and isinstance(contaminated_correct, Mapping)):
            raise ValueError("paired_flips: expected two sequences or two mappings")
        if set(clean_correct) != set(contaminated_correct):
            raise ValueError("paired_flips: the two mappings cover different questions")
        keys = list(clean_correct)
        before = [clean_correct[k] for k in keys]
        after = [contaminated_correct[k] for k in keys]
    else:
        before, after = list(clean_correct), list(contaminated_correct)
    if len(before) != len(after):
        raise ValueError(f"paired_flips: {len(before)} clean outcomes but {len(after)} "
                         "contaminated ones; expected one pair per question")
    for name, values in (("clean_correct", before), ("contaminated_correct", after)):
        bad = [v for v in values if isinstance(v, str) or v not in (0, 1)]
        if bad:
            raise ValueError(f"paired_flips: {name} expected bools or 0/1; got {bad[0]!r}")
    b = [bool(v) for v in before]
    a = [bool(v) for v in after]
    pairs = list(zip(b, a, strict=True))
    return Flips(len(b), sum(b), sum(a), sum(1 for x, y in pairs if x and not y),
                 sum(1 for x, y in pairs if not x and y))


def parse_positions(value: str | Sequence[str] | None, source: str) -> tuple[str, ...]:
    """``--positions`` (comma-separated or a list); default per source."""
    if value is None:
        return DEFAULT_POSITIONS[source]
    items = [v.strip() for v in (value.split(",") if isinstance(value, str) else value)]
    if not items or any(not v for v in items):
        raise ValueError(f"--positions: expected a comma-separated list of {', '.join(POSITIONS)}"
                         f"; got {value!r}")
    for v in items:
        if v not in POSITIONS:
            raise ValueError(f"--positions: unknown position {v!r}; expected one of "
                             f"{', '.join(POSITIONS)}")
    return tuple(dict.fromkeys(items))


def parse_counts(value: str | Sequence[int] | None) -> tuple[int, ...] | None:
    """``--counts`` (comma-separated or a list of ints ≥ 1); ``None`` = the source's default."""
    if value is None:
        return None
    raw = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for v in raw:
        try:
            n = int(v.strip()) if isinstance(v, str) else v
        except ValueError:
            raise ValueError(f"--counts: expected comma-separated integers ≥ 1; got {value!r}"
                             ) from None
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"--counts: every count must be an integer ≥ 1 (number of "
                             f"contaminants injected); got {v!r}")
        out.append(n)
    if not out:
        raise ValueError("--counts: expected at least one count")
    return tuple(dict.fromkeys(out))


# -- data -------------------------------------------------------------------------------------

@dataclass
class StressData:
    """A source prepared for the stress bench."""

    evalset: EvalSet  # every document (clean and contaminants) and the evaluated questions
    contaminants: dict[str, list[str]]  # qid -> contaminant ids, file order
    evaluated: list[str]
    fit_set: EvalSet | None  # pooled set the learned credibility model is fitted on
    fit_questions: list[str]
    notes: list[str]
    details: dict[str, Any]


def load_stress(source: str, path: Path | str, corpus_path: Path | str | None, seed: int
                ) -> StressData:
    """Read ``source`` and split it (module docstring)."""
    if source not in SOURCES:
        raise ValueError(f"bench stress: unknown source {source!r}; expected one of "
                         f"{', '.join(SOURCES)}")
    if source == "poisonedrag":
        if corpus_path is None:
            raise ValueError("bench stress-poisonedrag: the CrAM NQ corpus (--corpus) is "
                             "required")
        targets = read_poisonedrag(path)
        if not targets.targets:
            raise ValueError(f"{path}: the PoisonedRAG reader found 0 usable target records "
                             f"({'; '.join(targets.notes)})")
        cram = require_usable(read_cram_nq(corpus_path), corpus_path)
        evalset = poisoned_corpus(targets, cram, max(len(t.adv_texts) for t in targets.targets))
        contaminants: dict[str, list[str]] = {}
        for d, lab in evalset.doc_labels.items():
            if lab.get("poison"):
                contaminants.setdefault(str(lab["target"]), []).append(d)
        for q in contaminants:
            contaminants[q].sort(key=lambda d: evalset.doc_labels[d]["index"])
        asked = {squad_normalize(t.question) for t in targets.targets}
        fit_q = [q for q, text in cram.queries if squad_normalize(text) not in asked]
        return StressData(
            evalset, contaminants, [q for q, _ in evalset.queries], cram, fit_q,
            [f"corpus: the real Wikipedia passages of CrAM NQ ({Path(corpus_path).name}), its "
             "GPT fakes removed, exact duplicate texts dropped; contaminants: PoisonedRAG's "
             "adversarial texts of each target, file order (text i = the i-th)",
             f"learned credibility: fitted on the {len(fit_q)} CrAM NQ questions that are not "
             f"PoisonedRAG targets (CrAM's real passages vs its GPT fakes), applied to "
             "PoisonedRAG texts: a transfer test",
             *evalset.notes],
            {"corpus": str(corpus_path), "targets": len(targets)})
    name = "cram-nq" if source == "cram" else "newspolluted"
    evalset = require_usable(load_dataset(name, path), path)
    pools = evalset.pools or {}
    contaminants = {q: [str(d) for d in pools.get(q, []) if str(d) in evalset.bad.get(q, set())]
                    for q, _ in evalset.queries}
    qids = [q for q, _ in evalset.queries]
    split = split_questions(qids, seed)
    return StressData(
        evalset, contaminants, list(split.test), evalset, list(split.dev),
        [f"questions: the {len(split.test)} test questions of a seeded split "
         f"(default_rng({seed}), {len(split.dev)} development questions fit the learned "
         "credibility model and are not evaluated)",
         "corpus: every document that is not a contaminant (labelled bad) of any question; "
         "the clean pool is built from it by removing the labelled contaminants — the "
         "experimental control, not a system",
         ("contaminants: CrAM NQ's one GPT fake per question (no paraphrase of it exists, so "
          "count 1 only)" if source == "cram" else
          "contaminants: NewsPolluted's 3 LLM-written fakes per question, file order: "
          "correlated (the same false story in different styles)"),
         *evalset.notes],
        {"split": split.to_dict()})


# -- pools --------------------------------------------------------------------------------------

def contaminated_batch(index_search: Callable[[Sequence[str], int], Candidates],
                       clean: Candidates, contaminants: Sequence[str], position: str,
                       count: int, top_k: int) -> Candidates:
    """The clean pool with ``count`` contaminants added at ``position`` (module docstring).
    ``index_search(ids, k)`` returns the rows of ``ids`` with their real cosines."""
    chosen = list(contaminants[:count])
    clean_ids = [str(d) for d in clean.doc_ids]
    full = index_search(clean_ids + chosen, len(clean_ids) + len(chosen))
    if position == "natural":
        return full
    row = {str(d): i for i, d in enumerate(full.doc_ids)}
    order = inject(clean_ids, chosen, position, count, context=top_k)
    batch = full.take([row[d] for d in order])
    scores = batch.retrieval_score.copy()
    clean_score = dict(zip(clean_ids, clean.retrieval_score.tolist(), strict=True))
    bad = set(chosen)
    for i, d in enumerate(order):
        if d in bad:  # the score of the clean document it displaces (the next clean one)
            after = [clean_score[x] for x in order[i + 1:] if x not in bad]
            scores[i] = after[0] if after else (float(clean.retrieval_score[-1])
                                                if len(clean) else 0.0)
    return replace(batch, retrieval_score=scores, score=scores.copy())


# -- systems ------------------------------------------------------------------------------------

def stress_system_names(data: StressData) -> list[str]:
    """The rows :func:`stress_systems` can build for ``data``, in table order (the learned
    credibility rows are absent from a run whose fit has one class only)."""
    gpt = ([GPT_SYSTEM] if data.evalset.name == "cram-nq"
           and signal_count(data.evalset, GPT_TRUTH) else [])
    return [BASELINE, *CONSENSUS_COLLAPSE, LEARNED, LEARNED_CONSENSUS, *gpt, DEFAULT_ROW,
            ORACLE]


def pipeline_system(spec: PipelineSpec, top_k: int, fetch_k: int) -> System:
    """A pipeline spec as a stress row (the audit's audited pipeline): its stages after
    retrieval run on the bench's pool of ``fetch_k`` clean passages and keep the bench's
    ``top_k``, as every spec row of the bench (:func:`~credrank_bench.experiments.bench.
    search_spec`): its own ``top_k``, ``fetch_k``, ``retrieval`` and ``pushdown`` say how to
    fetch from an index, and the bench's pools are fetched already. Reads no label."""
    spec = spec.replace_top(top_k=top_k, fetch_k=fetch_k)
    return reading_with(memoized(extractive_answers), System.of_spec(
        spec, notes=("a pipeline spec given to the bench: its stages over the bench's pool",)))


def held_out_rows(data: StressData, fit_q: Sequence[str], shown: Collection[str],
                  keys: Collection[str]) -> dict[str, int]:
    """Counts of the hold-out by content of the learned credibility model's training rows:
    ``development_documents`` (of the pools of ``fit_q``), ``held_out_of_training`` (those
    whose :func:`~credrank_bench.experiments.label_free.text_key` is one of ``keys``, those of
    ``shown``, the ids of ``data.evalset`` an evaluated question is shown) and, of these,
    ``held_out_same_id`` (the same id, when the model is fitted on the evaluated set)."""
    fit = data.fit_set
    if fit is None:
        return {"development_documents": 0, "held_out_of_training": 0, "held_out_same_id": 0}
    texts = {d.id: d.text for d in fit.documents}
    dev = list(dict.fromkeys(str(d) for q in fit_q for d in (fit.pools or {}).get(q, [])))
    held = [d for d in dev if text_key(texts[d]) in keys]
    same_id = set(shown) if fit is data.evalset else set()
    return {"development_documents": len(dev), "held_out_of_training": len(held),
            "held_out_same_id": sum(1 for d in held if d in same_id)}


def stress_systems(data: StressData, embedder: Embedder, top_k: int, seed: int,
                   fit_limit: int | None = None, fetch_k: int | None = None,
                   only: Collection[str] | None = None, *, shown: Collection[str]
                   ) -> tuple[dict[str, System], dict[str, Any], list[str]]:
    """The compared systems, their fit details and notes (module docstring). Every system
    but the learned credibility ones is a pipeline spec (of ``fetch_k`` clean passages,
    default 3 × ``top_k``); the GPT prior and the oracle read data no spec can name: they are
    the bench's ``before`` stage of a similarity-only spec (the oracle's reads the labels).
    The learned credibility model is fitted here, in memory: those systems stay stages.
    ``only``: build these rows and the baseline only (:func:`stress_system_names`); the
    learned credibility model is fitted only when one of its rows is asked for. ``shown``:
    the ids (of ``data.evalset``) of every document an evaluated question is shown (its clean
    pool and its contaminants); no training row has the normalised text of one of them
    (:func:`held_out_rows`)."""
    fetch_k = 3 * top_k if fetch_k is None else fetch_k

    def wanted(name: str) -> bool:
        return only is None or name in only

    reader = memoized(extractive_answers)
    systems = {BASELINE: baseline_system(top_k, fetch_k)}
    notes: list[str] = []
    details: dict[str, Any] = {}
    for name, (jaccard, cosine) in CONSENSUS_COLLAPSE.items():
        if not wanted(name):
            continue
        systems[name] = reading_with(reader, System.of_spec(
            search_spec(top_k, fetch_k, {"stage": "consensus", "jaccard": jaccard,
                                         "cosine": cosine}),
            params={"jaccard": jaccard, "cosine": cosine, "threshold": 0.5, "floor": 0.1},
            notes=("answer consensus over the pool (offline extractive reader on each "
                   "passage), a-priori defaults τ = 0.5, floor 0.1, neutral when contested",)))
    fit = data.fit_set
    fitted = None
    fit_q = data.fit_questions if fit_limit is None else data.fit_questions[:fit_limit]
    if fit is not None and fit_q and (wanted(LEARNED) or wanted(LEARNED_CONSENSUS)):
        featurizer = CredibilityFeaturizer(embedder)
        shown_text = {d.id: d.text for d in data.evalset.documents}
        held_out = text_keys(shown_text[d] for d in shown)
        examples = credibility_examples(fit, fit_q, held_out)
        fitted = fit_credibility(examples, featurizer, seed)
        if fitted is not None and leaked_documents(
                fitted.model, {d.id: d.text for d in fit.documents}, held_out):
            raise AssertionError("stress: the learned credibility model trained on a text an "
                                 "evaluated question is shown")
        counts = held_out_rows(data, fit_q, shown, held_out)
        details["learned_credibility_held_out"] = counts
        notes.append(
            f"learned credibility: {counts['held_out_of_training']} of the "
            f"{counts['development_documents']} development documents were left out of its "
            "training rows because their text (case-folded, whitespace collapsed) is that of "
            "a document an evaluated question is shown (its clean pool or its contaminants; "
            f"{counts['held_out_same_id']} of them by the same id), so no evaluated question "
            "sees a text the model was fitted on")
    if fitted is None and (wanted(LEARNED) or wanted(LEARNED_CONSENSUS)):
        notes.append("absent: no learned credibility model (the development documents hold "
                     "one class only or there are none), so its systems were not run")
    elif fitted is not None and fit is not None:
        cred = LearnedCredibilityPrior(fitted.model, name="credibility", floor=CREDIBILITY_FLOOR)
        cfg = fitted.choice["config"]
        seen = SET_NAMES.get(fit.name, fit.name)
        params = {"config": cfg, "cv_auc": fitted.choice["cv_auc"], "floor": CREDIBILITY_FLOOR,
                  "fitted_on": f"{fitted.choice['trained_on']} documents of "
                               f"{len(fit_q)} development questions of {seen}"}
        if fit is data.evalset:  # its development questions: labels of the evaluated set
            params["not_label_free_for"] = seen
            saw = (f"not label-free for {seen}: fitted on the labels of its development "
                   "questions (never the evaluated ones)")
        else:
            saw = (f"fitted on labels of {seen} only, not of the evaluated set (a transfer "
                   "test)")
        systems[LEARNED] = System(
            Pipeline([cred, Combine("multiply"), TopK(top_k)]), reads_labels=False,
            params=params, notes=(f"λ = {CREDIBILITY_FLOOR} + {1 - CREDIBILITY_FLOOR:g}·"
                                  "P(credible) from page text, fitted on development questions "
                                  "only", saw))
        systems[LEARNED_CONSENSUS] = System(
            Pipeline([cred, AnswerConsensus(reader, jaccard=JACCARD), Combine("multiply"),
                      TopK(top_k)]), reads_labels=False,
            params={**params, "jaccard": JACCARD, "threshold": 0.5, "floor_consensus": 0.1},
            notes=(saw,))
        details["learned_credibility"] = fitted.choice
    ev = data.evalset
    if ev.name == "cram-nq" and signal_count(ev, GPT_TRUTH) and wanted(GPT_SYSTEM):
        systems[GPT_SYSTEM] = gpt_prior_system(ev, top_k, fetch_k)
    # the label-free defence, its default combination
    if wanted(DEFAULT_ROW):
        systems[DEFAULT_ROW] = defence_systems(top_k, fetch_k,
                                               only=("planted",))[DEFAULT_ROW]
    bad = {d for ids in data.contaminants.values() for d in ids}

    def drop(batch: Candidates) -> Candidates:
        return batch.take([i for i, d in enumerate(batch.doc_ids) if str(d) not in bad])
    if not wanted(ORACLE):
        return systems, details, notes
    systems[ORACLE] = System.of_spec(
        search_spec(top_k, fetch_k),
        before=[FunctionStage(drop, name="drop_labelled_contaminants")], reads_labels=True,
        notes=("removes every labelled contaminant: the clean-pool reference, an upper bound",))
    return systems, details, notes


# -- the bench ----------------------------------------------------------------------------------

def _answer_fn(generator: Generator, evalset: EvalSet
               ) -> Callable[[str, Sequence[str]], str]:
    texts = {d.id: d.text for d in evalset.documents}
    questions = dict(evalset.queries)
    cache: dict[tuple[str, tuple[str, ...]], str] = {}

    def answer(q: str, top: Sequence[str]) -> str:
        key = (q, tuple(top))
        if key not in cache:
            prompt = build_prompt(questions[q], [texts[d] for d in top])
            cache[key] = generator.generate(prompt, max_tokens=MAX_TOKENS).text
        return cache[key]
    return answer


def bench_stress(source: str, path: Path | str, embedder: Embedder, *,
                 corpus_path: Path | str | None = None,
                 positions: str | Sequence[str] | None = None,
                 counts: str | Sequence[int] | None = None,
                 generator: Generator | None = None, generator_name: str = "extractive",
                 limit: int | None = None, top_k: int = 5, fetch_k: int = 10,
                 seed: int = 0, on_progress: OnProgress | None = None,
                 machine_text: MachineTextOption | None = None,
                 pipelines: Mapping[str, PipelineSpec] | None = None,
                 rows: Sequence[str] | None = None) -> BenchResult:
    """The contamination stress bench of ``source`` (module docstring); one table per position
    and count (key ``<position>_n<count>``) and the table ``flips``.

    ``limit``: evaluate the first ``limit`` questions and fit the learned credibility model on
    the first ``limit`` development questions only (a quick run); ``None``: all of them.
    ``corpus_path``: the CrAM NQ file (poisonedrag only). ``generator``: default the offline
    :class:`~credrank.generate.llm.ExtractiveReader`. ``on_progress(done, total, label)``
    (:mod:`credrank.core.progress`): embedding, fitting the systems, then systems × questions
    on the clean pools and per condition (each answered by the generator). ``machine_text``
    (``--machine-text``): the passages of the evaluated questions' clean pools and their
    contaminants are scored with the machine-text statistic first, and the rows of
    :mod:`credrank_bench.experiments.machine_text_rows` join every table.

    ``pipelines``: more rows, ``{name: spec}``, each a pipeline spec's stages over the
    bench's pools at its ``top_k`` (:func:`pipeline_system`; the audit's audited pipeline).
    ``rows``: run only these rows (and the baseline, which every Δ is paired with): the
    other systems are neither fitted nor run; ``ValueError`` naming the rows there are
    when one is not a row of this run."""
    if source not in SOURCES:
        raise ValueError(f"bench stress: unknown source {source!r}; expected one of "
                         f"{', '.join(SOURCES)}")
    top_k = check_int("top_k", top_k, 1)
    fetch_k = check_int("fetch_k", fetch_k, top_k)
    if limit is not None:
        limit = check_int("--limit", limit, 1)
    chosen_positions = parse_positions(positions, source)
    chosen_counts = parse_counts(counts)
    data = load_stress(source, path, corpus_path, seed)
    ev = data.evalset
    evaluated = [q for q in data.evaluated if gold_answers(ev, q) and data.contaminants.get(q)]
    dropped = len(data.evaluated) - len(evaluated)
    if limit is not None:
        evaluated = evaluated[:limit]
    if not evaluated:
        raise ValueError(f"bench stress-{source}: no question with a gold answer and a "
                         "contaminant to evaluate")
    available = min(len(data.contaminants[q]) for q in evaluated)
    if chosen_counts is None:
        chosen_counts = (tuple(c for c in POISONEDRAG_COUNTS if c <= available)
                         if source == "poisonedrag" else tuple(range(1, available + 1)))
    too_many = [c for c in chosen_counts if c > available]
    if too_many:
        raise ValueError(f"--counts: {too_many[0]} is larger than the {available} distinct "
                         f"contaminants every evaluated question has ({source}); expected "
                         f"counts from 1 to {available}")
    if any(p != "natural" for p in chosen_positions) and max(chosen_counts) > top_k:
        raise ValueError(f"--counts: {max(chosen_counts)} contaminants do not fit the top "
                         f"{top_k} context of a controlled position")
    extra = dict(pipelines or {})
    clash = [n for n in extra if n in stress_system_names(data)]
    if clash:
        raise ValueError(f"pipelines: {clash[0]!r} is already a row of the stress bench; "
                         "expected another name")
    if rows is not None:
        known = [*stress_system_names(data), *(machine_text_systems(top_k, fetch_k)
                                               if machine_text is not None else {}), *extra]
        unknown = [r for r in rows if r not in known]
        if unknown:
            raise ValueError(f"rows: {unknown[0]!r} is not a row of the stress bench; rows: "
                             f"{', '.join(known)}")
    # built before anything is embedded: a stage that cannot run on these pools fails now
    extra_systems = {n: pipeline_system(spec, top_k, fetch_k) for n, spec in extra.items()
                     if rows is None or n in rows}
    generator = generator if generator is not None else ExtractiveReader()
    prepared = prepare(ev, embedder, on_progress=on_progress)
    index, qv = prepared.index, prepared.query_vectors
    questions = dict(ev.queries)
    bad_all = {d for ids in data.contaminants.values() for d in ids}
    clean_ids = [str(d) for d in index.doc_ids if str(d) not in bad_all]
    clean_pools = {q: index.search(questions[q], qv[q], fetch_k, restrict=clean_ids)
                   for q in evaluated}
    machine_details = None
    if machine_text is not None:  # the passages these questions can rank, then pools again
        seen = {str(d) for q in evaluated for d in clean_pools[q].doc_ids}
        seen.update(d for q in evaluated for d in data.contaminants[q])
        machine_details = machine_text.apply(index, only=seen, on_progress=on_progress)
        clean_pools = {q: index.search(questions[q], qv[q], fetch_k, restrict=clean_ids)
                       for q in evaluated}
    shown = {str(d) for q in evaluated for d in clean_pools[q].doc_ids}
    shown.update(d for q in evaluated for d in data.contaminants[q])
    with one_step(on_progress, "fitting the label-free systems"):
        systems, fit_details, fit_notes = stress_systems(data, embedder, top_k, seed, limit,
                                                         fetch_k, only=rows, shown=shown)
    if machine_text is not None and machine_details is not None:
        systems.update({n: row for n, row in machine_text_systems(top_k, fetch_k).items()
                        if rows is None or n in rows})
        fit_notes.append(machine_text.note(machine_details))
    systems.update(extra_systems)
    answer = _answer_fn(generator, ev)

    def outcome(q: str, top: Sequence[str]) -> tuple[bool, bool]:
        text = answer(q, top)
        misled = contains_answer(text, wrong_answers(ev, q))
        return contains_answer(text, gold_answers(ev, q)) and not misled, misled

    clean_correct: dict[str, dict[str, bool]] = {}
    tick = Counter(step(on_progress, "clean pools: systems × questions"),
                   len(systems) * len(evaluated))
    for name, system in systems.items():
        assert system.stage is not None
        clean_correct[name] = {}
        for q in evaluated:
            top = ranked_docs(run_from_batches({q: system.stage(clean_pools[q])}).get(q, {}))
            clean_correct[name][q] = outcome(q, top[:top_k])[0]
            tick.add()
    hit_k = f"{ADV_HIT}@{top_k}"
    measures = list(dict.fromkeys([f"{ADV_HIT}@1", hit_k, CORRECT_CLEAN, CORRECT_CONTAMINATED,
                                   FLIP_C2I, FLIP_I2C, MISLED]))
    result = BenchResult(
        f"stress-{'news' if source == 'newspolluted' else source}", str(path),
        {**bench_settings(embedder, top_k, fetch_k, seed), "source": source,
         "positions": list(chosen_positions), "counts": list(chosen_counts),
         "generator": generator_name, "limit": limit,
         "intervals": f"percentile bootstrap over questions, {N_RESAMPLES} resamples; Wilson "
                      "95% in the flips table"},
        {**ev.summary(), "evaluated_questions": len(evaluated),
         "contaminants_per_question_min": available,
         "skipped_without_gold_or_contaminant": dropped},
        [*_limit_note(limit, len(evaluated)), *data.notes, *fit_notes,
         *([] if rows is None else [f"rows: only {', '.join(systems)} were run (the bench's "
                                    "other systems were neither fitted nor run)"])],
        qrels={q: dict(ev.qrels.get(q, {})) for q in evaluated})
    flip_rows: list[Row] = []
    flip_details: dict[str, dict[str, Any]] = {}

    def search_ids(q: str) -> Callable[[Sequence[str], int], Candidates]:
        return lambda ids, k: index.search(questions[q], qv[q], k, restrict=list(ids))

    for position in chosen_positions:
        for count in chosen_counts:
            cond = f"{position}_n{count}"
            pools = {q: contaminated_batch(search_ids(q), clean_pools[q], data.contaminants[q],
                                           position, count, top_k) for q in evaluated}
            per_query: PerQuery = {}
            runs = {}
            tick = Counter(step(on_progress, f"{count} contaminant(s) at {position}: systems "
                                             "× questions"), len(systems) * len(evaluated))
            for name, system in systems.items():
                assert system.stage is not None
                run = runs[name] = run_from_batches({q: system.stage(b) for q, b in pools.items()})
                values: dict[str, dict[str, float]] = {m: {} for m in measures}
                after: dict[str, bool] = {}
                for q in evaluated:
                    top = ranked_docs(run.get(q, {}))[:top_k]
                    own = set(data.contaminants[q][:count])
                    hits = [d in own for d in top]
                    correct, misled = outcome(q, top)
                    after[q] = correct
                    before = clean_correct[name][q]
                    values[f"{ADV_HIT}@1"][q] = float(any(hits[:1]))
                    values[hit_k][q] = float(any(hits))
                    values[CORRECT_CLEAN][q] = float(before)
                    values[CORRECT_CONTAMINATED][q] = float(correct)
                    values[FLIP_C2I][q] = float(before and not correct)
                    values[FLIP_I2C][q] = float(correct and not before)
                    values[MISLED][q] = float(misled)
                    tick.add()
                per_query[name] = values
                flips = paired_flips(clean_correct[name], after)
                row_name = f"{name} · {position} · n={count}"
                flip_details[row_name] = {**flips.to_dict(), "system": name,
                                          "position": position, "count": count,
                                          "if_no_answer_improved": _bound(flips)}
                flip_rows.append(_flip_row(row_name, system, flips, position, count))
            result.add_experiment(compare_systems(
                per_query, systems, [Column.of(m) for m in measures], runs=runs, seed=seed,
                n_resamples=N_RESAMPLES, key=cond, kind="systems",
                title=f"Contaminants: {count} at position {position}",
                notes=[_condition_note(position, count, top_k, fetch_k, len(evaluated)),
                       f"Δ is paired with {BASELINE} in this condition; intervals: 95% "
                       f"percentile bootstrap over the {len(evaluated)} questions, "
                       f"{N_RESAMPLES:,} resamples, seed {seed}. Flips compare each system's "
                       "answer on the clean pool with its answer on this pool; the table "
                       "'flips' has their counts and Wilson intervals."]))
    result.add_table(ResultTable(
        "flips", "Paired flips per system, position and count", [
            Column.of(FLIP_C2I), Column.of(FLIP_I2C)], flip_rows, kind="sweep",
        parameter="position, count",
        notes=["Each cell: the share of all evaluated questions that flip that way, with its "
               "Wilson 95% interval; n = questions. Counts, the shares of the initially "
               "correct / incorrect and the chapter's 'no answer improves' bound are in "
               "details.flips."]))
    result.details["flips"] = flip_details
    result.details["generator"] = generator_name
    result.details.update(data.details)
    result.details.update(fit_details)
    if machine_details is not None:
        result.details["machine_text"] = machine_details
    if source == "poisonedrag":
        result.details["poison_copies"] = poison_copies(ev, index, max(chosen_counts))
    else:
        result.details["fake_pair_duplicates"] = fake_pair_duplicates(ev, index, evaluated)
    result.details["chapter_arithmetic_35_2"] = [contamination_loss(1000, 0.82, a)
                                                 for a in (0.62, 0.52)]
    return result


def _bound(flips: Flips) -> dict[str, Any] | None:
    """The chapter's reading of the observed accuracies (only for a net loss)."""
    if flips.n == 0 or flips.correct_before == 0 or flips.correct_after > flips.correct_before:
        return None
    out = contamination_loss(flips.n, flips.correct_before / flips.n,
                             flips.correct_after / flips.n)
    out["observed_correct_to_incorrect"] = flips.correct_to_incorrect
    return out


def _flip_row(name: str, system: System, flips: Flips, position: str, count: int) -> Row:
    cells = {}
    for column, k in ((FLIP_C2I, flips.correct_to_incorrect),
                      (FLIP_I2C, flips.incorrect_to_correct)):
        low, high = wilson(k, flips.n)
        cells[column] = Cell(k / flips.n if flips.n else None, low, high, flips.n)
    return Row(name, system.reads_labels, cells,
               params={"position": position, "count": count,
                       "correct_to_incorrect": flips.correct_to_incorrect,
                       "incorrect_to_correct": flips.incorrect_to_correct, "net": flips.net})


def _condition_note(position: str, count: int, top_k: int, fetch_k: int, n: int) -> str:
    where = ("at their own cosine (the list sorted by it)" if position == "natural" else
             f"at the {position} slots of the top {top_k} context, each taking the retrieval "
             "score of the clean document it displaces")
    return (f"{n} questions; each pool: the {fetch_k} nearest clean documents plus {count} "
            f"contaminant(s) of the question, {where}; every system reranks it and the "
            f"generator reads its top {top_k} in rank order")


def _limit_note(limit: int | None, evaluated: int) -> list[str]:
    """With ``--limit``, the note that says this run's counts before the notes that describe
    the whole split (whose sizes are the split's, not the run's)."""
    if limit is None:
        return []
    return [f"--limit {limit}: this run evaluates {evaluated} question(s), the first of the "
            f"split's test questions, and fits the learned credibility model on at most {limit} "
            "development question(s); the sizes in the notes below are the whole split's, not "
            "this run's"]
