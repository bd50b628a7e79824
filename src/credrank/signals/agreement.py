"""Answer agreement: a correctness signal from credibility-weighted consensus (chapter 35.3).

RA-RAG (chapter 35.3) scores a *source* by how often its answer agrees with the weighted
consensus ``â = argmax_a Σ_s v_s 1[A_s(q) ~ a]``. This module applies the same idea to the
*documents of one candidate batch* for a yes/no question ("does the treatment help?"):

1. each candidate ``d`` gets ``p_d = P(d says yes)`` from a stance model
   (:class:`credrank.stages.stance.StanceAgreement`, or any callable ``(query, batch) -> p``);
2. each candidate votes with weight ``w_d = λ_d · max(sim_d, 0)``, ``λ_d`` being an existing
   factor of the batch (by default the source prior ``prior``; ``1`` when that factor is
   absent or ``weight_factor=None``);
3. the soft consensus is ``z = Σ_d w_d p_d / Σ_d w_d`` (a credibility-weighted share of "yes"),
   sharpened to ``ẑ = σ(κ · logit z)`` (``κ = 1`` keeps ``z``, ``κ → ∞`` is the hard weighted
   majority of the chapter's vote, ``κ = 0`` switches the signal off);
4. each candidate's agreement is the probability that its answer and the consensus coincide,
   ``a_d = p_d ẑ + (1 − p_d)(1 − ẑ)`` (``mode="expected"``), or ``a_d = 1 − |p_d − ẑ|``
   (``mode="absolute"``); the factor is ``f_d = floor + (1 − floor) · a_d ∈ [floor, 1]``.

With ``exclude_self=True`` each document is compared with the consensus of the *other*
candidates (its own vote removed from both sums), so a lone confident page cannot agree with
itself.

**Declared policies.**

* ``Σ w = 0`` (empty batch, all similarities ≤ 0, all priors 0): there is no consensus; every
  factor is 1 (no reweighting) and ``info["agreement"]["consensus"]`` is ``None``. With
  ``exclude_self`` the same holds per document whose *others* weigh 0.
* ``z`` is clipped to ``[1e-6, 1 − 1e-6]`` before the logit, so ``ẑ`` is finite.
* ``mode="expected"`` with ``ẑ = 0.5`` gives every document ``a_d = 0.5``: an undecided
  consensus changes nothing. ``mode="absolute"`` with ``ẑ = 0.5`` instead favours undecided
  pages (``p_d ≈ 0.5``) over confident ones of either side.

**Risk (chapter 35.3): a consensus can be wrong.** Agreement measures conformity, not truth.
When most weighted candidates repeat the same wrong claim (copied pages, a popular myth, a
retriever that favours one side), the factor *rewards* the wrong answer and demotes the correct
minority; a stance model that errs systematically does the same. The factor is bounded below by
``floor`` so that a dissenting page is demoted, never removed, and the consensus, its weight and
the policy are recorded in ``info`` for audit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.params import parameters
from credrank.core.pipeline import Stage
from credrank.core.schema import Flag, Integer, Nullable, Number, Text
from credrank.core.validation import (
    as_unit_vector,
    as_vector,
    check_bool,
    check_choice,
    check_probability,
    check_real,
)

MODES = ("expected", "absolute")
_EPS = 1e-6

StanceFn = Callable[[str, Candidates], np.ndarray]


def _votes(p: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``p`` as probabilities in [0, 1] and ``w`` as one non-negative weight per ``p``."""
    p = as_unit_vector("p", np.reshape(p, -1))
    return p, as_vector("w", np.reshape(w, -1), length=len(p), low=0.0)


def consensus(p: np.ndarray, w: np.ndarray) -> float | None:
    """Credibility-weighted share of "yes": ``z = Σ w_d p_d / Σ w_d`` (chapter 35.3, soft
    weighted vote). ``None`` when ``Σ w = 0`` (declared: no consensus)."""
    p, w = _votes(p, w)
    total = float(w.sum())
    if total <= 0:
        return None
    return float(np.clip((w @ p) / total, 0.0, 1.0))


def sharpen(z: float | np.ndarray, sharpness: float) -> np.ndarray:
    """``ẑ = σ(κ · logit z)`` with ``z`` clipped to ``[1e-6, 1 − 1e-6]`` (finite for every
    ``z``); ``κ = 1`` returns ``z``, ``κ = 0`` returns 0.5."""
    zc = np.clip(np.asarray(z, dtype=np.float64), _EPS, 1 - _EPS)
    logit = np.log(zc) - np.log1p(-zc)
    return np.exp(-np.logaddexp(0.0, -sharpness * logit))


