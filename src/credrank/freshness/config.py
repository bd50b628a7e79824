"""Half-lives per source type, host and claim class, and the opt-out for time-persistent
claims (chapter 35.7: "revisit claims according to domain change rates rather than one
universal half-life"; "a historical fact need not decay").

A freshness config file (TOML, or YAML with the same keys)::

    half_life = "365d"                 # the default τ (required)

    [source_type]                      # τ per source type (provenance taxonomy)
    established_news = "30d"
    peer_reviewed = "5y"

    [host]                             # τ per host (exact host, as in the ``host`` column)
    "www.cdc.gov" = "2y"

    [claim_class]                      # τ per claim class (meta column ``claim_class``)
    statistic = "1y"
    breaking = "7d"

    [no_decay]                         # time-persistent claims: weight 1, never decayed
    claim_class = ["historical", "definition"]
    field = "persistent"               # a boolean meta column; true = no decay (default name)

**Precedence** (first that applies): document opt-out (``field`` true) > claim class in
``no_decay.claim_class`` > ``[claim_class]`` τ > ``[host]`` τ > ``[source_type]`` τ >
``half_life``. Durations: ``Nd`` days, ``Nw`` weeks (7 d), ``Ny`` years (**365.25 d**),
``Nh`` hours (1/24 d), or a bare number of days; 0 or negative is refused
(:func:`~credrank.freshness.decay.check_half_life`). Errors name the file and the key.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from credrank.freshness.decay import check_half_life

#: days per unit of a duration string (a year is the Julian year, 365.25 days)
UNITS = {"h": 1.0 / 24.0, "d": 1.0, "w": 7.0, "y": 365.25}
#: the boolean meta column that marks a time-persistent document (default of ``no_decay.field``)
PERSISTENT_FIELD = "persistent"
#: the meta column that names a document's claim class
CLAIM_CLASS_FIELD = "claim_class"
_DURATION = re.compile(r"^\s*([+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([hdwy]?)\s*$")
_TABLES = ("source_type", "host", "claim_class")


def parse_duration(value: Any, name: str = "half_life") -> float:
    """A half-life in days from ``365d`` / ``52w`` / ``1y`` (365.25 d) / ``12h`` / a number of
    days; ``ValueError`` naming ``name`` for anything else, 0 or a negative value."""
    if isinstance(value, bool):
        raise ValueError(f"{name}: expected a duration such as 365d, 52w, 1y or 12h, "
                         f"got {value!r}")
    if isinstance(value, (int, float)):
        return check_half_life(value, name)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"{name}: expected a duration such as 365d, 52w, 1y or 12h, "
                         f"got {value!r}")
    number, unit = float(match.group(1)), match.group(2) or "d"
    return check_half_life(number * UNITS[unit], f"{name} ({value!r})")


@dataclass(frozen=True)
class FreshnessConfig:
    """Half-lives (days) with the precedence of the module docstring.

    ``half_life`` the default τ; ``source_type`` / ``host`` / ``claim_class`` map a value to
    its τ; ``no_decay_classes`` are claim classes that never decay; ``no_decay_field`` the
    boolean meta column of a document-level opt-out (``None``: no such column)."""

    half_life: float
    source_type: Mapping[str, float] = field(default_factory=dict)
    host: Mapping[str, float] = field(default_factory=dict)
    claim_class: Mapping[str, float] = field(default_factory=dict)
    no_decay_classes: frozenset[str] = frozenset()
    no_decay_field: str | None = PERSISTENT_FIELD
    path: str | None = None

    def __post_init__(self) -> None:
        where = f"{self.path}: " if self.path else ""
        object.__setattr__(self, "half_life", check_half_life(self.half_life,
                                                              f"{where}half_life"))
        for table in _TABLES:
            checked = {str(k): check_half_life(v, f"{where}{table}.{k}")
                       for k, v in dict(getattr(self, table)).items()}
            object.__setattr__(self, table, checked)
        object.__setattr__(self, "no_decay_classes", frozenset(self.no_decay_classes))

    @property
    def single(self) -> bool:
        """Whether every document gets the one default τ (no table, no opt-out)."""
        return not (self.source_type or self.host or self.claim_class
                    or self.no_decay_classes or self.no_decay_field)

    def half_lives(self, source_types: Sequence[Any], hosts: Sequence[Any],
                   claim_classes: Sequence[Any], persistent: Sequence[Any]) -> np.ndarray:
        """τ per document (days), ``inf`` for a time-persistent one (no decay: weight 1).

        The four sequences are the batch's columns (``None`` where unknown); ``persistent``
        counts as an opt-out only when it is ``True`` (or a string ``"true"``)."""
        n = len(source_types)
        out = np.full(n, self.half_life)
        for i in range(n):
            if self.no_decay_field is not None and _truthy(persistent[i]):
                out[i] = math.inf
                continue
            cls, host, stype = claim_classes[i], hosts[i], source_types[i]
            if cls is not None and str(cls) in self.no_decay_classes:
                out[i] = math.inf
            elif cls is not None and str(cls) in self.claim_class:
                out[i] = self.claim_class[str(cls)]
            elif host is not None and str(host) in self.host:
                out[i] = self.host[str(host)]
            elif stype is not None and str(stype) in self.source_type:
                out[i] = self.source_type[str(stype)]
        return out

    def as_dict(self) -> dict[str, Any]:
        """JSON form (``--json`` settings, ``info``)."""
        return {"half_life_days": self.half_life, "source_type": dict(self.source_type),
                "host": dict(self.host), "claim_class": dict(self.claim_class),
                "no_decay": {"claim_class": sorted(self.no_decay_classes),
                             "field": self.no_decay_field},
                "precedence": "document opt-out > no-decay claim class > claim class > host > "
                              "source type > default",
                **({"path": self.path} if self.path else {})}


def _truthy(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return isinstance(value, str) and value.strip().lower() == "true"


def load_freshness_config(path: str | Path) -> FreshnessConfig:
    """A :class:`FreshnessConfig` from a ``.toml`` / ``.yaml`` / ``.yml`` file;
    ``ValueError`` naming the file and the key for anything wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the freshness config: {exc.strerror or exc}"
                         ) from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        else:
            raise ValueError(f"{path}: expected a .toml, .yaml or .yml freshness config")
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not valid {suffix[1:].upper()}: {exc}") from None
    return config_from_dict(data, str(path))


