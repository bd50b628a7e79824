"""Parquet records: one record a row (``path:row N``), and the JSON form of Arrow values.

Reading (:func:`parquet_records`): every column is read as Python values, with these policies:

* nanosecond timestamps, times and durations, at any depth (in structs, lists and maps), are
  truncated to microseconds, Python's resolution; a timestamp with a time zone is read as its
  instant in UTC;
* a map is read as an object (``dict``);
* a cell Python cannot hold (a date beyond year 9999, a map with a repeated key) becomes an
  :class:`Unreadable` naming what was expected and what came, never the failure of the file:
  the reader reports it on that row and column (a field it may drop, or the record's reject).

The values of unknown columns (``Document.extra``) must be JSON data; :func:`json_value` is
the one conversion of an Arrow value to JSON, applied by the reader to every such column.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from credrank.documents.fields import got
from credrank.documents.records import CorpusError, RawRecord

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Unreadable", "json_value", "parquet_records"]


@dataclass(frozen=True)
class Unreadable:
    """A Parquet cell that cannot be read as a Python value; ``reason`` is ``expected …, got
    …``, as a reject's."""

    reason: str

    def __str__(self) -> str:  # in a record's excerpt
        return "<unreadable>"


def parquet_records(p: Path, on_header: Callable[[int | None, list[str]], None] | None = None
                    ) -> Iterator[RawRecord]:
    """One :class:`RawRecord` per row (``line`` is the 1-based row number); an unreadable file
    or repeated column names raise :class:`CorpusError` on the first ``next()``, as does
    ``on_header(None, names)`` (the check of the column names) when it raises. Values are
    read as the module docstring says."""
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
        cols = [_readable_column(col) for col in batch.columns]
        for rec in _rows(pa.RecordBatch.from_arrays(cols, names=batch.schema.names)):
            row += 1
            yield RawRecord(row, rec, rec)


# --------------------------------------------------------------------------- Arrow → Python

def _readable_type(t: pa.DataType) -> pa.DataType:
    """``t`` with every nanosecond timestamp, time and duration (at any depth) in
    microseconds and every zoned timestamp in UTC: the type a column is cast to."""
    import pyarrow as pa

    types = pa.types
    if types.is_timestamp(t):
        return pa.timestamp("us" if t.unit == "ns" else t.unit,
                            tz=None if t.tz is None else "UTC")
    if types.is_time64(t) and t.unit == "ns":
        return pa.time64("us")
    if types.is_duration(t) and t.unit == "ns":
        return pa.duration("us")
    if types.is_struct(t):
        return pa.struct([t.field(i).with_type(_readable_type(t.field(i).type))
                          for i in range(t.num_fields)])
    if types.is_map(t):
        return pa.map_(_readable_type(t.key_type), _readable_type(t.item_type), t.keys_sorted)
    if types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_readable_type(t.value_type)), t.list_size)
    if types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_readable_type(t.value_type)))
    if types.is_list(t):
        return pa.list_(t.value_field.with_type(_readable_type(t.value_type)))
    return t


def _readable_column(col: pa.Array) -> pa.Array:
    """``col`` cast to :func:`_readable_type` (truncating nanoseconds); as it is when the
    cast is not available (its cells are then read one by one, see :func:`_rows`)."""
    import pyarrow as pa

    try:
        target = _readable_type(col.type)
        return col if target.equals(col.type) else col.cast(target, safe=False)
    except (pa.ArrowException, TypeError, ValueError):
        return col


