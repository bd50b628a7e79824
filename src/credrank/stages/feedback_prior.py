"""``FeedbackPrior``: the catalog stage ``feedback_prior``, the prior of a feedback store.

The store (versions, updates, rollback, locking) is
:class:`~credrank.signals.feedback.FeedbackPriors`; the stage reads its per-source prior
first, then its per-type prior, at the latest version unless one is pinned."""

from __future__ import annotations

from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.pipeline import BuildContext, Stage
from credrank.core.schema import Field, Integer, Nullable, Table, Text
from credrank.signals.feedback import STORE_FILE, FeedbackPriors


class FeedbackPrior(Stage):
    """Factor ``name`` = the store's prior: per-source (``source_id``) first, then per-type.

    Reads the latest version at each call unless ``version`` pins one.
    ``batch.info["feedback_prior"]`` records the version used and how many candidates took a
    per-source prior.
    """

    SPEC = Table({"store": Field(Text(what="a feedback store folder (credrank priors init)")),
                  "version": Field(Nullable(Integer(0)), default=None)})

    def formula_term(self) -> str:
        return "needs the Python path (per-source priors of a feedback store)"

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> FeedbackPrior:
        """``store``: a feedback store folder (a registered name or a path)."""
        where = ctx.path(params["store"], "store", "feedback store")
        if not (where / STORE_FILE).is_file():
            raise ValueError(f"store: {params['store']!r}: no feedback store here (create one "
                             "with `credrank priors init DIR`)")
        return cls(FeedbackPriors(where), version=params["version"])

    def __init__(self, store: FeedbackPriors, *, name: str = "prior", version: int | None = None):
        if not isinstance(store, FeedbackPriors):
            raise ValueError(f"store: expected a FeedbackPriors, got {type(store).__name__}")
        self.store, self.name, self.version = store, name, version

    def transform(self, batch: Candidates) -> Candidates:
        if self.version is None:  # the latest version at the time of the call
            self.store.refresh()
        record = self.store.record(self.version)
        values = self.store.table(record["version"]).lookup(batch.column("source_type"))
        sources = record["sources"]
        hits = 0
        for i, sid in enumerate(batch.column("source_id")):
            if isinstance(sid, str) and sid in sources:
                values[i] = sources[sid]
                hits += 1
        return (batch.with_factor(self.name, values, low=0.0, high=1.0)
                .with_info(feedback_prior={"version": record["version"], "source_hits": hits}))

    def config(self) -> dict[str, Any]:
        return {"store": str(self.store.directory), "version": self.version}
