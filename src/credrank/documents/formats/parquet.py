"""Parquet records: one record a row (``path:row N``); nanosecond timestamps are truncated to
microseconds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from credrank.documents.records import CorpusError, RawRecord

__all__ = ["parquet_records"]


def parquet_records(p: Path, on_header: Callable[[int | None, list[str]], None] | None = None
                    ) -> Iterator[RawRecord]:
    """One :class:`RawRecord` per row (``line`` is the 1-based row number); an unreadable file
    or repeated column names raise :class:`CorpusError` on the first ``next()``, as does
    ``on_header(None, names)`` (the check of the column names) when it raises."""
    # Imported here on purpose: `import pyarrow.parquet` measured 40-180 ms on the 2-core
    # machine (as much as the rest of credrank.documents), which every CLI call would pay
    # although only Parquet corpora need it; and pyarrow is the optional `parquet` extra.
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise CorpusError(f"{p}: reading Parquet needs the 'parquet' extra ({exc.name} is not "
                          "installed): pip install 'credrank[parquet]'") from exc

    try:
        pf = pq.ParquetFile(p)
    except (OSError, pa.ArrowException) as e:
        raise CorpusError(f"{p}: expected a Parquet file, got an unreadable one ({e})") from e
    names = pf.schema_arrow.names
    dupes = sorted({h for h in names if names.count(h) > 1})
    if dupes:
        raise CorpusError(f"{p}: expected unique column names, got {dupes} repeated")
    if on_header is not None:
        on_header(None, list(names))
    row = 0
    for batch in pf.iter_batches(batch_size=1024):
        cols = []
        for col, f in zip(batch.columns, batch.schema, strict=True):
            if pa.types.is_timestamp(f.type) and f.type.unit == "ns":
                col = col.cast(pa.timestamp("us", tz=f.type.tz), safe=False)
            cols.append(col)
        for rec in pa.RecordBatch.from_arrays(cols, names=batch.schema.names).to_pylist():
            row += 1
            yield RawRecord(row, rec, rec)
