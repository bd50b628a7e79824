"""The exceptions every layer shares."""

from __future__ import annotations


class StageError(ValueError):
    """A stage received or produced values outside its declared domain."""


class CandidateVectorError(StageError):
    """A stage cannot use the vector of the candidate ``doc_id`` (a vector of zeros has no
    direction): a door that took the candidates names that candidate's vector field."""

    def __init__(self, message: str, doc_id: str) -> None:
        super().__init__(message)
        self.doc_id = doc_id


class FileFormatError(ValueError):
    """A structured file credrank reads is unreadable or does not follow its format: the
    message names the file, the key path, what was expected and what came."""
