"""Citation chains: the provenance graph, date inheritance and the laundering audit (35.7).

Chapter 35.7's blind spot: a claim observed at ``t_0`` is repeated by pages ``C_1, …, C_n``
published at ``t_1, …, t_n``; a recency proxy on ``t_n`` overstates the recency of the
measurement. This module traces the chain and carries the origin's date to the wrappers.

**Edges** (``doc → parent``: *doc repeats parent's evidence*):

* ``cites``: a document citing another repeats that document's evidence;
* ``copy`` (optional): a near-duplicate that does not cite. The test is supplied by the
  caller as ``copies(texts, vectors) -> group ids`` (the CLI passes
  :func:`credrank.consensus.duplicates.duplicate_groups`: word 3-gram Jaccard ``>= 0.5``, and
  with ``--copies embedding`` also cosine ``>= 0.95``; the freshness layer sits below
  consensus and cannot import it). **Direction**: the later-appeared document copies the
  earlier; "appeared" = ``published_at``, else ``observed_at``, else ``verified_at``. Equal or
  unknown appearance dates: no direction can be told, **no edge** (counted as
  ``undirected_copies``). Candidates for the test are only a document's ``k`` nearest
  neighbours by dense vector (default ``k = 10``), never all pairs.

Declared edge policies: a self-citation is dropped; a cited id that is not in the index is
*dangling* (ignored for inheritance, listed in the audit); edges leaving a document with its
own evidence date are not followed (see below).

**Evidence date** ``e(d)`` (the date a document's evidence carries):

1. ``d`` has its own ``observed_at`` (else ``verified_at``): an independent re-measurement
   (or substantive verification, which 35.7 also lets refresh a claim); ``e(d)`` is that date
   and ``d`` is its own origin — never a wrapper, whatever it cites;
2. else, ``d`` has (non-dangling) parents: ``d`` **inherits** the earliest evidence date
   reachable, ``e(d) = min_p e(p)`` recursively — the root origin's date, basis
   ``inherited:<origin_id>``. Unknown dates never win over known ones; if every reachable
   origin is undated the inherited date is unknown (the unknown-age policy applies: no
   fabricated boost from the wrapper's own publication date). Ties: fewer hops, then the
   smaller origin id;
3. else ``d`` is an origin dated by its publication: ``published_at`` or unknown.

In the laundering audit a date after ``T`` counts at age 0 (``T − t`` is floored at 0: the
chapter's bound ``ρ ≤ 2^((T − t_0)/τ)`` holds because a wrapper cannot be dated after ``T``);
a graph built with an evaluation time clamps such dates to ``T``
(:func:`~credrank.freshness.dates.freshness_date`). The ranking's freshness stage and the
context read a date after ``T`` as an unknown age instead
(:func:`~credrank.freshness.dates.evidence_date`).

**Cycles** (documents that cite each other, directly or through others) are found as the
strongly connected components of the graph (Tarjan), reported, never looped over. Policy: the
members of a cycle share one evidence date, the best of (a) what the cycle's members reach
outside the cycle and (b) the members' own publication dates (of pages that cite each other,
none is the pure copy of the other; the earliest publication is the best origin left).

**Laundering candidate**: a document whose naive freshness date ``t_n`` (its publication
date, what a publication-age filter sees) is later than its inherited origin date ``t_0``.
Reported with the hop chain, ``w(T, t_n) = 2^(−(T − t_n)/τ)``, ``w(T, t_0)``, the distortion
``ρ = w(T, t_n)/w(T, t_0) = 2^((t_n − t_0)/τ)`` (:mod:`credrank.freshness.decay`), the product
of the hop factors along the chain (it telescopes to ``ρ``: more hops with the same final date
change nothing) and the bound ``2^((T − t_0)/τ)``. A document published *before* its origin's
evidence date is not a candidate: it is listed as an anachronism (a data error to check).
All times are in days; ``τ`` in days (a year = 365.25 days where the CLI parses ``1y``), at
least :data:`MIN_HALF_LIFE_DAYS` (one microsecond, the resolution of the dates: a shorter
half-life cannot be told apart from 0, and it keeps every exponent below finite).

**Range policy** (35.7's ratios are powers of two and leave the float range on valid input:
``T = 9999-12-31`` with ``τ = 1y`` gives a 2020 origin a bound of about ``2^7980``): each
candidate carries the exponents ``log2_ratio = (t_n − t_0)/τ``, ``log2_chain_ratio`` (the sum
of the hop exponents) and ``log2_bound = (T − t_0)/τ``, always finite; ``ratio``,
``chain_ratio`` and ``bound`` are ``2^`` of them, or ``None`` (JSON ``null``) where that
exceeds the largest float, and ``overflow`` names those fields. Weights that underflow are
``0.0``. Candidates are sorted by ``log2_ratio`` (exact even where the ratios overflow),
largest first, then by wrapper id.

**Bounded reports.** A wrapper ``n`` hops from its origin has a chain of ``n + 1`` documents;
listing all of them for every wrapper of one long chain is ``Σ n = N(N − 1)/2`` hops (the
quadratic memory and output of issue 23). A report lists at most ``max_hops_listed = H``
hops per wrapper (:data:`MAX_HOPS_LISTED` by default, :func:`check_max_hops_listed`): all of
them when ``n ≤ H``, else the wrapper, its first ``⌊H/2⌋`` hops, then its last ``⌈H/2⌉`` hops
ending at the origin, with ``hops_elided = n − H`` and ``chain_gap`` (the position in the
listed chain where the elided hops sit). ``hops``, ``origin``, the dates and the ratios stay
exact (``log2_chain_ratio`` is memoised along the next-hop pointers). The per-candidate
``cycle`` lists at most ``H + 1`` members with ``cycle_size`` exact (the report's ``cycles``
lists each cycle once, in full). Nothing stores a chain: each document keeps one next-hop
pointer (:class:`Evidence`), the tail of a long chain is found through a memoised pointer to
the node ``⌈H/2⌉`` hops from the origin (:meth:`ProvenanceGraph.listed_chain`), and a
bounded chain is materialised only when a candidate is written
(:meth:`AuditReport.iter_candidates`, :meth:`AuditReport.write_json` streams them). Audit
memory and output are therefore ``O(N · H)``, time ``O(N + E + N · H)``.

**Work scales with the reachable subgraph, not the corpus.** :class:`ProvenanceGraph` fetches
records on demand, by id, frontier by frontier (breadth-first along parents), from a
``fetch(ids)`` callable (a dict, or :class:`StoreSource`: ``read_payloads`` by id, plus one
``k``-NN search per fetched document when copies are on). Resolution is one iterative Tarjan
pass (no recursion: a chain of 100,000 is fine) over the not-yet-resolved part of what the
starts reach, memoised across calls: resolving ``S`` costs ``O(|R(S)| + |E(R(S))|)`` where
``R(S)`` is the set reachable from ``S`` (with copy detection, ``|R(S)|`` searches of ``k``
plus ``O(k²)`` shingle work each), and an audit of the whole index costs ``O(N + E)`` in total
(plus the bounded listing above) — each document is expanded once. The counters in
:attr:`ProvenanceGraph.stats` (``fetched``, ``expanded``, ``edges``) measure it
(``tests/test_lineage.py``, ``bench/scripts/bench_lineage.py``).
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

import numpy as np

from credrank.freshness.dates import SECONDS_PER_DAY, FreshnessDate, freshness_date
from credrank.freshness.decay import (
    check_half_life,
    exp2_declared,
    half_life_weight,
    log2_distortion_bound,
    log2_distortion_ratio,
)

#: fields whose presence makes a document its own origin (independent re-measurement)
OWN_FIELDS = ("observed_at", "verified_at")
#: the naive freshness date of a publication-age filter
NAIVE_FIELD = "published_at"
#: the payload fields a record is built from
PAYLOAD_FIELDS = ("doc_id", "cites", "observed_at", "verified_at", "published_at")
#: edge kinds
CITES, COPY = "cites", "copy"
#: copy detection defaults (stated, not tuned): neighbours searched per document, the
#: thresholds the CLI passes to the near-duplicate test
COPY_NEIGHBOURS = 10
COPY_JACCARD = 0.5
COPY_SHINGLE = 3
COPY_COSINE = 0.95
DAYS_PER_YEAR = 365.25
#: hops listed per wrapper in an audit report by default (the rest summarised: module docstring)
MAX_HOPS_LISTED = 20
#: the shortest half-life an audit accepts, in days: one microsecond, the resolution of dates
MIN_HALF_LIFE_DAYS = 1e-6 / SECONDS_PER_DAY


def check_max_hops_listed(value: Any, name: str = "max_hops_listed") -> int:
    """The hop cap of a report as an ``int >= 1``, else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
    if int(value) < 1:
        raise ValueError(f"{name}: expected an integer >= 1 (hops listed per wrapper; the "
                         f"origin is always among them), got {value!r}")
    return int(value)