def agreement_factor(p: np.ndarray, w: np.ndarray, *, floor: float = 0.1,
                     sharpness: float = 1.0, mode: str = "expected",
                     exclude_self: bool = False) -> np.ndarray:
    """Per-document agreement factor ``f_d ∈ [floor, 1]`` (chapter 35.3 at document level).

    ``z = Σ w p / Σ w`` (with ``exclude_self``: ``z_d = Σ_{e≠d} w_e p_e / Σ_{e≠d} w_e``),
    ``ẑ = σ(κ · logit z)``, ``a_d = p_d ẑ + (1 − p_d)(1 − ẑ)`` (``expected``) or
    ``1 − |p_d − ẑ|`` (``absolute``), ``f_d = floor + (1 − floor) · a_d``.
    A document whose consensus weight is 0 gets ``f_d = 1`` (declared: no evidence, no change).
    """
    p, w = _votes(p, w)
    floor = check_probability("floor", floor)
    sharpness = check_real("sharpness", sharpness, 0.0, math.inf)
    check_choice("mode", mode, MODES)
    exclude_self = check_bool("exclude_self", exclude_self)
    n = len(p)
    if n == 0:
        return np.zeros(0)
    total = float(w.sum())
    wp = float(w @ p)
    if exclude_self:
        others = total - w
        has = others > 1e-12 * max(total, 1.0)
        z = np.where(has, (wp - w * p) / np.where(has, others, 1.0), 0.5)
    else:
        has = np.full(n, total > 0)
        z = np.full(n, wp / total if total > 0 else 0.5)
    z_hat = sharpen(np.clip(z, 0.0, 1.0), sharpness)
    if mode == "expected":
        a = p * z_hat + (1.0 - p) * (1.0 - z_hat)
    else:
        a = 1.0 - np.abs(p - z_hat)
    f = floor + (1.0 - floor) * np.clip(a, 0.0, 1.0)
    return np.where(has, np.clip(f, floor, 1.0), 1.0)


class AnswerAgreement(Stage):
    """Adds the factor ``agreement`` (default name) = :func:`agreement_factor` of the batch.

    Args:
        stance: ``(query, batch) -> p`` with ``p[i] = P(candidate i says yes)`` in [0, 1].
        weight_factor: name of the factor used as the credibility ``λ_d`` in the vote weight
            ``w_d = λ_d · max(sim_d, 0)``; ``None``, or a factor the batch does not have,
            means ``λ_d = 1`` (recorded in ``info``).
        floor, sharpness, mode, exclude_self: see :func:`agreement_factor`.
        voters: when set, only the ``voters`` candidates with the highest retrieval score
            vote (the others still receive a factor).

    The stance probabilities are kept in the meta column ``p_yes`` for audit; the consensus,
    its total weight and the policies go to ``info["agreement"]``.
    """

    #: agreement counts each document once (passages of one page are one voice)
    counts_documents = True

    @parameters(weight_factor=Nullable(Text()), floor=Number(0.0, 1.0),
                sharpness=Number(0.0), mode=Text(choices=MODES), exclude_self=Flag(),
                voters=Nullable(Integer(1)))
    def __init__(self, stance: StanceFn, weight_factor: str | None = "prior", *,
                 floor: float = 0.1, sharpness: float = 1.0, mode: str = "expected",
                 exclude_self: bool = False, voters: int | None = None,
                 name: str = "agreement"):
        if not callable(stance):
            raise ValueError(f"stance: expected a callable (query, batch) -> p; got "
                             f"{type(stance).__name__}")
        self.floor, self.sharpness, self.mode, self.voters = floor, sharpness, mode, voters
        self.stance = stance
        self.weight_factor, self.exclude_self = weight_factor, exclude_self
        self.name = name

    def weights(self, batch: Candidates) -> tuple[np.ndarray, str]:
        """Vote weights ``w_d = λ_d · max(sim_d, 0)`` and a note on where ``λ`` came from."""
        sim = np.maximum(batch.retrieval_score, 0.0)
        if self.weight_factor is None:
            lam, note = np.ones(len(batch)), "λ = 1 (weight_factor=None)"
        elif self.weight_factor in batch.factors:
            lam = np.maximum(batch.factors[self.weight_factor], 0.0)
            note = f"λ = factor {self.weight_factor!r}"
        else:
            lam = np.ones(len(batch))
            note = f"λ = 1 (factor {self.weight_factor!r} absent from the batch)"
        w = lam * sim
        if self.voters is not None and len(batch) > self.voters:
            order = np.argsort(-batch.retrieval_score, kind="stable")
            mask = np.zeros(len(batch), dtype=bool)
            mask[order[:self.voters]] = True
            w = np.where(mask, w, 0.0)
        return w, note

    def transform(self, batch: Candidates) -> Candidates:
        if len(batch) == 0:
            out = batch.with_factor(self.name, np.zeros(0), low=0.0, high=1.0)
            return out.with_info(agreement={"consensus": None, "total_weight": 0.0,
                                            "policy": "empty batch"})
        p = np.reshape(self.stance(batch.query, batch), -1)
        if len(p) != len(batch):
            raise StageError(f"stance: returned {len(p)} probabilities; expected {len(batch)} "
                             "(one per candidate)")
        p = as_unit_vector("stance", p, error=StageError)
        w, note = self.weights(batch)
        f = agreement_factor(p, w, floor=self.floor, sharpness=self.sharpness, mode=self.mode,
                             exclude_self=self.exclude_self)
        z = consensus(p, w)
        info = {"consensus": z,
                "sharpened": None if z is None else float(sharpen(z, self.sharpness)),
                "total_weight": float(w.sum()), "weights": note,
                "policy": "no consensus (total weight 0): factor 1" if z is None else "ok"}
        out = batch.with_factor(self.name, f, low=0.0, high=1.0).with_meta("p_yes", list(p))
        return out.with_info(agreement=info)

    def config(self) -> dict[str, Any]:
        return {"weight_factor": self.weight_factor, "floor": self.floor,
                "sharpness": self.sharpness, "mode": self.mode,
                "exclude_self": self.exclude_self, "voters": self.voters}
