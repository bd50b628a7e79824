"""Source-reliability priors λ(s) (seed 004); the stage that attaches them is
:class:`~credrank.stages.prior.SourcePrior`.

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

from credrank.core.errors import FileFormatError
from credrank.core.schema import Field, MapOf, Number, Table, Text
from credrank.core.structured import read_structured
from credrank.core.validation import (
    check_choice,
    check_probability,
    check_real,
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
