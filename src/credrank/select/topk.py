"""Top-k selection: order by the combined score, keep the first ``k`` (seed 004's last step)."""

from __future__ import annotations

from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.params import construct, parameters
from credrank.core.pipeline import BuildContext, FormulaTerm, Stage
from credrank.core.validation import check_int


class TopK(Stage):
    """Sort by descending ``score`` (stable: ties keep retrieval order) and keep ``k`` rows."""

    name = "topk"
    selects = True

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> TopK:
        """The pipeline's ``top_k`` best (``top_k`` checked by the spec)."""
        return construct(cls, params, k=ctx.top_k)

    def formula_term(self) -> FormulaTerm | str:
        """The engine cuts to the top ``k`` itself."""
        return FormulaTerm("cut", self)

    @parameters()  # no spec parameter: the pipeline's top_k is its k
    def __init__(self, k: int = 10):
        self.k = check_int("k", k, 1)  # its own name; a spec's top_k is checked there

    def transform(self, batch: Candidates) -> Candidates:
        return batch.sorted_by_score().take(range(min(self.k, len(batch))))

    def config(self) -> dict[str, Any]:
        return {"k": self.k}
