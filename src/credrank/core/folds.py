"""Grouped cross-validation folds and group bootstrap resamples (shared by the learned models).

No group (a topic, a host) is ever split across folds, and an interval resamples whole groups,
so an estimate never rests on a model that saw the group it scores.

* :func:`group_folds`: leave-one-group-out while there are at most ``max_logo`` groups (in
  first-seen order); above that ``k`` folds: the sorted groups permuted by
  ``numpy.random.default_rng(seed)`` and dealt round-robin (fold sizes differ by at most one
  group; the same input and seed give the same folds).
* :func:`group_resamples`: ``n_boot`` bootstrap resamples of the groups with replacement
  (``default_rng(seed)``), each as the row indices of the picked groups.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from credrank.core.validation import check_int

#: leave-one-group-out up to this many groups, else ``N_FOLDS`` folds
MAX_LOGO_GROUPS = 20
N_FOLDS = 10


def group_folds(groups: Sequence[str], *, seed: int = 0, max_logo: int = MAX_LOGO_GROUPS,
                k: int = N_FOLDS) -> list[tuple[str, ...]]:
    """Folds of ``groups`` (module docstring). Every group is in exactly one fold."""
    names = list(dict.fromkeys(groups))
    check_int("k", k, 2)
    check_int("max_logo", max_logo, 1)
    if len(names) <= max_logo:
        return [(g,) for g in names]
    order = sorted(names)
    perm = np.random.default_rng(seed).permutation(len(order))
    folds: list[list[str]] = [[] for _ in range(min(k, len(order)))]
    for i, j in enumerate(perm):
        folds[i % len(folds)].append(order[int(j)])
    return [tuple(sorted(f)) for f in folds]


def group_resamples(groups: Sequence[str], n_boot: int, seed: int = 0
                    ) -> Iterator[np.ndarray]:
    """Row indices of ``n_boot`` resamples of the groups with replacement (none when there is
    no group). Row ``i`` belongs to ``groups[i]``."""
    check_int("n_boot", n_boot, 1)
    names = list(dict.fromkeys(groups))
    if not names:
        return
    arr = np.asarray(groups, dtype=object)
    rows = [np.flatnonzero(arr == g) for g in names]
    rng = np.random.default_rng(seed)
    for _ in range(n_boot):
        yield np.concatenate([rows[i] for i in rng.integers(0, len(names), size=len(names))])
