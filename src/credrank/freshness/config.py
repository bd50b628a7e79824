"""Half-lives per source type, host and claim class, and the opt-out for time-persistent
claims (chapter 35.7: "revisit claims according to domain change rates rather than one
universal half-life"; "a historical fact need not decay").

A freshness config file (TOML, or YAML with the same keys)::

    half_life = "365d"                 # the default τ (required)

    [source_type]                      # τ per source type (provenance taxonomy)
    established_news = "30d"
    peer_reviewed = "5y"

    [host]                             # τ per host and the hosts under it (cdc.gov: www.cdc.gov)
    "www.cdc.gov" = "2y"

    [claim_class]                      # τ per claim class (the document field claim_class)
    statistic = "1y"
    breaking = "7d"

    [no_decay]                         # time-persistent claims: weight 1, never decayed
    claim_class = ["historical", "definition"]
    field = "persistent"               # a boolean meta column; true = no decay (default name)

**Where the claim columns come from.** ``claim_class`` and ``persistent`` are declared document
fields (:mod:`credrank.documents.schema`), one rule at every door: ``credrank index`` (and
``POST /index``) reads them from a record (``--field KEY=claim_class`` maps another key) and
stores them at the payload's top level; every index search returns them as meta columns, as
it returns ``source_type`` (:data:`credrank.index.payload.CLAIM_FIELDS`; nothing of ``extra``
is read); ``credrank.rerank`` and ``POST /rerank`` take them as candidate fields, the adapters
from the metadata keys of those names or their ``fields=`` mapping
(:data:`credrank.rerank.fields.EVIDENCE_FIELDS`). ``field`` may name another column only of a
batch built by hand; no door fills it. A table that can apply to no candidate of a batch —
claim classes named where none carries a ``claim_class``, a ``field`` other than
``persistent`` that none carries — is said (:meth:`FreshnessConfig.unreached`), never
silently ignored.

**Precedence** (first that applies): document opt-out (``field`` true) > claim class in
``no_decay.claim_class`` > ``[claim_class]`` τ > ``[host]`` τ > ``[source_type]`` τ >
``half_life``. Durations: ``Nd`` days, ``Nw`` weeks (7 d), ``Ny`` years (**365.25 d**),
``Nh`` hours (1/24 d), or a bare number of days, **between one second (1/86400 d) and 1,000
years** (:func:`check_half_life_days`; 0, a negative value, a denormal such as ``1e-320`` or a
number beyond the float range is refused — the same range at every door: a spec, ``--freshness``,
a config file, HTTP).

A file is read by :func:`credrank.core.structured.read_structured` (YAML without aliases) and
checked against the declared :data:`CONFIG_SCHEMA` (unknown keys refused); errors are
:class:`FreshnessConfigError` (a ``ValueError``) naming the file and the key path
(``host.www.cdc.gov``, ``no_decay.claim_class``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.errors import FileFormatError
from credrank.core.schema import Field, ListOf, MapOf, Nullable, Spec, Table, Text, got
from credrank.core.structured import read_structured
from credrank.core.validation import is_number
from credrank.documents.schema import SOURCE_TYPES
from credrank.freshness.decay import check_half_life

#: days per unit of a duration string (a year is the Julian year, 365.25 days)
UNITS = {"h": 1.0 / 24.0, "d": 1.0, "w": 7.0, "y": 365.25}
#: the boolean meta column that marks a time-persistent document (default of ``no_decay.field``)
PERSISTENT_FIELD = "persistent"
#: the meta column that names a document's claim class
CLAIM_CLASS_FIELD = "claim_class"
#: the shortest half-life in days: one second (a shorter one zeroes every dated weight)
MIN_HALF_LIFE_DAYS = 1.0 / 86400.0
#: the longest half-life in days: 1,000 years of 365.25 d (longer is "no decay": omit the stage)
MAX_HALF_LIFE_DAYS = 1000.0 * 365.25
#: how a half-life out of range is described (every door: spec, flag, file, HTTP)
HALF_LIFE_RANGE = "between 1 second (1/86400 d) and 1000 years (365250 d)"
#: the longest duration text read (a duration is a number and a unit; this bounds the match)
MAX_DURATION_CHARS = 64
_DURATION = re.compile(r"^\s*([+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([hdwy]?)\s*$")
_TABLES = ("source_type", "host", "claim_class")


class FreshnessConfigError(FileFormatError):
    """A freshness config file that cannot be read or does not validate; the message names
    the file and the key path."""


class FreshnessConfigWarning(UserWarning):
    """Part of a freshness config applied to no candidate (:meth:`FreshnessConfig.unreached`):
    the note is also in the stage's ``info`` (``info.freshness.warnings``)."""


