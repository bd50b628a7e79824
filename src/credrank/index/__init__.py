"""Stores (the engine protocol and its backends), embedders, ingestion and retrievers.

:func:`open_store` opens the store an index directory describes; :class:`VectorStore` is what
every backend offers and :func:`supports_formula` says whether one scores the credibility
formula in its engine.
"""

from credrank.index.errors import StoreError
from credrank.index.formula import FormulaScoring, supports_formula
from credrank.index.manifest import Manifest
from credrank.index.opener import open_store
from credrank.index.store import VectorStore

__all__ = ["FormulaScoring", "Manifest", "StoreError", "VectorStore", "open_store",
           "supports_formula"]
