"""CrAM head selection: indirect effects on known wrong answers, batched (chapter 35.5).

CrAM picks the attention heads to reweight by a causal test on labelled misinformation
calibration examples. For one example (a prompt holding real passages and one fake passage, and
the wrong answer ``a_wrong`` the fake passage argues for) and one head ``h``::

    IE_h     = P_0(a_wrong) − P_h*(a_wrong)
    IE_h^log = log P_0(a_wrong) − log P_h*(a_wrong)

``P_0`` is the model's probability of the wrong answer with stock attention and ``P_h*`` the
same with the CrAM intervention (:func:`credrank.cram.attention.reweight`) on head ``h`` *alone*.
A positive effect means this modification of this head lowered the wrong answer's probability;
it is not head removal. Effects are averaged over the calibration examples and ranked
(:func:`rank_heads`); how many of the top heads to use is chosen on a *separate* validation
split (:func:`choose_n_heads`). Individually measured effects need not add up when many heads
are changed together — that is why the head count is validated, not read off the ranking.

**Multi-token answers (teacher forcing).** ``P(a) = Π_t P(a_t | prompt, a_<t)``: the model reads
``prompt ⊕ a`` once and the log-probability of answer token ``t`` is read at position
``p − 1 + t`` (``p`` = prompt length in tokens), i.e. the logits *before* each answer token::

    log P(a) = Σ_{t=0}^{T−1} log softmax(z_{p−1+t})[a_t]

The prompt is tokenised with the model's special tokens (``add_special_tokens=True`` by
default), the answer without, and the two id sequences are concatenated (so the answer text
should carry its own leading space where the tokenizer expects one). Answer tokens get the
multiplier ``1`` (they are not documents).

**Multipliers ("ideal" setting).** Each :class:`CalibrationExample` carries its documents'
character spans in the prompt and raw credibility scores. CrAM's paper calibrates in the ideal
setting — the fake passage scores ``0``, the real ones ``1`` — and uses the plain min-max
``c_d = (s_d − s_min)/(s_max − s_min)``, i.e. the fake passage's tokens get ``c = 0`` and the
real passages ``c = 1``. That is the default here (``floor=0.0``); ``floor = ε > 0`` uses
:func:`credrank.cram.multipliers.scores_to_multipliers` (``c_d = ε + (1 − ε)·minmax``) instead.
Equal scores give all ``1`` (nothing reweighted). A query row whose allowed keys all have
``c = 0`` keeps its stock attention (the declared fallback of :mod:`~credrank.cram.attention`);
such rows are counted in :attr:`HeadEffects.fallback_rows` instead of warned once per pass.

**Numerics.** Log-probabilities come from ``log_softmax`` in float64 of the model's logits;
every per-token log-probability is clipped below at ``log(PROB_EPS)`` (``PROB_EPS = 1e-30``),
so no ``-inf`` / NaN can come out, and ``P = exp(log P)``.

**Batching.** The reference path (``batched=False``) runs one forward pass per example for
``P_0`` and one per (example, head) for ``P_h*``: ``N (1 + L·H)`` passes. The batched path
builds one row per (example, head) job, each intervening on its own head through
``reweight(..., row_heads=...)`` (rows right-padded, masked; padding is after the real tokens,
so causal attention never sees it), and runs ``rows_per_pass`` rows per forward pass
(default ``H``: all heads of one layer for one example): ``⌈N/R⌉ + ⌈N·L·H/R⌉`` passes. Both
paths give the same effects up to float rounding (padding changes the reduction length).

**Ranking.** :func:`rank_heads` sorts by the mean effect, largest first; ties are broken by
``(layer, head)`` ascending. Heads of non-full-attention layers (sliding/chunked) cannot be
reweighted and are left out of the ranking (their effect is reported as ``0``, with
``eligible`` False).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from credrank.core.progress import Counter
from credrank.cram.multipliers import (
    CramInputError,
    encode_with_offsets,
    scores_to_multipliers,
    token_multipliers,
    token_spans,
)

PROB_EPS = 1e-30
LOG_PROB_EPS = math.log(PROB_EPS)
DEFAULT_GRID = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
TIE_POLICY = "ties broken by (layer, head) ascending"


class HeadSelectionError(ValueError):
    """Invalid head-selection request (empty calibration set, bad grid, bad ranking)."""


@dataclass(frozen=True)
class CalibrationExample:
    """One labelled misinformation example.

    ``prompt``: the rendered prompt (question and passages, as the model sees it, without the
    answer); ``doc_char_spans[d]``: passage ``d``'s ``[start, end)`` in ``prompt``;
    ``doc_scores[d]``: its credibility score (ideal setting: ``0`` fake, ``1`` real);
    ``answer_wrong``: the answer the fake passage argues for; ``answer_right``: the correct
    answer (kept for reporting, not used by the effects).
    """

    prompt: str
    doc_char_spans: list[tuple[int, int]]
    doc_scores: list[float]
    answer_wrong: str
    answer_right: str | None = None


@dataclass
class HeadEffects:
    """Mean indirect effects over the calibration examples (chapter 35.5).

    ``ie[l, h]`` = mean over examples of ``P_0(a_wrong) − P_h*(a_wrong)``; ``ie_log[l, h]`` = mean
    of ``log P_0 − log P_h*``; ``eligible[l, h]`` is False for heads of layers that cannot be
    reweighted (their effects are 0). ``p0_log[e]`` is example ``e``'s baseline
    ``log P_0(a_wrong)``. ``passes``: model forward passes run; ``seconds``: wall time of those
    passes plus batching; ``fallback_rows``: zero-mass query rows kept stock (see module doc).
    """

    ie: np.ndarray
    ie_log: np.ndarray
    eligible: np.ndarray
    p0_log: np.ndarray
    passes: int
    seconds: float
    n_examples: int
    batched: bool
    rows_per_pass: int
    floor: float
    fallback_rows: int = 0
    tie_policy: str = field(default=TIE_POLICY)
    method: str = "exact"


@dataclass(frozen=True)
class _Row:
    prompt_ids: tuple[int, ...]
    answer_ids: tuple[int, ...]
    multipliers: np.ndarray  # one per prompt token
    heads: tuple[tuple[int, int], ...]


def _torch() -> Any:
    import torch

    return torch


def _white_box(model: Any) -> Any:
    from credrank.cram.models import check_white_box

    return check_white_box(model)


def _answer_ids(tokenizer: Any, answer: str) -> tuple[int, ...]:
    if not isinstance(answer, str) or not answer.strip():
        raise CramInputError(f"answer: expected a non-empty string, got {answer!r}")
    ids, _ = encode_with_offsets(tokenizer, answer, add_special_tokens=False)
    if not ids:
        raise CramInputError(f"answer {answer!r} tokenises to no tokens")
    return ids


def _doc_values(scores: Sequence[float], floor: float) -> tuple[float, ...]:
    if floor > 0.0:
        return scores_to_multipliers(scores, floor=floor).values
    if not math.isfinite(floor) or floor != 0.0:
        raise CramInputError(f"floor: expected a number in [0, 1), got {floor!r}")
    # the paper's plain min-max (ε = 0): the lowest-scored passage gets 0
    arr = np.asarray(list(scores), dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise CramInputError(f"scores: expected a non-empty 1-d sequence of finite numbers, "
                             f"got {list(scores)!r}")
    lo, hi = float(arr.min()), float(arr.max())
    if not hi - lo > 0.0:
        return (1.0,) * arr.size
    values = np.clip((arr - lo) / (hi - lo), 0.0, 1.0)
    values[arr == hi] = 1.0
    return tuple(float(v) for v in values)


def _example_row(tokenizer: Any, ex: CalibrationExample, floor: float,
                 add_special_tokens: bool) -> _Row:
    if not isinstance(ex, CalibrationExample):
        raise HeadSelectionError(f"expected CalibrationExample, got {type(ex).__name__}")
    if len(ex.doc_char_spans) != len(ex.doc_scores):
        raise CramInputError(f"got {len(ex.doc_char_spans)} document spans but "
                             f"{len(ex.doc_scores)} scores")
    ids, offsets = encode_with_offsets(tokenizer, ex.prompt, add_special_tokens=add_special_tokens)
    if not ids:
        raise CramInputError("prompt tokenises to no tokens")
    spans = token_spans(offsets, ex.doc_char_spans, text_length=len(ex.prompt))
    vec = token_multipliers(len(ids), spans, _doc_values(ex.doc_scores, floor))
    return _Row(prompt_ids=ids, answer_ids=_answer_ids(tokenizer, ex.answer_wrong),
                multipliers=vec, heads=())


class _Runner:
    """Runs batches of rows through the model, counting passes and fallback rows."""

    def __init__(self, model: Any, pad_id: int) -> None:
        self.model = model
        self.pad_id = pad_id
        self.passes = 0
        self.fallback_rows = 0

    def token_log_probs(self, rows: Sequence[_Row]) -> list[np.ndarray]:
        """Per-answer-token log-probabilities (float64, clipped) of each row, one pass."""
        torch = _torch()
        from credrank.cram.attention import CramFallbackWarning, reweight

        ids, mask, mult = self.batch(rows)
        row_heads = [list(r.heads) for r in rows]
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", CramFallbackWarning)
            if any(row_heads):
                with reweight(self.model, None, mult, row_heads=row_heads) as report:
                    logits = self.model(input_ids=ids, attention_mask=mask).logits
                self.fallback_rows += report.fallback_rows
            else:
                logits = self.model(input_ids=ids, attention_mask=mask).logits
        self.passes += 1
        return [vals.cpu().numpy() for vals in _answer_token_log_probs(logits, rows)]

    def batch(self, rows: Sequence[_Row]) -> tuple[Any, Any, Any]:
        """Right-padded ``input_ids``, ``attention_mask`` (on the model's device) and the
        ``[rows, width]`` multipliers (answer tokens and padding: 1)."""
        torch = _torch()
        width = max(len(r.prompt_ids) + len(r.answer_ids) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        mult = torch.ones((len(rows), width), dtype=torch.float32)
        for i, r in enumerate(rows):
            seq = r.prompt_ids + r.answer_ids
            ids[i, :len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[i, :len(seq)] = 1
            mult[i, :len(r.prompt_ids)] = torch.as_tensor(r.multipliers, dtype=torch.float32)
        device = getattr(self.model, "device", None) or torch.device("cpu")
        return ids.to(device), mask.to(device), mult


    def log_probs(self, rows: Sequence[_Row], per_pass: int,
                  on_rows: Callable[[int], None] | None = None) -> np.ndarray:
        """``log P(answer | prompt)`` for every row, ``per_pass`` rows per forward pass;
        ``on_rows(n)`` after each pass of ``n`` rows."""
        res = np.empty(len(rows), dtype=np.float64)
        for start in range(0, len(rows), per_pass):
            chunk = rows[start:start + per_pass]
            for k, tok in enumerate(self.token_log_probs(chunk)):
                res[start + k] = float(tok.sum())
            if on_rows is not None:
                on_rows(len(chunk))
        return res


def _counter(total: int, on_progress: Callable[[int, int], None] | None) -> Callable[[int], None]:
    """``count(n)``: ``n`` more rows done, reported to ``on_progress(done, total)``."""
    return Counter(on_progress, total).add


def _answer_token_log_probs(logits: Any, rows: Sequence[_Row]) -> list[Any]:
    """Per-row tensors of the answer tokens' log-probabilities (float64, clipped below at
    ``log(PROB_EPS)``), read at positions ``p − 1 + t`` (module doc)."""
    torch = _torch()
    out = []
    for i, r in enumerate(rows):
        p, t = len(r.prompt_ids), len(r.answer_ids)
        lp = torch.log_softmax(logits[i, p - 1:p - 1 + t].to(torch.float64), dim=-1)
        tgt = torch.tensor(r.answer_ids, dtype=torch.long, device=lp.device)
        out.append(lp.gather(1, tgt[:, None])[:, 0].clamp(min=LOG_PROB_EPS))
    return out


def _pad_id(tokenizer: Any) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    if isinstance(pad, int):
        return pad
    eos = getattr(tokenizer, "eos_token_id", None)
    return eos if isinstance(eos, int) else 0  # masked and after the real tokens: never read


def _check_rows_per_pass(rows_per_pass: int | None, default: int) -> int:
    if rows_per_pass is None:
        return default
    if isinstance(rows_per_pass, bool) or not isinstance(rows_per_pass, int) \
            or rows_per_pass < 1:
        raise HeadSelectionError(f"rows_per_pass: expected an integer >= 1, got "
                                 f"{rows_per_pass!r}")
    return rows_per_pass


def answer_log_prob(model: Any, tokenizer: Any, prompt: str | Sequence[str],
                    answer: str | Sequence[str], *,
                    multipliers: Sequence[Any] | None = None,
                    heads: Sequence[tuple[int, int]] = (),
                    row_heads: Sequence[Sequence[tuple[int, int]]] | None = None,
                    add_special_tokens: bool = True, rows_per_pass: int | None = None,
                    per_token: bool = False) -> np.ndarray | list[np.ndarray]:
    """Teacher-forced ``log P(answer | prompt)`` for one or many rows (float64).

    ``log P(a) = Σ_t log softmax(z_{p−1+t})[a_t]`` (module doc), each term clipped below at
    ``log(PROB_EPS)``. ``prompt`` / ``answer``: one string each, or equal-length sequences (one
    row each; a single string is broadcast). ``multipliers``: optional per-row token multipliers
    of the *prompt* tokens (answer tokens get 1); with ``heads`` (every row) and/or
    ``row_heads`` (per row) the CrAM intervention is active, otherwise stock attention.
    Rows are right-padded and run ``rows_per_pass`` at a time (default: all in one pass).
    Returns an array ``[rows]``, or with ``per_token=True`` a list of per-token arrays.
    """
    prompts = [prompt] if isinstance(prompt, str) else list(prompt)
    answers = [answer] if isinstance(answer, str) else list(answer)
    n = max(len(prompts), len(answers))
    if n == 0:
        raise CramInputError("answer_log_prob: no rows (empty prompt/answer lists)")
    if len(prompts) == 1:
        prompts = prompts * n
    if len(answers) == 1:
        answers = answers * n
    if len(prompts) != len(answers):
        raise CramInputError(f"got {len(prompts)} prompts but {len(answers)} answers")
    if row_heads is not None and len(row_heads) != n:
        raise CramInputError(f"row_heads: expected {n} entries (one per row), got "
                             f"{len(row_heads)}")
    if multipliers is not None and len(multipliers) != n:
        raise CramInputError(f"multipliers: expected {n} vectors (one per row), got "
                             f"{len(multipliers)}")
    _white_box(model)
    rows: list[_Row] = []
    for i in range(n):
        ids, _ = encode_with_offsets(tokenizer, prompts[i], add_special_tokens=add_special_tokens)
        if not ids:
            raise CramInputError(f"prompt {i} tokenises to no tokens")
        vec = np.ones(len(ids)) if multipliers is None else \
            np.asarray(multipliers[i], dtype=np.float64)
        if vec.shape != (len(ids),):
            raise CramInputError(f"multipliers[{i}]: expected {len(ids)} values (one per prompt "
                                 f"token), got shape {vec.shape}")
        extra = tuple(row_heads[i]) if row_heads is not None else ()
        rows.append(_Row(prompt_ids=ids, answer_ids=_answer_ids(tokenizer, answers[i]),
                         multipliers=vec, heads=tuple(heads) + extra))
    runner = _Runner(model, _pad_id(tokenizer))
    per_pass = _check_rows_per_pass(rows_per_pass, n)
    if per_token:
        out: list[np.ndarray] = []
        for start in range(0, n, per_pass):
            out.extend(runner.token_log_probs(rows[start:start + per_pass]))
        return out
    return runner.log_probs(rows, per_pass)


def head_effects(model: Any, tokenizer: Any, examples: Sequence[CalibrationExample], *,
                 batched: bool = True, floor: float = 0.0, rows_per_pass: int | None = None,
                 add_special_tokens: bool = True,
                 on_progress: Callable[[int, int], None] | None = None) -> HeadEffects:
    """Mean indirect effects ``IE_h`` and ``IE_h^log`` of every head over ``examples``.

    ``batched=True``: one row per (example, head) job, each row intervening on its own head,
    ``rows_per_pass`` rows per forward pass (default: the number of heads per layer), and the
    baselines ``P_0`` ``rows_per_pass`` examples per pass. ``batched=False``: the reference,
    one forward pass per example for ``P_0`` and one per (example, head) for ``P_h*``.
    ``floor``: ``0`` (the paper's ideal setting, default) or ``ε ∈ (0, 1)`` (module doc).
    ``on_progress(done, total)``: rows evaluated of ``N (1 + L·H)``, after each pass.
    Raises :class:`HeadSelectionError` on an empty calibration set and
    :class:`~credrank.cram.models.WhiteBoxError` for a model CrAM cannot intervene on.
    """
    examples = list(examples)
    if not examples:
        raise HeadSelectionError("head_effects: the calibration set is empty; CrAM head "
                                 "selection needs labelled misinformation examples (the CrAM "
                                 "paper uses 100 per data set)")
    box = _white_box(model)
    n_layers, n_heads = box.num_layers, box.num_heads
    per_pass = _check_rows_per_pass(rows_per_pass, n_heads)
    base_rows = [_example_row(tokenizer, ex, floor, add_special_tokens) for ex in examples]
    eligible = np.zeros((n_layers, n_heads), dtype=bool)
    for layer in range(n_layers):
        eligible[layer] = box.layer_types[layer] == "full_attention"
    pairs = [(int(layer), int(h)) for layer, h in zip(*np.nonzero(eligible), strict=True)]
    jobs = [_Row(r.prompt_ids, r.answer_ids, r.multipliers, (pair,))
            for r in base_rows for pair in pairs]
    runner = _Runner(model, _pad_id(tokenizer))
    count = _counter(len(base_rows) + len(jobs), on_progress)
    t0 = time.perf_counter()
    if batched:
        p0_log = runner.log_probs(base_rows, per_pass, count)
        ph_log = runner.log_probs(jobs, per_pass, count)
    else:
        p0_log = np.empty(len(base_rows))
        ph_log = np.empty(len(jobs))
        for e, row in enumerate(base_rows):
            p0_log[e] = runner.log_probs([row], 1, count)[0]
            for k in range(len(pairs)):
                j = e * len(pairs) + k
                ph_log[j] = runner.log_probs([jobs[j]], 1, count)[0]
    seconds = time.perf_counter() - t0
    ph_log = ph_log.reshape(len(base_rows), len(pairs))
    d_prob = np.exp(p0_log)[:, None] - np.exp(ph_log)
    d_log = p0_log[:, None] - ph_log
    ie = np.zeros((n_layers, n_heads))
    ie_log = np.zeros((n_layers, n_heads))
    for k, (layer, h) in enumerate(pairs):
        ie[layer, h] = float(d_prob[:, k].mean())
        ie_log[layer, h] = float(d_log[:, k].mean())
    return HeadEffects(ie=ie, ie_log=ie_log, eligible=eligible, p0_log=p0_log,
                       passes=runner.passes, seconds=seconds, n_examples=len(base_rows),
                       batched=batched, rows_per_pass=per_pass if batched else 1, floor=floor,
                       fallback_rows=runner.fallback_rows)


def head_attributions(model: Any, tokenizer: Any, examples: Sequence[CalibrationExample], *,
                      floor: float = 0.0, add_special_tokens: bool = True,
                      on_progress: Callable[[int, int], None] | None = None) -> HeadEffects:
    """First-order estimates of ``IE_h`` and ``IE_h^log`` for every head, one forward and one
    backward pass per example (attribution patching; chapter 35.5's effects, approximated).

    With :func:`credrank.cram.attention.attribution_patch` every head carries a strength
    ``t_h`` (``0``: stock, ``1``: CrAM on that head alone), so to first order::

        IE_h^log ≈ −∂ log P(a_wrong) / ∂t_h |_{t=0}
        IE_h     ≈ −∂ P(a_wrong) / ∂t_h |_{t=0} = P_0(a_wrong) · IE_h^log-estimate

    averaged over the examples. The exact effects (:func:`head_effects`) need ``1 + L·H``
    row evaluations per example, this ``1`` forward and ``1`` backward pass, whatever the
    number of heads. It is an approximation: the switch ``t = 0 → 1`` is not infinitesimal
    (with ``floor = 0`` the fake's tokens lose all their weight), so the ranking can differ from
    the exact one; ``method = "attribution"`` in the result says which was used, and
    ``bench/scripts/bench_cram_heads.py`` measures the agreement of the two rankings.
    ``passes`` counts forward passes (each followed by one backward pass).
    ``on_progress(done, total)``: examples done, after each.
    """
    examples = list(examples)
    if not examples:
        raise HeadSelectionError("head_attributions: the calibration set is empty; CrAM head "
                                 "selection needs labelled misinformation examples (the CrAM "
                                 "paper uses 100 per data set)")
    torch = _torch()
    from credrank.cram.attention import attribution_patch

    box = _white_box(model)
    n_layers, n_heads = box.num_layers, box.num_heads
    rows = [_example_row(tokenizer, ex, floor, add_special_tokens) for ex in examples]
    eligible = np.zeros((n_layers, n_heads), dtype=bool)
    for layer in range(n_layers):
        eligible[layer] = box.layer_types[layer] == "full_attention"
    runner = _Runner(model, _pad_id(tokenizer))
    grad_log = np.zeros((len(rows), n_layers, n_heads))
    p0_log = np.empty(len(rows))
    fallback = 0
    count = _counter(len(rows), on_progress)
    t0 = time.perf_counter()
    for e, row in enumerate(rows):
        ids, mask, mult = runner.batch([row])
        with torch.enable_grad(), attribution_patch(model, mult) as (strength, report):
            logits = model(input_ids=ids, attention_mask=mask).logits
            log_p = _answer_token_log_probs(logits, [row])[0].sum()
            (grad,) = torch.autograd.grad(log_p, strength)
        runner.passes += 1
        fallback += report.fallback_rows
        p0_log[e] = float(log_p.detach())
        g = grad.detach().to(torch.float64).cpu().numpy()
        if not np.all(np.isfinite(g)):
            raise HeadSelectionError(f"calibration example {e}: the attribution gradient is not "
                                     "finite (numerical overflow in the model)")
        grad_log[e] = g
        count(1)
    seconds = time.perf_counter() - t0
    ie_log = np.where(eligible, -grad_log.mean(axis=0), 0.0)
    ie = np.where(eligible, -(np.exp(p0_log)[:, None, None] * grad_log).mean(axis=0), 0.0)
    return HeadEffects(ie=ie, ie_log=ie_log, eligible=eligible, p0_log=p0_log,
                       passes=runner.passes, seconds=seconds, n_examples=len(rows),
                       batched=False, rows_per_pass=1, floor=floor, fallback_rows=fallback,
                       method="attribution")


def rank_heads(effects: HeadEffects, by: Literal["ie", "ie_log"] = "ie"
               ) -> list[tuple[int, int]]:
    """Eligible heads sorted by mean effect, largest first; ties by ``(layer, head)``."""
    if by not in ("ie", "ie_log"):
        raise HeadSelectionError(f"by: expected 'ie' or 'ie_log', got {by!r}")
    values = effects.ie if by == "ie" else effects.ie_log
    heads = [(int(layer), int(h)) for layer, h in zip(*np.nonzero(effects.eligible),
                                                        strict=True)]
    return sorted(heads, key=lambda lh: (-float(values[lh]), lh[0], lh[1]))


def choose_n_heads(model: Any, tokenizer: Any, ranked: Sequence[tuple[int, int]],
                   valid_examples: Sequence[CalibrationExample], *,
                   grid: Sequence[int] = DEFAULT_GRID, by: Literal["prob", "log_prob"] = "prob",
                   floor: float = 0.0, rows_per_pass: int | None = None, tol: float = 0.0,
                   add_special_tokens: bool = True,
                   on_progress: Callable[[int, int], None] | None = None
                   ) -> tuple[int, dict[int, float]]:
    """Choose how many top-ranked heads to reweight, on a separate validation split.

    ``curve[n]`` = mean over ``valid_examples`` of ``P(a_wrong)`` (``by="prob"``) or
    ``log P(a_wrong)`` (``by="log_prob"``) with the top ``n`` heads of ``ranked`` reweighted
    together (``n = 0``: stock attention). Grid values above ``len(ranked)`` are dropped (an
    error if none is left). The chosen ``n`` is the smallest grid value with
    ``curve[n] <= min(curve) + tol`` (``tol = 0``: exact minimiser, ties to the smallest ``n``).
    One row per (example, n), ``rows_per_pass`` rows per pass (default: all in one pass);
    ``on_progress(done, total)``: rows evaluated, after each pass.
    """
    valid = list(valid_examples)
    if not valid:
        raise HeadSelectionError("choose_n_heads: the validation set is empty; the head count "
                                 "must be chosen on a separate labelled validation split")
    if by not in ("prob", "log_prob"):
        raise HeadSelectionError(f"by: expected 'prob' or 'log_prob', got {by!r}")
    if not (isinstance(tol, int | float) and math.isfinite(tol) and tol >= 0):
        raise HeadSelectionError(f"tol: expected a finite number >= 0, got {tol!r}")
    ranked = [(int(layer), int(h)) for layer, h in ranked]
    if len(set(ranked)) != len(ranked):
        raise HeadSelectionError("ranked: heads must be distinct (use rank_heads)")
    ns: list[int] = []
    for n in grid:
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise HeadSelectionError(f"grid: expected integers >= 0, got {n!r}")
        if n <= len(ranked) and int(n) not in ns:
            ns.append(int(n))
    if not ns:
        raise HeadSelectionError(f"grid: no value <= {len(ranked)} (the number of ranked heads)")
    ns.sort()
    _white_box(model)
    base = [_example_row(tokenizer, ex, floor, add_special_tokens) for ex in valid]
    rows = [_Row(r.prompt_ids, r.answer_ids, r.multipliers, tuple(ranked[:n]))
            for n in ns for r in base]
    runner = _Runner(model, _pad_id(tokenizer))
    logp = runner.log_probs(rows, _check_rows_per_pass(rows_per_pass, len(rows)),
                            _counter(len(rows), on_progress))
    logp = logp.reshape(len(ns), len(base))
    vals = np.exp(logp) if by == "prob" else logp
    curve = {n: float(vals[i].mean()) for i, n in enumerate(ns)}
    best = min(curve.values())
    chosen = next(n for n in ns if curve[n] <= best + tol)
    return chosen, curve
