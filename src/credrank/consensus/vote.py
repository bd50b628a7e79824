"""The weighted answer vote of one query, copies counted once (chapter 35.3, pure math).

RA-RAG's weighted majority ``â = argmax_a Σ_s v_s 1[A_s(q) ~ a]`` (chapter 35.3) ranks
*answers* by the credibility-weighted mass behind them. Here the voters are the candidate
passages of one query:

* passage ``d`` answers class ``c_d`` (``-1``: no answer, it does not vote) and weighs
  ``w_d ≥ 0`` (the stage uses ``w_d = max(sim_d, 0) · Π λ_d``, the credibility factors the
  batch has);
* passages are grouped into near-duplicate groups ``g``
  (:func:`~credrank.consensus.duplicates.duplicate_groups`); **each group votes once**, with
  its heaviest answering member ``r(g) = argmax_{d ∈ g, c_d ≥ 0} w_d`` (ties: the earliest
  row), for that member's answer. Ten copies of one fake are one voice;
* the weighted share of answer ``c`` is ``s_c = Σ_g w_{r(g)} 1[c_{r(g)} = c] / Σ_g w_{r(g)}``;
  the top answer is ``c* = argmax_c s_c`` (ties: the lower class index, i.e. the
  lexicographically smaller answer) with share ``s* = s_{c*}``;
* **status**: ``no answers`` when the total voting weight is 0 (no passage answers, or all
  answering passages weigh 0); ``contested`` when ``s* ≤ threshold`` (an even split at the
  default 0.5 is contested; ``threshold = 1`` never commits) or when another answer's share
  ties ``s*`` (within :data:`TIE_RTOL`: ``tied``; the lower class index is ``c*`` only by
  name, so no threshold commits to it); else ``agreed``;
* **factor** (:func:`consensus_factor`): ``f_d = floor + (1 − floor) · s_{c_d} / s*`` for an
  answering passage (``1`` for the top answer, ``floor`` for an answer no voice supports,
  never 0 while ``floor > 0``); a passage without an answer gets ``unanswered`` (declared;
  default 1: no evidence, no change). With status ``no answers`` every factor is 1.

Every output is finite: ``Σ w = 0`` is the declared ``no answers`` case, never a division.
Agreement measures conformity, not truth: when most independent voices repeat one wrong
answer, the consensus is wrong (see :mod:`credrank.signals.agreement`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from credrank.core.validation import as_vector, check_probability

#: the three outcomes of a vote
NO_ANSWERS, CONTESTED, AGREED = "no answers", "contested", "agreed"
#: how close (relative) two shares are to tie for the top: then the vote is contested
TIE_RTOL = 1e-9


@dataclass(frozen=True)
class Vote:
    """The outcome of one query's vote.

    Attributes:
        shares: ``s_c`` per answer class (sums to 1 unless the status is ``no answers``,
            then all 0).
        weights: the voting mass ``Σ_g w_{r(g)} 1[c_{r(g)} = c]`` per class.
        voices: per passage, True when it cast its group's vote.
        total_weight: ``Σ_g w_{r(g)}``.
        top: the top class ``c*`` (``None`` with ``no answers``).
        status: ``no answers`` | ``contested`` | ``agreed``.
        threshold: the vote is ``contested`` when ``s*`` is at or below it.
        tied: another answer's share ties ``s*`` (the vote is then ``contested``).
    """

    shares: np.ndarray
    weights: np.ndarray
    voices: np.ndarray
    total_weight: float
    top: int | None
    status: str
    threshold: float
    tied: bool = False

    @property
    def top_share(self) -> float:
        """``s*`` (0 with ``no answers``)."""
        return 0.0 if self.top is None else float(self.shares[self.top])


def group_voices(classes: np.ndarray, groups: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per passage, whether it is its group's voice ``r(g)``: the heaviest answering member
    (ties: the earliest row). A group whose members all lack an answer has no voice."""
    n = len(classes)
    voices = np.zeros(n, dtype=bool)
    best: dict[int, int] = {}
    for i in range(n):
        if classes[i] < 0:
            continue
        g = int(groups[i])
        j = best.get(g)
        if j is None or weights[i] > weights[j]:
            best[g] = i
    voices[list(best.values())] = True
    return voices


def weighted_vote(classes: np.ndarray, groups: np.ndarray, weights: np.ndarray, *,
                  n_classes: int | None = None, threshold: float = 0.5) -> Vote:
    """The vote of the module docstring.

    Args:
        classes: answer class per passage, ``-1`` for no answer.
        groups: near-duplicate group per passage (any integers; equal = copies).
        weights: ``w_d ≥ 0`` per passage (finite).
        n_classes: number of answer classes (default ``max(classes) + 1``).
        threshold: ``s* ≤ threshold`` is ``contested``, in ``[0, 1]``.
    """
    classes = np.asarray(classes, dtype=np.int64).reshape(-1)
    n = len(classes)
    groups = np.asarray(groups, dtype=np.int64).reshape(-1)
    if len(groups) != n:
        raise ValueError(f"groups: expected {n} entries (one per passage), got {len(groups)}")
    weights = as_vector("weights", np.reshape(weights, -1), length=n, low=0.0)
    threshold = check_probability("threshold", threshold)
    k = int(classes.max()) + 1 if n and n_classes is None else int(n_classes or 0)
    if n and classes.max() >= k:
        raise ValueError(f"classes: expected ids in [-1, {k - 1}], got {int(classes.max())}")
    voices = group_voices(classes, groups, weights)
    mass = np.zeros(k)
    np.add.at(mass, classes[voices], weights[voices])
    total = float(mass.sum())
    if total <= 0.0:
        return Vote(np.zeros(k), mass, voices, 0.0, None, NO_ANSWERS, threshold)
    shares = mass / total
    top = int(np.argmax(shares))  # first maximum: the lower class index on ties
    tied = int(np.sum(shares >= shares[top] * (1.0 - TIE_RTOL))) > 1
    status = CONTESTED if tied or shares[top] <= threshold else AGREED
    return Vote(shares, mass, voices, total, top, status, threshold, tied)


def consensus_factor(classes: np.ndarray, vote: Vote, *, floor: float = 0.1,
                     unanswered: float = 1.0) -> np.ndarray:
    """``f_d = floor + (1 − floor) · s_{c_d} / s*`` (answering passages), ``unanswered``
    (passages without an answer); all 1 when the vote has ``no answers``. In
    ``[min(floor, unanswered), 1]``."""
    floor = check_probability("floor", floor)
    unanswered = check_probability("unanswered", unanswered)
    classes = np.asarray(classes, dtype=np.int64).reshape(-1)
    if vote.top is None:
        return np.ones(len(classes))
    top = vote.top_share  # > 0: the total weight is positive
    share = np.where(classes >= 0, vote.shares[np.maximum(classes, 0)], 0.0)
    f = np.clip(floor + (1.0 - floor) * share / top, floor, 1.0)
    f = np.where(share >= top, 1.0, f)  # the top answer (and any tied with it): exactly 1
    return np.where(classes >= 0, f, unanswered)
