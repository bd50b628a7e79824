"""The work budget of a request: a declared cost model, checked before any work starts.

Bytes do not bound work: 1,000 candidates (about 1 MB) cost 0.3 s with top-k and 25 s and
1.3 GB with ``select: "coverage"``; a 150-byte ``/search`` with ``fetch_k`` 10,000 and the
``planted`` stage cost 16–37 s and 8 GB before that stage had a price. Every ``/search`` and
``/rerank`` request is therefore priced before it runs, in *work units* (1 unit ≈ 1 ms of one
CPU core on the 2-core machine the constants were measured on), as the sum of

* **every stage of its pipeline** over the pool of ``N`` candidates (``fetch_k`` for
  ``/search``, the candidate count for ``/rerank``), ``k = min(top_k, N)``: the price each
  stage declares in the catalog (:class:`credrank.pipeline.catalog.Cost`, e.g. coverage
  ``0.05·N(N−1)/2``, mmr ``1e-4·N²``, consensus ``1e-4·N + 5e-4·N²``, planted ``0.05·N +
  5e-5·N²`` in its default mode). A catalog line without a price does not import, so a new
  stage is never free;
* **embedding** the passages a ``/rerank`` embeds: a passage of ``c`` characters is split
  into chunks of the embedder's window (MiniLM: 256 tokens ≈ :data:`CHUNK_CHARS` characters,
  a new chunk every :data:`CHUNK_STRIDE`: the window less its overlap) and every chunk is
  embedded (:func:`~credrank.index.passages.chunk_texts`)::

      chunks(c) = 1 if c ≤ 1,000 else 1 + ⌈(c − 1,000) / 900⌉
      units(c)  = rate · (c + (chunks(c) − 1) · 100) / 1,000      (the characters read)

  with ``rate`` 50 units per 1,000 characters for a model embedder (MiniLM: 0.03 to 0.1 s
  per 1,000-character passage on that machine, idle to loaded) or 0.1 for the hashing
  embedder; a stage that embeds one passage per candidate (``embeds`` in its price) pays
  ``rate`` per candidate. The query itself is not counted (at most 2,000 characters, once).

Declared policy: a request whose estimate is over the budget (``--max-request-cost``,
default :data:`~credrank.serve.config.DEFAULT_MAX_REQUEST_COST`) is refused with 422 before
any work, naming the field that sets the pool (``candidates`` or ``fetch_k``), the estimate
part by part, the stage that costs most, the budget and the largest pool that fits (the body
carries ``cost``, ``budget``, ``stage`` and ``largest_pool``). A pool over a stage's declared
cap (``max_pool`` of its price: the stages whose memory grows as ``N²``) is refused the same
way, budget or not; a budget of 0 turns the check off (the behaviour
before it existed). A request estimated at ``--heavy-cost`` units or more (default
:data:`HEAVY_UNITS`) is *heavy*: at most ``--max-heavy-requests`` of those run at once
(:mod:`credrank.serve.gate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from credrank.pipeline.catalog import entry

#: the default cost from which a request is heavy (its concurrency is limited)
HEAVY_UNITS = 1_000.0
#: the selectors whose cost grows fastest with the pool (named in refusals as the costly ones)
EXPENSIVE_SELECTORS = ("coverage", "exposure")
#: units to embed 1,000 characters of passage text, by embedder name (others: MODEL_EMBED)
EMBED_UNITS = {"hashing": 0.1}
MODEL_EMBED_UNITS = 50.0
#: characters of one chunk (MiniLM's window: 256 tokens ≈ 1,000 characters) and between the
#: starts of two chunks (the window less its overlap of 32 tokens, rounded up)
CHUNK_CHARS = 1_000
CHUNK_STRIDE = 900


def passage_units(embedder: str) -> float:
    """Units to embed one passage of :data:`CHUNK_CHARS` characters with ``embedder``."""
    return EMBED_UNITS.get(embedder, MODEL_EMBED_UNITS) * CHUNK_CHARS / 1_000


def chunks(chars: int) -> int:
    """The chunks a passage of ``chars`` characters is embedded as (module docstring)."""
    return 1 if chars <= CHUNK_CHARS else 1 + math.ceil((chars - CHUNK_CHARS) / CHUNK_STRIDE)


def embed_units(embedder: str, lengths: Sequence[int]) -> float:
    """Units to embed passages of ``lengths`` characters, every chunk of each (module
    docstring): ``rate · Σ (c + (chunks(c) − 1)·(CHUNK_CHARS − CHUNK_STRIDE)) / 1,000``."""
    rate = EMBED_UNITS.get(embedder, MODEL_EMBED_UNITS)
    overlap = CHUNK_CHARS - CHUNK_STRIDE
    return rate * sum(n + (chunks(n) - 1) * overlap for n in lengths) / 1_000


@dataclass(frozen=True)
class Estimate:
    """A request's estimated cost: ``parts`` (what → units), their ``total`` and the stage
    that costs most (``costliest``: its name, ``None`` when embedding costs more)."""

    parts: dict[str, float]
    costliest: str | None = None

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def describe(self) -> str:
        return ", ".join(f"{what}: {units:,.0f}" for what, units in self.parts.items())


def estimate(*, pool: int, top_k: int, stages: Sequence[tuple[str, dict[str, Any]]],
             embedder: str = "hashing", embed_lengths: Sequence[int] | None = None
             ) -> Estimate:
    """The cost of one request (module docstring): ``stages`` are the pipeline's ``(name,
    params)`` in order, each priced by its catalog :class:`~credrank.pipeline.catalog.Cost`."""
    k = min(top_k, pool)
    passage = passage_units(embedder)
    parts: dict[str, float] = {}
    best, most = None, -1.0
    for name, params in stages:
        cost = entry(name).cost
        units = cost.units(pool, top_k, params, passage=passage)
        uses_k = bool(cost.resolved(params).nk or cost.resolved(params).nk2)
        parts[f"{name} ({cost.formula(params)}, N={pool:,}"
              + (f", k={k:,})" if uses_k else ")")] = units
        if units > most:
            best, most = name, units
    if embed_lengths:
        units = embed_units(embedder, embed_lengths)
        parts[f"embedding {len(embed_lengths):,} passages with {embedder}"] = units
        if units > most:
            best = None
    return Estimate(parts, best)


def pool_caps(stages: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, int]]:
    """``(stage, max_pool)`` of each stage whose price declares a pool cap."""
    out = []
    for name, params in stages:
        cap = entry(name).cost.resolved(params).max_pool
        if cap is not None:
            out.append((name, cap))
    return out


def largest_pool(budget: float, *, pool: int, top_k: int,
                 stages: Sequence[tuple[str, dict[str, Any]]], embedder: str = "hashing",
                 embed_lengths: Sequence[int] | None = None) -> int:
    """The largest pool ``≤ pool`` whose estimate fits ``budget`` (embedding scaled to the
    same share of passages to embed); 0 when even one candidate does not fit."""
    lengths = list(embed_lengths or [])

    def fits(n: int) -> bool:
        share = lengths[:round(len(lengths) * n / pool)] if pool else []
        return estimate(pool=n, top_k=top_k, stages=stages, embedder=embedder,
                        embed_lengths=share).total <= budget

    low, high = 0, pool
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low
