"""The credibility formula, backend-neutral: :data:`FORMULA`, its freshness factor
:data:`FRESHNESS_FORMULA` and its learned-credibility factor :data:`CREDIBILITY_FORMULA`, the
validated prior table (:func:`formula_priors`), the freshness and credibility parameters
(:class:`FreshnessFormula`, :class:`CredibilityFormula`) and the optional capability of
scoring it inside the engine (:class:`FormulaScoring`, asked with :func:`supports_formula`).
Each backend translates the formula into its engine's expression language."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import numpy as np

from credrank.core.candidates import Candidates
from credrank.documents.schema import SOURCE_TYPES
from credrank.index.payload import returned_fields

__all__ = [
    "CREDIBILITY_FORMULA",
    "FORMULA",
    "FRESHNESS_FIELDS",
    "FRESHNESS_FORMULA",
    "CredibilityFormula",
    "FormulaScoring",
    "FreshnessFormula",
    "formula_fields",
    "formula_priors",
    "formula_unavailable",
    "supports_formula",
]

#: the credibility-aware score every formula-capable backend computes in its engine
FORMULA = "max($score, 0) × Σ_t λ_t·[source_type = t]"
#: the freshness factor a formula may carry (:class:`FreshnessFormula`, chapter 35.7)
FRESHNESS_FORMULA = ("× ([o]·D(observed_at) + [¬o][v]·D(verified_at) + [¬o][¬v][p]·"
                     "D(published_at) + [¬o][¬v][¬p]·w_undated), D(f) = [f ≤ T]·exp_decay(x = "
                     "f, target = T, midpoint = 0.5, scale = τ) + [f > T]·w_undated = "
                     "[f ≤ T]·2^(−(T − f)/τ) + [f > T]·w_undated")
#: the learned page-credibility factor a formula may carry (:class:`CredibilityFormula`): the
#: ``P(credible)`` stored at index time in the payload field ``credibility`` by the model of
#: key ``K`` (``credibility_key``), ``p₀`` where a point holds no score of that model
CREDIBILITY_FORMULA = ("× (floor + (1 − floor)·([credibility_key = K]·$payload.credibility + "
                       "(1 − [credibility_key = K])·p₀))")
#: the payload dates that date a document's evidence, in order of preference (the rule of
#: :mod:`credrank.freshness.dates`, which the index layer cannot import; a test checks both
#: agree)
FRESHNESS_FIELDS = ("observed_at", "verified_at", "published_at")


def formula_priors(priors: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """``(source type, λ)`` for every type of the taxonomy, in taxonomy order, validated.

    The prior table of :data:`FORMULA`: each backend turns it into a sum of
    ``λ_t × [source_type = t]`` conditions. Raises ``ValueError`` naming a missing type or a
    weight that is not a finite number ``>= 0``.
    """
    out = []
    for t in SOURCE_TYPES:
        if t not in priors:
            raise ValueError(f"priors: no weight for source type {t!r}; expected one for each "
                             f"of {', '.join(SOURCE_TYPES)}")
        value = priors[t]
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                             np.floating)):
            raise ValueError(f"priors[{t!r}]: expected a number, got {value!r}")
        if not math.isfinite(float(value)) or float(value) < 0:
            raise ValueError(f"priors[{t!r}]: expected a finite number >= 0, got {value!r}")
        out.append((t, float(value)))
    return tuple(out)


def _check_now(now: str) -> None:
    """``ValueError`` unless ``now`` is an ISO 8601 date with a UTC offset."""
    try:
        when = datetime.fromisoformat(now.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        raise ValueError(f"freshness formula: now: expected an ISO 8601 date, "
                         f"got {now!r}") from None
    if when.tzinfo is None:
        raise ValueError(f"freshness formula: now: expected a date with a UTC offset, "
                         f"got {now!r}")


@dataclass(frozen=True)
class FreshnessFormula:
    """The freshness factor of :data:`FRESHNESS_FORMULA`, backend-neutral (chapter 35.7).

    ``w = 2^(−(T − t)/τ)`` with ``t`` the first non-empty of :data:`FRESHNESS_FIELDS` (a
    payload ISO date), and ``undated_weight`` where all three are empty (null or missing) or
    where ``t`` is after ``T`` (no usable age: unknown, as
    :class:`credrank.stages.freshness.FreshnessDecay` scores it). Each backend writes it as an
    exponential decay on the datetime key with ``midpoint = 0.5`` at ``scale = τ`` —
    ``exp(ln 0.5 · |x − T|/τ) = 2^(−|x − T|/τ)`` — times the condition ``t ≤ T`` (a datetime
    range on the key), plus ``undated_weight`` times ``t > T``; the key's formula default is
    ``T`` (decay 1, then multiplied by 0 through the emptiness conditions: an undated point
    weighs exactly ``undated_weight``).

    ``now``: ``T`` as an ISO 8601 string with offset; ``half_life``: ``τ`` in days (> 0);
    ``undated_weight`` in ``[0, 1]``. Built once when a search is compiled (all three
    checked); each query sets its ``T`` with :meth:`at`, which checks ``T`` only.
    """

    now: str
    half_life: float
    undated_weight: float

    def __post_init__(self) -> None:
        _check_now(self.now)
        tau = float(self.half_life)
        if not math.isfinite(tau) or tau <= 0:
            raise ValueError(f"freshness formula: half_life: expected a positive finite "
                             f"number, got {self.half_life!r}")
        w = float(self.undated_weight)
        if not (0.0 <= w <= 1.0):
            raise ValueError(f"freshness formula: undated_weight: expected a number in [0, 1], "
                             f"got {self.undated_weight!r}")

    def at(self, now: str) -> FreshnessFormula:
        """This formula at the evaluation time ``now`` (checked); ``τ`` and the undated
        weight, checked when this one was built, are not checked again."""
        _check_now(now)
        out = copy.copy(self)
        object.__setattr__(out, "now", now)
        return out

    @property
    def instant(self) -> datetime:
        """``T`` as an aware ``datetime`` (``now`` was checked to parse with its offset)."""
        return datetime.fromisoformat(self.now.replace("Z", "+00:00"))

    @property
    def scale_seconds(self) -> float:
        """``τ`` in seconds (the engines measure datetimes in seconds)."""
        return float(self.half_life) * 86_400.0


@dataclass(frozen=True)
class CredibilityFormula:
    """The learned-credibility factor of :data:`CREDIBILITY_FORMULA`, backend-neutral.

    ``λ = floor + (1 − floor) · p`` (:class:`credrank.stages.credibility.
    LearnedCredibilityPrior`), ``p`` the number in the payload field ``field`` of a point
    whose ``field_key`` payload is ``key`` (the model that computed it,
    :mod:`credrank.index.scoring`), else ``neutral`` — so a point scored by another model, or
    not at all, weighs ``floor + (1 − floor)·neutral`` (the formula default of ``field`` is
    ``neutral`` too: an absent field never fails the query). The stage pushes the factor
    down only when every point holds a score of ``key`` or when its missing-score policy is
    ``neutral``, so the engine and the Python path agree.
    """

    key: str
    floor: float
    neutral: float = 0.5
    field: str = "credibility"

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"credibility formula: key: expected a non-empty string, "
                             f"got {self.key!r}")
        for name in ("floor", "neutral"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"credibility formula: {name}: expected a number in [0, 1], "
                                 f"got {value!r}")
        if not isinstance(self.field, str) or not self.field:
            raise ValueError(f"credibility formula: field: expected a payload field name, "
                             f"got {self.field!r}")

    @property
    def key_field(self) -> str:
        """The payload field holding the key of the model that computed ``field``."""
        return f"{self.field}_key"

    @property
    def fields(self) -> tuple[str, str]:
        """The payload fields the factor reads (a search returns them to re-attach it)."""
        return (self.field, self.key_field)


@runtime_checkable
class FormulaScoring(Protocol):
    """The optional capability: score :data:`FORMULA` inside the engine.

    ``formula_supported`` may be ``False`` where the class has the method but this installation
    cannot run it (e.g. a ``qdrant-client`` older than formula queries).
    """

    formula_supported: bool

    def search_formula(self, query: str, query_vector: np.ndarray, fetch_k: int, top_k: int,
                       priors: Mapping[str, float], *, with_vectors: bool = False,
                       exact: bool = False, with_text: bool = False,
                       freshness: FreshnessFormula | None = None,
                       fields: Sequence[str] | None = None,
                       credibility: CredibilityFormula | None = None) -> Candidates:
        """Prefetch ``fetch_k`` nearest, rescore by :data:`FORMULA` (× the freshness factor
        :data:`FRESHNESS_FORMULA` with ``freshness``, × the learned-credibility factor
        :data:`CREDIBILITY_FORMULA` with ``credibility``), return the ``top_k``.

        The pool is the index's global ``fetch_k`` nearest on every backend, however many
        shards hold it — the pool the Python path reranks — so both rank alike (a sharded
        backend must not rescore each shard's own nearest:
        :meth:`credrank.index.qdrant_server.QdrantServerIndex.search_formula`).

        ``fields``: the payload fields returned (``doc_id`` always; e.g.
        :data:`~credrank.index.payload.HIT_FIELDS`); ``None`` returns
        :func:`~credrank.index.payload.returned_fields` of ``with_text``, which ``fields``
        replaces."""
        ...


def formula_defaults(freshness: FreshnessFormula | None,
                     credibility: CredibilityFormula | None) -> dict[str, Any]:
    """The formula's payload defaults, one table for both engine backends: a point without a
    date field of :data:`FRESHNESS_FIELDS` reads it as ``freshness.now``, a point without the
    credibility score reads ``credibility.neutral`` (``p₀``); empty when neither term is in the
    formula."""
    defaults: dict[str, Any] = {}
    if freshness is not None:
        defaults.update({name: freshness.now for name in FRESHNESS_FIELDS})
    if credibility is not None:
        defaults[credibility.field] = credibility.neutral
    return defaults


def formula_fields(fields: Sequence[str] | None, with_text: bool) -> list[str]:
    """The payload fields a formula search returns: ``fields`` (with ``doc_id`` first, each
    once), or :func:`~credrank.index.payload.returned_fields` of ``with_text`` when ``fields``
    is ``None``."""
    if fields is None:
        return returned_fields(with_text)
    if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
        raise ValueError(f"fields: expected a sequence of payload field names, got {fields!r}")
    return list(dict.fromkeys(["doc_id", *fields]))


def formula_unavailable(store: object) -> str | None:
    """Why ``store`` cannot score :data:`FORMULA` in its engine (pushdown), or ``None`` when it
    can: a store without the capability, or one holding documents split into passages (the
    engine's formula ranks passages, and a document's score is its best passage's — MaxP,
    :mod:`credrank.index.passages` — computed on the Python path over the pool of documents)."""
    if not (isinstance(store, FormulaScoring) and bool(store.formula_supported)):
        return "cannot score formulas in its engine"
    if bool(getattr(getattr(store, "manifest", None), "split", False)):
        return ("holds documents split into passages (the engine's formula ranks passages; a "
                "document's best passage is found on the Python path)")
    return None


def supports_formula(store: object) -> bool:
    """Whether ``store`` can score :data:`FORMULA` in its engine (pushdown):
    :func:`formula_unavailable` has no objection."""
    return formula_unavailable(store) is None
