"""Feedback-updated source priors: bounded, versioned, logged and reversible (seed 004).

Seed 004 updates the priors after each query from feedback, and says itself that its feedback
came from an oracle (ground-truth labels), which is not a deployable mechanism. This module keeps
the update rule and adds what a product needs around it:

* **bounded** steps: one update moves a prior by at most ``max_change`` and never outside
  ``[ε, 1]`` (see :meth:`FeedbackPriors.update` for the rule);
* **versioned**: every change is a new version in ``<store>/priors.json`` (timestamp, author,
  reason, feedback counts, the full per-type table and the per-source *delta*: the sources
  that version set or changed, ``sources_set``, the type each new source was recorded with,
  ``source_types_set``, and the sources it removed, ``sources_removed``);
* **typed by provenance**: a source's prior belongs to the source type it was recorded with
  when first seen, and :class:`~credrank.stages.feedback_prior.FeedbackPrior` gives it only to
  candidates whose provenance type is that type (any other takes its type's prior). A new
  source starts from that type's prior, so one update moves the prior a document gets by at
  most ``max_change``. A door that sees the index passes the types the index gives each
  source (``known_types``): an item declaring another type is refused
  (:class:`SourceTypeMismatch`), as is an item whose type differs from its source's recorded
  one — a declared ``source_type`` is a claim, never the type;
* **logged**: one JSON line per event is appended to ``<store>/audit.jsonl`` (never rewritten);
* **reversible**: :meth:`FeedbackPriors.rollback` restores any earlier version as a new one;
* **idempotent on request**: a write may carry a ``request_id``; a retry with the same id
  returns the version the first one made instead of applying again (the ids of the last
  :data:`REQUEST_IDS` versions that carry one are remembered, in the store itself, so a
  restarted server does not re-apply either; an older id is forgotten and applies again).

Store format (``credrank-feedback-priors/3``): a version stores only the sources it changed,
so a store's size grows with the feedback it received, not with versions × sources. A
version's full tables are resolved by replaying the deltas from version 0; the current ones
are resolved once and cached. Formats 1 and 2 recorded no type per source: they are refused
naming the file and how to start a new store (their per-source priors started from whatever
type an item declared, so they cannot be carried over safely). Parsed stores are shared
within a process (up to :data:`SHARED_STORES`, keyed by path, inode, size and modification
time of the file; every write replaces the file, so a new version always has a new inode and
a larger size): opening an unchanged store reads nothing.

The stage that reads the store (per-source prior first, then per-type) is
:class:`~credrank.stages.feedback_prior.FeedbackPrior`.
:func:`simulate_oracle_feedback` reproduces the seed's oracle experiment.

Concurrent writers (several processes, or several ``FeedbackPriors`` objects on one folder) are
safe: every read-modify-write (creation, :meth:`~FeedbackPriors.update`,
:meth:`~FeedbackPriors.rollback`) holds an exclusive ``fcntl.flock`` on ``<store>/priors.lock``
and re-reads the store under it, so no update is lost and version numbers never repeat. The
store file is replaced atomically (a unique temporary file in the same folder, flushed and
fsynced, then ``os.replace`` and an fsync of the folder). Readers take no lock: they see the
old or the new file, never half of one.

A write commits in two steps (:meth:`FeedbackPriors._commit`): the audit line is appended
first (whole, on a line of its own, fsynced), then the store file is replaced. When either
step fails the audit log is truncated back to its size before the write and a
:class:`FeedbackWriteError` (an ``OSError`` keeping the ``errno``, so a full disk is still
``ENOSPC``) names the file: a failed write changes nothing. A crash between the two steps
leaves a last audit line for a version the store does not hold; the next write removes it (see
:meth:`FeedbackPriors._commit`).

Every store read is validated field by field (:func:`_parse`): a hand-edited file with a missing
or ill-typed field, a prior outside ``[ε, 1]`` or a non-finite number is refused naming the
file and the field (``priors.json: versions[3].timestamp: expected …, got …``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from credrank.core.files import atomic_write_text
from credrank.core.schema import (
    Field,
    Integer,
    ListOf,
    MapOf,
    Nullable,
    Number,
    Spec,
    Table,
    Text,
    got,
    join,
)
from credrank.core.structured import parse_json
from credrank.core.validation import (
    check_bool,
    check_choice,
    check_int,
    check_probability,
    check_real,
    check_str,
    is_number,
)
from credrank.documents.schema import SOURCE_TYPES
from credrank.signals.prior import PriorTable, load_priors

FORMAT = "credrank-feedback-priors/3"
#: the formats without a type per source: refused, naming how to start a new store
OLD_FORMATS = ("credrank-feedback-priors/1", "credrank-feedback-priors/2")
STORE_FILE = "priors.json"
AUDIT_FILE = "audit.jsonl"
LOCK_FILE = "priors.lock"
#: request ids remembered for idempotent writes (those of the most recent versions)
REQUEST_IDS = 10_000
#: the longest request id
MAX_REQUEST_ID = 200
#: resolved per-source tables cached per parsed store (the current one is always kept)
RESOLVED_TABLES = 4
#: parsed stores shared per process (least recently opened dropped first)
SHARED_STORES = 8

#: one feedback item: (source_type, source_id or None, relevant)
Feedback = tuple[str, str | None, bool]


class FeedbackStoreError(ValueError):
    """A feedback store is missing, unreadable or inconsistent."""


class SourceTypeMismatch(ValueError):
    """Feedback items declare a source type other than their source's: the type the index
    gives it (``known_types``) or the type the store recorded it with. ``problems``: every
    such item of the round, ``(position, what was expected and what came)`` in order (a door
    says the position as its own field or line); ``item`` the first's position; the message
    is the first's at ``feedback[i] source_type``, naming how many more there are."""

    def __init__(self, problems: Sequence[tuple[int, str]]) -> None:
        self.problems = list(problems)
        self.item, first = self.problems[0]
        more = [f"feedback[{i}]" for i, _ in self.problems[1:]]
        super().__init__(f"feedback[{self.item}] source_type: {first}"
                         + (f" (and {len(more)} more item(s) so: {', '.join(more)})"
                            if more else ""))


