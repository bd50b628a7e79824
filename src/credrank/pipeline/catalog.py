"""The stage catalog: every stage a pipeline spec can name, with its kind and order rank.

One line per stage: its spec name, the class that implements it (``"module:Class"``, imported
when first used, so naming the catalog costs no import of scipy, torch or the stage modules;
every prior and signal is a module of :mod:`credrank.stages`), its kind and its rank. The
class declares everything else itself (DESIGN.md §4): its parameters (``SPEC``, a
:mod:`credrank.core.schema` table: one declaration, one validator, whatever the front door),
how it is built from them (``from_spec``), what it reads of each candidate (``reads``) and
whether the engine can score it (``formula_term``).
**Adding a stage is its module and one line here**; every front door then has it.

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
from dataclasses import dataclass
from functools import cache
from typing import Any

KINDS = ("prior", "signal", "combine", "select")


@dataclass(frozen=True)
class Entry:
    """One stage of the catalog (module docstring)."""

    name: str
    target: str
    kind: str
    rank: int
    summary: str

    @property
    def cls(self) -> Any:
        """The stage class (imported on first use)."""
        return _load(self.target)


#: name → entry; the order is the order of ``credrank search --help`` and of the docs
CATALOG: dict[str, Entry] = {e.name: e for e in (
    Entry("prior", "credrank.stages.prior:SourcePrior", "prior", 10,
          "λ(source type): a preset or a prior file"),
    Entry("feedback_prior", "credrank.stages.feedback_prior:FeedbackPrior", "prior", 10,
          "the current version of a feedback store (credrank priors)"),
    Entry("reliability_prior", "credrank.stages.reliability_prior:ShrunkReliabilityPrior",
          "prior", 10,
          "per-source reliability (credrank reliability estimate) shrunk toward λ(type)"),
    Entry("smoothing", "credrank.stages.smoothing:NeighbourSmoothing", "signal", 15,
          "one-hop neighbour smoothing of the prior"),
    Entry("credibility", "credrank.stages.credibility:LearnedCredibilityPrior", "signal", 20,
          "learned page credibility: floor + (1 − floor) · P(credible)"),
    Entry("planted", "credrank.stages.planted:PlantedEvidence", "signal", 22,
          "label-free planted-evidence defence over the pool (GRADA, RAGDefender, TrustRAG)"),
    Entry("machine_text", "credrank.stages.machine_text:MachineTextFactor", "signal", 24,
          "machine-written text: the Fast-DetectGPT statistic stored at index time, floored"),
    Entry("freshness", "credrank.stages.freshness:FreshnessDecay", "signal", 30,
          "half-life decay 2^(−(T−t)/τ) on the evidence date"),
    Entry("stance", "credrank.stages.stance:StanceAgreement", "signal", 40,
          "stance agreement of claim-style queries (a stance model)"),
    Entry("consensus", "credrank.stages.consensus:AnswerConsensus", "signal", 50,
          "label-free answer consensus of question-style queries"),
    Entry("combine", "credrank.combine:Combine", "combine", 90,
          "the score: multiply | linear | rrf"),
    Entry("topk", "credrank.select.topk:TopK", "select", 100, "the top_k best"),
    Entry("mmr", "credrank.select.stages:MMRSelect", "select", 100,
          "maximal marginal relevance"),
    Entry("coverage", "credrank.select.stages:CoverageSelect", "select", 100,
          "intent coverage optimum"),
    Entry("exposure", "credrank.select.stages:ExposureSelect", "select", 100,
          "fair exposure lottery"),
    Entry("fair", "credrank.select.stages:FairSelect", "select", 100, "FA*IR top-k"),
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
