"""``FeedbackPrior``: the catalog stage ``feedback_prior``, the prior of a feedback store.

The store (versions, updates, rollback, locking) is
:class:`~credrank.signals.feedback.FeedbackPriors`; the stage reads its per-source prior
first, then its per-type prior, at the latest version unless one is pinned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.params import construct, parameters
from credrank.core.pipeline import BuildContext, Stage
from credrank.core.schema import AnyOf, Instance, Integer, Nullable, Text
from credrank.signals.feedback import STORE_FILE, FeedbackPriors


class FeedbackPrior(Stage):
    """Factor ``name`` = the store's prior: per-source (``source_id``) first, then per-type.

    Reads the latest version at each call unless ``version`` pins one.
    ``batch.info["feedback_prior"]`` records the version used and how many candidates took a
    per-source prior.
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
        self.name, self.version = name, version

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
        """The store as given (a folder; a store object: its folder) and the version."""
        store = self.params()["store"]
        return {"store": store if isinstance(store, str) else str(self.store.directory),
                "version": self.version}


def _open(where: Path, named: object) -> FeedbackPriors:
    """The feedback store in folder ``where`` (``named`` in the message when there is none)."""
    if not (where / STORE_FILE).is_file():
        raise ValueError(f"store: {str(named)!r}: no feedback store here (create one with "
                         "`credrank priors init DIR`)")
    return FeedbackPriors(where)
