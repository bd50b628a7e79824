"""Top-k selection: order by the combined score, keep the first ``k`` (seed 004's last step)."""

from __future__ import annotations

from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.pipeline import Stage


class TopK(Stage):
    """Sort by descending ``score`` (stable: ties keep retrieval order) and keep ``k`` rows."""

    name = "topk"

    def __init__(self, k: int = 10):
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"top_k: expected an integer >= 1, got {k!r}")
        self.k = k

    def transform(self, batch: Candidates) -> Candidates:
        return batch.sorted_by_score().take(range(min(self.k, len(batch))))

    def config(self) -> dict[str, Any]:
        return {"k": self.k}
