"""The freshness stages (chapter 35.7): the factor ``freshness = w(T, t) = 2^(−(T−t)/τ)``
(:class:`FreshnessDecay`) and the origin's date for wrappers (:class:`InheritedDates`). The
``--freshness`` shortcut (:mod:`credrank.pipeline.shortcuts`) writes the stage's parameters as
``half_life=365d[,now=2026-01-01][,undated=neutral|neutral:W|penalty:W|exclude][,config=FILE]
[,lineage=off|cites]``.

``t`` is each candidate's *freshness date* (:func:`~credrank.freshness.dates.freshness_date`:
``observed_at``, else ``verified_at``, else ``published_at``, else unknown — never
``modified_at`` or ``retrieved_at``). A date after ``T`` is no usable age: it is **unknown**
(the undated policy below) and flagged ``after_now`` — never the best age (clamping it to
``T``, as earlier versions did, gave a page dated in the future the largest weight of the pool;
:mod:`credrank.context` tiers it the same way). ``τ`` is one half-life, or per document from a
:class:`~credrank.freshness.config.FreshnessConfig` (claim class, host, source type; a
time-persistent claim has no decay: weight 1, dated or not). An undated, decaying candidate
weighs what its :class:`~credrank.freshness.policy.UnknownAge` policy states (``neutral``: a
stated constant, default the median weight of the dated candidates of the query;
``penalty``: a stated factor; ``exclude``: removed) — never more than that, and so never more
than the same document dated at ``T``.

Per candidate, the stage writes the meta columns ``freshness_basis`` (``observed_at`` /
``verified_at`` / ``published_at`` / ``unknown``, or the inherited basis), ``age_days``
(``None`` when unknown, a date after ``T`` included), ``freshness_after_now`` and
``freshness_half_life`` (days; ``None`` for no decay), and records in ``info["freshness"]``
the evaluation time, the half-life(s), the policy with the value it used, the counts and the
doc ids with ``age: unknown`` (``unknown_age``: undated or dated after ``T``), dated after
``T`` (``after_now``, a subset), excluded or not decayed (what a hit's breakdown cannot hold:
:meth:`Candidates.hits` shows factors only).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np

from credrank.core.candidates import DATE_COLUMNS, Candidates
from credrank.core.errors import StageError
from credrank.core.params import construct, parameters
from credrank.core.pipeline import BuildContext, FormulaTerm, IndexNeeded, Stage
from credrank.core.schema import AnyOf, Function, Instance, Nullable, Text
from credrank.freshness.config import (
    CLAIM_CLASS_FIELD,
    Duration,
    FreshnessConfig,
    FreshnessConfigWarning,
    load_freshness_config,
)
from credrank.freshness.dates import (
    FreshnessDate,
    Instant,
    elapsed_days,
    evidence_date,
    parse_instant,
)
from credrank.freshness.lineage import ProvenanceGraph, StoreSource, inherited_dates
from credrank.freshness.policy import UnknownAge, parse_undated

#: meta columns an :class:`~credrank.stages.freshness.InheritedDates` stage fills: the
#: origin's evidence date (ISO string or ``None``) and its basis ``inherited:<origin id>``
INHERITED_AT, INHERITED_BASIS = "inherited_at", "inherited_basis"

#: the evaluation time ``T``: fixed, per query (a function of the batch) or ``None`` (now)
Now = datetime | Callable[[Candidates], datetime] | None


def row_dates(batch: Candidates, now: datetime | None, name: str | None = None
              ) -> list[FreshnessDate]:
    """Each row's evidence date at ``now``
    (:func:`~credrank.freshness.dates.evidence_date`: a wrapper's origin's date from the
    ``inherited_at`` / ``inherited_basis`` columns an :class:`InheritedDates` stage wrote; a
    date after ``now`` an unknown age) — what :class:`FreshnessDecay` weighs and the context
    tiers. A date that does not parse is a :class:`StageError` naming the document (after
    ``name:`` when given)."""
    columns = {c: batch.column(c) for c in DATE_COLUMNS}
    inherited_at, inherited_basis = batch.column(INHERITED_AT), batch.column(INHERITED_BASIS)
    out = []
    for i in range(len(batch)):
        try:
            out.append(evidence_date({c: columns[c][i] for c in DATE_COLUMNS}, now,
                                     f"document {batch.doc_ids[i]!r}", inherited_at[i],
                                     inherited_basis[i]))
        except ValueError as exc:
            raise StageError(f"{name}: {exc}" if name else str(exc)) from None
    return out


def _half_life_or_config(params: dict[str, Any]) -> None:
    """A half-life, a config file, or both."""
    if params["half_life"] is None and params["config"] is None:
        raise ValueError("half_life: expected a duration such as 365d (or a config file), "
                         "got neither")


class FreshnessDecay(Stage):
    """Factor ``freshness = 2^(−(T − t)/τ)`` (chapter 35.7) per candidate, in ``[0, 1]``.

    Args:
        half_life: ``τ``: a duration (``365d``, ``52w``, ``1y``, ``12h``) or a number of days
            (positive, finite); with ``config``, it replaces the file's default ``τ``.
        now: ``T`` — an ISO 8601 date or an aware (naive = UTC) ``datetime``; a callable
            ``batch -> datetime`` for a per-query ``T`` (e.g. a bench's query date); ``None``
            reads the current UTC time once per :meth:`transform`.
        undated: the unknown-age policy: ``neutral`` (default: median of the dated
            candidates, 0.5 when none is dated), ``neutral:W``, ``penalty:W``, ``exclude``,
            or an :class:`~credrank.freshness.policy.UnknownAge`.
        config: a freshness config file or a
            :class:`~credrank.freshness.config.FreshnessConfig` (τ per claim class, host,
            source type; no-decay opt-outs).
        lineage: ``cites``: wrappers take their origin's date (put
            :class:`InheritedDates` before the stage; a spec does); ``off``.
        name: the factor's name.

    Raises ``ValueError`` for a half-life of 0 or below, neither a half-life nor a config, or
    a ``now`` that is not a date; ``StageError`` when a candidate's date does not parse or
    ``now`` returns no date.
    """

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> Stage:
        """The freshness factor of ``params`` (``config`` a registered name or a path); with
        ``lineage: cites`` the citation chains are read from ``ctx.store`` first
        (:class:`InheritedDates`)."""
        config = params["config"]
        stage = construct(cls, params, config=None if config is None else
                          ctx.path(config, "config", "freshness config"))
        if not stage.lineage:
            return stage
        if ctx.store is None:
            raise IndexNeeded("lineage: 'cites' reads citation chains from an index; not "
                              "available for candidates retrieved elsewhere")
        return InheritedDates(ctx.store) >> stage

    def formula_term(self) -> FormulaTerm | str:
        """The engine scores one half-life with a fixed or current ``T`` and a stated weight
        for the undated; anything that depends on the pool or on other columns stays in
        Python (the reason says which)."""
        if not self.single:
            return "with config=FILE (several half-lives or opt-outs) needs the Python path"
        if callable(self.now):
            return "with a per-query evaluation time needs the Python path"
        if self.undated.kind == "exclude":
            return "undated=exclude needs the Python path"
        if self.undated.value is None:
            return ("undated=neutral (median of the dated candidates) needs the Python path; "
                    "give neutral:W or penalty:W to score in the engine")
        if self.lineage:
            return "lineage=cites (citation chains read from the index) needs the Python path"
        return FormulaTerm("freshness", self)

    @parameters(half_life=Nullable(Duration()),
                now=Nullable(AnyOf((Instant(), Function(what="a function of the batch")))),
                undated=AnyOf((Text(what="neutral, neutral:W, penalty:W or exclude"),
                               Instance(UnknownAge, what="an UnknownAge policy"))),
                config=Nullable(AnyOf((Text(what="a freshness config file"),
                                       Instance((FreshnessConfig, Path),
                                                what="a FreshnessConfig")))),
                lineage=Text(choices=("off", "cites")), together=_half_life_or_config)
    def __init__(self, half_life: float | str | None = None, *, now: Now | str = None,
                 undated: str | UnknownAge = "neutral",
                 config: str | Path | FreshnessConfig | None = None, lineage: str = "off",
                 name: str = "freshness"):
        if isinstance(config, str | Path):
            config = load_freshness_config(config)
        if config is not None and half_life is not None:  # the file's default τ replaced
            config = dataclasses.replace(config, half_life=float(half_life))
        #: per-type/host/class half-lives and opt-outs (``None``: one ``τ`` for every one)
        self.config_: FreshnessConfig | None = config
        self._half_life = float(config.half_life if config is not None else
                                cast(float, half_life))
        self.now = parse_instant(now, "now") if isinstance(now, str | datetime) else now
        self.undated = parse_undated(undated) if isinstance(undated, str) else undated
        self.lineage = lineage == "cites"
        self.name = name

    @property
    def half_life(self) -> float:
        """The default half-life ``τ`` in days."""
        return self._half_life

    @property
    def single(self) -> bool:
        """One ``τ`` for every candidate (no per-type/host/class table, no opt-out)."""
        return self.config_ is None or self.config_.single

    def resolve_now(self, batch: Candidates) -> datetime:
        """``T`` for ``batch`` as an aware UTC datetime."""
        if self.now is None:
            return datetime.now(UTC)
        if isinstance(self.now, datetime):
            return self.now
        value = self.now(batch)
        try:
            out = parse_instant(value, "now")
        except ValueError as exc:
            raise StageError(f"{self.name}: now({batch.query!r}): {exc}") from None
        if out is None:
            raise StageError(f"{self.name}: now({batch.query!r}) returned no date")
        return out

    def weights(self, batch: Candidates, now: datetime) -> tuple[np.ndarray, dict[str, Any]]:
        """``(w, facts)``: the factor per row (``NaN`` for rows to exclude) and the per-row
        facts (basis, age, after ``T``, half-life, undated flag) — the computation of
        :meth:`transform` without its side columns."""
        n = len(batch)
        bases, dates, after_now = [], [], np.zeros(n, dtype=bool)
        for i, fd in enumerate(row_dates(batch, now, self.name)):
            bases.append(fd.basis)
            dates.append(fd.date)  # None: undated, or dated after T (an unknown age)
            after_now[i] = fd.after_now
        table = self.config_
        claims = batch.column(CLAIM_CLASS_FIELD)
        flags = (batch.column(table.no_decay_field) if table is not None and table.no_decay_field
                 else np.full(n, None, dtype=object))
        taus = np.full(n, self.half_life) if table is None else table.half_lives(
            batch.column("source_type"), batch.column("host"), claims, flags)
        notes = [] if table is None else table.unreached(claims, flags)
        age = elapsed_days(now, dates)
        dated = ~np.isnan(age)
        no_decay = np.isinf(taus)
        w = np.full(n, np.nan)
        decaying = dated & ~no_decay
        w[decaying] = np.exp2(-age[decaying] / taus[decaying])
        w[no_decay] = 1.0
        undated = ~dated & ~no_decay
        value = self.undated.weight(w[dated])  # None with exclude
        if value is not None:
            w[undated] = value
        facts = {"basis": bases, "age": age, "after_now": after_now, "tau": taus,
                 "undated": undated, "no_decay": no_decay, "dated": dated, "value": value,
                 "warnings": notes}
        return w, facts

    def transform(self, batch: Candidates) -> Candidates:
        return self.apply(batch, self.resolve_now(batch))

    def apply(self, batch: Candidates, now: datetime) -> Candidates:
        """The factor at the evaluation time ``now`` (already resolved: the engine's formula
        search reads ``T`` once and scores with the same, :mod:`credrank.pipeline.pushdown`)."""
        w, f = self.weights(batch, now)
        ids = [str(d) for d in batch.doc_ids]
        excluded = f["undated"] if self.undated.kind == "exclude" else np.zeros(len(w), bool)
        info = {
            "now": now.isoformat(),
            "formula": "w(T, t) = 2^(-(T - t)/tau) (chapter 35.7)",
            "half_life": self.half_life,
            **({} if self.config_ is None or self.single
               else {"half_lives": self.config_.as_dict()}),
            "date_rule": "observed_at > verified_at > published_at > unknown (never "
                         "modified_at / retrieved_at); a date after now is an unknown age",
            "undated": {"policy": self.undated.describe(),
                        "weight": None if self.undated.kind == "exclude" else f["value"]},
            # the candidates counted: the pool the stage weighed (the engine's formula search
            # weighs the pool in the engine and counts its hits: "hits")
            "counted_over": "pool",
            "counts": {"dated": int(f["dated"].sum()), "undated": int(f["undated"].sum()),
                       "excluded": int(excluded.sum()),
                       "after_now": int(f["after_now"].sum()),
                       "no_decay": int(f["no_decay"].sum())},
            "unknown_age": [d for d, u in zip(ids, f["undated"], strict=True) if u],
            "after_now": [d for d, c in zip(ids, f["after_now"], strict=True) if c],
            "excluded": [d for d, x in zip(ids, excluded, strict=True) if x],
            "no_decay": [d for d, x in zip(ids, f["no_decay"], strict=True) if x],
            # a config table that applies to no candidate: said, never silently ignored
            **({"warnings": f["warnings"]} if f["warnings"] else {}),
        }
        for note in f["warnings"]:
            warnings.warn(note, FreshnessConfigWarning, stacklevel=2)
        ages = [None if math.isnan(a) else float(a) for a in f["age"]]
        out = (batch.with_meta("freshness_basis", f["basis"])
               .with_meta("age_days", ages)
               .with_meta("freshness_after_now", list(f["after_now"]))
               .with_meta("freshness_half_life",
                          [None if math.isinf(t) else float(t) for t in f["tau"]]))
        if excluded.any():
            keep = np.flatnonzero(~excluded)
            out, w = out.take(keep), w[keep]
        return out.with_factor(self.name, w, 0.0, 1.0).with_info(**{self.name: info})

    def config(self) -> dict[str, Any]:
        """The parameters as given (``now`` a function: ``"per query"``; a policy or config
        object: its text or its file) and, with a config, the ``half_lives`` it resolves."""
        given = self.params()
        now, undated, config = given.get("now"), given.get("undated"), given.get("config")
        table = self.config_
        return {"half_life": given.get("half_life"),
                "now": now.isoformat() if isinstance(now, datetime)
                else "per query" if callable(now) else now,
                "undated": undated if isinstance(undated, str) else self.undated.describe(),
                "config": config if isinstance(config, str) or config is None
                else table.path if table is not None else None,
                "lineage": given.get("lineage", "cites" if self.lineage else "off"),
                **({} if table is None or table.single else {"half_lives": table.as_dict()})}


class InheritedDates(Stage):
    """Adds ``inherited_at`` / ``inherited_basis`` from ``store``'s ``cites`` links: the
    origin's evidence date for wrappers, read from the index (35.7); a fresh graph per batch,
    so index updates are seen.

    A document that repeats an earlier measurement (it ``cites`` the origin, directly or along
    a chain) is evidence of the origin's date, not of its own publication date. For the
    candidates of a batch, the stage resolves their citation chains over the index
    (:class:`~credrank.freshness.lineage.ProvenanceGraph` over
    :class:`~credrank.freshness.lineage.StoreSource`; the work is the subgraph the candidates
    reach, not the corpus) and writes two meta columns that :class:`FreshnessDecay` reads:

    * ``inherited_at`` — the origin's evidence date (ISO 8601), ``None`` when every origin
      reached is undated (then the wrapper's age is unknown: never its own publication date);
    * ``inherited_basis`` — ``inherited:<origin id>``; ``None`` for documents that are not
      wrappers (no citation chain, or their own ``observed_at``/``verified_at``: a
      re-measurement).

    ``info["lineage"]`` records the graph work (records fetched, nodes expanded, edges walked),
    cycles found, the wrappers weighted at their origin's date (``wrappers``: id → origin) and
    the citing documents that are not, their origin being newer than themselves
    (``anachronisms``: id → origin; their own date stands)."""

    name = "lineage"
    reads = frozenset({"index"})

    def __init__(self, store: Any):
        if not callable(getattr(store, "read_payloads", None)):
            raise ValueError("lineage: the store cannot read payloads by id; citation chains "
                             "need an index")
        self.store = store

    def transform(self, batch: Candidates) -> Candidates:
        ids = [str(d) for d in batch.doc_ids]
        graph = ProvenanceGraph(StoreSource(self.store))
        inherited = inherited_dates(graph, ids) if ids else {}
        dated = {d: item.date for d, item in inherited.items() if item.date is not None}
        at = [dated[d].isoformat() if d in dated else None for d in ids]
        basis = [inherited[d].basis if d in inherited else None for d in ids]
        out = batch.with_meta(INHERITED_AT, at).with_meta(INHERITED_BASIS, basis)
        # a wrapper whose origin is newer than itself keeps its own date (evidence_date)
        applied = [fd.basis.startswith("inherited:") for fd in row_dates(out, None, self.name)]
        info = {"rule": "cites chains: a wrapper takes its origin's evidence date",
                "work": graph.stats.to_dict(), "cycles": [list(c) for c in graph.cycles],
                "wrappers": {d: inherited[d].basis.split(":", 1)[1]
                             for d, yes in zip(ids, applied, strict=True) if yes},
                "anachronisms": {d: inherited[d].basis.split(":", 1)[1]
                                 for d, yes in zip(ids, applied, strict=True)
                                 if d in inherited and not yes}}
        return out.with_info(lineage=info)

    def config(self) -> dict[str, Any]:
        return {"rule": "cites chains (35.7)"}