def _duration_days(value: Any) -> float | None:
    """The days a duration stands for (``None`` when it is not a duration); not yet checked
    for being positive and finite."""
    if isinstance(value, bool):
        return None
    if is_number(value):
        try:
            return float(value)
        except OverflowError:  # an integer beyond the float range
            return math.inf
    if not isinstance(value, str) or len(value) > MAX_DURATION_CHARS:
        return None
    match = _DURATION.match(value)
    if not match:
        return None
    return float(match.group(1)) * UNITS[match.group(2) or "d"]


def check_half_life_days(days: float, name: str = "half_life") -> float:
    """A half-life in days, positive, finite and within [:data:`MIN_HALF_LIFE_DAYS`,
    :data:`MAX_HALF_LIFE_DAYS`] (``ValueError`` naming ``name`` otherwise): shorter zeroes or
    denormalises every weight, longer is no decay at all."""
    value = check_half_life(days, name)
    if not MIN_HALF_LIFE_DAYS <= value <= MAX_HALF_LIFE_DAYS:
        raise ValueError(f"{name}: expected a half-life {HALF_LIFE_RANGE}, got {got(days)} "
                         "days")
    return value


def parse_duration(value: Any, name: str = "half_life") -> float:
    """A half-life in days from ``365d`` / ``52w`` / ``1y`` (365.25 d) / ``12h`` / a number of
    days; ``ValueError`` naming ``name`` for anything else, 0, a negative value or one beyond
    the float range (an integer of 400 digits is not a half-life)."""
    days = _duration_days(value)
    if days is None:
        raise ValueError(f"{name}: expected a duration such as 365d, 52w, 1y or 12h, "
                         f"got {got(value)}")
    if not math.isfinite(days) or days <= 0:
        raise ValueError(f"{name}: expected a positive, finite half-life, got {got(value)} (a "
                         f"half-life of 0 or below has no meaning; omit {name} to switch "
                         "decay off)")
    return check_half_life_days(days, name)


class Duration(Spec):
    """A schema for a half-life (:func:`parse_duration`), cleaned to days."""

    def describe(self) -> str:
        return ("a positive duration such as 365d, 52w, 1y or 12h (or a number of days) "
                f"{HALF_LIFE_RANGE}")

    def clean(self, value: Any, at: str, fail: Any) -> float:
        days = _duration_days(value)
        if (days is None or not math.isfinite(days)
                or not MIN_HALF_LIFE_DAYS <= days <= MAX_HALF_LIFE_DAYS):
            raise fail(at, self.describe(), value)
        return days