class FeedbackWriteError(OSError):
    """A store file (``priors.json`` or ``audit.jsonl``) could not be written; nothing was
    changed. The ``errno`` of the failure is kept (a full disk is ``ENOSPC``, which the
    service answers 507); the message names the file: ``…/audit.jsonl: cannot write: No space
    left on device; the new version was not saved``."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _write_error(path: Path, exc: OSError) -> FeedbackWriteError:
    reason = exc.strerror or str(exc)
    return FeedbackWriteError(exc.errno, f"cannot write: {reason}; the new version was not "
                                         "saved", str(path))


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write part of it)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "the write made no progress")
        view = view[n:]


def _truncate(fd: int, size: int) -> None:
    """Cut the file ``fd`` back to ``size`` bytes (undoing an append; needs no free space).
    Best effort: if even this fails, the line left is removed by the next write
    (:func:`_drop_orphan`) or, when torn, ends before the next entry's line."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, size)
        os.fsync(fd)


def _last_line_start(fd: int, size: int) -> int:
    """The offset of the last line of the file ``fd`` of ``size`` bytes, which ends in a
    newline (read backwards in blocks: a line may be large)."""
    pos = size - 1  # the final newline
    while pos > 0:
        start = max(0, pos - 65536)
        i = os.pread(fd, pos - start, start).rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return 0


def _drop_orphan(fd: int, size: int, version: int) -> int:
    """Remove the last line of the audit log ``fd`` (of ``size`` bytes) when it is the entry
    of ``version``, the version about to be written (see :meth:`FeedbackPriors._commit`);
    return the log's size after."""
    if size == 0 or os.pread(fd, 1, size - 1) != b"\n":
        return size
    start = _last_line_start(fd, size)
    # an entry this module wrote opens with its version (a line may be megabytes: only its
    # opening is read); a line of another shape is never taken for an orphan
    head = _ENTRY_HEAD.match(os.pread(fd, 64, start))
    if head is None or int(head.group(1)) != version:
        return size
    os.ftruncate(fd, start)
    os.fsync(fd)
    return start


#: the opening of an audit entry as :meth:`FeedbackPriors._commit` writes it
_ENTRY_HEAD = re.compile(rb'\{"version": (0|[1-9][0-9]{0,17}), "parent": ')


def _now() -> datetime:
    return datetime.now(UTC)


def check_step(step: object) -> float:
    """Validate the learning rate η ∈ (0, 0.5]."""
    return check_real("feedback step", step, 0.0, 0.5, open_low=True)


def check_epsilon(epsilon: object, *, error: type[Exception] = ValueError) -> float:
    """Validate the floor ε of every prior, ε ∈ (0, 1)."""
    return check_probability("epsilon", epsilon, open_low=True, open_high=True, error=error)


def check_max_change(max_change: object, *, error: type[Exception] = ValueError) -> float:
    """Validate the per-update cap on one prior's change, in (0, 1]."""
    return check_probability("max_change", max_change, open_low=True, error=error)


def feedback_move(prior: float, n_relevant: int, n_total: int, step: float, max_change: float,
                  epsilon: float) -> float:
    """One bounded move of one prior from ``n_total`` feedback items (seed 004's update).

    ``λ ← clip(λ + clamp(η_n · (r̄ − λ), −c, c), ε, 1)`` with ``r̄ = n_relevant / n_total`` the
    share of relevant items (target 1 for relevant, 0 for non-relevant, averaged),
    ``η_n = 1 − (1 − η)^n`` (the same as ``n`` successive steps of size η toward one target, but
    independent of the order of mixed items), ``c = max_change`` the per-update cap. With
    ``n_total = 0`` the prior is returned unchanged (declared: no evidence, no move).
    """
    if n_total <= 0:
        return float(prior)
    target = n_relevant / n_total
    rate = 1.0 - (1.0 - step) ** n_total
    delta = min(max(rate * (target - prior), -max_change), max_change)
    return float(min(max(prior + delta, epsilon), 1.0))


def _check_feedback(feedback: Iterable[Feedback],
                    known_types: Mapping[str, Collection[str]] | None = None) -> list[Feedback]:
    """Validate feedback items ``(source_type, source_id or None, relevant)``; return them as
    a list with ``relevant`` a plain bool. ``known_types``: the types the index gives each
    source id (its documents' provenance types); an item whose source is there with other
    types is refused (:class:`SourceTypeMismatch`, naming every such item of the round), a
    source the index lacks is not checked."""
    items, mismatched = [], []
    for i, item in enumerate(feedback):
        if not isinstance(item, Sequence) or isinstance(item, str) or len(item) != 3:
            raise ValueError(f"feedback[{i}]: expected (source_type, source_id or None, "
                             f"relevant), got {item!r}")
        stype, sid, relevant = item
        check_choice(f"feedback[{i}] source_type", stype, SOURCE_TYPES)
        if sid is not None:
            check_str(f"feedback[{i}] source_id", sid, what="a non-empty string or None")
            known = (known_types or {}).get(sid)
            if known and stype not in known:
                said = " or ".join(repr(t) for t in sorted(known))
                mismatched.append((i, f"expected {said} (the type the index gives source "
                                      f"{sid!r} by provenance), got {stype!r}"))
        items.append((stype, sid, check_bool(f"feedback[{i}] relevant", relevant)))
    if mismatched:
        raise SourceTypeMismatch(mismatched)
    return items


