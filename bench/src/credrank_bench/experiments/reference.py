"""A straightforward dict-of-answers IWMV: the readable reference that the vectorised kernel
(:func:`credrank.reliability.estimate.iterate_weighted_majority`) is tested against and
benchmarked against. Same declared rules (chapter 35.3): strict-majority (or unique-plurality)
start, vote weights ``v_s = S·r_s − 1``, abstentions never vote, lowest class id wins ties
(the answer only: a tied question, and one with fewer than two ballots, is unresolved and
counts in no source's ``r``).
Not for production use: it is a loop over Python dictionaries.
"""

from __future__ import annotations


def dict_loop_iwmv(answers: dict[int, dict[int, int]], n_questions: int, tol: float = 1e-6,
                   max_iter: int = 100, start: str = "majority",
                   ) -> tuple[dict[int, float], dict[int, int], int]:
    """IWMV over dictionaries: strict-majority (or unique-plurality) start, v = S·r − 1,
    lowest-id ties. Returns ``(r, z, n_iter)``: ``z`` holds every answered question's answer
    (ties by the lowest id); ``r`` counts only the resolved ones (not tied, >= 2 ballots)."""
    n_s = len(answers)
    resolved: set[int] = set()

    def vote(weights: dict[int, float], strict: str | None) -> dict[int, int]:
        z = {}
        resolved.clear()
        for q in range(n_questions):
            score: dict[int, float] = {}
            count: dict[int, int] = {}
            for s, row in answers.items():
                c = row.get(q)
                if c is not None:
                    score[c] = score.get(c, 0.0) + weights[s]
                    count[c] = count.get(c, 0) + 1
            if not score:
                continue
            if strict == "majority" and 2 * max(count.values()) <= sum(count.values()):
                continue
            best = max(score.values())
            tol_ = 1e-9 * max(1.0, abs(best))
            top = [c for c, v in score.items() if v >= best - tol_]
            if strict == "plurality" and len(top) > 1:
                continue
            z[q] = min(top)
            if len(top) == 1 and sum(count.values()) >= 2:
                resolved.add(q)
        return z

    def rates(z: dict[int, int]) -> dict[int, float]:
        r = {}
        for s, row in answers.items():
            usable = [q for q in row if q in resolved]
            if usable:
                r[s] = sum(row[q] == z[q] for q in usable) / len(usable)
        return r

    z = vote(dict.fromkeys(answers, 1.0), strict=start)
    r = rates(z)
    n_iter = 0
    while r and n_iter < max_iter:
        z = vote({s: (n_s * r[s] - 1.0) if s in r else 0.0 for s in answers}, strict=None)
        new = rates(z)
        same = set(new) == set(r)
        delta = max((abs(new[s] - r[s]) for s in new if s in r), default=0.0)
        r, n_iter = new, n_iter + 1
        if same and delta < tol:
            break
    return r, z, n_iter