def check_audit_half_life(tau: Any, name: str = "half_life") -> float:
    """``τ`` in days for an audit: positive, finite (:func:`check_half_life`) and at least
    :data:`MIN_HALF_LIFE_DAYS`, else ``ValueError`` naming ``name``."""
    value = check_half_life(tau, name)
    if value < MIN_HALF_LIFE_DAYS:
        raise ValueError(f"{name}: expected a half-life of at least one microsecond "
                         f"({MIN_HALF_LIFE_DAYS:.6g} days, the resolution of dates: a shorter "
                         f"one cannot be told apart from 0), got {tau!r}")
    return value


#: ``copies(texts, vectors) -> group id per text`` (``vectors`` may be ``None``)
CopyTest = Callable[[Sequence[str], "np.ndarray | None"], np.ndarray]
#: ``fetch(ids) -> records`` of the ids found (missing ids are simply absent)
Fetch = Callable[[Sequence[str]], Iterable["Record"]]


@dataclass(frozen=True)
class Record:
    """One node: its parents ``(parent_id, kind)`` (``kind`` in ``cites``/``copy``), its own
    evidence date (``observed_at``/``verified_at``; basis ``unknown`` when it has none) and its
    naive date (``published_at`` or unknown)."""

    doc_id: str
    parents: tuple[tuple[str, str], ...]
    own: FreshnessDate
    naive: FreshnessDate


@dataclass(frozen=True)
class Evidence:
    """The resolved evidence of one document: ``date``/``basis`` (as :class:`FreshnessDate`),
    its root ``origin`` (itself when not inherited), the next hop towards it (``None`` at the
    origin) with the edge ``kind``, the number of ``hops`` and the ``cycle`` it belongs to."""

    evidence: FreshnessDate
    origin: str
    next_hop: str | None = None
    kind: str | None = None
    hops: int = 0
    cycle: tuple[str, ...] = ()


