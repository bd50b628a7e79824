"""The stage catalog: every stage a pipeline spec can name, with its kind and order rank.

One line per stage: its spec name, the class that implements it (``"module:Class"``, imported
when first used, so naming the catalog costs no import of scipy, torch or the stage modules;
every prior and signal is a module of :mod:`credrank.stages`), its kind and its rank. The
class declares everything else itself (DESIGN.md §4): its parameters (``SPEC``, a
:mod:`credrank.core.schema` table: one declaration, one validator, whatever the front door),
how it is built from them (``from_spec``), what it reads of each candidate (``reads``) and
whether the engine can score it (``formula_term``).
**Adding a stage is its module and one line here**; every front door then has it.

Every line declares the stage's **price** (:class:`Cost`: how its work grows with the pool
``N`` of candidates it sees and ``k = min(top_k, N)``), which the service's budget
(:mod:`credrank.serve.cost`) and its heavy-request gate read. ``cost`` has no default: a line
without a price fails when this module is imported, so no stage is ever free.

Kinds, in the order a pipeline runs them:

* ``prior`` — the source prior a candidate starts from (at most one);
* ``signal`` — one more factor each (any number, each at most once);
* ``combine`` — the factors and the retrieval score into one score (at most one; default
  ``multiply``);
* ``select`` — the ordering and cut (at most one, last; default ``topk``).

Within a pipeline, stages must come in non-decreasing rank: a smoothing step needs the prior
it smooths, stance agreement and consensus weigh votes by the factors before them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

KINDS = ("prior", "signal", "combine", "select")


@dataclass(frozen=True)
class Cost:
    """A stage's declared price in *work units* (1 unit ≈ 1 ms of one CPU core on the 2-core
    machine the constants were measured on) over a pool of ``N`` candidates, ``k = min(top_k,
    N)``::

        units = n·N + pairs·N(N−1)/2 + n2·N² + nk·N·k + nk2·N·k² + embeds·N·e
                + per_param·N·min(p, N)            (p: the parameter ``param``, e.g. ``m``)

    ``e`` is the embedder's price of one passage (the service's, :func:`credrank.serve.cost.
    passage_units`): ``embeds`` counts the passages a stage embeds per candidate (a stance
    model's snippets). ``variants``: ``(parameter, value, cost)`` triples — the first whose
    parameter has that value in the spec replaces this cost (a mode that costs more).
    ``max_pool``: the largest pool the stage accepts in the service (``None``: the budget
    alone bounds it) — set where a stage is super-linear in memory."""

    n: float = 0.0
    pairs: float = 0.0
    n2: float = 0.0
    nk: float = 0.0
    nk2: float = 0.0
    embeds: float = 0.0
    param: str | None = None
    param_default: int = 0
    per_param: float = 0.0
    max_pool: int | None = None
    variants: tuple[tuple[str, Any, Cost], ...] = ()

    def __post_init__(self) -> None:
        terms = (self.n, self.pairs, self.n2, self.nk, self.nk2, self.embeds, self.per_param)
        if any(not isinstance(t, (int, float)) or t < 0 or t != t for t in terms):
            raise ValueError(f"Cost: expected finite coefficients >= 0, got {terms}")
        if not any(terms):
            raise ValueError("Cost: expected at least one coefficient > 0 (no stage is free), "
                             "got all 0")

    def resolved(self, params: Mapping[str, Any]) -> Cost:
        """The cost that applies with ``params`` (the first matching variant, else this)."""
        for name, value, cost in self.variants:
            if params.get(name) == value:
                return cost.resolved(params)
        return self

    def units(self, pool: int, top_k: int, params: Mapping[str, Any] | None = None, *,
              passage: float = 0.0) -> float:
        """The units over ``pool`` candidates (class docstring); ``passage``: ``e``."""
        c = self.resolved(params or {})
        n, k = float(pool), float(min(top_k, pool))
        p = float((params or {}).get(c.param, c.param_default)) if c.param else 0.0
        return (c.n * n + c.pairs * n * (n - 1) / 2 + c.n2 * n * n + c.nk * n * k
                + c.nk2 * n * k * k + c.embeds * n * passage + c.per_param * n * min(p, n))

    def formula(self, params: Mapping[str, Any] | None = None) -> str:
        """The formula as shown in a refusal, e.g. ``"0.05·N(N−1)/2"``."""
        c = self.resolved(params or {})
        parts = [f"{_num(c.n)}·N" if c.n else "",
                 f"{_num(c.pairs)}·N(N−1)/2" if c.pairs else "",
                 f"{_num(c.n2)}·N²" if c.n2 else "", f"{_num(c.nk)}·N·k" if c.nk else "",
                 f"{_num(c.nk2)}·N·k²" if c.nk2 else "",
                 f"{_num(c.embeds)}·N·embed" if c.embeds else "",
                 f"{_num(c.per_param)}·N·min({c.param}, N)" if c.per_param else ""]
        return " + ".join(p for p in parts if p)


def _num(x: float) -> str:
    """A coefficient as written in the docs: ``0.05``, ``0.001``, ``1e-4``, ``5e-5``."""
    if x >= 1e-3:
        return f"{x:g}"
    mantissa, exponent = f"{x:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


#: the price of a stage whose work is a few vectorised operations per candidate
LINEAR = Cost(n=1e-4)
#: a stage that may embed one passage per candidate (a stance model's snippets, on a cold
#: embedding cache): priced as if it does
EMBEDS_EACH = Cost(n=1e-3, embeds=1.0)
#: learned credibility: a column read where the index stores the model's scores (``credrank
#: score credibility``), the model's features otherwise; a ``head`` model over candidates
#: without stored scores also embeds their openings, which this price does not count (it
#: cannot see the model file; declared in the issue 37 report)
CREDIBILITY = Cost(n=1e-3)
#: neighbour smoothing: the N × N cosine matrix and its partition (≈ 7e-5·N² ms measured, 5
#: N × N arrays: 3,000 candidates ≈ 360 MB); ``m`` ≤ N bounds the neighbour mask
SMOOTHING = Cost(n2=1e-4, param="m", param_default=5, per_param=1e-5, max_pool=3_000)
#: the planted-evidence defence (bench/scripts/bench_planted.py; a 2-core machine under load):
#: the default mode compares the pool block by block (N²·dim multiply-adds: ≈ 20 ms at
#: N = 1,000 on normal pools) and reports each member's paraphrase group, which is O(N²) on
#: a pool of near-copies (≈ 1–4 s at N = 1,000, /rerank's most): priced between the two.
#: ``grada`` weighs all pairs (sparse PageRank over up to N² edges), ``linkage: complete``
#: clusters each paraphrase component (one component of N near-copies: ≈ 2.5 s at 1,000),
#: ``ragdefender`` clusters with Ward linkage over all pairs and a dense TF-IDF matrix (two
#: at once at N = 1,560 took 6.3 s and 1.6 GB on a real server: priced and capped harder)
PLANTED = Cost(n=0.01, n2=3e-4, max_pool=5_000, variants=(
    ("mode", "ragdefender", Cost(n=0.5, n2=1.5e-3, max_pool=1_000)),
    ("mode", "grada", Cost(n=0.01, n2=1e-3, max_pool=3_000)),
    ("mode", "trustrag", Cost(n=0.2, n2=3e-4, max_pool=5_000)),
    ("linkage", "complete", Cost(n=0.01, n2=1e-3, max_pool=3_000)),
))


@dataclass(frozen=True)
class Entry:
    """One stage of the catalog (module docstring)."""

    name: str
    target: str
    kind: str
    rank: int
    summary: str
    cost: Cost

    def __post_init__(self) -> None:
        if not isinstance(self.cost, Cost):
            raise TypeError(f"catalog entry {self.name!r}: cost: expected a Cost (the stage's "
                            f"declared price), got {self.cost!r}")

    @property
    def cls(self) -> Any:
        """The stage class (imported on first use)."""
        return _load(self.target)


#: name → entry; the order is the order of ``credrank search --help`` and of the docs
CATALOG: dict[str, Entry] = {e.name: e for e in (
    Entry("prior", "credrank.stages.prior:SourcePrior", "prior", 10,
          "λ(source type): a preset or a prior file", LINEAR),
    Entry("feedback_prior", "credrank.stages.feedback_prior:FeedbackPrior", "prior", 10,
          "the current version of a feedback store (credrank priors)", LINEAR),
    Entry("reliability_prior", "credrank.stages.reliability_prior:ShrunkReliabilityPrior",
          "prior", 10,
          "per-source reliability (credrank reliability estimate) shrunk toward λ(type)", LINEAR),
    Entry("smoothing", "credrank.stages.smoothing:NeighbourSmoothing", "signal", 15,
          "one-hop neighbour smoothing of the prior", SMOOTHING),
    Entry("credibility", "credrank.stages.credibility:LearnedCredibilityPrior", "signal", 20,
          "learned page credibility: floor + (1 − floor) · P(credible)", CREDIBILITY),
    Entry("planted", "credrank.stages.planted:PlantedEvidence", "signal", 22,
          "label-free planted-evidence defence over the pool (GRADA, RAGDefender, TrustRAG)",
          PLANTED),
    Entry("machine_text", "credrank.stages.machine_text:MachineTextFactor", "signal", 24,
          "machine-written text: the Fast-DetectGPT statistic stored at index time, floored",
          LINEAR),
    Entry("freshness", "credrank.stages.freshness:FreshnessDecay", "signal", 30,
          "half-life decay 2^(−(T−t)/τ) on the evidence date", LINEAR),
    Entry("stance", "credrank.stages.stance:StanceAgreement", "signal", 40,
          "stance agreement of claim-style queries (a stance model)", EMBEDS_EACH),
    Entry("consensus", "credrank.stages.consensus:AnswerConsensus", "signal", 50,
          "label-free answer consensus of question-style queries", Cost(n=1e-4, n2=5e-4)),
    Entry("combine", "credrank.combine:Combine", "combine", 90,
          "the score: multiply | linear | rrf", LINEAR),
    Entry("topk", "credrank.select.topk:TopK", "select", 100, "the top_k best", Cost(n=0.001)),
    Entry("mmr", "credrank.select.stages:MMRSelect", "select", 100,
          "maximal marginal relevance", Cost(n2=1e-4)),
    Entry("coverage", "credrank.select.stages:CoverageSelect", "select", 100,
          "intent coverage optimum", Cost(pairs=0.05)),
    Entry("exposure", "credrank.select.stages:ExposureSelect", "select", 100,
          "fair exposure lottery", Cost(nk2=4e-4)),
    Entry("fair", "credrank.select.stages:FairSelect", "select", 100, "FA*IR top-k", Cost(nk=1e-4)),
)}


@cache
def _load(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def entry(name: str) -> Entry:
    """The catalog entry ``name``; ``KeyError`` when there is none."""
    return CATALOG[name]


def names(kind: str | None = None) -> list[str]:
    """The stage names (of one ``kind``), in catalog order."""
    return [n for n, e in CATALOG.items() if kind is None or e.kind == kind]


__all__ = ["CATALOG", "KINDS", "Entry", "entry", "names"]