def _rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows of ``batch`` as dicts (maps as objects); when a cell cannot be read, the
    batch is read column by column and that cell alone is an :class:`Unreadable`."""
    try:
        return batch.to_pylist(maps_as_pydicts="strict")
    except Exception:  # a cell Python cannot hold: find it (rare, so only then per cell)
        columns = [_column_values(col) for col in batch.columns]
        names = batch.schema.names
        return [dict(zip(names, cells, strict=True)) for cells in zip(*columns, strict=True)]


def _column_values(col: pa.Array) -> list[Any]:
    try:
        return col.to_pylist(maps_as_pydicts="strict")
    except Exception:
        return [_cell(col, i) for i in range(len(col))]


def _cell(col: pa.Array, i: int) -> Any:
    """The Python value of ``col[i]``, or an :class:`Unreadable` saying why there is none."""
    try:
        return col[i].as_py(maps_as_pydicts="strict")
    except OverflowError as exc:
        return Unreadable(f"expected a {col.type} value Python can represent (dates within "
                          f"years 1–9999), got one out of its range ({exc})")
    except Exception as exc:  # a repeated map key, nanoseconds without pandas, …
        message = exc.args[0] if exc.args else exc
        return Unreadable(f"expected a {col.type} value credrank can read, got one that "
                          f"raised {type(exc).__name__}: {message}")


# --------------------------------------------------------------------------- Arrow → JSON

def json_value(value: Any, name: str = "") -> tuple[Any, str | None]:
    """``(JSON data, None)`` for a value read from Parquet (:func:`parquet_records`), else
    ``(None, reason)`` (``expected …, got …``; ``name``, the column, places a nested value in
    the reason: ``(at 'meta.when')``). The JSON form of each Arrow type, chosen to keep the
    value exactly and never to guess:

    * text, integers, floats, booleans and nulls are JSON already (a non-finite float is
      left to the reader's check of numbers);
    * **timestamp with a time zone** → ISO 8601 text in UTC, as the date fields are written
      (``2020-01-01T05:00:00+00:00``; microseconds shown when not zero);
    * **timestamp without a time zone** → ISO 8601 text without one
      (``2020-01-01T00:00:00``): an extra column is kept as written, no zone is invented
      (``assume_timezone`` applies to the date fields only);
    * **date** (``date32``, ``date64``) → ``YYYY-MM-DD``;
    * **time** (``time32``, ``time64``) → ``HH:MM:SS``, or ``HH:MM:SS.ffffff`` when the
      microseconds are not zero;
    * **duration** → its length in seconds, a JSON number (a float: microseconds are kept
      exactly up to about 285 years);
    * **decimal** → its exact decimal text (``"19.99"``, scale kept: ``"1.10"``): a float
      would round values of more than 15 significant digits, and text keeps one JSON type
      per column;
    * **binary** (``binary``, ``large_binary``, ``fixed_size_binary``) → base64 text
      (RFC 4648, padded);
    * **uuid** → its canonical text (``12345678-1234-…``);
    * **struct** and **map** → an object, **list** → an array, converted recursively; an
      object's keys must be text (a map with integer keys is refused, not rewritten);
    * anything else is refused: the reason names its type.
    """
    out, reason, at = _json(value, name)
    if reason is not None and at != name:
        reason += f" (at '{at}')"
    return out, reason


def _json(v: Any, at: str) -> tuple[Any, str | None, str]:
    """:func:`json_value` and the path (``at``) of the value a reason is about."""
    if v is None or isinstance(v, bool | int | float | str):
        return v, None, at
    if isinstance(v, datetime):
        out, reason = _datetime_text(v)
        return out, reason, at
    if isinstance(v, date | time):
        return v.isoformat(), None, at
    if isinstance(v, timedelta):
        return v.total_seconds(), None, at
    if isinstance(v, Decimal):
        return _decimal_text(v), None, at
    if isinstance(v, bytes | bytearray | memoryview):
        return base64.b64encode(v).decode("ascii"), None, at
    if isinstance(v, UUID):
        return str(v), None, at
    if isinstance(v, dict):
        obj: dict[str, Any] = {}
        for k, x in v.items():
            if not isinstance(k, str):
                return None, f"expected an object with text keys, got the key {got(k)}", at
            obj[k], reason, where = _json(x, f"{at}.{k}")
            if reason is not None:
                return None, reason, where
        return obj, None, at
    if isinstance(v, list | tuple):
        arr: list[Any] = []
        for i, x in enumerate(v):
            item, reason, where = _json(x, f"{at}[{i}]")
            if reason is not None:
                return None, reason, where
            arr.append(item)
        return arr, None, at
    return None, (f"expected a value storable as JSON (text, number, boolean, null, list, "
                  f"object, date, time, duration, decimal or binary), got {got(v)}"), at


def _datetime_text(v: datetime) -> tuple[str | None, str | None]:
    """ISO 8601 text of a timestamp: in UTC when it has a zone, as it is when it has none."""
    # a pandas Timestamp (nanoseconds) as Python's own datetime: microseconds, as the reader
    plain = datetime(v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond,
                     tzinfo=v.tzinfo, fold=v.fold)
    if plain.tzinfo is None or plain.utcoffset() is None:
        return plain.replace(tzinfo=None).isoformat(), None
    try:
        return plain.astimezone(UTC).isoformat(), None
    except (OverflowError, ValueError):
        return None, (f"expected a timestamp that stays within years 1–9999 in UTC, got "
                      f"{plain.isoformat()!r}")


def _decimal_text(v: Decimal) -> str:
    """The exact text of a decimal, without exponent (``Decimal('1E+2')`` → ``"100"``)."""
    return format(v, "f")