_HALF_LIVES = Nullable(MapOf(Duration()))
#: half-lives by source type: the keys are source types (a misspelt one, ``peer_reviewd``,
#: matched no document and was echoed as if it did)
_TYPE_HALF_LIVES = Nullable(MapOf(Duration(), key=Text(choices=SOURCE_TYPES)))
#: a freshness config document (module docstring); ``null`` tables (an empty YAML section)
#: are empty
CONFIG_SCHEMA = Table({
    "half_life": Field(Duration()),
    "source_type": Field(_TYPE_HALF_LIVES, default=None),
    "host": Field(_HALF_LIVES, default=None),
    "claim_class": Field(_HALF_LIVES, default=None),
    "no_decay": Field(Nullable(Table({
        "claim_class": Field(ListOf(Text()), default=[]),
        "field": Field(Nullable(Text()), default=PERSISTENT_FIELD),
    }, what="a table with claim_class and/or field")), default=None),
}, what="a table (half_life, source_type, host, claim_class, no_decay)")


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
        object.__setattr__(self, "half_life", check_half_life_days(self.half_life,
                                                                   f"{where}half_life"))
        for table in _TABLES:
            checked = {str(k): check_half_life_days(v, f"{where}{table}.{k}")
                       for k, v in dict(getattr(self, table)).items()}
            object.__setattr__(self, table, checked)
        object.__setattr__(self, "no_decay_classes", frozenset(self.no_decay_classes))

    @property
    def single(self) -> bool:
        """Whether every document gets the one default τ (no table, no opt-out)."""
        return not (self.source_type or self.host or self.claim_class
                    or self.no_decay_classes or self.no_decay_field)

    def _host_half_life(self, host: str) -> float | None:
        """The ``[host]`` τ of ``host`` or of the nearest domain above it (``cdc.gov``
        covers ``www.cdc.gov``, as a domain table's row does); ``None`` when none is set."""
        while True:
            if host in self.host:
                return self.host[host]
            if "." not in host:
                return None
            host = host.split(".", 1)[1]

    def half_lives(self, source_types: Sequence[Any] | np.ndarray,
                   hosts: Sequence[Any] | np.ndarray, claim_classes: Sequence[Any] | np.ndarray,
                   persistent: Sequence[Any] | np.ndarray) -> np.ndarray:
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
            elif host is not None and (tau := self._host_half_life(str(host))) is not None:
                out[i] = tau
            elif stype is not None and str(stype) in self.source_type:
                out[i] = self.source_type[str(stype)]
        return out

    def unreached(self, claim_classes: Sequence[Any] | np.ndarray,
                  persistent: Sequence[Any] | np.ndarray) -> list[str]:
        """Why part of this table applies to none of a batch's candidates (the batch's
        ``claim_class`` column and its ``no_decay.field`` column, ``None`` where a candidate
        lacks it; empty for an empty batch): claim classes named (``[claim_class]``,
        ``no_decay.claim_class``) where no candidate carries a ``claim_class``, and a ``field``
        other than ``persistent`` (which no door fills) that no candidate carries. Each note
        names the table and what fills the column; a ``field`` of ``persistent`` carried by
        none is no note (no candidate opted out)."""
        n = len(claim_classes)
        if n == 0:
            return []
        where = "freshness config"  # never its path: the service names files by name
        notes = []
        named = sorted(set(self.claim_class) | self.no_decay_classes)
        if named and all(_absent(c) for c in claim_classes):
            tables = " and ".join(t for t, used in (("[claim_class]", self.claim_class),
                                                    ("no_decay.claim_class",
                                                     self.no_decay_classes)) if used)
            notes.append(
                f"{where}: {tables} name claim classes ({', '.join(named)}), but none of the "
                f"candidates carries a {CLAIM_CLASS_FIELD}, so they applied to none; give "
                f"the documents the field {CLAIM_CLASS_FIELD} (a corpus record's, or "
                f"--field KEY={CLAIM_CLASS_FIELD}; candidates[].{CLAIM_CLASS_FIELD}; the "
                f"adapters' metadata key {CLAIM_CLASS_FIELD}) — an index built before it was "
                "a document field keeps it in extra: index the corpus again")
        field_name = self.no_decay_field
        if (field_name is not None and field_name != PERSISTENT_FIELD
                and len(persistent) == n and all(_absent(p) for p in persistent)):
            notes.append(
                f"{where}: no_decay.field {field_name!r}: none of the candidates carries "
                f"it, so none opted out; the doors fill the document field "
                f"{PERSISTENT_FIELD} (--field {field_name}={PERSISTENT_FIELD} when indexing, "
                f"candidates[].{PERSISTENT_FIELD}, fields={{'{PERSISTENT_FIELD}': "
                f"'{field_name}'}} in the adapters): drop field or name {PERSISTENT_FIELD}")
        return notes

    def as_dict(self) -> dict[str, Any]:
        """JSON form (``--json`` settings, ``info``)."""
        return {"half_life": self.half_life, "source_type": dict(self.source_type),
                "host": dict(self.host), "claim_class": dict(self.claim_class),
                "no_decay": {"claim_class": sorted(self.no_decay_classes),
                             "field": self.no_decay_field},
                "precedence": "document opt-out > no-decay claim class > claim class > host > "
                              "source type > default",
                **({"path": self.path} if self.path else {})}


