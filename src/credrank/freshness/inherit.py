"""``InheritedDates``: the origin's evidence date for wrappers, read from the index (35.7).

A document that repeats an earlier measurement (it ``cites`` the origin, directly or along a
chain) is evidence of the origin's date, not of its own publication date. For the candidates
of a batch, this stage resolves their citation chains over the index
(:class:`~credrank.freshness.lineage.ProvenanceGraph` over
:class:`~credrank.freshness.lineage.StoreSource`; the work is the subgraph the candidates reach,
not the corpus) and writes two meta columns that
:class:`~credrank.freshness.stage.FreshnessDecay` reads:

* ``inherited_at`` — the origin's evidence date (ISO 8601), ``None`` when every origin reached
  is undated (then the wrapper's age is unknown: never its own publication date);
* ``inherited_basis`` — ``inherited:<origin id>``; ``None`` for documents that are not
  wrappers (no citation chain, or their own ``observed_at``/``verified_at``: a re-measurement).

``info["lineage"]`` records the graph work (records fetched, nodes expanded, edges walked),
cycles found, and the wrappers with their origins.
"""

from __future__ import annotations

from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.pipeline import Stage
from credrank.freshness.lineage import ProvenanceGraph, StoreSource, inherited_dates
from credrank.freshness.stage import INHERITED_AT, INHERITED_BASIS


class InheritedDates(Stage):
    """Adds ``inherited_at`` / ``inherited_basis`` (module docstring) from ``store``'s
    ``cites`` links; a fresh graph per batch, so index updates are seen."""

    name = "lineage"

    def __init__(self, store: Any):
        if not callable(getattr(store, "read_payloads", None)):
            raise ValueError("lineage: the store cannot read payloads by id; citation chains "
                             "need an index")
        self.store = store

    def transform(self, batch: Candidates) -> Candidates:
        ids = [str(d) for d in batch.doc_ids]
        graph = ProvenanceGraph(StoreSource(self.store))
        inherited = inherited_dates(graph, ids) if ids else {}
        at = [None if d not in inherited or inherited[d].date is None
              else inherited[d].date.isoformat() for d in ids]
        basis = [inherited[d].basis if d in inherited else None for d in ids]
        info = {"rule": "cites chains: a wrapper takes its origin's evidence date",
                "work": graph.stats.to_dict(), "cycles": [list(c) for c in graph.cycles],
                "wrappers": {d: inherited[d].basis.split(":", 1)[1] for d in ids
                             if d in inherited}}
        return (batch.with_meta(INHERITED_AT, at).with_meta(INHERITED_BASIS, basis)
                .with_info(lineage=info))

    def config(self) -> dict[str, Any]:
        return {"rule": "cites chains (35.7)"}
