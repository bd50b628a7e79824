"""The exceptions every layer shares."""

from __future__ import annotations


class StageError(ValueError):
    """A stage received or produced values outside its declared domain."""
