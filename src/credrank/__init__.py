"""credrank: source credibility in the retrieval step of retrieval-augmented generation."""

from credrank.candidates import Candidates
from credrank.pipeline import Pipeline, Stage

__all__ = ["Candidates", "Pipeline", "Stage"]
__version__ = "0.1.0"