def config_from_dict(data: Any, where: str = "freshness config") -> FreshnessConfig:
    """The mapping of a config file (see the module docstring) as a :class:`FreshnessConfig`."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a table of keys, got {type(data).__name__}")
    known = {"half_life", *_TABLES, "no_decay"}
    unknown = sorted(set(map(str, data)) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; expected some of "
                         f"{', '.join(sorted(known))}")
    if "half_life" not in data:
        raise ValueError(f"{where}: key 'half_life' missing (the default half-life, e.g. "
                         "\"365d\")")
    tables: dict[str, dict[str, float]] = {}
    for table in _TABLES:
        raw = data.get(table) or {}
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where}: key {table!r}: expected a table of name = duration, "
                             f"got {raw!r}")
        tables[table] = {str(k): parse_duration(v, f"{where}: {table}.{k}")
                         for k, v in raw.items()}
    no_decay = data.get("no_decay") or {}
    if not isinstance(no_decay, Mapping):
        raise ValueError(f"{where}: key 'no_decay': expected a table with claim_class and/or "
                         f"field, got {no_decay!r}")
    bad = sorted(set(map(str, no_decay)) - {"claim_class", "field"})
    if bad:
        raise ValueError(f"{where}: no_decay: unknown key(s) {', '.join(bad)}; expected "
                         "claim_class, field")
    classes = no_decay.get("claim_class", [])
    if isinstance(classes, str) or not isinstance(classes, Sequence) or not all(
            isinstance(c, str) for c in classes):
        raise ValueError(f"{where}: no_decay.claim_class: expected a list of class names, "
                         f"got {classes!r}")
    field_name = no_decay.get("field", PERSISTENT_FIELD)
    if field_name is not None and (not isinstance(field_name, str) or not field_name.strip()):
        raise ValueError(f"{where}: no_decay.field: expected a column name, got "
                         f"{field_name!r}")
    return FreshnessConfig(half_life=parse_duration(data["half_life"], f"{where}: half_life"),
                           source_type=tables["source_type"], host=tables["host"],
                           claim_class=tables["claim_class"],
                           no_decay_classes=frozenset(classes), no_decay_field=field_name,
                           path=None if where == "freshness config" else where)