@dataclass
class GraphStats:
    """Work done: records ``fetched``, nodes ``expanded`` by the resolution, ``edges`` walked,
    ``fetch_calls`` (one per breadth-first frontier)."""

    fetched: int = 0
    expanded: int = 0
    edges: int = 0
    fetch_calls: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"fetched": self.fetched, "expanded": self.expanded, "edges": self.edges,
                "fetch_calls": self.fetch_calls}


def _parents(doc_id: str, cites: Any, copy_of: Iterable[str]) -> tuple[tuple[str, str], ...]:
    if cites is None:
        cites = ()
    if isinstance(cites, str) or not isinstance(cites, Iterable):
        raise ValueError(f"{doc_id}: field 'cites': expected a list of document ids, got "
                         f"{cites!r}")
    out: dict[str, str] = {}
    for c in cites:
        if not isinstance(c, str):
            raise ValueError(f"{doc_id}: field 'cites': expected string ids, got {c!r}")
        if c != doc_id:
            out.setdefault(c, CITES)
    for c in copy_of:
        if c != doc_id:
            out.setdefault(c, COPY)  # a copy that also cites keeps the 'cites' kind
    return tuple(out.items())


def record_from_payload(payload: Mapping[str, Any], now: datetime | None = None,
                        copy_of: Iterable[str] = ()) -> Record:
    """A :class:`Record` from an index payload (or corpus-like dict) with ``doc_id`` (or
    ``id``), ``cites`` and the date fields (ISO strings or datetimes); ``copy_of`` adds copy
    edges. ``ValueError`` names the document and field of a malformed value."""
    doc_id = payload.get("doc_id", payload.get("id"))
    if not isinstance(doc_id, str) or not doc_id:
        raise ValueError(f"payload: expected a non-empty string doc_id, got {doc_id!r}")
    own = freshness_date({k: payload.get(k) for k in OWN_FIELDS}, now, doc_id)
    naive = freshness_date({NAIVE_FIELD: payload.get(NAIVE_FIELD)}, now, doc_id)
    return Record(doc_id, _parents(doc_id, payload.get("cites"), copy_of), own, naive)


def _appeared(payload: Mapping[str, Any], now: datetime | None) -> datetime | None:
    """When a text appeared: ``published_at``, else ``observed_at``, else ``verified_at``."""
    where = str(payload.get("doc_id"))
    for name in (NAIVE_FIELD, *OWN_FIELDS):
        got = freshness_date({"published_at": payload.get(name)}, now, where).date
        if got is not None:
            return got
    return None


def copy_parents(doc: Mapping[str, Any], neighbours: Sequence[Mapping[str, Any]],
                 copies: CopyTest, vectors: np.ndarray | None = None,
                 now: datetime | None = None) -> tuple[list[str], list[str]]:
    """``(ids doc copies, ids of undirected copies)``: run ``copies`` on ``[doc,
    *neighbours]`` (texts from ``text``; ``vectors`` one row each, or ``None``) and keep the
    neighbours in ``doc``'s group that appeared strictly earlier. Same-group neighbours with
    equal or unknown dates give no edge and are listed as undirected."""
    rows = [doc, *[n for n in neighbours if n.get("doc_id") != doc.get("doc_id")]]
    if len(rows) < 2:
        return [], []
    if vectors is not None and len(vectors) != len(rows):
        raise ValueError(f"vectors: expected {len(rows)} rows, got {len(vectors)}")
    groups = np.asarray(copies([str(r.get("text") or "") for r in rows], vectors))
    mine = _appeared(doc, now)
    out: list[str] = []
    undirected: list[str] = []
    for row, g in zip(rows[1:], groups[1:], strict=True):
        if g != groups[0]:
            continue
        theirs = _appeared(row, now)
        if mine is not None and theirs is not None and theirs < mine:
            out.append(str(row["doc_id"]))
        elif mine is None or theirs is None or theirs == mine:
            undirected.append(str(row["doc_id"]))
    return out, undirected


