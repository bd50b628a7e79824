"""The exceptions every layer shares."""

from __future__ import annotations


class StageError(ValueError):
    """A stage received or produced values outside its declared domain."""


class FileFormatError(ValueError):
    """A structured file credrank reads is unreadable or does not follow its format: the
    message names the file, the key path, what was expected and what came."""
