"""Estimated reliabilities as a learned per-source prior for the reranker (chapter 35.3 → 004).

A reliability estimated from few answers is noisy, so it is shrunk toward the prior of the
source's type (seed 004's table) with pseudo-count ``m``:

    λ_s = (n_s · r_s + m · λ_type(s)) / (n_s + m)

``n_s`` is the number of usable answers (``|J_s|``, the estimator's ``coverage_``). With
``m > 0`` the denominator is never zero; an unknown source (``n_s = 0``) gets ``λ_type``.
Remember what ``r_s`` is: agreement with a consensus, not verified accuracy. The catalog stage
is :class:`~credrank.stages.reliability_prior.ShrunkReliabilityPrior`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from credrank.core.errors import FileFormatError
from credrank.core.maths import shrink
from credrank.core.schema import Field, Flag, Integer, ListOf, Nullable, Number, Table, Text, got
from credrank.core.structured import read_structured
from credrank.core.validation import (
    check_bounds,
    check_finite,
    check_positive,
    check_probability,
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
    NaN/Infinity or duplicate keys) and checked against :data:`ESTIMATE_SCHEMA`; a source's
    entries must agree (:func:`_check_consistent`: a known source has a reliability in
    [0, 1] and coverage >= 1, an unknown one a null reliability and coverage 0), a source id
    may appear once. Every problem is a
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
        _check_consistent(s, f"{where}: sources[{i}]")
        estimates[sid] = (s["reliability"], s["coverage"]) if s["known"] else (0.0, 0)
    return estimates




def _check_consistent(source: Mapping[str, object], where: str) -> None:
    """``known`` agrees with ``reliability`` and ``coverage``: ``known`` is ``|J_s| > 0``, and
    only a known source has a reliability (the estimator writes exactly that), so any other
    combination was edited or comes from elsewhere and is refused rather than guessed."""
    known, r, n = source["known"], source["reliability"], source["coverage"]
    if known and r is None:
        raise FileFormatError(f"{where}.reliability: expected a finite number in [0, 1] (the "
                              "source is known), got None")
    if known and n == 0:
        raise FileFormatError(f"{where}.coverage: expected at least 1 (the source is known: "
                              "it agreed or disagreed on some resolved question), got 0")
    if not known and r is not None:
        raise FileFormatError(f"{where}.reliability: expected null (the source is unknown), "
                              f"got {r!r}")
    if not known and n != 0:
        raise FileFormatError(f"{where}.coverage: expected 0 (the source is unknown), got {n!r}")
