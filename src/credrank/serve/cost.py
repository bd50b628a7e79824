"""The work budget of a request: a declared cost model, checked before any work starts.

Bytes do not bound work: 1,000 candidates (about 1 MB) cost 0.3 s with top-k and 25 s and
1.3 GB with ``select: "coverage"``. Every ``/search`` and ``/rerank`` request is therefore
priced before it runs, in *work units* (1 unit ≈ 1 ms of one CPU core on the 2-core machine
the constants were measured on), as the sum of

* **selection** over a pool of ``N`` candidates (``fetch_k`` for ``/search``, the candidate
  count for ``/rerank``) with ``k = min(top_k, N)``:

  ======== ================================= ============================================
  select   units                             what grows
  ======== ================================= ============================================
  (none)   0.001 · N                         top-k: a sort
  mmr      1e-4 · N²                         the pairwise cosine matrix
  fair     1e-4 · N · k                      FA*IR's greedy prefix test
  exposure 4e-4 · N · k²                     the exposure LP (N × k) and its BvN lottery
  coverage 0.05 · N(N−1)/2                   the MILP's pair variables (ILAD), HiGHS
  ======== ================================= ============================================

* **consensus** (``consensus: true``): ``1e-4 · N + 5e-4 · N²`` (pairwise answer matching);
* **embedding** the candidates a ``/rerank`` sends without a ``vector``: per passage,
  ``min(characters, 1,000) / 1,000 ×`` 50 units for a model embedder (MiniLM: 0.03 to 0.1 s
  per 1,000-character passage on that machine, idle to loaded; it reads at most 256 tokens)
  or 0.1 for the hashing embedder. The query itself is not counted (at most 2,000 characters, once).

Declared policy: a request whose estimate is over the budget (``--max-request-cost``,
default :data:`~credrank.serve.config.DEFAULT_MAX_REQUEST_COST`) is refused with 422 before
any work, naming the field that sets the pool (``candidates`` or ``fetch_k``), the estimate,
the budget and the largest pool that fits; a budget of 0 turns the check off (the behaviour
before it existed). A request estimated at ``--heavy-cost`` units or more (default
:data:`HEAVY_UNITS`) is *heavy*: at most ``--max-heavy-requests`` of those run at once
(:mod:`credrank.serve.gate`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: the default cost from which a request is heavy (its concurrency is limited)
HEAVY_UNITS = 1_000.0
#: the selectors whose cost grows fastest with the pool (named in refusals as the costly ones)
EXPENSIVE_SELECTORS = ("coverage", "exposure")
#: units to embed 1,000 characters of passage text, by embedder name (others: MODEL_EMBED)
EMBED_UNITS = {"hashing": 0.1}
MODEL_EMBED_UNITS = 50.0
#: characters of a passage an embedder reads at most (MiniLM: 256 tokens ≈ 1,000 characters)
EMBED_CHARS_CAP = 1_000


@dataclass(frozen=True)
class SelectorCost:
    """The declared cost of one selector: ``units(N, k)`` and the formula, as shown."""

    name: str
    formula: str
    units: Callable[[int, int], float]


SELECTOR_COSTS: dict[str | None, SelectorCost] = {
    None: SelectorCost("top-k", "0.001·N", lambda n, k: 0.001 * n),
    "mmr": SelectorCost("mmr", "1e-4·N²", lambda n, k: 1e-4 * n * n),
    "fair": SelectorCost("fair", "1e-4·N·k", lambda n, k: 1e-4 * n * k),
    "exposure": SelectorCost("exposure", "4e-4·N·k²", lambda n, k: 4e-4 * n * k * k),
    "coverage": SelectorCost("coverage", "0.05·N(N−1)/2",
                             lambda n, k: 0.05 * n * (n - 1) / 2),
}


def consensus_units(n: int) -> float:
    """Units of label-free answer consensus over ``n`` candidates."""
    return 1e-4 * n + 5e-4 * n * n


def embed_units(embedder: str, lengths: list[int]) -> float:
    """Units to embed passages of ``lengths`` characters with the embedder named so."""
    rate = EMBED_UNITS.get(embedder, MODEL_EMBED_UNITS)
    return rate * sum(min(n, EMBED_CHARS_CAP) for n in lengths) / 1_000


@dataclass(frozen=True)
class Estimate:
    """A request's estimated cost: ``parts`` (what → units) and their ``total``."""

    parts: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def describe(self) -> str:
        return ", ".join(f"{what}: {units:,.0f}" for what, units in self.parts.items())


def estimate(*, pool: int, top_k: int, select: str | None, consensus: bool,
             embedder: str = "hashing", embed_lengths: list[int] | None = None) -> Estimate:
    """The cost of one request (see the module docstring for the model)."""
    k = min(top_k, pool)
    cost = SELECTOR_COSTS[select]
    parts = {f"select {cost.name} ({cost.formula}, N={pool:,}, k={k:,})": cost.units(pool, k)}
    if consensus:
        parts[f"consensus (1e-4·N + 5e-4·N², N={pool:,})"] = consensus_units(pool)
    if embed_lengths:
        parts[f"embedding {len(embed_lengths):,} passages with {embedder}"] = embed_units(
            embedder, embed_lengths)
    return Estimate(parts)


def largest_pool(budget: float, *, pool: int, top_k: int, select: str | None,
                 consensus: bool, embedder: str = "hashing",
                 embed_lengths: list[int] | None = None) -> int:
    """The largest pool ``≤ pool`` whose estimate fits ``budget`` (embedding scaled to the
    same share of passages to embed); 0 when even one candidate does not fit."""
    lengths = embed_lengths or []

    def fits(n: int) -> bool:
        share = lengths[:round(len(lengths) * n / pool)] if pool else []
        return estimate(pool=n, top_k=top_k, select=select, consensus=consensus,
                        embedder=embedder, embed_lengths=share).total <= budget

    low, high = 0, pool
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low
