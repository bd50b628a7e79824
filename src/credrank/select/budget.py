"""The pool size a stage handles within its budget, and the warning past it.

Selection and consensus run on the whole ``fetch_k`` pool of one query. Each such stage states
the largest pool it handles within its time budget (its ``max_pool``, measured in
``bench/scripts/bench_select_scale.py`` and given in its docstring); a larger pool still runs, but
the stage warns once per call — a :class:`PoolSizeWarning` (Python's ``warnings``) and the same
sentence in the stage's ``info`` (``"warnings"``), so the ``--json`` document carries it.
"""

from __future__ import annotations

import warnings


class PoolSizeWarning(UserWarning):
    """A stage received more candidates than it handles within its budget."""


def pool_warnings(stage: str, n: int, max_pool: int | None, cost: str) -> list[str]:
    """``[]`` when ``n <= max_pool`` (or no limit); else one sentence naming the stage, the
    pool, the limit and ``cost`` (what grows with the pool), also issued as a
    :class:`PoolSizeWarning`."""
    if max_pool is None or n <= max_pool:
        return []
    message = (f"{stage}: {n} candidates exceed the {max_pool} this stage handles within its "
               f"budget ({cost}); lower fetch_k to {max_pool} or less")
    warnings.warn(message, PoolSizeWarning, stacklevel=3)
    return [message]
