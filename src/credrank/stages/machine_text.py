"""The pipeline stage ``machine_text``: demote passages that read as machine-written.

:class:`MachineTextFactor` adds the factor ``machine_text`` from the Fast-DetectGPT statistic
``d`` stored in each candidate's payload at index time (``credrank index … --score
machine-text`` or ``credrank score machine-text --index DIR``; the payload fields
``machine_text`` and ``machine_text_key``, :mod:`credrank.index.scoring`), so a search pays
for a column read, not for a language model. The factor is the fixed transform of
:mod:`credrank.machine_text.factor`::

    f(d) = 1 − (1 − floor) · Φ((d − center) / scale)        ∈ (floor, 1], floor > 0

**Declared policies.** A candidate scored but too short to score (``d`` stored as ``null``)
gets ``f = 1``. A candidate *not scored* (an index never scored, or documents added after the
scoring run) is, by ``missing``: ``error`` (default: a clear error naming the command that
adds the scores), ``neutral`` (``f = 1``, counted in ``info.machine_text.missing``) or
``score`` (computed now with SmolLM2 from the candidate's text, ≈ the index-time cost per
candidate: the path for candidates that come from elsewhere —
:meth:`~credrank.searcher.Searcher.rerank`, ``POST /rerank``, the framework adapters — whose
metadata is never read as evidence).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.params import construct, parameters
from credrank.core.pipeline import BuildContext, Stage
from credrank.core.schema import Number, Text
from credrank.machine_text.factor import CENTER, FLOOR, SCALE, machine_text_factor

#: the payload field of the statistic and of what computed it (``credrank.index.scoring``)
FIELD = "machine_text"
KEY_FIELD = "machine_text_key"
MISSING = ("error", "neutral", "score")
#: the command that adds the scores to an index, named by the missing-score error
COMMAND = "credrank score machine-text --index DIR"


class MachineTextFactor(Stage):
    """Adds the factor ``machine_text`` (module docstring).

    Args:
        floor: the factor of a passage that reads as fully machine-written, in ``(0, 1]``.
        center: the statistic at which half of ``1 − floor`` is taken.
        scale: the width of the transform (> 0).
        missing: ``error`` | ``neutral`` | ``score`` (module docstring).
        index: the index directory, named in the missing-score error (optional).
    """

    #: per row: the index-time score is the document's (stored on each of its passages); a
    #: query-time score reads the row's text (with unit passage, the passage's)
    counts_documents = False

    name = "machine_text"

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> MachineTextFactor:
        """The stage of ``params``; the index's directory (``ctx.store``) names itself in
        the missing-score error."""
        path = getattr(ctx.store, "path", None)
        return construct(cls, params, index=None if path is None else str(path))

    # floor > 0: a machine-like passage is demoted, never removed
    @parameters(floor=Number(0.0, 1.0, open_low=True), center=Number(-1000.0, 1000.0),
                scale=Number(0.0, 1000.0, open_low=True), missing=Text(choices=MISSING))
    def __init__(self, floor: float = FLOOR, *, center: float = CENTER, scale: float = SCALE,
                 missing: str = "error", index: str | None = None) -> None:
        self.floor, self.center, self.scale, self.missing = floor, center, scale, missing
        self.index = index
        #: the candidates' text is read only to score the unscored ones now
        # this stage's reads depend on its `missing` option
        self.reads = (
            frozenset({"text"}) if missing == "score" else frozenset())

    def formula_term(self) -> str:
        return "needs the Python path (it transforms the stored machine-text statistic)"

    def transform(self, batch: Candidates) -> Candidates:
        n = len(batch)
        stats = batch.column(FIELD)
        keys = batch.column(KEY_FIELD)
        d = np.full(n, np.nan)
        unscored: list[int] = []
        unscorable = 0
        for i in range(n):
            value = stats[i]
            if value is not None and np.isfinite(float(value)):
                d[i] = float(value)
            elif keys[i] is not None:
                unscorable += 1  # scored, too short: f = 1
            else:
                unscored.append(i)
        if unscored and self.missing == "error":
            where = self.index or "DIR"
            example = str(batch.doc_ids[unscored[0]])
            raise StageError(
                f"machine_text: {len(unscored)} of {n} candidates have no machine-text score "
                f"(e.g. {example!r}): the index was not scored, or documents were added after "
                f"scoring; add the scores with `credrank score machine-text --index {where}` "
                "(or index with `credrank index … --score machine-text`); candidates from "
                "elsewhere (rerank, adapters) are scored now with "
                "{\"stage\": \"machine_text\", \"missing\": \"score\"}")
        if unscored and self.missing == "score":
            d[unscored] = _score_now(batch, unscored)
        f = machine_text_factor(d, floor=self.floor, center=self.center, scale=self.scale)
        info = {"floor": self.floor, "center": self.center, "scale": self.scale,
                "n": n, "unscorable": unscorable,
                "missing": len(unscored) if self.missing == "neutral" else 0,
                "scored_now": len(unscored) if self.missing == "score" else 0,
                "keys": sorted({str(k) for k in keys if k is not None})}
        return (batch.with_factor(self.name, f, low=0.0, high=1.0)
                .with_meta("machine_text_statistic", [None if np.isnan(x) else float(x)
                                                      for x in d])
                .with_info(machine_text=info))



def _score_now(batch: Candidates, rows: list[int]) -> np.ndarray:
    """The statistic of ``rows`` from their text, with SmolLM2 (``missing = score``)."""
    from credrank.machine_text.scorer import FastDetectScorer  # lazy: the lm extra

    texts = batch.column("text")
    missing = [str(batch.doc_ids[i]) for i in rows if not isinstance(texts[i], str)]
    if missing:
        raise StageError(f"machine_text: missing=score needs each unscored candidate's text; "
                         f"{missing[0]!r} has none (retrieve with text)")
    return FastDetectScorer().score([str(texts[i]) for i in rows])


__all__ = ["COMMAND", "FIELD", "KEY_FIELD", "MISSING", "MachineTextFactor"]
