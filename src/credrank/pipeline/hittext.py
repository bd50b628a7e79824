"""Where the text of the final hits comes from: :func:`with_hit_text`, shared by
:class:`~credrank.searcher.Searcher` (CLI, library, batch) and the service.

Ranking never needs the text on the default path, and moving payload out of the engine costs
about as much as the search itself (issue 15), so the text is fetched for the final ``top_k``
hits only, never for the ``fetch_k`` pool:

* the engine's formula search cut to ``top_k`` (:class:`PushdownSearch` with the cut fused —
  the default search) is asked for ``text`` with the hits' other fields, in the same query
  (measured on the demo index: no slower than without it; a separate read by id costs about
  0.8 ms);
* any other pipeline gets :class:`~credrank.index.hittext.FetchText` after its selector: one
  read by id of the final hits that lack their text (none when a stage that reads text,
  credibility or consensus, had the retriever return it with the pool).
"""

from __future__ import annotations

from collections.abc import Sequence

from credrank.core.hittext import check_text
from credrank.core.pipeline import Stage
from credrank.index.hittext import FetchText
from credrank.index.store import VectorStore
from credrank.pipeline.pushdown import PushdownSearch


def with_hit_text(stages: Sequence[Stage], store: VectorStore, text: str) -> list[Stage]:
    """``stages`` arranged so that the final hits hold their text (``text``: ``full`` or
    ``snippet``), or unchanged for ``none``; see the module docstring."""
    if check_text(text) == "none":
        return list(stages)
    if (len(stages) == 1 and isinstance(stages[0], PushdownSearch)
            and stages[0].hit_fields_only and not stages[0].with_text):
        cut = stages[0]  # the engine returns top_k points: ask it for their text as well
        return [PushdownSearch(cut.index, cut.embedder, cut.priors, cut.fetch_k, cut.top_k,
                               with_vectors=cut.with_vectors, with_text=True,
                               freshness=cut.freshness, hit_fields_only=True,
                               credibility=cut.credibility)]
    return [*stages, FetchText(store)]


__all__ = ["with_hit_text"]