def _absent(value: Any) -> bool:
    """A cell that carries nothing (``None``, ``""``)."""
    return value is None or (isinstance(value, str) and not value.strip())


def _truthy(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return isinstance(value, str) and value.strip().lower() == "true"


def load_freshness_config(path: str | Path) -> FreshnessConfig:
    """A :class:`FreshnessConfig` from a ``.toml`` / ``.yaml`` / ``.yml`` file, read by
    :func:`credrank.core.structured.read_structured` (UTF-8 with a byte-order mark accepted;
    bounded size, nesting and number length; YAML **without aliases**, so a few hundred bytes
    of nested aliases cannot expand to gigabytes); :class:`FreshnessConfigError` (a
    ``ValueError``) naming the file and the key path for anything wrong."""
    data = read_structured(path, what="freshness config", formats=("toml", "yaml"),
                           error=FreshnessConfigError)
    if data is None:  # an empty YAML file
        raise FreshnessConfigError(f"{path}: expected a freshness config table with at least "
                                   "half_life, got an empty file")
    return config_from_dict(data, str(path))


def _host_keys(hosts: Mapping[str, float], where: str) -> dict[str, float]:
    """``[host]`` keys as the ``host`` column writes hosts (lower case, IDN as punycode, no
    trailing dot: ``WWW.CDC.GOV`` is ``www.cdc.gov``), so that a key matches; a key that is
    no host name, or two keys of one host, is a :class:`FreshnessConfigError` naming it
    (``WWW.CDC.GOV`` matched nothing, silently)."""
    from credrank.provenance.hosts import parse_url

    out: dict[str, float] = {}
    for key, tau in hosts.items():
        parsed = parse_url(f"https://{key}/") if "/" not in key else None
        host = None if parsed is None else parsed.host
        if not host:
            raise FreshnessConfigError(f"{where}: host.{key}: expected a host name such as "
                                       f"www.cdc.gov, got {key!r}")
        if host in out:
            raise FreshnessConfigError(f"{where}: host.{key}: names the host {host!r} of "
                                       "another key again")
        out[host] = tau
    return out


def config_from_dict(data: Any, where: str = "freshness config") -> FreshnessConfig:
    """The mapping of a config file (see the module docstring) as a :class:`FreshnessConfig`,
    checked against :data:`CONFIG_SCHEMA`; :class:`FreshnessConfigError` naming ``where`` and
    the key path."""
    doc = CONFIG_SCHEMA.check(data, where, error=FreshnessConfigError)
    no_decay = doc["no_decay"] or {"claim_class": [], "field": PERSISTENT_FIELD}
    return FreshnessConfig(half_life=doc["half_life"],
                           source_type=doc["source_type"] or {},
                           host=_host_keys(doc["host"] or {}, where),
                           claim_class=doc["claim_class"] or {},
                           no_decay_classes=frozenset(no_decay["claim_class"]),
                           no_decay_field=no_decay["field"],
                           path=None if where == "freshness config" else where)
