"""Source-reliability priors λ(s) and the stage that attaches them (seed 004).

Seed 004 scores ``score_SA(q, d) = sim(q, d) × λ(s_d)`` with a fixed prior per source type,
set from health-domain assumptions (0.95 peer-reviewed … 0.30 AI-generated). The presets:

* ``current`` — the seed's health-domain values (table below);
* ``compressed`` and ``aggressive`` — the same ordering with less or more spread between high and
  low priors, made by :func:`disperse` with γ = 0.5 and γ = 1.5.

A prior file (TOML or YAML) gives ``{source_type: value}`` under a ``priors`` table (or at the
top level), optionally ``name`` and ``base = "current"`` to fill the types it leaves out. Every
value must be in (0, 1]; no other key is accepted (:data:`PRIOR_FILE_SCHEMA`). YAML aliases are
refused (:func:`read_prior_file`). A document's prior comes from its provenance-derived
``source_type`` (never from its text); with ``use_domain_scores`` a per-domain score from a
user table replaces the type prior.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.errors import FileFormatError
from credrank.core.pipeline import BuildContext, FormulaTerm, Stage
from credrank.core.schema import Field, Flag, MapOf, Number, Table, Text
from credrank.core.structured import read_structured
from credrank.core.validation import (
    check_bool,
    check_choice,
    check_probability,
    check_real,
    check_str,
    is_number,
)
from credrank.documents.schema import SOURCE_TYPES

#: seed 004's health-domain priors; the intermediate types and ``unknown`` are our choice
CURRENT: dict[str, float] = {
    "peer_reviewed": 0.95,
    "government": 0.90,
    "established_news": 0.80,
    "blog": 0.50,
    "user_generated": 0.40,
    "ai_generated": 0.30,
    "unknown": 0.50,
}

#: dispersion factors of the named presets (γ < 1 compresses, γ > 1 spreads)
PRESET_DISPERSION: dict[str, float] = {"compressed": 0.5, "current": 1.0, "aggressive": 1.5}

_EPS = 1e-6


def _logit(p: float) -> float:
    p = min(max(p, _EPS), 1 - _EPS)
    return math.log(p / (1 - p))


def disperse(values: Mapping[str, float], gamma: float) -> dict[str, float]:
    """Scale the spread of a prior table in logit space around its mean.

    ``λ'_s = σ(c + γ·(logit λ_s − c))`` with ``c = logit(mean_s λ_s)`` over the six typed sources
    (``unknown`` excluded from the mean, but transformed too). γ = 1 returns the table, γ = 0
    makes all priors equal (no reweighting), γ > 1 spreads them; the order of the types is kept
    and every value stays in (0, 1). Used for the presets and the continuous sensitivity sweep
    of seed 004 ("the gain is driven by the dispersion between high and low priors").
    """
    gamma = check_real("dispersion gamma", gamma, 0.0, math.inf)
    typed = [v for k, v in values.items() if k != "unknown"] or list(values.values())
    centre = _logit(float(np.mean(typed)))
    out = {}
    for key, value in values.items():
        z = centre + gamma * (_logit(value) - centre)
        out[key] = round(1.0 / (1.0 + math.exp(-z)), 6)
    return out


@dataclass(frozen=True)
class PriorTable:
    """A prior per source type; ``values`` covers every type of ``SOURCE_TYPES``."""

    name: str
    values: Mapping[str, float]

    def __post_init__(self) -> None:
        for key, value in self.values.items():
            check_choice(f"prior table {self.name!r}: source type", key, SOURCE_TYPES)
            check_probability(f"prior table {self.name!r}: prior for {key!r}", value,
                              open_low=True)
        missing = [t for t in SOURCE_TYPES if t not in self.values]
        if missing:
            raise ValueError(f"prior table {self.name!r}: missing source types {missing} "
                             "(or set base = \"current\" to fill them)")

    def __getitem__(self, source_type: str) -> float:
        return float(self.values.get(source_type, self.values["unknown"]))

    def lookup(self, source_types: np.ndarray) -> np.ndarray:
        """Vectorised λ(s) over a column of source types (None/unlisted → ``unknown``)."""
        table, default = self.values, float(self.values["unknown"])
        return np.array([table.get(t, default) if isinstance(t, str) else default
                         for t in source_types], dtype=np.float64)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "values": dict(self.values)}


def preset(name: str) -> PriorTable:
    """One of the named presets ``compressed``, ``current``, ``aggressive``."""
    if name not in PRESET_DISPERSION:
        raise ValueError(f"priors: expected a preset ({', '.join(PRESET_DISPERSION)}) or a "
                         f"TOML/YAML file, got {name!r}")
    return PriorTable(name, disperse(CURRENT, PRESET_DISPERSION[name]))


class PriorFileError(FileFormatError):
    """A prior file that cannot be read or does not validate; the message names the file and
    the key path."""


#: a prior value: in (0, 1]
_PRIOR = Number(0, 1, open_low=True)
_HEAD: dict[str, Field] = {
    "name": Field(Text(), required=False),
    "base": Field(Text(choices=tuple(PRESET_DISPERSION)), required=False),
}
#: a prior file with a ``[priors]`` table: ``{source_type: prior}`` (plus ``name``, ``base``)
PRIOR_FILE_SCHEMA = Table({
    **_HEAD,
    "priors": Field(MapOf(_PRIOR, key=Text(choices=SOURCE_TYPES))),
}, what="a table of source_type = prior (name, base, [priors])")
#: a prior file with the priors at the top level
FLAT_PRIOR_FILE_SCHEMA = Table({
    **_HEAD,
    **{t: Field(_PRIOR, required=False) for t in SOURCE_TYPES},
}, what="a table of source_type = prior (name, base, [priors])")


def read_prior_file(path: str | Path) -> PriorTable:
    """The :class:`PriorTable` of a TOML / YAML prior file (module docstring).

    Read by :func:`credrank.core.structured.read_structured` (UTF-8 with a byte-order mark
    accepted; bounded size, nesting and number length; YAML **without aliases**, so a few
    hundred bytes of nested aliases cannot expand to gigabytes), checked against
    :data:`PRIOR_FILE_SCHEMA` (with a ``priors`` table) or :data:`FLAT_PRIOR_FILE_SCHEMA`;
    :class:`PriorFileError` naming the file and the key path for anything wrong."""
    data = read_structured(path, what="prior file", formats=("toml", "yaml"),
                           error=PriorFileError)
    if data is None:  # an empty YAML file
        raise PriorFileError(f"{path}: expected a table of source_type = prior, got an empty "
                             "file")
    schema = (PRIOR_FILE_SCHEMA if isinstance(data, dict) and "priors" in data
              else FLAT_PRIOR_FILE_SCHEMA)
    doc = schema.check(data, str(path), error=PriorFileError)
    values = doc.get("priors", {k: v for k, v in doc.items() if k in SOURCE_TYPES})
    merged = dict(preset(doc["base"]).values) if "base" in doc else {}
    merged.update(values)
    missing = [t for t in SOURCE_TYPES if t not in merged]
    if missing:
        where = "priors" if "priors" in doc else "(top level)"
        raise PriorFileError(f"{path}: {where}: expected a prior for every source type, "
                             f"missing source types {missing} (or set base = \"current\" to "
                             "fill them)")
    return PriorTable(doc.get("name", Path(path).stem), merged)


def load_priors(spec: str | Path) -> PriorTable:
    """A preset by name, or a TOML / YAML prior file by path (:func:`read_prior_file`)."""
    if isinstance(spec, str) and spec in PRESET_DISPERSION:
        return preset(spec)
    if not Path(spec).exists():
        raise ValueError(f"priors: {str(spec)!r} is neither a preset "
                         f"({', '.join(PRESET_DISPERSION)}) nor an existing file")
    return read_prior_file(spec)


class SourcePrior(Stage):
    """Adds the factor ``prior`` = λ(s_d) from each candidate's ``source_type`` (seed 004).

    With ``use_domain_scores=True`` a document whose host matched a ``domain,score`` user table
    at index time (meta column ``domain_score``) gets that score, clipped to [floor, 1], instead
    of its type prior.
    """

    def __init__(self, priors: PriorTable | str = "current", *, use_domain_scores: bool = False,
                 floor: float = 0.01, name: str = "prior"):
        self.priors = load_priors(priors) if isinstance(priors, str | Path) else priors
        if not isinstance(self.priors, PriorTable):
            raise ValueError(f"priors: expected a PriorTable, a preset name or a prior file, "
                             f"got {type(priors).__name__}")
        self.use_domain_scores = check_bool("use_domain_scores", use_domain_scores)
        self.floor = check_probability("floor", floor)
        self.name = check_str("name", name)

    SPEC = Table({
        "priors": Field(Text(what="a preset (compressed, current, aggressive) or a prior file"),
                        default="current"),
        "use_domain_scores": Field(Flag(), default=False),
        "floor": Field(Number(0.0, 1.0), default=0.01),
    })

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> SourcePrior:
        """``priors`` is a preset name, else a prior file (a registered name or a path)."""
        priors = params["priors"]
        if priors not in PRESET_DISPERSION:
            priors = ctx.path(priors, "priors", "prior file")
        return cls(priors, use_domain_scores=params["use_domain_scores"],
                   floor=params["floor"])

    def formula_term(self) -> FormulaTerm | str:
        """The engine scores the type prior (``λ_t × [source_type = t]``), not the per-host
        domain scores."""
        if self.use_domain_scores:
            return "with use_domain_scores needs the Python path (per-host domain scores)"
        return FormulaTerm("prior", self)

    def transform(self, batch: Candidates) -> Candidates:
        values = self.priors.lookup(batch.column("source_type"))
        if self.use_domain_scores:
            scores = batch.column("domain_score")
            has = np.array([is_number(s) for s in scores], dtype=bool)
            if has.any():
                values[has] = np.clip(np.array([float(s) for s in scores[has]]), self.floor, 1.0)
        return batch.with_factor(self.name, values, low=0.0, high=1.0)

    def config(self) -> dict[str, Any]:
        return {"priors": self.priors.as_dict(), "use_domain_scores": self.use_domain_scores}