class StoreSource:
    """``fetch(ids)`` over a :class:`~credrank.index.store.VectorStore`: ``read_payloads`` by
    id; with ``copies`` and ``embed`` (the index's embedder), one dense search of the
    ``neighbours`` nearest documents per fetched document, the near-duplicate test on the
    document and its neighbours, and copy edges per :func:`copy_parents`. ``with_vectors``
    passes the stored neighbour vectors (and the document's embedding) to ``copies``.
    ``on_progress(records)``: the number of records built so far, after each fetch (with
    copy detection, after each record: one search each); it never prints."""

    @property
    def undirected_copies(self) -> int:
        """Pairs of copies whose direction cannot be told (equal or unknown dates), each
        counted once."""
        return len(self._undirected)

    def __init__(self, store: Any, now: datetime | None = None, *,
                 copies: CopyTest | None = None,
                 embed: Callable[[Sequence[str]], np.ndarray] | None = None,
                 neighbours: int = COPY_NEIGHBOURS, with_vectors: bool = False,
                 on_progress: Callable[[int], None] | None = None) -> None:
        if copies is not None and embed is None:
            raise ValueError("copies: copy detection needs embed (the index's embedder) to "
                             "find each document's neighbours")
        if int(neighbours) < 1:
            raise ValueError(f"neighbours: expected an integer >= 1, got {neighbours!r}")
        self.store, self.now, self.copies, self.embed = store, now, copies, embed
        self.neighbours, self.with_vectors = int(neighbours), with_vectors
        #: the pairs of copies whose direction cannot be told, each once (found from both
        #: ends, it was counted twice)
        self._undirected: set[frozenset[str]] = set()
        self.searches = 0
        self.records = 0
        self.on_progress = on_progress

    def _built(self, n: int) -> None:
        self.records += n
        if self.on_progress is not None:
            self.on_progress(self.records)

    def __call__(self, ids: Sequence[str]) -> list[Record]:
        fields = PAYLOAD_FIELDS + (("text",) if self.copies is not None else ())
        payloads = self.store.read_payloads(list(ids), fields)
        if self.copies is None or not payloads:
            records = [record_from_payload(p, self.now) for p in payloads]
            self._built(len(records))
            return records
        assert self.embed is not None
        qv = np.asarray(self.embed([str(p.get("text") or "") for p in payloads]))
        out = []
        for p, v in zip(payloads, qv, strict=True):
            found = self.store.search_dense("", v, self.neighbours + 1, with_text=True,
                                            with_vectors=self.with_vectors)
            self.searches += 1
            rows = [{**{k: found.meta[k][i] if k in found.meta else None
                        for k in ("text", *PAYLOAD_FIELDS[2:])},
                     "doc_id": str(found.doc_ids[i])} for i in range(len(found))]
            rows = [r for r in rows if r["doc_id"] != p["doc_id"]]
            vectors = None
            if self.with_vectors and found.vectors is not None:
                keep = [i for i in range(len(found)) if str(found.doc_ids[i]) != p["doc_id"]]
                vectors = np.vstack([v[None, :], found.vectors[keep]])
            parents, undirected = copy_parents(p, rows, self.copies, vectors, self.now)
            self._undirected.update(frozenset((str(p["doc_id"]), o)) for o in undirected)
            out.append(record_from_payload(p, self.now, parents))
            self._built(1)
        return out


