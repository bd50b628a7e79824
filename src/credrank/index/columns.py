"""A columnar copy of the ranking payload, kept by a long-lived process (issue 26, item 4;
compact since issue 38, item 1).

Reading a point's payload out of the engine costs about the same whatever fields are asked
for (≈ 7–8 µs per point on Qdrant Edge: the stored payload is decoded, then converted to a
Python dict), so a search that fetches ``fetch_k`` candidates without the formula pays it
``fetch_k`` times: at 1,000 candidates the payload is nine tenths of the retrieval stage, while
the vector search itself costs ≈ 1 ms. :class:`PayloadColumns` holds the ranking fields of
every point (:data:`credrank.index.payload.RANKING_FIELDS`, and the extra columns a
:class:`~credrank.core.candidates.Candidates` batch carries, never the text), keyed by the
point id the engine returns with no payload at all; a batch's meta columns are then one
fancy-indexing per column.

**Layout (typed, no per-cell objects).** Each field is stored by what its values are:

* strings (ids, urls, titles, source types, ISO dates): one ``int32`` code per cell into
  one table of the distinct strings of every field (code 0 is ``None``) — a repeated value
  (a source type, a date) is kept once;
* floats (``domain_score``, index-time scores): one ``float64`` per cell (NaN: ``None``);
* integers (``passage``, ``passages``): one ``int64`` per cell and a mask of the missing;
* ``[start, end]`` pairs of integers (``span``): two ``int64`` columns and a mask;
* a field no point has: nothing; anything else (a field whose values mix types): an object
  column, as before.

Point ids that are integers (``u64``, index format 2 and later) are a sorted ``int64`` array
searched with ``searchsorted`` (plus the permutation to rows); uuids (format 1) a dict. A
batch's columns come out as the very Python values the engine's payload gives (``str``,
``float``, ``int``, ``list``, ``None``) — :func:`credrank.index.payload.columns_to_candidates`
is unchanged.

The dense vectors are a separate, optional float32 matrix (:meth:`PayloadColumns.
attach_vectors`): a store reads them only when a search asks for vectors (MMR, pluralism),
up to :data:`MAX_VECTOR_BYTES` (converting 1,000 engine vectors to numpy costs ≈ 10–15 ms; a
row of the matrix costs nothing) — a service that never asks never pays their memory.

**Cost.** Building it reads every payload once: ``O(N)`` (≈ 1 s per 100,000 documents, page
by page: the Python payloads of one page at a time), and memory ``O(N · fields)`` at a few
bytes a cell plus the distinct strings (:meth:`PayloadColumns.nbytes`; measured ≈ 0.15 kB
per document of the demo corpus against ≈ 0.7 kB of the object table it replaces, and ≈ 11 kB
a document at build time when the vectors were copied as Python lists; docs/results.md).
Taking ``k`` rows costs ``O(k · fields)`` in numpy, plus ``O(k)`` Python lists for ``span``.
It pays off in a process that answers many queries (``credrank serve``, a
:class:`~credrank.searcher.Searcher` kept open), not in one ``credrank search``, so a store
builds it only when asked (``EdgeIndex.keep_columns``) and only up to :data:`MAX_POINTS`
documents.

**Consistency.** Any write through the store (an upsert, a payload change of an index-time
score) drops the copy; the next search rebuilds it. A point the copy does not know (written
by another handle) makes that search read the payload from the engine instead — the answer is
the same either way.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

#: the largest index a store keeps the columnar copy for (memory: ≈ 0.15 kB per document
#: of the demo corpus, the distinct strings most of it; docs/results.md)
MAX_POINTS = 500_000
#: the largest copy of the dense vectors kept beside it (bytes; above: vectors come from the
#: engine)
MAX_VECTOR_BYTES = 256 * 1024 * 1024
_I64 = (-(2 ** 63), 2 ** 63 - 1)


class _Column:
    """One field's values, built a value at a time in the most compact kind that holds
    them exactly (the module docstring); a value of another kind turns it into an object
    column (the values so far decoded once)."""

    __slots__ = ("a", "b", "kind", "mask", "n", "objects")

    def __init__(self) -> None:
        self.kind = "none"
        self.n = 0  # values appended
        self.a: Any = None
        self.b: Any = None
        self.mask: Any = None  # 1 where missing (int, pair)
        self.objects: list[Any] | None = None

    @staticmethod
    def kind_of(value: Any) -> str:
        t = type(value)
        if t is str:
            return "str"
        if t is float:
            return "float"
        if t is int and _I64[0] <= value <= _I64[1]:
            return "int"
        if (t is list and len(value) == 2 and type(value[0]) is int
                and type(value[1]) is int and _I64[0] <= value[0] <= _I64[1]
                and _I64[0] <= value[1] <= _I64[1]):
            return "pair"
        return "object"

    def _start(self, kind: str) -> None:
        """Switch a column of ``n`` missing values to ``kind``."""
        n = self.n
        self.kind = kind
        if kind == "str":
            self.a = array("i", bytes(4 * n))
        elif kind == "float":
            self.a = array("d", [float("nan")]) * n
        elif kind == "int":
            self.a, self.mask = array("q", bytes(8 * n)), array("b", b"\x01" * n)
        elif kind == "pair":
            self.a, self.b = array("q", bytes(8 * n)), array("q", bytes(8 * n))
            self.mask = array("b", b"\x01" * n)
        else:
            self.objects = [None] * n

    def append(self, value: Any, strings: dict[str, int]) -> None:
        """Add one value (``strings``: every distinct string so far, by code − 1)."""
        kind = self.kind
        if value is None:
            if kind == "str":
                self.a.append(0)
            elif kind == "float":
                self.a.append(float("nan"))
            elif kind == "int":
                self.a.append(0)
                self.mask.append(1)
            elif kind == "pair":
                self.a.append(0)
                self.b.append(0)
                self.mask.append(1)
            elif kind == "object":
                assert self.objects is not None
                self.objects.append(None)
            self.n += 1
            return
        got = self.kind_of(value)
        if kind == "none":
            self._start(got)
            kind = got
        elif got != kind and kind != "object":
            self._to_objects([None, *strings])
            kind = "object"
        if kind == "str":
            self.a.append(strings.setdefault(value, len(strings) + 1))
        elif kind == "float":
            self.a.append(value)
        elif kind == "int":
            self.a.append(value)
            self.mask.append(0)
        elif kind == "pair":
            self.a.append(value[0])
            self.b.append(value[1])
            self.mask.append(0)
        else:
            assert self.objects is not None
            self.objects.append(value)
        self.n += 1

    def extend(self, values: list[Any], strings: dict[str, int]) -> None:
        """:meth:`append` of each value; one page at a time, in bulk where every value is
        missing or of the column's kind."""
        present = {type(v) for v in values} - {type(None)}
        kind = self.kind
        if kind == "none" and len(present) == 1:
            first = next(v for v in values if v is not None)
            if self.kind_of(first) in ("str", "float"):
                self._start(self.kind_of(first))
                kind = self.kind
        if kind == "str" and present <= {str}:
            add = strings.setdefault
            codes = [0 if v is None else add(v, len(strings) + 1) for v in values]
            self.a.extend(codes)
            self.n += len(values)
        elif kind == "float" and present <= {float}:
            nan = float("nan")
            self.a.extend([nan if v is None else v for v in values])
            self.n += len(values)
        elif kind == "none" and not present:
            self.n += len(values)
        else:
            for value in values:
                self.append(value, strings)

    def _to_objects(self, table: Sequence[str | None]) -> None:
        values = list(self.values(np.arange(self.n), table))
        self.kind, self.a, self.b, self.mask, self.objects = "object", None, None, None, values

    def freeze(self) -> None:
        """The build buffers as numpy arrays (no copy of the data kept twice)."""
        dtypes = {"str": np.int32, "float": np.float64, "int": np.int64, "pair": np.int64}
        if self.kind in dtypes:
            self.a = np.frombuffer(self.a, dtype=dtypes[self.kind]).copy()
        if self.kind == "pair":
            self.b = np.frombuffer(self.b, dtype=np.int64).copy()
        if self.mask is not None:
            mask = np.frombuffer(self.mask, dtype=np.int8).astype(bool)
            self.mask = mask if mask.any() else None
        if self.kind == "float" and not np.isnan(self.a).any():
            self.mask = None
        elif self.kind == "float":
            self.mask = np.isnan(self.a)
        if self.kind == "object":
            out = np.empty(self.n, dtype=object)
            out[:] = self.objects  # element-wise: a list value stays one object
            self.objects = None
            self.a = out

    def values(self, rows: np.ndarray, table: Any) -> np.ndarray:
        """An object array of the values at ``rows`` (fresh: callers may keep it)."""
        kind, n = self.kind, len(rows)
        if kind == "none":
            return np.full(n, None, dtype=object)
        a = np.asarray(self.a) if not isinstance(self.a, np.ndarray) and kind != "object" \
            else self.a
        if kind == "object":
            if isinstance(a, np.ndarray):
                return a[rows]
            out = np.empty(n, dtype=object)
            for i, r in enumerate(rows):
                out[i] = a[r]
            return out
        if kind == "str":
            return np.asarray(table, dtype=object)[a[rows]] if isinstance(table, list) \
                else table[a[rows]]
        mask = self.mask
        if mask is not None and not isinstance(mask, np.ndarray):
            mask = np.frombuffer(mask, dtype=np.int8).astype(bool)
        if kind == "float":
            out = a[rows].astype(object)  # Python floats
            missing = np.isnan(a[rows])
        elif kind == "int":
            out = a[rows].astype(object)  # Python ints
            missing = mask[rows] if mask is not None else None
        else:  # pair: a fresh [start, end] list per row, as the engine gives
            b = self.b if isinstance(self.b, np.ndarray) else np.asarray(self.b)
            out = np.empty(n, dtype=object)
            for i, pair in enumerate(zip(a[rows].tolist(), b[rows].tolist(), strict=True)):
                out[i] = list(pair)
            missing = mask[rows] if mask is not None else None
        if missing is not None and missing.any():
            out[missing] = None
        return out

    def nbytes(self) -> int:
        """Bytes of this column's arrays (an object column: its pointers only)."""
        return sum(x.nbytes for x in (self.a, self.b, self.mask) if isinstance(x, np.ndarray))