def source_types_of(rows: Iterable[Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    """``source_id → the provenance types of its documents`` from index payload rows
    (``{"source_id", "source_type"}`` each): the ``known_types`` of
    :meth:`FeedbackPriors.update` (a row without a source id or a type is skipped)."""
    found: dict[str, set[str]] = {}
    for row in rows:
        sid, stype = row.get("source_id"), row.get("source_type")
        if isinstance(sid, str) and isinstance(stype, str):
            found.setdefault(sid, set()).add(stype)
    return {sid: frozenset(types) for sid, types in found.items()}


class RequestIdReused(FeedbackStoreError):
    """A request id already names a version made by a different request."""


def _check_request_id(request_id: object) -> str | None:
    if request_id is None:
        return None
    if (not isinstance(request_id, str) or not 1 <= len(request_id) <= MAX_REQUEST_ID
            or not request_id.isprintable() or request_id != request_id.strip()):
        raise ValueError(f"request_id: expected 1 to {MAX_REQUEST_ID} printable characters "
                         f"without surrounding whitespace, got {request_id!r}")
    return request_id


def request_digest(payload: dict[str, Any]) -> str:
    """The fingerprint of a write request stored beside its id (SHA-256 of canonical JSON)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


#: a version's resolved per-source tables: (source → prior, source → recorded type)
Tables = tuple[dict[str, float], dict[str, str]]


def _apply(tables: Tables, record: dict[str, Any]) -> None:
    priors, types = tables
    for sid in record["sources_removed"]:
        priors.pop(sid, None)
        types.pop(sid, None)
    priors.update(record["sources_set"])
    types.update(record["source_types_set"])


class _StoreData:
    """One parsed store file, shared by every :class:`FeedbackPriors` that reads it (never
    changed once built; a commit builds a new one). ``records`` are the stored versions
    (per-source *deltas*); :meth:`tables` resolves a version's full per-source tables (priors
    and recorded types) by replaying them, caching the current ones and the last few
    others."""

    def __init__(self, epsilon: float, max_change: float, base: dict[str, float],
                 base_name: str, records: tuple[dict[str, Any], ...],
                 current_sources: Tables | None = None) -> None:
        self.epsilon, self.max_change, self.base, self.base_name = (epsilon, max_change, base,
                                                                    base_name)
        self.records = records
        #: (event, request id) → version, for the most recent REQUEST_IDS ids, oldest first
        self.requests: dict[tuple[str, str], int] = {}
        for record in reversed(records):
            rid = record.get("request_id")
            if rid is not None and (record["event"], rid) not in self.requests:
                self.requests[(record["event"], rid)] = int(record["version"])
                if len(self.requests) >= REQUEST_IDS:
                    break
        self.requests = dict(reversed(list(self.requests.items())))
        self._tables: OrderedDict[int, Tables] = OrderedDict()
        self._lock = threading.Lock()
        if records and current_sources is not None:
            self._tables[len(records) - 1] = current_sources

    @property
    def current(self) -> int:
        return len(self.records) - 1

    def tables(self, version: int) -> Tables:
        """The full per-source tables of ``version``: priors and recorded types (shared:
        treat them as read-only)."""
        with self._lock:
            if version in self._tables:
                self._tables.move_to_end(version)
                return self._tables[version]
            start = max((v for v in self._tables if v < version), default=-1)
            tables: Tables = ((dict(self._tables[start][0]), dict(self._tables[start][1]))
                              if start >= 0 else ({}, {}))
            for record in self.records[start + 1:version + 1]:
                _apply(tables, record)
            self._tables[version] = tables
            while len(self._tables) > RESOLVED_TABLES:
                oldest = next(v for v in self._tables if v != self.current)
                del self._tables[oldest]
            return tables

    def appended(self, record: dict[str, Any], sources: Tables) -> _StoreData:
        """This store with ``record`` (whose full tables are ``sources``) as its new
        version."""
        return _StoreData(self.epsilon, self.max_change, self.base, self.base_name,
                          (*self.records, record), sources)


#: parsed stores by path, each with the (inode, size, mtime) of the file it was read from
_SHARED: OrderedDict[str, tuple[tuple[int, int, int], _StoreData]] = OrderedDict()
_SHARED_LOCK = threading.Lock()


def _file_key(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _shared(path: Path) -> tuple[tuple[int, int, int], _StoreData] | None:
    with _SHARED_LOCK:
        hit = _SHARED.get(str(path.resolve()))
        if hit is not None:
            _SHARED.move_to_end(str(path.resolve()))
        return hit


def _share(path: Path, key: tuple[int, int, int], data: _StoreData) -> None:
    with _SHARED_LOCK:
        _SHARED[str(path.resolve())] = (key, data)
        _SHARED.move_to_end(str(path.resolve()))
        while len(_SHARED) > SHARED_STORES:
            _SHARED.popitem(last=False)


@dataclass(frozen=True)
class _Timestamp(Spec):
    """An ISO 8601 timestamp string (what :meth:`datetime.isoformat` writes)."""

    def describe(self) -> str:
        return "an ISO 8601 timestamp string"

    def clean(self, value: Any, at: str, fail: Any) -> str:
        if not isinstance(value, str):
            raise fail(at, self.describe(), value)
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise fail(at, self.describe(), value) from None
        return value


@dataclass(frozen=True)
class _FiniteJson(Spec):
    """Any JSON value whose numbers are all finite (the free-form ``counts`` of a version);
    the error names the key path of the first non-finite number (``1e999`` parses as
    infinity)."""

    def describe(self) -> str:
        return "a finite number"

    def clean(self, value: Any, at: str, fail: Any) -> Any:
        stack: list[tuple[str, Any]] = [(at, value)]
        while stack:
            where, x = stack.pop()
            if isinstance(x, dict):
                stack.extend((join(where, str(k)), v) for k, v in x.items())
            elif isinstance(x, list):
                stack.extend((join(where, i), v) for i, v in enumerate(x))
            elif is_number(x) and not math.isfinite(x):
                raise fail(where, self.describe(), x)
        return value


_EVENTS = ("init", "update", "rollback")


def _store_spec(epsilon: float) -> Table:
    """The schema of a store file whose floor is ``epsilon`` (every prior a finite number in
    ``[ε, 1]``)."""
    prior = Number(epsilon, 1.0)
    types = Table({t: Field(prior) for t in SOURCE_TYPES},
                  what="a table of the prior of every source type")
    record: dict[str, Field] = {
        "version": Field(Integer(0)),
        "parent": Field(Nullable(Integer(0))),
        "event": Field(Text(choices=_EVENTS)),
        "timestamp": Field(_Timestamp()),
        "author": Field(Text()),
        "reason": Field(Text(allow_empty=True)),
        "counts": Field(MapOf(_FiniteJson())),
        "types": Field(types),
    }
    record["sources_set"] = Field(MapOf(prior))
    record["source_types_set"] = Field(MapOf(Text(choices=SOURCE_TYPES)))
    record["sources_removed"] = Field(ListOf(Text(what="a source id")))
    record["restored_from"] = Field(Integer(0), required=False)
    record["request_id"] = Field(Text(what="a request id"), required=False)
    record["request_digest"] = Field(Text(what="a SHA-256 digest"), required=False)
    return Table({
        "format": Field(Text()),
        "epsilon": Field(Number()),
        "max_change": Field(Number()),
        "base": Field(Table({"name": Field(Text()), "values": Field(types)})),
        "current": Field(Integer(0)),
        "versions": Field(ListOf(Table(record, what="a version record"), min_len=1)),
    }, what="a feedback store")


#: the store's parameters, checked first (the priors' bounds depend on epsilon)
_PARAMETERS = Table({"epsilon": Field(Number(0.0, 1.0, open_low=True, open_high=True)),
                     "max_change": Field(Number(0.0, 1.0, open_low=True))}, extra=True)


def _parse(path: Path, data: Any) -> _StoreData:
    """Validate a store document and return it parsed; :class:`FeedbackStoreError` ``FILE:
    FIELD: expected …, got …`` at the first violation.

    Policy: every field of every version record is required with its type (``version``,
    ``parent``, ``event``, ``timestamp``, ``author``, ``reason``, ``counts``, ``types``,
    ``sources_set``, ``source_types_set``, ``sources_removed``; ``restored_from``,
    ``request_id`` and ``request_digest`` where they apply); unknown keys are refused; every
    prior (``base.values``, ``types``, the per-source ones) is a finite number in ``[ε, 1]``;
    every source a version sets has a recorded type (set by it or by an earlier version, and
    not removed since); versions are numbered 0, 1, 2, … in order, each the child of the one
    before, version 0 the ``init`` and only it; ``current`` is the last version's number. A
    store of an older format (:data:`OLD_FORMATS`: no type per source) is refused, saying how
    to start a new one.
    """
    found = data.get("format") if isinstance(data, dict) else None
    if found in OLD_FORMATS:
        raise FeedbackStoreError(
            f"{path}: format {found!r} records no source type per source, which a per-source "
            f"prior now needs (it applies only to documents of the type it was recorded "
            f"with); start a new store (`credrank priors init NEW_DIR --base "
            f"{_base_name(data)}`) and apply the feedback files again (`credrank priors "
            "update NEW_DIR FILE --index DIR`)")
    if found != FORMAT:
        raise FeedbackStoreError(
            f"{path}: expected a feedback store with format {FORMAT!r}, got {found!r}; this "
            "credrank cannot read it")
    where = str(path)

    def bad(field: str, expected: str, value: Any) -> FeedbackStoreError:
        return FeedbackStoreError(f"{where}: {field}: expected {expected}, got {got(value)}")

    params = _PARAMETERS.check(data, where, error=FeedbackStoreError)
    epsilon, max_change = params["epsilon"], params["max_change"]
    clean = _store_spec(epsilon).check(data, where, error=FeedbackStoreError)
    stored = clean["versions"]
    if clean["current"] != len(stored) - 1:
        raise bad("current", f"{len(stored) - 1} (the number of the last version)",
                  clean["current"])
    records: list[dict[str, Any]] = []
    typed: set[str] = set()
    for i, v in enumerate(stored):
        at = f"versions[{i}]"
        if v["version"] != i:
            raise bad(f"{at}.version", f"{i} (versions are numbered 0, 1, 2, … in order)",
                      v["version"])
        if v["parent"] != (i - 1 if i else None):
            raise bad(f"{at}.parent", f"{i - 1} (the version before)" if i else "null",
                      v["parent"])
        if (v["event"] == "init") != (i == 0):
            raise bad(f"{at}.event", "'init'" if i == 0 else "'update' or 'rollback'",
                      v["event"])
        if "restored_from" in v and v["event"] != "rollback":
            raise bad(f"{at}.restored_from", "no such key (only a rollback restores a version)",
                      v["restored_from"])
        if v["event"] == "rollback" and not 0 <= v.get("restored_from", -1) < i:
            raise bad(f"{at}.restored_from", f"the version a rollback restored, an integer in "
                      f"[0, {i - 1}]", v.get("restored_from", _Missing()))
        if "request_id" in v:
            try:
                _check_request_id(v["request_id"])
            except ValueError as exc:
                raise FeedbackStoreError(f"{where}: {at}.{exc}") from None
            if "request_digest" not in v:
                raise bad(f"{at}.request_digest", "the digest of the request (it has a "
                          "request_id)", _Missing())
        typed.difference_update(v["sources_removed"])
        typed.update(v["source_types_set"])
        untyped = sorted(set(v["sources_set"]) - typed)
        if untyped:
            raise bad(f"{at}.source_types_set", f"the type of every source the version sets "
                      f"(missing for {untyped[0]!r})", v["source_types_set"])
        records.append(v)
    return _StoreData(epsilon, max_change, clean["base"]["values"], clean["base"]["name"],
                      tuple(records))


def _base_name(data: Any) -> str:
    """The base preset of an old store document, as ``priors init --base`` takes it (its
    name when it is a word, else ``current``)."""
    base = data.get("base") if isinstance(data, dict) else None
    name = base.get("name") if isinstance(base, dict) else None
    return name if isinstance(name, str) and re.fullmatch(r"[a-z_]+", name) else "BASE"


class _Missing:
    def __repr__(self) -> str:
        return "nothing (the key is missing)"


class FeedbackPriors:
    """A versioned store of per-type and per-source priors updated from relevance feedback.

    ``FeedbackPriors(directory, base)`` creates the store from ``base`` (a
    :class:`~credrank.signals.prior.PriorTable` or a preset name) when ``directory`` holds none,
    and loads it otherwise (``base`` may then be omitted; if given it must equal the stored
    base). ``epsilon`` (ε, the floor of every prior, in (0, 1); default 0.01) and
    ``max_change`` (the cap on one update's change of one prior, in (0, 1]; default 0.05) are
    fixed at creation and stored; when loading, values given must equal the stored ones. ``clock``
    supplies timestamps (tests pass a fixed one).

    Opening is cheap: a store file already parsed in this process (same path, inode, size
    and modification time) is not read again, and the current per-source table is resolved
    once per version (see the module docstring).
    """

    def __init__(self, directory: str | Path, base: PriorTable | str | None = None, *,
                 epsilon: float | None = None, max_change: float | None = None,
                 author: str = "credrank",
                 reason: str = "initial priors", clock: Callable[[], datetime] = _now):
        self.directory = Path(directory)
        self.clock = clock
        if self.directory.exists() and not self.directory.is_dir():
            raise FeedbackStoreError(f"{self.directory}: expected a feedback store folder, got "
                                     "a file")
        path = self.directory / STORE_FILE
        if path.exists():
            self._open_existing(path, base, epsilon, max_change)
            return
        if base is None:
            raise FeedbackStoreError(f"{path}: no feedback store here; pass base= (a PriorTable "
                                     "or preset name) to create one")
        from credrank.index.manifest import MANIFEST

        if (self.directory / MANIFEST).is_file():  # a store's files among an index's
            raise FeedbackStoreError(f"{self.directory}: holds a credrank index; a feedback "
                                     "store goes in a folder of its own")
        table = load_priors(base) if isinstance(base, str) else base
        if not isinstance(table, PriorTable):
            raise ValueError(f"base: expected a PriorTable or preset name, got {base!r}")
        eps = check_epsilon(0.01 if epsilon is None else epsilon)
        cap = check_max_change(0.05 if max_change is None else max_change)
        values = {t: float(table[t]) for t in SOURCE_TYPES}
        low = {t: v for t, v in values.items() if v < eps}
        if low:
            raise ValueError(f"base: priors {low} are below epsilon={eps}; lower "
                             "epsilon or raise them")
        check_str("author", author)
        check_str("reason", reason, allow_empty=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._locked():
            if path.exists():  # another writer created it while we waited for the lock
                self._open_existing(path, base, epsilon, max_change)
                return
            self._data = _StoreData(eps, cap, values, table.name, ())
            self._commit("init", dict(values), ({}, {}), [], author, reason, counts={},
                         changes={})

    def _open_existing(self, path: Path, base: PriorTable | str | None,
                       epsilon: float | None, max_change: float | None) -> None:
        self._load(path)
        if base is not None:
            table = load_priors(base) if isinstance(base, str) else base
            if {t: float(table[t]) for t in SOURCE_TYPES} != self.base:
                raise FeedbackStoreError(
                    f"{path}: the store exists with a different base table; open it "
                    "without base= to load it, or use another directory")
        for label, given, stored in (("epsilon", epsilon, self.epsilon),
                                     ("max_change", max_change, self.max_change)):
            if given is not None and float(given) != stored:
                raise FeedbackStoreError(f"{path}: {label}={given!r} differs from the "
                                         f"stored {label}={stored}; it is fixed at creation")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the store's exclusive lock (``fcntl.flock`` on ``<store>/priors.lock``)."""
        with (self.directory / LOCK_FILE).open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _reload(self) -> None:
        """Re-read the store from disk (call under the lock, before a read-modify-write)."""
        path = self.directory / STORE_FILE
        if not path.exists():
            raise FeedbackStoreError(f"{path}: the feedback store has disappeared")
        self._load(path)

    # ------------------------------------------------------------------ persistence
    @property
    def epsilon(self) -> float:
        return self._data.epsilon

    @property
    def max_change(self) -> float:
        return self._data.max_change

    @property
    def base(self) -> dict[str, float]:
        return self._data.base

    @property
    def base_name(self) -> str:
        return self._data.base_name

    def _load(self, path: Path) -> None:
        try:
            key = _file_key(path)
            hit = _shared(path)
            if hit is not None and hit[0] == key:
                self._data = hit[1]
                return
            # NaN / Infinity parse here and are refused by _parse naming their field (every
            # value of a store is checked by its schema)
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise FeedbackStoreError(f"{path}: cannot read the feedback store: {exc}") from exc
        except RecursionError:
            raise FeedbackStoreError(f"{path}: cannot read the feedback store: expected JSON "
                                     "nested a few levels deep, got deeper") from None
        self._data = _parse(path, data)
        _share(path, key, self._data)

    def _commit(self, event: str, types: dict[str, float], sources_set: Tables,
                sources_removed: list[str], author: str, reason: str, *,
                counts: dict[str, Any], changes: dict[str, Any],
                restored_from: int | None = None, request: tuple[str, str] | None = None,
                on_commit: Callable[[], None] | None = None) -> int:
        """Write the next version (call under the store lock, after :meth:`_reload`); return
        its number.

        Order and policy: ``on_commit`` is called first (if it raises, nothing is written);
        then the audit line is appended (:meth:`_append_audit`: on a line of its own, whole,
        fsynced), then the store file is replaced atomically. If the append fails, the log is
        truncated back to its size before it; if the replace fails, likewise: either way a
        :class:`FeedbackWriteError` names the file and nothing was changed (the object still
        holds the version before). ``sources_set``: the priors the version sets and the types
        of the sources it types. A crash between the two steps leaves the log one line ahead
        of the store: that line, for the version being written now, is removed before the
        next append (under the lock, so it is never another writer's line in progress).
        """
        check_str("author", author)
        check_str("reason", reason, allow_empty=True)
        old = self._data
        version = old.current + 1
        record: dict[str, Any] = {
            "version": version,
            "parent": version - 1 if version else None,
            "event": event,
            "timestamp": self.clock().isoformat(),
            "author": author,
            "reason": reason,
            "counts": counts,
            "types": types,
            "sources_set": dict(sorted(sources_set[0].items())),
            "source_types_set": dict(sorted(sources_set[1].items())),
            "sources_removed": sorted(sources_removed),
        }
        if restored_from is not None:
            record["restored_from"] = restored_from
        if request is not None:
            record["request_id"], record["request_digest"] = request
        full: Tables = ({}, {})
        if old.records:
            priors, typed = old.tables(old.current)
            full = (dict(priors), dict(typed))
        _apply(full, record)
        new = old.appended(record, full)
        data = {
            "format": FORMAT,
            "epsilon": new.epsilon,
            "max_change": new.max_change,
            "base": {"name": new.base_name, "values": new.base},
            "current": version,
            "versions": list(new.records),
        }
        text = json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False)
        line = {k: record[k] for k in ("version", "parent", "event", "timestamp", "author",
                                       "reason", "counts")}
        if restored_from is not None:
            line["restored_from"] = restored_from
        if request is not None:
            line["request_id"] = request[0]
        line["changes"] = changes
        if on_commit is not None:
            on_commit()  # may raise: nothing has been written
        path = self.directory / STORE_FILE
        audit = self.directory / AUDIT_FILE
        try:
            fd = os.open(audit, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise _write_error(audit, exc) from exc
        try:
            size = self._append_audit(fd, audit, version, line)
            try:
                atomic_write_text(path, text)
            except BaseException as exc:
                _truncate(fd, size)
                if isinstance(exc, OSError):
                    raise _write_error(path, exc) from exc
                raise
        finally:
            os.close(fd)
        self._data = new
        _share(path, _file_key(path), new)  # under the store lock: no other writer between
        return version

    @staticmethod
    def _append_audit(fd: int, audit: Path, version: int, line: dict[str, Any]) -> int:
        """Append ``line`` (the entry of ``version``) to the audit log open as ``fd``; return
        the log's size before the append (to truncate back to if the store write fails).

        Policy: a last line that is the entry of ``version`` itself is what a crash between
        an earlier append and its store write left (the store does not hold ``version``): it
        is removed first. A log that does not end in a newline (a torn last line) gets one
        before the entry, so the entry is always a line of its own (the torn line stays, and
        reading the history names it). A missing or empty log while the store already holds
        versions starts anew, and its first entry says so (``note``). On any failure the log
        is truncated back to its size before and :class:`FeedbackWriteError` names it.
        """
        try:
            size = _drop_orphan(fd, os.fstat(fd).st_size, version)
        except OSError as exc:
            raise _write_error(audit, exc) from exc
        try:
            if size == 0 and version > 0:
                line = {**line, "note": f"the audit log was missing or empty when version "
                                        f"{version} was written: it starts here; versions 0 "
                                        f"to {version - 1} are recorded in {STORE_FILE} only"}
            payload = json.dumps(line, ensure_ascii=False, allow_nan=False).encode("utf-8")
            if size and os.pread(fd, 1, size - 1) != b"\n":
                payload = b"\n" + payload
            _write_all(fd, payload + b"\n")
            os.fsync(fd)
        except BaseException as exc:
            _truncate(fd, size)
            if isinstance(exc, OSError):
                raise _write_error(audit, exc) from exc
            raise
        return size

    # ------------------------------------------------------------------ reading
    def refresh(self) -> None:
        """Read the store again if its file changed since this object read it (another
        writer: ``credrank priors update``, ``POST /feedback``); one ``stat`` when it did
        not. A long-lived pipeline calls it before ranking with the latest version."""
        self._load(self.directory / STORE_FILE)

    @property
    def current(self) -> int:
        """The latest version number."""
        return self._data.current

    def record(self, version: int | None = None) -> dict[str, Any]:
        """The record of ``version`` (default: the latest) with its full ``types``,
        ``sources`` (per-source priors) and ``source_types`` (the type each source was recorded
        with) tables (resolved from the stored deltas; treat it as read-only)."""
        v = self.current if version is None else check_int("version", version, 0, self.current)
        stored = self._data.records[v]
        out = {k: x for k, x in stored.items()
               if k not in ("sources_set", "source_types_set", "sources_removed",
                            "request_digest")}
        out["sources"], out["source_types"] = self._data.tables(v)
        return out

    def table(self, version: int | None = None) -> PriorTable:
        """The per-type priors of ``version`` (default: the latest) as a PriorTable."""
        v = self.record(version)
        return PriorTable(f"feedback@v{v['version']}", dict(v["types"]))

    def source_priors(self, version: int | None = None) -> dict[str, float]:
        """The per-source priors of ``version`` (default: the latest)."""
        return dict(self.record(version)["sources"])

    def source_types(self, version: int | None = None) -> dict[str, str]:
        """The type each source of ``version`` (default: the latest) was recorded with: its
        prior applies only to documents of that provenance type."""
        return dict(self.record(version)["source_types"])

    def history(self) -> list[dict[str, Any]]:
        """Every version record with its full tables, oldest first (copies)."""
        return [json.loads(json.dumps(self.record(v))) for v in range(self.current + 1)]

    def find_request(self, request_id: str, event: str = "update") -> int | None:
        """The version made by the ``event`` (``update`` or ``rollback``) with
        ``request_id`` (one of the last :data:`REQUEST_IDS` ids), or ``None``."""
        return self._data.requests.get((event, request_id))

    def audit(self) -> list[dict[str, Any]]:
        """The parsed lines of the append-only audit log, oldest first.

        Lines are split on ``\\n`` only (as JSONL is defined); blank lines are skipped. Raises
        :class:`FeedbackStoreError` naming the file and line of an entry that is not UTF-8,
        not strict JSON (``NaN`` / ``Infinity`` included: they are not JSON) or not an
        object; and naming the file when the log is missing or empty (every store writes
        version 0's entry, so an empty history means the log was lost — the versions
        themselves are still in ``priors.json``, and the next write starts a new log whose
        first entry says so). A log that was started anew this way begins at that version.
        """
        path = self.directory / AUDIT_FILE
        entries = []
        try:
            with path.open("rb") as log:
                for number, raw in enumerate(log, start=1):
                    where = f"{path}:{number}: corrupt audit entry"
                    try:
                        line = raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise FeedbackStoreError(f"{where}: expected UTF-8 text, got the byte "
                                                 f"0x{raw[exc.start]:02x} at column "
                                                 f"{exc.start + 1}") from None
                    if not line.strip():
                        continue
                    entry = parse_json(line, where, error=FeedbackStoreError)
                    if not isinstance(entry, dict):
                        raise FeedbackStoreError(f"{where}: expected a JSON object, got "
                                                 f"{got(entry)}")
                    entries.append(entry)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise FeedbackStoreError(f"{path}: cannot read the audit log: {exc}") from exc
        if not entries:
            raise FeedbackStoreError(
                f"{path}: the audit log is missing or empty, though the store holds versions 0 "
                f"to {self.current}; their records are still in {STORE_FILE}, and the next "
                "write starts a new log at its version")
        return entries

    def audit_log_lost(self) -> bool:
        """Whether the audit log is missing or empty: then the next write starts a new log at
        its version (its first entry carries a ``note`` saying so) and :meth:`audit` refuses
        to present the lost history as empty."""
        try:
            return (self.directory / AUDIT_FILE).stat().st_size == 0
        except FileNotFoundError:
            return True

    # ------------------------------------------------------------------ writing
    def _seen(self, event: str, request: tuple[str, str] | None) -> int | None:
        """The version an earlier ``event`` with this request id made (same digest), else
        None; :class:`RequestIdReused` when the id names a different request."""
        if request is None:
            return None
        version = self._data.requests.get((event, request[0]))
        if version is None:
            return None
        if self._data.records[version].get("request_digest") != request[1]:
            raise RequestIdReused(f"request_id {request[0]!r}: already used by version "
                                  f"{version} for a different request; send a new id")
        return version

    def update(self, feedback: Iterable[Feedback], step: float = 0.1, *,
               author: str = "feedback", reason: str = "",
               request_id: str | None = None,
               known_types: Mapping[str, Collection[str]] | None = None) -> int:
        """Apply one round of feedback and store the result as a new version; return it.

        ``feedback``: ``(source_type, source_id or None, relevant)`` items. Every prior an item
        involves (its type's, and its source's when ``source_id`` is given) moves once by
        :func:`feedback_move` over all items that involve it: toward 1 for relevant, toward 0
        for non-relevant, by ``η_n = 1 − (1 − η)^n`` of the gap to the share of relevant
        items, at most ``max_change``, clipped to ``[ε, 1]``. All moves are computed from the
        state before the update. An empty round is still a version (it records that feedback
        was asked for and none came). ``request_id``: see :meth:`update_once` (a repeated id
        returns the version it made).

        Source types (a declared type is a claim, checked against provenance): a source seen
        for the first time is recorded with its item's type and starts from that type's prior
        (before the round), the prior its documents of that type had; the stage gives its
        prior only to documents of that provenance type. ``known_types``: the types the index
        gives each source id (:func:`source_types_of`); an item whose source is there with
        other types, or whose type differs from its source's recorded type (or from the type
        of an earlier item of a new source in this round), raises
        :class:`SourceTypeMismatch` naming ``feedback[i] source_type``, and nothing is
        applied. So one update moves the prior any document gets by at most ``max_change``.
        """
        return self.update_once(feedback, step, author=author, reason=reason,
                                request_id=request_id, known_types=known_types)[0]

    def update_once(self, feedback: Iterable[Feedback], step: float = 0.1, *,
                    author: str = "feedback", reason: str = "",
                    request_id: str | None = None,
                    on_commit: Callable[[], None] | None = None,
                    known_types: Mapping[str, Collection[str]] | None = None
                    ) -> tuple[int, bool]:
        """:meth:`update`, idempotent by ``request_id``: ``(version, applied)``.

        Under the store's lock, a ``request_id`` one of the last :data:`REQUEST_IDS` updates
        carries (ids are per event: an update's and a rollback's are separate) returns that
        version with ``applied=False`` (nothing written) when the
        request is the same (same items, step, author and reason) and raises
        :class:`RequestIdReused` when it differs. ``on_commit`` is called under the lock
        just before the new version is written; if it raises, nothing is written.
        """
        eta = check_step(step)
        items = _check_feedback(feedback, known_types)
        check_str("author", author)
        check_str("reason", reason, allow_empty=True)
        rid = _check_request_id(request_id)
        request = None if rid is None else (rid, request_digest(
            {"event": "update", "items": [list(i) for i in items], "step": eta,
             "author": author, "reason": reason}))
        with self._locked():
            self._reload()
            seen = self._seen("update", request)
            if seen is not None:
                return seen, False
            return self._update(items, eta, author, reason, request, on_commit), True

    def _update(self, items: list[Feedback], eta: float, author: str, reason: str,
                request: tuple[str, str] | None,
                on_commit: Callable[[], None] | None) -> int:
        state = self.record()
        types, sources = dict(state["types"]), state["sources"]
        new_types = _new_source_types(items, state["source_types"])
        by_type: dict[str, Counter[bool]] = {}
        by_source: dict[str, Counter[bool]] = {}
        source_start: dict[str, float] = {}
        for stype, sid, relevant in items:
            by_type.setdefault(stype, Counter())[relevant] += 1
            if sid is not None:
                by_source.setdefault(sid, Counter())[relevant] += 1
                # a new source starts from its (recorded) type's prior before the round
                source_start.setdefault(sid, sources.get(sid, state["types"][stype]))
        changes: dict[str, dict[str, Any]] = {"types": {}, "sources": {}}
        for stype, c in by_type.items():
            old = state["types"][stype]
            types[stype] = feedback_move(old, c[True], c[True] + c[False], eta,
                                         self.max_change, self.epsilon)
            changes["types"][stype] = [old, types[stype]]
        changed: dict[str, float] = {}
        for sid, c in by_source.items():
            old = source_start[sid]
            new = feedback_move(old, c[True], c[True] + c[False], eta, self.max_change,
                                self.epsilon)
            if sources.get(sid) != new:
                changed[sid] = new
            changes["sources"][sid] = [old, new]
        if new_types:
            changes["source_types"] = dict(sorted(new_types.items()))
        n_rel = sum(1 for _, _, r in items if r)
        counts = {
            "items": len(items), "relevant": n_rel, "non_relevant": len(items) - n_rel,
            "step": eta,
            "by_type": {t: {"relevant": c[True], "non_relevant": c[False]}
                        for t, c in sorted(by_type.items())},
            "sources": len(by_source),
        }
        return self._commit("update", types, (changed, new_types), [], author, reason,
                            counts=counts, changes=changes, request=request,
                            on_commit=on_commit)

    def rollback(self, version: int, *, author: str = "credrank", reason: str = "",
                 request_id: str | None = None) -> int:
        """Restore the tables of ``version`` as a new version (the log keeps everything).
        ``request_id``: see :meth:`rollback_once`."""
        return self.rollback_once(version, author=author, reason=reason,
                                  request_id=request_id)[0]

    def rollback_once(self, version: int, *, author: str = "credrank", reason: str = "",
                      request_id: str | None = None,
                      on_commit: Callable[[], None] | None = None) -> tuple[int, bool]:
        """:meth:`rollback`, idempotent by ``request_id`` as :meth:`update_once` is:
        ``(version, applied)``."""
        check_int("version", version, 0)
        check_str("author", author)
        check_str("reason", reason, allow_empty=True)
        rid = _check_request_id(request_id)
        request = None if rid is None else (rid, request_digest(
            {"event": "rollback", "version": version, "author": author, "reason": reason}))
        with self._locked():
            self._reload()
            seen = self._seen("rollback", request)
            if seen is not None:
                return seen, False
            return self._rollback(version, author, reason, request, on_commit), True

    def _rollback(self, version: int, author: str, reason: str,
                  request: tuple[str, str] | None,
                  on_commit: Callable[[], None] | None) -> int:
        target = self.record(version)
        state = self.record()
        now, then = state["sources"], target["sources"]
        changes = {
            "types": {t: [state["types"][t], target["types"][t]] for t in SOURCE_TYPES
                      if state["types"][t] != target["types"][t]},
            "sources": {s: [now.get(s), then.get(s)] for s in sorted(set(now) | set(then))
                        if now.get(s) != then.get(s)},
        }
        now_typed, then_typed = state["source_types"], target["source_types"]
        changed = {s: x for s, x in then.items() if now.get(s) != x}
        retyped = {s: t for s, t in then_typed.items() if now_typed.get(s) != t}
        removed = [s for s in now if s not in then]
        return self._commit("rollback", dict(target["types"]), (changed, retyped), removed,
                            author,
                            reason or f"rollback to version {target['version']}",
                            counts={}, changes=changes, restored_from=int(target["version"]),
                            request=request, on_commit=on_commit)


def _new_source_types(items: Sequence[Feedback], recorded: Mapping[str, str]) -> dict[str, str]:
    """The type each source the round sees for the first time is recorded with (its first
    item's); :class:`SourceTypeMismatch` for an item whose type differs from its source's
    recorded type, or from an earlier item's type for a new source (every such item)."""
    new: dict[str, str] = {}
    mismatched: list[tuple[int, str]] = []
    for i, (stype, sid, _) in enumerate(items):
        if sid is None:
            continue
        if sid in recorded:
            if recorded[sid] != stype:
                mismatched.append((i, (
                    f"expected {recorded[sid]!r} (the type source "
                    f"{sid!r} was recorded with when first seen; if that type was wrong, roll "
                    "the store back to a version before the source was first seen — its "
                    f"history lists the versions — and apply the feedback again), got "
                    f"{stype!r}")))
            continue
        first = new.setdefault(sid, stype)
        if first != stype:
            mismatched.append((i, f"expected {first!r} (the type of an earlier item of "
                                  f"source {sid!r} in this round), got {stype!r}"))
    if mismatched:
        raise SourceTypeMismatch(mismatched)
    return new