class ProvenanceGraph:
    """The provenance graph, fetched on demand and resolved with memoisation (module
    docstring). ``fetch(ids)`` returns the records of the ids it knows."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self._records: dict[str, Record | None] = {}
        self._value: dict[str, Evidence] = {}
        # tail anchors per listing size k: doc -> the node k hops from its origin on its chain
        self._anchor: dict[int, dict[str, str]] = {}
        self.cycles: list[tuple[str, ...]] = []
        self.stats = GraphStats()

    @classmethod
    def from_records(cls, records: Iterable[Record]) -> ProvenanceGraph:
        """A graph over records held in memory (a dict lookup as ``fetch``)."""
        table: dict[str, Record] = {}
        for r in records:
            if r.doc_id in table:
                raise ValueError(f"records: document id {r.doc_id!r} appears twice")
            table[r.doc_id] = r
        return cls(lambda ids: [table[i] for i in ids if i in table])

    @classmethod
    def from_payloads(cls, payloads: Iterable[Mapping[str, Any]],
                      now: datetime | None = None) -> ProvenanceGraph:
        """A graph over payload dicts (:func:`record_from_payload`; cite edges only)."""
        return cls.from_records(record_from_payload(p, now) for p in payloads)

    # -- loading --------------------------------------------------------------------------
    def record(self, doc_id: str) -> Record | None:
        """The record of ``doc_id`` (``None``: not in the index), fetching it if needed."""
        self._load([doc_id])
        return self._records[doc_id]

    def _load(self, starts: Iterable[str]) -> None:
        """Fetch what ``starts`` reach, breadth-first, one ``fetch`` per frontier."""
        frontier = [s for s in dict.fromkeys(starts) if s not in self._records]
        while frontier:
            self.stats.fetch_calls += 1
            got = {r.doc_id: r for r in self._fetch(frontier)}
            self.stats.fetched += len(got)
            nxt: dict[str, None] = {}
            for i in frontier:
                rec = got.get(i)
                self._records[i] = rec
                if rec is not None and rec.own.date is None:
                    for p, _ in rec.parents:
                        if p not in self._records:
                            nxt[p] = None
            frontier = [p for p in nxt if p not in self._records]

    def _succ(self, rec: Record) -> list[tuple[str, str]]:
        """Inheritance edges: none from a document with its own evidence date; dangling
        parents dropped."""
        if rec.own.date is not None:
            return []
        return [(p, k) for p, k in rec.parents if self._records.get(p) is not None]

    def dangling(self, doc_id: str) -> list[str]:
        """The ids ``doc_id`` cites or copies that are not in the index."""
        rec = self.record(doc_id)
        if rec is None:
            return []
        self._load(p for p, _ in rec.parents)
        return [p for p, _ in rec.parents if self._records.get(p) is None]

    # -- resolution -----------------------------------------------------------------------
    def resolve(self, doc_ids: Iterable[str]) -> dict[str, Evidence]:
        """:class:`Evidence` of each id in the index (ids not in it are absent): an iterative
        Tarjan pass over what the ids reach and is not yet resolved."""
        starts = list(dict.fromkeys(doc_ids))
        self._load(starts)
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        # each node's inheritance edges, computed once when it is first indexed
        succ: dict[str, list[tuple[str, str]]] = {}
        for s in starts:
            if s in self._value or s in index or self._records.get(s) is None:
                continue
            index[s] = low[s] = len(index)
            stack.append(s)
            on_stack.add(s)
            succ[s] = self._succ(self._records[s])  # type: ignore[arg-type]
            work = [(s, iter(succ[s]))]
            while work:
                v, it = work[-1]
                descended = False
                for w, _ in it:
                    self.stats.edges += 1
                    if w in self._value:
                        continue
                    if w not in index:
                        index[w] = low[w] = len(index)
                        stack.append(w)
                        on_stack.add(w)
                        succ[w] = self._succ(self._records[w])  # type: ignore[arg-type]
                        work.append((w, iter(succ[w])))
                        descended = True
                        break
                    if w in on_stack:
                        low[v] = min(low[v], index[w])
                if descended:
                    continue
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    scc = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        scc.append(w)
                        if w == v:
                            break
                    self._settle(scc, {m: succ.pop(m) for m in scc})
        return {d: self._value[d] for d in starts if d in self._value}

    @staticmethod
    def _key(e: Evidence, extra_hops: int) -> tuple[bool, datetime | None, int, str]:
        """The comparison key of an evidence reached ``extra_hops`` further away."""
        return (e.evidence.date is None, e.evidence.date, e.hops + extra_hops, e.origin)

    @staticmethod
    def _better(a: tuple[Any, ...], b: tuple[Any, ...] | None) -> bool:
        """Earliest known date first; unknown last; then fewer hops; then smaller origin id."""
        if b is None:
            return True
        if a[0] != b[0]:
            return not a[0]
        if not a[0] and a[1] != b[1]:
            return a[1] < b[1]
        return (a[2], a[3]) < (b[2], b[3])

    def _settle(self, scc: list[str], succ: dict[str, list[tuple[str, str]]]) -> None:
        """The evidence of a strongly connected component whose successors outside it are
        settled (module docstring: inheritance and the cycle policy); ``succ``: its members'
        inheritance edges."""
        self.stats.expanded += len(scc)
        if len(scc) == 1:
            v = scc[0]
            rec = self._records[v]
            assert rec is not None
            if rec.own.date is not None:
                self._value[v] = Evidence(rec.own, v)
                return
            if not succ[v]:
                self._value[v] = Evidence(rec.naive, v)
                return
            best: tuple[Any, ...] | None = None
            pick: tuple[str, str] | None = None
            for w, k in succ[v]:
                key = self._key(self._value[w], 1)
                if self._better(key, best):
                    best, pick = key, (w, k)
            assert pick is not None
            up = self._value[pick[0]]
            self._value[v] = Evidence(
                FreshnessDate(up.evidence.date, f"inherited:{up.origin}", up.evidence.after_now),
                up.origin, pick[0], pick[1], up.hops + 1)
            return
        # a cycle: one evidence for all members (module docstring)
        members = set(scc)
        recs = {m: self._records[m] for m in scc}
        cycle = tuple(sorted(scc))
        self.cycles.append(cycle)
        best = None
        choice: tuple[str, str | None, str | None] | None = None  # (member, out node, kind)
        for m in cycle:
            rec = recs[m]
            assert rec is not None
            own_key = (rec.naive.date is None, rec.naive.date, 0, m)
            if self._better(own_key, best):
                best, choice = own_key, (m, None, None)
            for w, k in succ[m]:
                if w in members:
                    continue
                key = self._key(self._value[w], 1)
                if self._better(key, best):
                    best, choice = key, (m, w, k)
        assert choice is not None
        exit_member, out, out_kind = choice
        # next hops inside the cycle: breadth-first backwards from the exit member
        preds: dict[str, list[tuple[str, str]]] = {m: [] for m in cycle}
        for m in cycle:
            for w, k in succ[m]:
                if w in members:
                    preds[w].append((m, k))
        dist = {exit_member: 0}
        nxt: dict[str, tuple[str, str]] = {}
        queue = deque([exit_member])
        while queue:
            w = queue.popleft()
            for m, k in preds[w]:
                if m not in dist:
                    dist[m] = dist[w] + 1
                    nxt[m] = (w, k)
                    queue.append(m)
        if out is None:
            origin_rec = recs[exit_member]
            assert origin_rec is not None
            base, origin, base_hops = origin_rec.naive, exit_member, 0
        else:
            up = self._value[out]
            base, origin, base_hops = up.evidence, up.origin, up.hops + 1
        for m in cycle:
            if m == exit_member:
                hop, kind = (out, out_kind) if out is not None else (None, None)
                hops = base_hops
            else:
                hop, kind = nxt[m]
                hops = dist[m] + base_hops
            basis = base.basis if origin == m else f"inherited:{origin}"
            self._value[m] = Evidence(FreshnessDate(base.date, basis, base.after_now), origin,
                                      hop, kind, hops, cycle)

    def evidence(self, doc_id: str) -> Evidence:
        """The :class:`Evidence` of ``doc_id`` (resolving it if needed; ``ValueError`` for an id
        not in the index)."""
        got = self._value.get(doc_id)
        if got is None:
            got = self.resolve([doc_id]).get(doc_id)
            if got is None:
                raise ValueError(f"doc_id: {doc_id!r} is not in the index")
        return got

    def chain(self, doc_id: str) -> list[tuple[str, str | None]]:
        """The whole hop chain ``[(doc_id, None), (next, kind), …, (origin, kind)]`` (resolving
        ``doc_id`` if needed; ``ValueError`` for an id not in the index). ``O(hops)``: reports
        use :meth:`listed_chain`."""
        e = self.evidence(doc_id)
        out: list[tuple[str, str | None]] = [(doc_id, None)]
        while e.next_hop is not None:
            out.append((e.next_hop, e.kind))
            e = self._value[e.next_hop]
        return out

    def _walk(self, doc_id: str, steps: int) -> list[tuple[str, str | None]]:
        """The next ``steps`` hops after ``doc_id``: ``[(node, kind), …]`` (fewer at the
        origin)."""
        out: list[tuple[str, str | None]] = []
        e = self._value[doc_id]
        while e.next_hop is not None and len(out) < steps:
            out.append((e.next_hop, e.kind))
            e = self._value[e.next_hop]
        return out

    def _tail_anchor(self, doc_id: str, k: int) -> str:
        """The node ``min(hops, k)`` hops from the origin on ``doc_id``'s chain. Chains share
        their suffixes (one next hop per node, each ``hops`` one less), so the answer is
        memoised per node: ``O(1)`` amortised over all the nodes of a graph."""
        memo = self._anchor.setdefault(k, {})
        path: list[str] = []
        node = doc_id
        while node not in memo and self._value[node].hops > k:
            path.append(node)
            node = self._value[node].next_hop  # type: ignore[assignment]
        anchor = memo.get(node, node)
        for p in path:
            memo[p] = anchor
        return anchor

    def listed_chain(self, doc_id: str, max_hops: int = MAX_HOPS_LISTED) -> ListedChain:
        """``doc_id``'s chain as a report lists it (module docstring, *Bounded reports*): all
        hops when there are at most ``max_hops``, else the wrapper, the first ``⌊H/2⌋`` and the
        last ``⌈H/2⌉`` hops, and the count of the elided ones. Work ``O(max_hops)`` amortised;
        ``ValueError`` for an id not in the index or a bad ``max_hops``."""
        cap = check_max_hops_listed(max_hops)
        e = self.evidence(doc_id)
        first = [(doc_id, None), *self._walk(doc_id, min(e.hops, cap))]
        if e.hops <= cap:
            return ListedChain(tuple(self._hop(h, k) for h, k in first), 0, None)
        tail = (cap + 1) // 2
        first = first[:cap - tail + 1]
        last = self._walk(self._tail_anchor(doc_id, tail), tail)
        return ListedChain(tuple(self._hop(h, k) for h, k in (*first, *last)),
                           e.hops - cap, len(first))

    def _hop(self, doc_id: str, kind: str | None) -> Hop:
        """The listed entry of ``doc_id``: the origin's evidence date, else the publication."""
        e = self._value[doc_id]
        rec = self._records[doc_id]
        assert rec is not None
        fd = e.evidence if e.next_hop is None else rec.naive
        return Hop(doc_id, kind, fd.date, fd.basis)


