"""credrank: source credibility in the retrieval step of retrieval-augmented generation.

One import for the library's front door::

    from credrank import Searcher, PipelineSpec

    with Searcher.open("./idx") as searcher:
        # the options of `credrank search --top-k 5` (the source prior, multiply, top-k)
        doc = searcher.search_json("does vitamin d prevent covid", Searcher.spec(top_k=5))
        # a whole spec: its stages are what runs (none: similarity only)
        spec = PipelineSpec.from_dict({"top_k": 5, "stages": ["prior"]})
        doc = searcher.search_json("does vitamin d prevent covid", spec)

Every name below is imported on first use (PEP 562), so ``import credrank`` costs no numpy,
engine or model import; ``credrank --help`` and ``credrank --version`` stay instant.
``rerank`` is the module :mod:`credrank.rerank`, which can be called as its function
:func:`credrank.rerank.rerank` (a package attribute named as a submodule is that submodule
once it is imported, so the name must be the module to mean one thing).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `import credrank` imports nothing else

__version__ = "0.1.0"

#: name → "module:attribute" (or "module" for a module)
_API: dict[str, str] = {
    # searching an index, reranking candidates retrieved elsewhere
    "Searcher": "credrank.searcher:Searcher",
    "rerank": "credrank.rerank",
    "rerank_context": "credrank.searcher:rerank_context",
    "open_store": "credrank.index.opener:open_store",
    "get_embedder": "credrank.index.embed:get_embedder",
    # the pipeline as configuration
    "PipelineSpec": "credrank.pipeline.spec:PipelineSpec",
    "SpecError": "credrank.pipeline.spec:SpecError",
    "CATALOG": "credrank.pipeline.catalog:CATALOG",
    # indexing
    "iter_documents": "credrank.documents:iter_documents",
    "index_documents": "credrank.index.ingest:index_documents",
    "SourceTyper": "credrank.provenance:SourceTyper",
    # the stage protocol and the columnar batch
    "Candidates": "credrank.core.candidates:Candidates",
    "Pipeline": "credrank.core.pipeline:Pipeline",
    "Stage": "credrank.core.pipeline:Stage",
    "load_priors": "credrank.signals.prior:load_priors",
}

if TYPE_CHECKING:
    from typing import Any

    from credrank.core.candidates import Candidates
    from credrank.core.pipeline import Pipeline, Stage
    from credrank.documents import iter_documents
    from credrank.index.embed import get_embedder
    from credrank.index.ingest import index_documents
    from credrank.index.opener import open_store
    from credrank.pipeline.catalog import CATALOG
    from credrank.pipeline.spec import PipelineSpec, SpecError
    from credrank.provenance import SourceTyper

    # to a type checker the function a user calls (at run time the module, callable as it)
    from credrank.rerank import rerank as rerank
    from credrank.searcher import Searcher, rerank_context
    from credrank.signals.prior import load_priors


def __getattr__(name: str) -> Any:
    target = _API.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = target.partition(":")
    value = importlib.import_module(module)
    if attribute:
        value = getattr(value, attribute)
        globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


__all__ = [  # = "__version__" and the keys of _API (a test checks it)
    "CATALOG", "Candidates", "Pipeline", "PipelineSpec", "Searcher", "SourceTyper",
    "SpecError", "Stage", "__version__", "get_embedder", "index_documents", "iter_documents",
    "load_priors", "open_store", "rerank", "rerank_context",
]