class PayloadColumns:
    """The payload ``fields`` of every point, columnar and typed, looked up by point id.

    Args:
        fields: the payload fields kept (never ``text``).
        rows: ``(point id, payload)`` pairs, one per point (the ids as the engine returns
            them: an integer, or e.g. :class:`uuid.UUID`, looked up as they come, never
            converted); consumed once, one pair at a time.
        dim: the dense vectors' dimension when they are kept too (each row then carries its
            vector as a third element), else ``None`` (:meth:`attach_vectors` adds them
            later).
    """

    def __init__(self, fields: Sequence[str], rows: Iterable[tuple[Any, ...]],
                 dim: int | None = None):
        self.fields = tuple(fields)
        ids: list[Any] = []
        columns = [_Column() for _ in self.fields]
        strings: dict[str, int] = {}  # string -> code (code 0: missing)
        vectors: list[Any] = []
        page: list[dict[str, Any]] = []

        def flush() -> None:
            for name, column in zip(self.fields, columns, strict=True):
                column.extend([p.get(name) for p in page], strings)
            page.clear()

        for pid, payload, *vector in rows:
            ids.append(pid)
            if dim is not None:
                vectors.append(np.asarray(vector[0], dtype=np.float32))
            page.append(payload)
            if len(page) >= 1000:
                flush()
        flush()
        self._strings = np.empty(len(strings) + 1, dtype=object)
        self._strings[1:] = list(strings)  # one table of every field's distinct strings
        strings.clear()
        for column in columns:
            column.freeze()
        self._columns = dict(zip(self.fields, columns, strict=True))
        self._n = len(ids)
        self._index(ids)
        #: the dense vectors, one float32 row per point (``None``: not kept)
        self.vectors: np.ndarray | None = None
        #: the vectors could not be kept (:meth:`attach_vectors` failed): not tried again
        self.no_vectors = False
        if dim is not None:
            self.vectors = (np.stack(vectors) if vectors
                            else np.empty((0, dim), dtype=np.float32))

    def _index(self, ids: list[Any]) -> None:
        """Integer ids: a sorted ``int64`` array and its permutation to rows; else a dict."""
        self._row: dict[Any, int] | None = None
        self._sorted: np.ndarray | None = None
        self._order: np.ndarray | None = None
        if ids and all(type(i) is int and 0 <= i <= _I64[1] for i in ids):
            keys = np.array(ids, dtype=np.int64)
            order = np.argsort(keys, kind="stable")
            self._sorted, self._order = keys[order], order
        else:
            self._row = {pid: i for i, pid in enumerate(ids)}

    def __len__(self) -> int:
        return self._n

    def rows(self, point_ids: Sequence[Any]) -> np.ndarray | None:
        """The rows of ``point_ids`` in order, or ``None`` when one is unknown (the caller
        then reads the payload from the engine). ``O(k log N)`` (integer ids)."""
        if self._row is not None:
            get = self._row.get
            out = np.empty(len(point_ids), dtype=np.int64)
            for i, pid in enumerate(point_ids):
                row = get(pid)
                if row is None:
                    return None
                out[i] = row
            return out
        assert self._sorted is not None and self._order is not None
        if not all(type(p) is int and 0 <= p <= _I64[1] for p in point_ids):
            return None
        keys = np.array(point_ids, dtype=np.int64)
        if not len(self._sorted):
            return None if len(keys) else np.empty(0, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self._sorted, keys), len(self._sorted) - 1)
        if not np.array_equal(self._sorted[pos], keys):
            return None
        return self._order[pos]

    def take(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """``field -> object array`` of ``rows`` (fresh arrays: callers may keep them)."""
        rows = np.asarray(rows, dtype=np.int64)
        return {name: column.values(rows, self._strings)
                for name, column in self._columns.items()}

    def attach_vectors(self, rows: Iterable[tuple[Any, Any]], dim: int) -> bool:
        """Keep the dense vectors too, from ``(point id, vector)`` pairs covering every
        point; ``False`` (nothing kept, :attr:`no_vectors` set) when one is unknown or
        missing. Memory: ``4 · dim`` bytes a point."""
        matrix = np.zeros((self._n, dim), dtype=np.float32)
        seen = np.zeros(self._n, dtype=bool)
        ids: list[Any] = []
        page: list[Any] = []

        def place() -> bool:
            found = self.rows(ids)
            if found is None or any(v is None for v in page):
                return False
            if len(ids):
                matrix[found] = np.asarray(page, dtype=np.float32).reshape(len(ids), dim)
                seen[found] = True
            ids.clear()
            page.clear()
            return True

        for pid, vector in rows:
            ids.append(pid)
            page.append(vector)
            if len(ids) >= 1000 and not place():
                self.no_vectors = True
                return False
        if not place() or not seen.all():
            self.no_vectors = True
            return False
        self.vectors = matrix
        return True

    def kinds(self) -> dict[str, str]:
        """``field -> kind`` (str, float, int, pair, none, object): how each is stored."""
        return {name: c.kind for name, c in self._columns.items()}

    def nbytes(self) -> int:
        """Bytes held: the typed arrays, the id index, and the distinct strings (their
        Python objects, ``sys.getsizeof``); the vectors not counted (:attr:`vectors`)."""
        import sys  # only for this measurement

        total = sum(c.nbytes() for c in self._columns.values()) + self._strings.nbytes
        total += sum(sys.getsizeof(s) for s in self._strings if s is not None)
        for part in (self._sorted, self._order):
            if part is not None:
                total += part.nbytes
        if self._row is not None:
            total += sys.getsizeof(self._row) + 100 * len(self._row)  # keys, ints: estimate
        return total


__all__ = ["MAX_POINTS", "MAX_VECTOR_BYTES", "PayloadColumns"]