def inherited_dates(graph: ProvenanceGraph, doc_ids: Iterable[str]
                    ) -> dict[str, FreshnessDate]:
    """``doc_id -> FreshnessDate(date, 'inherited:<origin_id>')`` for the ids whose evidence
    date is inherited along a citation/copy chain (date ``None``: every origin reached is
    undated). Other ids are absent: their date is :func:`freshness_date`'s. Work: the subgraph
    the ids reach (memoised in ``graph``)."""
    return {d: e.evidence for d, e in graph.resolve(doc_ids).items() if e.origin != d}


# -- the audit ---------------------------------------------------------------------------------

def _iso(d: datetime | None) -> str | None:
    return d.isoformat() if d is not None else None


def _days_before(now: datetime, d: datetime) -> float:
    return max((now - d).total_seconds() / SECONDS_PER_DAY, 0.0)


@dataclass(frozen=True)
class Hop:
    """One document on a chain: its id, the edge kind that led to it (``None`` for the
    wrapper), the date it contributes (the wrapper's and intermediaries' publication date, the
    origin's evidence date) and that date's basis."""

    doc_id: str
    kind: str | None
    date: datetime | None
    basis: str

    def to_dict(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "edge": self.kind, "date": _iso(self.date),
                "basis": self.basis}


@dataclass(frozen=True)
class ListedChain:
    """A chain as a report lists it: ``hops`` (the listed entries, wrapper first, origin
    last), ``elided`` (hops not listed) and ``gap`` (the index in ``hops`` before which the
    elided hops sit; ``None`` when none are)."""

    hops: tuple[Hop, ...]
    elided: int = 0
    gap: int | None = None


