"""``ShrunkReliabilityPrior``: the catalog stage ``reliability_prior``, each source's
estimated reliability shrunk toward the prior of its type at query time; and
``ReliabilityPrior``, a learned per-source table with the type prior as fallback.

The shrinkage ``λ_s = (n_s · r_s + m · λ_type(s)) / (n_s + m)``
(:func:`~credrank.reliability.prior.shrink_reliability`) and the estimate file it reads
(:func:`~credrank.reliability.prior.read_estimate`) are :mod:`credrank.reliability.prior`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.params import construct, parameters
from credrank.core.pipeline import BuildContext, Stage
from credrank.core.schema import AnyOf, Instance, Number, Text
from credrank.core.validation import (
    check_int,
    check_probability,
    check_str,
)
from credrank.reliability.prior import DEFAULT_TYPE_PRIOR, read_estimate, shrink_reliability


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


def _pair(source: Any, value: Any) -> tuple[float, int]:
    """``[r, n]`` of a spec's inline estimate table (``{"source": [0.8, 12]}``), checked by
    the stage's own validators; anything else names the source (a table was passed to the
    path reader: "unhashable type: 'dict'")."""
    if (not isinstance(value, list | tuple) or len(value) != 2
            or isinstance(value[0], bool) or isinstance(value[1], bool)):
        raise ValueError(f"estimate[{str(source)!r}]: expected [reliability in [0, 1], "
                         f"answers >= 0], got {value!r:.60}")
    return value[0], value[1]


class ShrunkReliabilityPrior(Stage):
    """Factor ``name`` (default ``prior``) = each candidate's source reliability, shrunk toward
    the prior of *that candidate's* source type at query time:

        λ_d = (n_s · r_s + m · λ_type(d)) / (n_s + m)

    with ``(r_s, n_s)`` from ``estimates`` keyed by ``batch.column(key_column)``; a source
    absent from ``estimates`` (or unknown, ``n_s = 0``) gets ``λ_type(d)``. It replaces
    :class:`credrank.stages.prior.SourcePrior` in a pipeline (same factor name by default).
    """

    @parameters(estimate=AnyOf((Text(what="the --json output of 'credrank reliability "
                                          "estimate'"),
                                Instance((Mapping, Path), what="a table source → (r, n)"))),
                type_priors=AnyOf((Text(what="a preset or a prior file"),
                                   Instance(Mapping, what="a table source type → prior"))),
                m=Number(0.0, open_low=True))
    def __init__(self, estimate: str | Path | Mapping[str, tuple[float, int]],
                 type_priors: str | Mapping[str, float] = "current", *, m: float = 5.0,
                 key_column: str = "source_id", name: str = "prior",
                 default: float = DEFAULT_TYPE_PRIOR) -> None:
        estimates = estimate if isinstance(estimate, Mapping) else read_estimate(str(estimate))
        if isinstance(type_priors, str):
            from credrank.signals.prior import load_priors  # a preset or a prior file

            type_prior: Mapping[str, float] = load_priors(type_priors).values
        else:
            type_prior = type_priors
        self.m = m
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

    def formula_term(self) -> str:
        return "needs the Python path (per-source reliability)"

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> ShrunkReliabilityPrior:
        """``estimate``: a reliability estimate (a registered name or a path), shrunk toward
        the ``type_priors`` preset or file with weight ``m``."""
        given = params["estimate"]
        if isinstance(given, Mapping):  # a table in the spec: source → [r, n]
            estimate = {str(k): _pair(k, v) for k, v in given.items()}
        else:
            path = ctx.path(given, "estimate", "reliability estimate")
            estimate = read_estimate(str(path))
        return construct(cls, params, estimate=estimate,
                         type_priors=ctx.type_priors(params["type_priors"], "type_priors"))

    @classmethod
    def from_estimate_json(cls, path: str, type_prior: Mapping[str, float],
                           **kwargs: Any) -> ShrunkReliabilityPrior:
        """Read the ``--json`` document of ``credrank reliability estimate``
        (:func:`read_estimate`)."""
        return cls(read_estimate(path), type_prior, **kwargs)

    def transform(self, batch: Candidates) -> Candidates:
        """The factor of the class docstring; ``info.reliability_prior`` counts the candidates
        it could use: ``estimated`` (their source has answers in the estimate),
        ``unknown_source`` (a key the estimate lacks or estimated from no answers: the type
        prior alone) and ``no_key`` (no value in ``key_column``: an index without source ids
        falls back to the type prior for every candidate, which it says here)."""
        keys, types = batch.column(self.key_column), batch.column("source_type")
        lam = np.array([self.type_prior.get(str(t), self.default) if t is not None
                        else self.default for t in types], dtype=np.float64)
        r = np.zeros(len(batch))
        n = np.zeros(len(batch))
        no_key = 0
        for i, key in enumerate(keys):
            if key is None:
                no_key += 1
            elif str(key) in self.estimates:
                r[i], n[i] = self.estimates[str(key)]
        estimated = int(np.count_nonzero(n))
        info = {"key_column": self.key_column, "estimated": estimated,
                "unknown_source": len(batch) - estimated - no_key, "no_key": no_key}
        return (batch.with_factor(self.name, shrink_reliability(r, n, lam, self.m), 0.0, 1.0)
                .with_info(reliability_prior=info))

    def config(self) -> dict[str, Any]:
        """The parameters as given (a table given in code: ``"in code"``), the key column and
        the number of sources estimated."""
        given = {k: v if isinstance(v, str | float) else "in code"
                 for k, v in self.params().items()}
        return {**given, "key_column": self.key_column, "n_sources": len(self.estimates)}
