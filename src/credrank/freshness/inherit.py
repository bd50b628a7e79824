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

from credrank.freshness.stage import InheritedDates

__all__ = ["InheritedDates"]