@dataclass(frozen=True)
class LaunderingCandidate:
    """A wrapper whose publication date ``t_n`` is later than its origin's evidence date
    ``t_0``, ``hops`` away from it: the weights, the exponents ``log2_ratio = (t_n − t_0)/τ``,
    ``log2_chain_ratio`` (the sum of the hop exponents, equal up to rounding) and
    ``log2_bound = (T − t_0)/τ`` (35.7), and the ratios themselves (``None`` where ``2^x``
    exceeds the float range: the range policy of the module docstring)."""

    wrapper: str
    origin: str
    hops: int
    t_n: datetime
    t_0: datetime
    weight_wrapper: float
    weight_origin: float
    log2_ratio: float
    log2_chain_ratio: float
    log2_bound: float
    cycle: tuple[str, ...] = ()

    @property
    def ratio(self) -> float | None:
        """``ρ = 2^((t_n − t_0)/τ)``, ``None`` beyond the float range."""
        return exp2_declared(self.log2_ratio)

    @property
    def chain_ratio(self) -> float | None:
        """The product of the hop factors, ``None`` beyond the float range."""
        return exp2_declared(self.log2_chain_ratio)

    @property
    def bound(self) -> float | None:
        """``2^((T − t_0)/τ)``, ``None`` beyond the float range."""
        return exp2_declared(self.log2_bound)

    def to_dict(self, chain: ListedChain, max_members: int) -> dict[str, Any]:
        """The candidate's JSON object with its listed ``chain`` and at most ``max_members``
        members of its cycle."""
        ratios = {"ratio": self.ratio, "chain_ratio": self.chain_ratio, "bound": self.bound}
        return {"wrapper": self.wrapper, "origin": self.origin, "hops": self.hops,
                "chain": [h.to_dict() for h in chain.hops], "hops_elided": chain.elided,
                "chain_gap": chain.gap, "t_n": _iso(self.t_n), "t_0": _iso(self.t_0),
                "weight_wrapper": self.weight_wrapper, "weight_origin": self.weight_origin,
                **ratios, "log2_ratio": self.log2_ratio,
                "log2_chain_ratio": self.log2_chain_ratio, "log2_bound": self.log2_bound,
                "overflow": [k for k, v in ratios.items() if v is None],
                "cycle": list(self.cycle[:max_members]), "cycle_size": len(self.cycle)}


@dataclass
class AuditReport:
    """What :func:`audit` found: candidates (largest ``log2_ratio`` first, then wrapper id),
    cycles, dangling citations ``(doc, cited id)``, anachronisms (published before the
    origin's evidence date), undated inherited documents, counts and the work done. Chains are
    listed from ``graph`` when written (at most ``max_hops_listed`` hops each)."""

    now: datetime
    half_life: float
    documents: int
    max_hops_listed: int = MAX_HOPS_LISTED
    candidates: list[LaunderingCandidate] = field(default_factory=list)
    cycles: list[tuple[str, ...]] = field(default_factory=list)
    dangling: list[tuple[str, str]] = field(default_factory=list)
    anachronisms: list[str] = field(default_factory=list)
    inherited: int = 0
    inherited_unknown: int = 0
    independent: int = 0
    stats: dict[str, int] = field(default_factory=dict)
    graph: ProvenanceGraph | None = field(default=None, repr=False, compare=False)

    def listed_chain(self, candidate: LaunderingCandidate) -> ListedChain:
        """``candidate``'s chain as the report lists it."""
        if self.graph is None:
            raise ValueError("graph: expected the report's provenance graph to list chains, "
                             "got None")
        return self.graph.listed_chain(candidate.wrapper, self.max_hops_listed)

    def iter_candidates(self) -> Iterator[dict[str, Any]]:
        """The candidates' JSON objects, one at a time (each chain listed as it is yielded)."""
        for c in self.candidates:
            yield c.to_dict(self.listed_chain(c), self.max_hops_listed + 1)

    def header(self) -> dict[str, Any]:
        """Everything of :meth:`to_dict` but the candidates."""
        h = self.max_hops_listed
        return {
            "credrank_provenance_audit": 1,
            "now": _iso(self.now), "half_life": self.half_life,
            "documents": self.documents, "max_hops_listed": h,
            "counts": {"candidates": len(self.candidates), "inherited": self.inherited,
                       "inherited_unknown": self.inherited_unknown,
                       "independent_remeasurements": self.independent,
                       "cycles": len(self.cycles), "dangling": len(self.dangling),
                       "anachronisms": len(self.anachronisms)},
            "cycles": [list(c) for c in self.cycles],
            "dangling": [{"doc_id": d, "cites": c} for d, c in self.dangling],
            "anachronisms": list(self.anachronisms),
            "work": dict(self.stats),
            "policy": {
                "edges": "cites; copies (later-appeared copies earlier) when enabled",
                "own_evidence_fields": list(OWN_FIELDS), "naive_field": NAIVE_FIELD,
                "inheritance": "earliest evidence date reachable; unknown never wins",
                "ratio": "w(T,t_n)/w(T,t_0) = 2^((t_n - t_0)/tau)",
                "bound": "2^((T - t_0)/tau)", "time_unit": "days",
                "chain": f"at most {h} hops listed per wrapper: the first {h - (h + 1) // 2} "
                         f"and the last {(h + 1) // 2} (ending at the origin); hops counts "
                         "them all, hops_elided the ones not listed, chain_gap where they sit",
                "overflow": "ratio, chain_ratio and bound are null where 2^x exceeds the "
                            "largest float (named in overflow); log2_ratio, log2_chain_ratio "
                            "and log2_bound are always given; weights that underflow are 0.0",
            },
        }

    def to_dict(self) -> dict[str, Any]:
        """The whole report as one dict (bounded chains; :meth:`write_json` streams it)."""
        return {**self.header(), "candidates": list(self.iter_candidates())}

    def write_json(self, out: IO[str], extra: Mapping[str, Any] | None = None) -> None:
        """Write ``{**to_dict(), **extra}`` to ``out`` as JSON, keys sorted, indented by 2,
        each candidate on one line (``json.dumps(…, sort_keys=True)``: the C encoder, and one
        candidate per line for ``grep``), one candidate at a time (memory: the header and one
        candidate, never the whole document)."""
        top: dict[str, Any] = {**self.header(), "candidates": None, **(extra or {})}
        out.write("{")
        for i, key in enumerate(sorted(top)):
            out.write(("," if i else "") + "\n  " + json.dumps(key) + ": ")
            if key != "candidates":
                out.write(_indented(top[key], 2))
                continue
            if not self.candidates:
                out.write("[]")
                continue
            out.write("[")
            for j, cand in enumerate(self.iter_candidates()):
                out.write(("," if j else "") + "\n    " + json.dumps(cand, sort_keys=True))
            out.write("\n  ]")
        out.write("\n}\n")


