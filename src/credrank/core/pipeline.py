"""Composition of stages (DESIGN.md §3, in the manner of PyTerrier's ``>>``).

Every stage maps a :class:`~credrank.core.candidates.Candidates` batch to a new one:

* a *retriever* fills an empty batch (only ``query`` set) with ``fetch_k`` candidates;
* a *signal* adds one named factor (prior, smoothing, freshness, agreement, …);
* a *combiner* computes ``score`` from the retrieval score and the factors;
* a *selector* orders and cuts (top-k, MMR, coverage optimum, exposure sampler, FA*IR).

``retriever >> SourcePrior(...) >> Combine() >> TopK(10)`` builds a :class:`Pipeline`;
``pipeline.search("query")`` runs it. Later stages are added without touching earlier ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from credrank.core.candidates import Candidates


class Stage(ABC):
    """One step of a pipeline: a pure function of a candidate batch."""

    #: short name used in reports and in ``score_breakdown`` keys
    name: str = "stage"

    @abstractmethod
    def transform(self, batch: Candidates) -> Candidates:
        """Return a new batch; never mutate ``batch``."""

    def __call__(self, batch: Candidates) -> Candidates:
        return self.transform(batch)

    def config(self) -> dict[str, Any]:
        """JSON-serialisable parameters (shown in reports and ``--json`` output)."""
        return {}

    def describe(self) -> dict[str, Any]:
        return {"stage": type(self).__name__, "name": self.name, **self.config()}

    def __rshift__(self, other: Stage) -> Pipeline:
        return Pipeline([self]) >> other

    def search(self, query: str) -> Candidates:
        """Run this stage (or pipeline) on ``query`` from an empty batch."""
        return self(Candidates.empty(query))


class Pipeline(Stage):
    """Stages applied in order; itself a stage, so pipelines nest."""

    name = "pipeline"

    def __init__(self, stages: Iterable[Stage]):
        self.stages: list[Stage] = []
        for stage in stages:
            if not isinstance(stage, Stage):
                raise TypeError(f"pipeline step {stage!r} is not a credrank Stage")
            self.stages.extend(stage.stages if isinstance(stage, Pipeline) else [stage])

    def __rshift__(self, other: Stage) -> Pipeline:
        return Pipeline([*self.stages, other])

    def transform(self, batch: Candidates) -> Candidates:
        for stage in self.stages:
            batch = stage(batch)
        return batch

    def describe(self) -> dict[str, Any]:
        return {"stage": "Pipeline", "stages": [s.describe() for s in self.stages]}

    def __repr__(self) -> str:
        return " >> ".join(type(s).__name__ for s in self.stages)


class FunctionStage(Stage):
    """Wrap a plain ``Candidates -> Candidates`` function as a stage."""

    def __init__(self, fn: Callable[[Candidates], Candidates], name: str | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")

    def transform(self, batch: Candidates) -> Candidates:
        return self.fn(batch)
