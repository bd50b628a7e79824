"""The core every other package builds on: the columnar :class:`Candidates` batch, stages and
pipelines, errors, parameter validation, the :class:`Embedder` protocol and small maths.
``core`` imports nothing else of credrank."""

from credrank.core.candidates import META_COLUMNS, Candidates
from credrank.core.embedder import Embedder
from credrank.core.errors import StageError
from credrank.core.pipeline import FunctionStage, Pipeline, Stage

__all__ = ["META_COLUMNS", "Candidates", "Embedder", "FunctionStage", "Pipeline", "Stage",
           "StageError"]
