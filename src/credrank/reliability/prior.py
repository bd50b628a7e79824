"""Estimated reliabilities as a learned per-source prior for the reranker (chapter 35.3 → 004).

A reliability estimated from few answers is noisy, so it is shrunk toward the prior of the
source's type (seed 004's table) with pseudo-count ``m``:

    λ_s = (n_s · r_s + m · λ_type(s)) / (n_s + m)

``n_s`` is the number of usable answers (``|J_s|``, the estimator's ``coverage_``). With
``m > 0`` the denominator is never zero; an unknown source (``n_s = 0``) gets ``λ_type``.
Remember what ``r_s`` is: agreement with a consensus, not verified accuracy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.errors import FileFormatError
from credrank.core.maths import shrink
from credrank.core.pipeline import BuildContext, Stage
from credrank.core.schema import Field, Flag, Integer, ListOf, Nullable, Number, Table, Text, got
from credrank.core.structured import read_structured
from credrank.core.validation import (
    check_bounds,
    check_finite,
    check_int,
    check_positive,
    check_probability,
    check_str,
)

#: prior of a source whose type is missing or absent from the type table
DEFAULT_TYPE_PRIOR = 0.5


def shrink_reliability(reliability: np.ndarray, n_answers: np.ndarray, type_prior: np.ndarray,
                       m: float = 5.0) -> np.ndarray:
    """``λ_s = (n_s r_s + m λ_type) / (n_s + m)`` (chapter 35.3 estimates feeding seed 004).

    Vectorised; ``r_s`` is ignored where ``n_s = 0`` (so the placeholder of an unknown source
    never leaks). ``m`` must be > 0. Computed by :func:`credrank.core.maths.shrink` with
    ``k = n_s r_s`` successes in ``n_s`` trials.
    """
    r = np.asarray(reliability, dtype=np.float64)
    n = np.asarray(n_answers, dtype=np.float64)
    lam = np.asarray(type_prior, dtype=np.float64)
    m = check_positive("m", m)
    if r.shape != n.shape or lam.shape != r.shape:
        raise ValueError(f"shapes differ: reliability {r.shape}, n_answers {n.shape}, "
                         f"type_prior {lam.shape}; expected equal shapes")
    check_bounds("n_answers", check_finite("n_answers", n), 0.0)
    used = n > 0
    check_bounds("reliability (where n_answers > 0)", np.where(used, r, 0.0), 0.0, 1.0)
    check_bounds("type_prior", check_finite("type_prior", lam), 0.0, 1.0)
    return shrink(np.where(used, n * r, 0.0), n, lam, m)


def reliability_table(
    source_ids: Sequence[str], reliability: np.ndarray, n_answers: np.ndarray,
    source_types: Mapping[str, str | None], type_prior: Mapping[str, float], *,
    m: float = 5.0, default: float = DEFAULT_TYPE_PRIOR,
) -> dict[str, float]:
    """``{source_id: λ_s}`` with shrinkage toward each source's type prior (see module doc)."""
    default = check_probability("default", default)
    lam = np.array([check_probability(f"type_prior[{source_types.get(s)!r}]",
                                type_prior.get(source_types.get(s) or "", default))
                    for s in source_ids])
    values = shrink_reliability(reliability, n_answers, lam, m)
    return {s: float(v) for s, v in zip(source_ids, values, strict=True)}


#: what :func:`read_estimate` reads of the ``--json`` document of ``credrank reliability
#: estimate``: the ``sources`` and, of each, its id, whether it is known, its reliability and
#: its coverage. The document's other keys (and a source's others: ``weight``, ``answered``,
#: ``cluster``, …) are that command's report and are ignored.
ESTIMATE_SCHEMA = Table({
    "sources": Field(ListOf(Table({
        "source_id": Field(Text()),
        "known": Field(Flag()),
        "reliability": Field(Nullable(Number(0, 1))),
        "coverage": Field(Integer(0)),
    }, extra=True))),
}, extra=True)


def read_estimate(path: str | Path) -> dict[str, tuple[float, int]]:
    """``{source_id: (r_s, n_s)}`` from the ``--json`` document of ``credrank reliability
    estimate`` at ``path``; an unknown source gives ``(0.0, 0)``.

    Declared policy: the file is read by the hardened JSON reader
    (:func:`~credrank.core.structured.read_structured`: UTF-8, bounded size and nesting, no
    NaN/Infinity or duplicate keys) and checked against :data:`ESTIMATE_SCHEMA`; a known
    source needs a reliability in [0, 1], a source id may appear once. Every problem is a
    :class:`~credrank.core.errors.FileFormatError` (a ``ValueError``) naming the file and the
    key path (``sources[3].coverage``)."""
    where = str(path)
    doc = read_structured(path, what="reliability estimate", fmt="json")
    if not isinstance(doc, dict) or "sources" not in doc:
        raise FileFormatError(f"{where}: expected the --json output of `credrank reliability "
                              "estimate` (a JSON object whose sources have source_id, known, "
                              f"reliability, coverage), got {got(doc)}")
    sources = ESTIMATE_SCHEMA.check(doc, where, error=FileFormatError)["sources"]
    estimates: dict[str, tuple[float, int]] = {}
    for i, s in enumerate(sources):
        sid = s["source_id"]
        if sid in estimates:
            raise FileFormatError(f"{where}: sources[{i}].source_id: expected a source listed "
                                  f"once, got {sid!r} again")
        if s["known"] and s["reliability"] is None:
            raise FileFormatError(f"{where}: sources[{i}].reliability: expected a finite "
                                  "number in [0, 1] (the source is known), got None")
        estimates[sid] = (s["reliability"], s["coverage"]) if s["known"] else (0.0, 0)
    return estimates


