"""Framework adapters (optional extras): Haystack, LlamaIndex, LangChain.

* :mod:`credrank.adapters.haystack` — ``CredibilityRanker``, a Haystack (2.x, 3.x) ``@component``
  (``pip install 'credrank[haystack]'``);
* :mod:`credrank.adapters.llamaindex` — ``CredibilityPostprocessor``, a LlamaIndex
  ``BaseNodePostprocessor`` (``pip install 'credrank[llamaindex]'``);
* :mod:`credrank.adapters.langchain` — ``CredibilityCompressor`` (a
  ``BaseDocumentCompressor``) and ``CredibilityRetriever`` (fetches the expanded pool from a
  vector store itself) (``pip install 'credrank[langchain]'``).

Each reranks the framework's documents with a pipeline spec (``pipeline=``: a
:class:`~credrank.pipeline.spec.PipelineSpec`, a spec dict or a spec file; or the shortcut
options ``priors``, ``mode``, ``select`` …), as :func:`credrank.rerank.rerank` runs it, through
:mod:`credrank.adapters._common` (where the options are declared once), and returns new
documents with the final score and the breakdown under ``credrank`` in their metadata. This package
imports no framework: only the module of an extra does (and says which extra to install when
its framework is missing).
"""
