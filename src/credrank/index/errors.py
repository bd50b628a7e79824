"""The one error of the index layer, :class:`StoreError` (re-exported by
:mod:`credrank.index.store`, where callers import it from)."""

from __future__ import annotations

__all__ = ["StoreError"]


class StoreError(RuntimeError):
    """The index directory or engine is missing, incompatible, damaged or unreachable."""