class ReliabilityPrior(Stage):
    """Pipeline stage: factor ``name`` = the learned prior of each candidate's source, in [0, 1].

    The key is ``batch.column(key_column)`` (``source_id`` by default, or ``host``); a key
    absent from ``table`` (or ``None``) falls back to ``type_prior[source_type]``, and a missing
    or unlisted type to ``default`` (0.5).
    """

    def __init__(self, table: Mapping[str, float], type_prior: Mapping[str, float],
                 key_column: str = "source_id", name: str = "reliability", *,
                 default: float = DEFAULT_TYPE_PRIOR) -> None:
        self.table = {str(k): check_probability(f"table[{k!r}]", v) for k, v in table.items()}
        self.type_prior = {str(k): check_probability(f"type_prior[{k!r}]", v)
                           for k, v in type_prior.items()}
        self.key_column = check_str("key_column", key_column, what="a column name")
        self.name = name
        self.default = check_probability("default", default)

    def transform(self, batch: Candidates) -> Candidates:
        keys = batch.column(self.key_column)
        types = batch.column("source_type")
        values = np.empty(len(batch), dtype=np.float64)
        for i, (key, typ) in enumerate(zip(keys, types, strict=True)):
            value = self.table.get(str(key)) if key is not None else None
            if value is None:
                value = self.type_prior.get(str(typ), self.default) if typ is not None \
                    else self.default
            values[i] = value
        return batch.with_factor(self.name, values, 0.0, 1.0)

    def config(self) -> dict[str, Any]:
        return {"key_column": self.key_column, "n_sources": len(self.table),
                "type_prior": dict(self.type_prior), "default": self.default}


class ShrunkReliabilityPrior(Stage):
    """Factor ``name`` (default ``prior``) = each candidate's source reliability, shrunk toward
    the prior of *that candidate's* source type at query time:

        λ_d = (n_s · r_s + m · λ_type(d)) / (n_s + m)

    with ``(r_s, n_s)`` from ``estimates`` keyed by ``batch.column(key_column)``; a source
    absent from ``estimates`` (or unknown, ``n_s = 0``) gets ``λ_type(d)``. It replaces
    :class:`credrank.signals.prior.SourcePrior` in a pipeline (same factor name by default).
    """

    def __init__(self, estimates: Mapping[str, tuple[float, int]],
                 type_prior: Mapping[str, float], *, m: float = 5.0,
                 key_column: str = "source_id", name: str = "prior",
                 default: float = DEFAULT_TYPE_PRIOR) -> None:
        self.m = check_positive("m", m)
        self.estimates = {}
        for key, (r, n) in estimates.items():
            n = check_int(f"estimates[{key!r}] answer count", n, 0)
            r = check_probability(f"estimates[{key!r}]", r) if n else 0.0
            self.estimates[str(key)] = (r, n)
        self.type_prior = {str(k): check_probability(f"type_prior[{k!r}]", v)
                           for k, v in type_prior.items()}
        self.key_column = check_str("key_column", key_column, what="a column name")
        self.name = name
        self.default = check_probability("default", default)

    SPEC = Table({
        "estimate": Field(Text(what="the --json output of `credrank reliability estimate`")),
        "type_priors": Field(Text(what="a preset or a prior file"), default="current"),
        "m": Field(Number(0.0, open_low=True), default=5.0),
    })

    def formula_term(self) -> str:
        return "needs the Python path (per-source reliability)"

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> ShrunkReliabilityPrior:
        """``estimate``: a reliability estimate (a registered name or a path), shrunk toward
        the ``type_priors`` preset or file with weight ``m``."""
        path = ctx.path(params["estimate"], "estimate", "reliability estimate")
        return cls.from_estimate_json(str(path), ctx.type_priors(params["type_priors"],
                                                                 "type_priors"),
                                      m=params["m"])

    @classmethod
    def from_estimate_json(cls, path: str, type_prior: Mapping[str, float],
                           **kwargs: Any) -> ShrunkReliabilityPrior:
        """Read the ``--json`` document of ``credrank reliability estimate``
        (:func:`read_estimate`)."""
        return cls(read_estimate(path), type_prior, **kwargs)

    def transform(self, batch: Candidates) -> Candidates:
        keys, types = batch.column(self.key_column), batch.column("source_type")
        lam = np.array([self.type_prior.get(str(t), self.default) if t is not None
                        else self.default for t in types], dtype=np.float64)
        r = np.zeros(len(batch))
        n = np.zeros(len(batch))
        for i, key in enumerate(keys):
            if key is not None and str(key) in self.estimates:
                r[i], n[i] = self.estimates[str(key)]
        return batch.with_factor(self.name, shrink_reliability(r, n, lam, self.m), 0.0, 1.0)

    def config(self) -> dict[str, Any]:
        return {"key_column": self.key_column, "n_sources": len(self.estimates), "m": self.m}
