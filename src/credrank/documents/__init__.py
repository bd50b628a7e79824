"""Documents: the schema (:mod:`.schema`), corpus readers with file:line:field rejects
(:mod:`.readers`: the policies, lenient or strict; :mod:`.records`: rejects, dropped fields
and results; :mod:`.fields`: the field
checks; :mod:`.files` and :mod:`.formats`: JSONL, CSV/TSV and Parquet records), queries and
qrels (:mod:`.judgements`) and BEIR folders (:mod:`.beir`)."""

from credrank.documents.beir import BeirDataset, load_beir
from credrank.documents.judgements import Query, read_qrels, read_queries
from credrank.documents.readers import (
    FORMATS,
    CorpusError,
    DocumentStream,
    DroppedField,
    LoadResult,
    Reject,
    iter_documents,
    load_summary,
    read_corpus,
    write_rejects,
)
from credrank.documents.schema import DATE_FIELDS, SOURCE_TYPES, Document

__all__ = [
    "DATE_FIELDS",
    "FORMATS",
    "SOURCE_TYPES",
    "BeirDataset",
    "CorpusError",
    "Document",
    "DocumentStream",
    "DroppedField",
    "LoadResult",
    "Query",
    "Reject",
    "iter_documents",
    "load_beir",
    "load_summary",
    "read_corpus",
    "read_qrels",
    "read_queries",
    "write_rejects",
]
