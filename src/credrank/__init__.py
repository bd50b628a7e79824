"""credrank: source credibility in the retrieval step of retrieval-augmented generation."""

from credrank.core.candidates import Candidates
from credrank.core.pipeline import Pipeline, Stage

__all__ = ["Candidates", "Pipeline", "Stage"]
__version__ = "0.1.0"