def _indented(value: Any, level: int) -> str:
    """``json.dumps(value, indent=2, sort_keys=True)`` nested ``level`` spaces deep."""
    return json.dumps(value, indent=2, sort_keys=True).replace("\n", "\n" + " " * level)


class _ChainExponents:
    """``log2_chain_ratio`` of every node, memoised along the next-hop pointers: for a chain
    ``t_0, …, t_n`` of dated entries (undated intermediaries skipped, as in
    :func:`~credrank.freshness.decay.log2_chain_ratio`), ``Σ_i (e_{i−1} − e_i)/τ`` with
    ``e = max(T − t, 0)`` in days (35.7). A node's sum is its next hop's plus one term, so all
    the nodes of a graph cost ``O(N)``, not ``O(Σ hops)``."""

    def __init__(self, graph: ProvenanceGraph, now: datetime, tau: float) -> None:
        self.graph, self.now, self.tau = graph, now, tau
        # node -> (sum of the hop exponents, elapsed days of its chain's latest dated entry)
        self._memo: dict[str, tuple[float, float | None]] = {}

    def __call__(self, doc_id: str) -> float:
        memo, values = self._memo, self.graph._value
        path: list[str] = []
        node = doc_id
        while node not in memo:
            e = values[node]
            if e.next_hop is None:
                d = e.evidence.date
                memo[node] = (0.0, None if d is None else _days_before(self.now, d))
                break
            path.append(node)
            node = e.next_hop
        total, top = memo[node]
        for p in reversed(path):
            rec = self.graph._records[p]
            assert rec is not None
            if rec.naive.date is not None:
                elapsed = _days_before(self.now, rec.naive.date)
                if top is not None:
                    total += (top - elapsed) / self.tau
                top = elapsed
            memo[p] = (total, top)
        if not math.isfinite(total):
            raise ValueError(f"log2_chain_ratio: expected a finite exponent for {doc_id!r}, "
                             f"got {total!r}")
        return total


def audit(graph: ProvenanceGraph, doc_ids: Iterable[str], now: datetime,
          half_life: float, max_hops_listed: int = MAX_HOPS_LISTED) -> AuditReport:
    """The laundering audit of ``doc_ids`` at evaluation time ``now`` (aware) with half-life
    ``half_life`` (at least :data:`MIN_HALF_LIFE_DAYS`), listing at most
    ``max_hops_listed`` hops per wrapper (module docstring: 35.7's ratio
    ``2^((t_n − t_0)/τ)``, its bound ``2^((T − t_0)/τ)``, the range policy, bounded reports).
    Work: the subgraph the ids reach, ``O(N + E)``; the report keeps no chain."""
    tau = check_audit_half_life(half_life, "half_life")
    cap = check_max_hops_listed(max_hops_listed, "max_hops_listed")
    if now.tzinfo is None:
        raise ValueError("now: expected an aware datetime (UTC), got a naive one")
    ids = list(dict.fromkeys(doc_ids))
    resolved = graph.resolve(ids)
    report = AuditReport(now=now, half_life=tau, documents=len(resolved),
                         max_hops_listed=cap, graph=graph)
    exponents = _ChainExponents(graph, now, tau)
    found: list[tuple[str, Evidence, datetime, datetime, float, float]] = []
    for d in ids:
        e = resolved.get(d)
        if e is None:
            continue
        rec = graph.record(d)
        assert rec is not None
        report.dangling += [(d, c) for c in graph.dangling(d)]
        if rec.own.date is not None and rec.parents:
            report.independent += 1
        if e.origin == d:
            continue
        report.inherited += 1
        t_0, t_n = e.evidence.date, rec.naive.date
        if t_0 is None:
            report.inherited_unknown += 1
            continue
        if t_n is None or t_n == t_0:
            continue
        if t_n < t_0:
            report.anachronisms.append(d)
            continue
        found.append((d, e, t_n, t_0, _days_before(now, t_n), _days_before(now, t_0)))
    if found:
        elapsed = np.array([(f[4], f[5]) for f in found], dtype=np.float64)
        weights = half_life_weight(elapsed, tau)
        for (d, e, t_n, t_0, e_n, e_0), (w_n, w_0) in zip(found, weights.tolist(),
                                                           strict=True):
            report.candidates.append(LaunderingCandidate(
                wrapper=d, origin=e.origin, hops=e.hops, t_n=t_n, t_0=t_0,
                weight_wrapper=w_n, weight_origin=w_0,
                log2_ratio=log2_distortion_ratio(-e_n, -e_0, tau),
                log2_chain_ratio=exponents(d), log2_bound=log2_distortion_bound(-e_0, 0.0, tau),
                cycle=e.cycle))
    report.candidates.sort(key=lambda c: (-c.log2_ratio, c.wrapper))
    report.cycles = sorted(set(graph.cycles))
    report.stats = graph.stats.to_dict()
    return report
