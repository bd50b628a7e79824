"""``FeedbackPrior``: the catalog stage ``feedback_prior``, the prior of a feedback store.

The store (versions, updates, rollback, locking) is
:class:`~credrank.signals.feedback.FeedbackPriors`; the stage reads its per-source prior
first, then its per-type prior, at the latest version unless one is pinned. A source's prior
applies only to candidates whose provenance ``source_type`` is the type the store recorded the
source with (a feedback item's declared type is a claim): any other candidate of that source
takes its type's prior, and is counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.params import construct, parameters
from credrank.core.pipeline import BuildContext, Stage
from credrank.core.schema import AnyOf, Instance, Integer, Nullable, Text
from credrank.signals.feedback import STORE_FILE, FeedbackPriors, FeedbackStoreError


class FeedbackPrior(Stage):
    """Factor ``name`` = the store's prior: per-source (``source_id``) first, then per-type.

    Reads the latest version at each call unless ``version`` pins one (checked against the
    store when built: ``version: expected a version of store …``). A per-source prior applies
    only to a candidate whose provenance ``source_type`` is the type the store recorded the
    source with; any other candidate of the source takes its type's prior.
    ``batch.info["feedback_prior"]`` records the version used, how many candidates took a
    per-source prior (``source_hits``), how many of a known source did not because their type
    differs (``type_mismatches``) and, then, a warning saying so (``warnings``).
    """

    def formula_term(self) -> str:
        return "needs the Python path (per-source priors of a feedback store)"

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> FeedbackPrior:
        """``store``: a feedback store folder (a registered name or a path)."""
        return construct(cls, params, store=_open(ctx.path(params["store"], "store",
                                                           "feedback store"), params["store"]))

    @parameters(store=AnyOf((Text(what="a feedback store folder (credrank priors init)"),
                             Instance((FeedbackPriors, Path), what="a FeedbackPriors"))),
                version=Nullable(Integer(0)))
    def __init__(self, store: FeedbackPriors | str | Path, *, name: str = "prior",
                 version: int | None = None):
        self.store = store if isinstance(store, FeedbackPriors) else _open(Path(store), store)
        if version is not None and version > self.store.current:
            named = self.params().get("store", store)  # as the spec named it
            said = named if isinstance(named, str) else str(self.store.directory)
            raise ValueError(f"version: expected a version of store {said!r} in "
                             f"[0, {self.store.current}], got {version}")
        self.name, self.version = name, version

    def transform(self, batch: Candidates) -> Candidates:
        if self.version is None:  # the latest version at the time of the call
            self.store.refresh()
        record = self.store.record(self.version)
        kinds = batch.column("source_type")
        values = self.store.table(record["version"]).lookup(kinds)
        sources, typed = record["sources"], record["source_types"]
        hits, mismatched = 0, []
        for i, sid in enumerate(batch.column("source_id")):
            if not isinstance(sid, str) or sid not in sources:
                continue
            if typed[sid] == kinds[i]:
                values[i] = sources[sid]
                hits += 1
            else:
                mismatched.append(i)
        info: dict[str, Any] = {"version": record["version"], "source_hits": hits,
                                "type_mismatches": len(mismatched), "warnings": []}
        if mismatched:
            i = mismatched[0]
            info["warnings"].append(
                f"{len(mismatched)} candidate(s) of a source with a feedback prior took their "
                f"type's prior instead: their provenance type differs from the type the store "
                f"recorded the source with (first: {batch.doc_ids[i]!r}, source "
                f"{batch.column('source_id')[i]!r}: {kinds[i]!r}, recorded "
                f"{typed[batch.column('source_id')[i]]!r})")
        return (batch.with_factor(self.name, values, low=0.0, high=1.0)
                .with_info(feedback_prior=info))

    def config(self) -> dict[str, Any]:
        """The store as given (a folder; a store object: its folder) and the version."""
        store = self.params()["store"]
        return {"store": store if isinstance(store, str) else str(self.store.directory),
                "version": self.version}


def _open(where: Path, named: object) -> FeedbackPriors:
    """The feedback store in folder ``where`` (``named`` in the message when there is none;
    a :class:`FeedbackStoreError`, as a damaged one: a service answers it 503)."""
    if not (where / STORE_FILE).is_file():
        raise FeedbackStoreError(f"store: {str(named)!r}: no feedback store here (create one with "
                         "`credrank priors init DIR`)")
    return FeedbackPriors(where)
