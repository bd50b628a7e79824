"""Record iterators, one module per file format: :mod:`.jsonl` (JSONL and BEIR corpora),
:mod:`.csv` (CSV/TSV) and :mod:`.parquet`. Each yields one
:class:`~credrank.documents.records.RawRecord` per physical record, in file order; the field
checks and the conversion to a :class:`~credrank.documents.schema.Document` are the same for
every format (:mod:`credrank.documents.readers`)."""
