"""Weighted voting over answer classes (chapter 35.3), vectorised over questions.

The vote of the chapter: ``â ∈ argmax_{a ∈ 𝒜} Σ_{s ∈ 𝒲} v_s 1[A_s(q) ~ a]``.

Declared policies:

* **abstentions** (class ``-1``) never vote;
* **empty**: a question with no non-abstaining ballot has no answer (class ``-1``);
* **candidates**: the argmax runs over the classes that received at least one ballot, so with
  negative weights (``v_s < 0`` when ``r_s < 1/S``) the least negative present class wins;
* **ties**: scores within ``1e-9 · max(1, |best|)`` of the best count as tied (sums of the
  same weights in another order differ in the last bits); the tie goes to the **lowest class
  id**, which the equivalence rule numbers in lexicographic order of the normalised answers,
  i.e. the lexicographically smallest normalised answer wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from credrank.core.validation import as_vector, check_bool, check_choice, check_int, check_positive
from credrank.reliability.equivalence import AnswerEquivalence

#: relative tolerance under which two class scores count as tied
TIE_RTOL = 1e-9


def paper_weights(reliability: np.ndarray, n_sources: int | None = None, *,
                  clip: bool = False, max_scale: float | None = None) -> np.ndarray:
    """RA-RAG vote weights ``v_s = S·r_s − 1`` (chapter 35.3).

    ``S`` is ``n_sources`` (default: ``len(reliability)``; never fewer than the reliabilities
    given: a subset of the sources may be weighted with the full ``S``). ``max_scale`` caps
    the scaling factor (``min(S, max_scale)·r_s − 1``, the paper's optional cap). With
    ``clip=True`` the weights are ``max(v_s, 0)``; otherwise ``v_s`` keeps the paper's
    semantics and is negative when ``r_s < 1/S`` (an affine weight, not a probability).
    """
    r = as_vector("reliability", reliability, low=0.0, high=1.0)
    scale = float(check_int("n_sources", len(r) if n_sources is None else n_sources, 1))
    if scale < len(r):
        raise ValueError(f"n_sources: expected at least the number of reliabilities "
                         f"({len(r)}), got {int(scale)}")
    if max_scale is not None:
        scale = min(scale, check_positive("max_scale", max_scale))
    v = scale * r - 1.0
    return np.maximum(v, 0.0) if check_bool("clip", clip) else v


def class_scores(classes: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-question class score sums ``Σ_s w_s 1[A_s(q) = c]`` and ballot counts (35.3).

    ``classes`` is the ``(S, Q)`` int matrix of class ids (``-1`` = abstain); returns
    ``(scores, counts)``, both ``(Q, C)`` with ``C = max class id + 1`` (at least 1).
    """
    m = np.asarray(classes)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if m.ndim != 2:
        raise ValueError(f"classes: expected a 2-D (sources, questions) matrix, got {m.ndim}-D")
    if len(w) != m.shape[0]:
        raise ValueError(f"weights: expected {m.shape[0]} values (one per source), got {len(w)}")
    as_vector("weights", w)
    n_q = m.shape[1]
    n_c = max(int(m.max(initial=-1)) + 1, 1)
    mask = m >= 0
    q_idx = np.broadcast_to(np.arange(n_q), m.shape)[mask]
    flat = q_idx * n_c + m[mask]
    w_b = np.broadcast_to(w[:, None], m.shape)[mask]
    scores = np.bincount(flat, weights=w_b, minlength=n_q * n_c).reshape(n_q, n_c)
    counts = np.bincount(flat, minlength=n_q * n_c).reshape(n_q, n_c)
    return scores, counts


def vote_matrix(classes: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted vote on every question at once (chapter 35.3, declared tie/empty rules).

    Returns ``(winner, tied)``: ``winner[q]`` is the winning class id or ``-1`` when no source
    answered ``q``; ``tied[q]`` is True when more than one class reached the best score.
    """
    scores, counts = class_scores(classes, weights)
    present = counts > 0
    masked = np.where(present, scores, -np.inf)
    best = masked.max(axis=1, initial=-np.inf)
    has = np.isfinite(best)
    tol = TIE_RTOL * np.maximum(1.0, np.abs(np.where(has, best, 0.0)))
    top = present & (masked >= (np.where(has, best, 0.0) - tol)[:, None])
    winner = np.where(has, np.argmax(top, axis=1), -1)
    tied = top.sum(axis=1) > 1
    return winner.astype(np.int64), tied


#: rules of :func:`majority_matrix`
MAJORITY_RULES = ("majority", "plurality", "all")
#: start rules of the iteration: the rules that leave a tie unresolved (a tie-broken class is
#: not agreement, :mod:`credrank.reliability.estimate`)
START_RULES = ("majority", "plurality")


def majority_matrix(classes: np.ndarray, rule: str = "all") -> np.ndarray:
    """Unweighted vote on every question; which questions count as resolved depends on ``rule``.

    * ``"majority"`` — strict majority: the top class holds **more than half** of the
      non-abstaining ballots (the iteration's default start, chapter 35.3);
    * ``"plurality"`` — strict plurality: the top class has strictly more ballots than any
      other class (needed when many wrong answers split the vote and nothing has > half);
    * ``"all"`` — plain plurality with the tie rule (every answered question resolved): the
      plain-majority *answer*, not a start of the iteration (a tie is not resolved there).

    Unresolved questions get ``-1``.
    """
    check_choice("rule", rule, MAJORITY_RULES)
    m = np.asarray(classes)
    winner, tied = vote_matrix(m, np.ones(m.shape[0]))
    if rule == "all":
        return winner
    if rule == "plurality":
        return np.where(tied, -1, winner)
    _, counts = class_scores(m, np.ones(m.shape[0]))
    total = counts.sum(axis=1)
    top = counts.max(axis=1, initial=0)
    return np.where(2 * top > total, winner, -1)


@dataclass(frozen=True)
class VoteResult:
    """Outcome of one weighted vote.

    Attributes:
        answer: representative (normalised) answer of the winning class, ``None`` if empty.
        votes: ``{class representative: summed weight}`` over classes with a ballot.
        ballots: ``{class representative: number of ballots}``.
        tie: whether the winner was picked by the tie rule.
        members: ``{class representative: [raw answers]}``.
    """

    answer: str | None
    votes: dict[str, float]
    ballots: dict[str, int]
    tie: bool
    members: dict[str, list[str]] = field(default_factory=dict)


def weighted_vote(answers: Sequence[str | None], weights: Sequence[float],
                  equivalence: AnswerEquivalence | None = None) -> VoteResult:
    """``â ∈ argmax_a Σ_s v_s 1[A_s(q) ~ a]`` for one question (chapter 35.3).

    ``answers[i]`` is the answer of the source with weight ``weights[i]`` (``None`` or IDK =
    abstention). Classes come from ``equivalence`` (default: normalisation only); ties and the
    empty vote follow the module's declared rules.
    """
    if len(answers) != len(weights):
        raise ValueError(f"weights: expected {len(answers)} values (one per answer), "
                         f"got {len(weights)}")
    eq = equivalence or AnswerEquivalence()
    labels, ids = eq.classes(list(answers))
    w = np.asarray(weights, dtype=np.float64)
    winner, tied = vote_matrix(ids[:, None], w)
    scores, counts = class_scores(ids[:, None], w)
    votes = {lab: float(scores[0, c]) for c, lab in enumerate(labels)}
    ballots = {lab: int(counts[0, c]) for c, lab in enumerate(labels)}
    members: dict[str, list[str]] = {lab: [] for lab in labels}
    for a, c in zip(answers, ids.tolist(), strict=True):
        if c >= 0 and a is not None:
            members[labels[c]].append(a)
    win = int(winner[0])
    return VoteResult(answer=labels[win] if win >= 0 else None, votes=votes, ballots=ballots,
                      tie=bool(tied[0]), members=members)
