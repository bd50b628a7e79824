"""The trust profile of chapter 35.1: six dimensions across three stages, with hard gates.

Chapter 35.1 ("Six aspects across three stages") tracks **robustness, privacy, fairness,
transparency, factuality and accountability** across **retrieval, generation and checking**,
asks for "defined component metrics, missing entries, uncertainty and stage tags", and keeps
hard requirements as separate failure gates "rather than averaging incomparable raw scores".
A profile is therefore six entries in that fixed order plus a list of gates. A TOML file::

    name = "model-a"                          # optional: the system the profile describes
    description = "…"                         # optional

    [[entry]]
    dimension = "robustness"                  # one of DIMENSIONS, each exactly once
    stages = ["retrieval"]                    # optional; default per Figure 35.1 (STAGE_DEFAULTS)
    metric = "accuracy under one injected misinformation document"   # what was measured
    unit = "fraction of questions"
    judge = "exact match against gold answers"                        # who/what scored it
    denominator = "300 questions"
    value = 0.80
    interval = [0.75, 0.85]                   # optional: [lo, hi], lo ≤ value ≤ hi
    scale = [0.0, 1.0]                        # the declared [min, max]; value must lie in it
    higher_is_better = true
    command = "credrank bench …"              # optional provenance
    data = "…"                                # optional
    settings = "…"                            # optional
    measured_on = "…"                         # optional: the system measured, when it is not
                                              #   the profile's own (a bench's row …)
    reads_labels = true                       # optional: the measure read evaluation labels

    [[entry]]
    dimension = "privacy"
    status = "not measured"                   # never a 0 in place of a missing measurement
    reason = "no leakage test set yet"

    [[gate]]
    name = "privacy-floor"
    dimension = "privacy"
    op = ">="                                 # one of <=, >=, ==, <, >
    threshold = 0.9                           # compared with the RAW value, not r
    reason = "a disqualifying exposure cannot be averaged away"

A measured entry must state ``value``, ``scale``, ``higher_is_better``, ``metric``, ``unit``,
``judge`` and ``denominator`` (the chapter: "its judge and denominator matter too"). A
not-measured entry must state a ``reason`` and may not carry a ``value`` or ``interval``; it may
describe the planned metric. Every dimension must appear exactly once.

**Normalisation** (the radar value, :attr:`Entry.normalised`): for a declared scale
``[lo, hi]`` (``lo < hi``) and raw value ``v`` in it, ``r = (v − lo) / (hi − lo)`` when higher
is better and ``r = (hi − v) / (hi − lo)`` when lower is better, so ``r ∈ [0, 1]`` and 1 is
always the good end. It is a linear rescaling of a *declared* range, not a calibration: two
axes with r = 0.7 are not thereby equally good, and r is not a probability.

**Gates** (:func:`check_gates`) compare the raw value with the threshold using the declared
operator (``==`` is exact float equality). A gate on a dimension that is not measured fails
with outcome ``"not measured"``; any failing gate fails the audit whatever the other scores.
A gate's explanation shows the value and the threshold with the digits that tell them apart
(:func:`gate_texts`): ``0.3000000001; required > 0.3``, never ``0.3; required > 0.3``.

A file is read by :func:`credrank.core.structured.read_structured` (UTF-8 with a UTF-8
byte-order mark accepted, bounded size, nesting and number length) and checked against the
declared schemas :data:`PROFILE_SCHEMA` / :data:`ENTRY_SCHEMA` / :data:`GATE_SCHEMA` (types,
ranges, unknown keys) before the semantic checks above. Errors are :class:`AuditInputError`
(a ``ValueError``) naming the file and the key path (``entry[2].value``, ``gate[0].op``), with
what was expected and what was found.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal

from credrank.core.files import atomic_write_text
from credrank.core.schema import Field, Flag, ListOf, Number, Table, Text, got
from credrank.core.structured import read_structured

__all__ = [
    "DIMENSIONS",
    "ENTRY_SCHEMA",
    "EXAMPLE_PROFILES",
    "GATE_OPS",
    "GATE_SCHEMA",
    "MEASURED",
    "NOT_MEASURED",
    "PROFILE_SCHEMA",
    "STAGES",
    "STAGE_DEFAULTS",
    "AuditInputError",
    "Entry",
    "Gate",
    "GateResult",
    "TrustProfile",
    "audit_passed",
    "check_gates",
    "example_profile_path",
    "gate_document",
    "gate_texts",
    "labels_document",
    "load_profile",
    "normalise",
    "number_text",
    "parse_profile",
    "profile_document",
    "profile_to_dict",
    "profile_to_json",
    "profile_to_toml",
    "write_profile",
]


class AuditInputError(ValueError):
    """A trust profile that cannot be read or does not validate; the message names the file,
    the entry or gate, and the key."""


#: the six dimensions of chapter 35.1, in the fixed axis order of every profile and radar
DIMENSIONS: tuple[str, ...] = ("robustness", "privacy", "fairness", "transparency",
                               "factuality", "accountability")
#: the three pipeline stages of chapter 35.1
STAGES: tuple[str, ...] = ("retrieval", "generation", "checking")
#: Figure 35.1's starting checkpoints: operational starting points, not exclusive ownership
#: or a causal diagnosis (a profile may override them per entry)
STAGE_DEFAULTS: dict[str, tuple[str, ...]] = {
    "robustness": ("retrieval",),
    "privacy": ("retrieval",),
    "fairness": ("generation",),
    "transparency": ("generation",),
    "factuality": ("checking",),
    "accountability": ("checking",),
}
MEASURED: Final = "measured"
NOT_MEASURED: Final = "not measured"
#: gate operators: text → comparison of (raw value, threshold)
GATE_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "<": operator.lt, ">": operator.gt,
}
#: profiles shipped with credrank (``credrank/audit/examples/NAME.toml``): chapter 35.1's toys
EXAMPLE_PROFILES: tuple[str, ...] = ("model_a", "model_b")

_TEXT_KEYS = ("metric", "unit", "judge", "denominator", "command", "data", "settings",
              "measured_on")
_REQUIRED_MEASURED = ("metric", "unit", "judge", "denominator", "value", "scale",
                      "higher_is_better")


def number_text(x: float) -> str:
    """``x`` short (``:g``) when that reads back as ``x``, else with every digit (``repr``):
    a gate's explanation must not round its value onto the threshold (``0.3000000001``
    shown as ``0.3`` beside ``required > 0.3 → PASS``)."""
    short = f"{x:g}"
    return short if float(short) == x else repr(float(x))


def gate_texts(value: float, threshold: float) -> tuple[str, str]:
    """``value`` and ``threshold`` as a gate's explanation shows them: six significant digits
    (``:g``), more where those would show two different numbers alike (``0.3000000001``
    against ``0.3``, never ``0.3`` beside ``required > 0.3 → PASS``)."""
    for digits in range(6, 18):
        shown = f"{value:.{digits}g}", f"{threshold:.{digits}g}"
        if (shown[0] == shown[1]) == (value == threshold):
            return shown
    return repr(float(value)), repr(float(threshold))


def normalise(value: float, scale: tuple[float, float], higher_is_better: bool) -> float:
    """The radar value of a raw ``value`` on its declared ``scale = (lo, hi)`` (chapter 35.1
    assumes "commensurately scaled scores r_i ∈ [0, 1]"; this is the declared mapping):
    ``r = (v − lo)/(hi − lo)`` if higher is better, else ``r = (hi − v)/(hi − lo)``.

    Raises ``ValueError`` when the scale is not finite with ``lo < hi`` or ``value`` lies
    outside it."""
    lo, hi = scale
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"scale: expected finite [min, max] with min < max, got {[lo, hi]}")
    if not (math.isfinite(value) and lo <= value <= hi):
        raise ValueError(f"value: expected a finite number in the scale [{lo}, {hi}], got "
                         f"{value}")
    if not math.isfinite(hi - lo):  # a scale as wide as [−1.7e308, 1.7e308]: its span
        lo, hi, value = lo / 2, hi / 2, value / 2  # overflows (r came out 0); halves do not
    r = (value - lo) / (hi - lo) if higher_is_better else (hi - value) / (hi - lo)
    return min(1.0, max(0.0, r))


@dataclass(frozen=True)
class Entry:
    """One dimension of a trust profile: a measured value with its definition, judge,
    denominator, uncertainty, declared scale, stage tags and provenance — or ``status = "not
    measured"`` with a ``reason`` (``value`` is then ``None``, never 0)."""

    dimension: str
    stages: tuple[str, ...]
    status: Literal["measured", "not measured"] = MEASURED
    reason: str = ""
    metric: str = ""
    unit: str = ""
    judge: str = ""
    denominator: str = ""
    value: float | None = None
    interval: tuple[float, float] | None = None
    scale: tuple[float, float] | None = None
    higher_is_better: bool | None = None
    command: str = ""
    data: str = ""
    settings: str = ""
    #: the system this entry measured when it is not the profile's own (``""``: the
    #: profile's system), e.g. the audit's robustness: a stress bench's row on its own data
    measured_on: str = ""
    #: whether the measure read evaluation labels (``None``: the profile does not say)
    reads_labels: bool | None = None

    @property
    def measured(self) -> bool:
        return self.status == MEASURED

    @property
    def normalised(self) -> float | None:
        """r ∈ [0, 1] (see :func:`normalise`), ``None`` when not measured."""
        if self.value is None or self.scale is None or self.higher_is_better is None:
            return None
        return normalise(self.value, self.scale, self.higher_is_better)

    @property
    def normalised_interval(self) -> tuple[float, float] | None:
        """The interval mapped like the value, as (low r, high r); ``None`` without one."""
        if self.interval is None or self.scale is None or self.higher_is_better is None:
            return None
        ends = sorted(normalise(x, self.scale, self.higher_is_better) for x in self.interval)
        return ends[0], ends[1]


@dataclass(frozen=True)
class Gate:
    """A hard requirement on one dimension's raw value: ``value op threshold``."""

    name: str
    dimension: str
    op: str
    threshold: float
    reason: str


@dataclass(frozen=True)
class GateResult:
    """A gate checked on a profile: ``outcome`` is ``"pass"``, ``"fail"`` or ``"not
    measured"`` (which fails too); ``value`` is the raw value compared (``None`` when not
    measured)."""

    gate: Gate
    outcome: Literal["pass", "fail", "not measured"]
    value: float | None
    detail: str

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"

    @property
    def label(self) -> str:
        """``PASS``, ``FAIL`` or ``FAIL (not measured)``."""
        return {"pass": "PASS", "fail": "FAIL"}.get(self.outcome, "FAIL (not measured)")


@dataclass(frozen=True)
class TrustProfile:
    """A validated trust profile: six entries in :data:`DIMENSIONS` order and the gates in
    file order. ``source`` (the file it came from) is not part of equality."""

    name: str
    description: str
    entries: tuple[Entry, ...]
    gates: tuple[Gate, ...] = ()
    source: str = field(default="<profile>", compare=False)

    def __post_init__(self) -> None:
        dims = tuple(e.dimension for e in self.entries)
        if dims != DIMENSIONS:
            raise AuditInputError(f"{self.source}: entries: expected the six dimensions in the "
                                  f"order {', '.join(DIMENSIONS)}, got {', '.join(dims)}")

    def entry(self, dimension: str) -> Entry:
        for e in self.entries:
            if e.dimension == dimension:
                return e
        raise KeyError(f"unknown dimension {dimension!r}; expected one of "
                       f"{', '.join(DIMENSIONS)}")

    @property
    def title(self) -> str:
        return self.name or self.source

    @property
    def normalised(self) -> tuple[float | None, ...]:
        """The radar values r_1 … r_6 in axis order, ``None`` for a dimension not measured."""
        return tuple(e.normalised for e in self.entries)


# ---------------------------------------------------------------- gates


def check_gates(profile: TrustProfile) -> list[GateResult]:
    """Check every gate on the raw values (chapter 35.1: keep hard requirements "independently
    visible"; "a low-risk average cannot compensate for a disqualifying exposure"). A gate on
    a dimension that is not measured fails as ``"not measured"``."""
    results = []
    for gate in profile.gates:
        entry = profile.entry(gate.dimension)
        if entry.value is None:
            results.append(GateResult(gate, "not measured", None,
                                      f"{gate.dimension} not measured — {entry.reason}"))
            continue
        ok = GATE_OPS[gate.op](entry.value, gate.threshold)
        value, threshold = gate_texts(entry.value, gate.threshold)
        detail = (f"{gate.dimension} = {value} {entry.unit}".rstrip()
                  + f"; required {gate.op} {threshold}")
        results.append(GateResult(gate, "pass" if ok else "fail", entry.value, detail))
    return results


def audit_passed(results: Sequence[GateResult]) -> bool:
    """``True`` only when every gate passed (no gates: ``True``; a not-measured gate fails)."""
    return all(r.passed for r in results)


# ---------------------------------------------------------------- parsing

_STAGE_LIST = ListOf(Text(choices=STAGES), min_len=1, unique=True)
_PAIR = ListOf(Number(), length=2)
_FREE_TEXT = Text(allow_empty=True)

#: one ``[[entry]]``: the structure only; which keys a measured / not-measured entry needs and
#: how value, interval and scale relate are checked after it (:func:`_entry`)
ENTRY_SCHEMA = Table({
    "dimension": Field(Text(choices=DIMENSIONS)),
    "stages": Field(_STAGE_LIST, required=False),
    "status": Field(Text(choices=(MEASURED, NOT_MEASURED)), default=MEASURED),
    "reason": Field(_FREE_TEXT, required=False),
    **{key: Field(_FREE_TEXT, required=False) for key in _TEXT_KEYS},
    "value": Field(Number(), required=False),
    "interval": Field(_PAIR, required=False),
    "scale": Field(_PAIR, required=False),
    "higher_is_better": Field(Flag(), required=False),
    "reads_labels": Field(Flag(), required=False),
}, what="an [[entry]] table")

#: one ``[[gate]]`` (also the ``[[gate]]`` of an audit config, :mod:`credrank.audit.run`)
GATE_SCHEMA = Table({
    "name": Field(Text()),
    "dimension": Field(Text(choices=DIMENSIONS)),
    "op": Field(Text(choices=tuple(GATE_OPS))),
    "threshold": Field(Number()),
    "reason": Field(Text()),
}, what="a [[gate]] table")

#: a trust profile document (TOML or JSON)
PROFILE_SCHEMA = Table({
    "name": Field(_FREE_TEXT, default=""),
    "description": Field(_FREE_TEXT, default=""),
    "entry": Field(ListOf(ENTRY_SCHEMA, min_len=1)),
    "gate": Field(ListOf(GATE_SCHEMA), default=[]),
}, what="a trust profile table (name, description, [[entry]], [[gate]])")


def _error(source: str, at: str, expected: str, value: Any) -> AuditInputError:
    """``AuditInputError("{source}: {at}: expected …, got …")`` (the schema's form)."""
    return AuditInputError(f"{source}: {at}: expected {expected}, got {got(value)}")


class _Absent:
    def __repr__(self) -> str:
        return "nothing (the key is missing)"


_ABSENT: Any = _Absent()


class _Shown(str):
    """A value already written for a message (an interval as ``[0.5, 3.0]``, not "a list of
    2 item(s)")."""

    def __repr__(self) -> str:
        return str(self)


def _not_measured(raw: dict[str, Any], at: str, source: str) -> dict[str, Any]:
    """The checks of a ``status = "not measured"`` entry: a reason, no value or interval."""
    for key in ("value", "interval"):
        if key in raw:
            raise _error(source, f"{at}.{key}", f"no {key} in a 'not measured' entry (missing "
                         "is not 0: drop it, or drop status)", raw[key])
    reason = raw.get("reason", _ABSENT)
    if reason is _ABSENT or not reason.strip():
        raise _error(source, f"{at}.reason", "a non-empty string (a 'not measured' entry says "
                     "why)", reason)
    return {"reason": reason.strip()}


def _measured(raw: dict[str, Any], at: str, source: str) -> dict[str, Any]:
    """The checks of a measured entry: the required keys, value in scale, interval around
    the value and inside the scale."""
    if "reason" in raw:
        raise _error(source, f"{at}.reason", "no reason in a measured entry (only a 'not "
                     "measured' entry has one)", raw["reason"])
    for key in _REQUIRED_MEASURED:
        if key not in raw:
            raise _error(source, f"{at}.{key}", f"a {key} (a measured entry states "
                         f"{', '.join(_REQUIRED_MEASURED)}; or write status = "
                         f"{NOT_MEASURED!r} with a reason)", _ABSENT)
    for key in ("metric", "unit", "judge", "denominator"):
        if not raw[key].strip():
            raise _error(source, f"{at}.{key}", "a non-empty string", raw[key])
    value, (lo, hi) = raw["value"], raw["scale"]
    shown = f"[{number_text(raw['interval'][0])}, {number_text(raw['interval'][1])}]" \
        if "interval" in raw else ""
    if not lo <= value <= hi:
        raise _error(source, f"{at}.value", f"a number in the declared scale [{lo:g}, "
                     f"{hi:g}]", value)
    out: dict[str, Any] = {"value": value}
    if "interval" in raw:
        ilo, ihi = raw["interval"]
        if ilo > ihi:
            raise _error(source, f"{at}.interval", "[lo, hi] with lo ≤ hi", _Shown(shown))
        if not ilo <= value <= ihi:
            raise _error(source, f"{at}.interval", f"an interval containing the value "
                         f"{number_text(value)}", _Shown(shown))
        if ilo < lo or ihi > hi:
            raise _error(source, f"{at}.interval", f"an interval inside the declared scale "
                         f"[{lo:g}, {hi:g}]", _Shown(shown))
        out["interval"] = (ilo, ihi)
    return out


def _entry(raw: dict[str, Any], index: int, source: str) -> Entry:
    """An entry from its schema-checked table (the semantic checks of the module docstring)."""
    at = f"entry[{index}]"
    dim, status = raw["dimension"], raw["status"]
    stages = raw.get("stages", list(STAGE_DEFAULTS[dim]))
    values: dict[str, Any] = {"dimension": dim, "status": status,
                              "stages": tuple(s for s in STAGES if s in stages)}  # canonical
    values.update({key: raw[key] for key in _TEXT_KEYS if key in raw})
    for key in ("higher_is_better", "reads_labels"):
        if key in raw:
            values[key] = raw[key]
    if "scale" in raw:
        lo, hi = raw["scale"]
        if not lo < hi:
            raise _error(source, f"{at}.scale", "[min, max] with min < max",
                         _Shown(f"[{number_text(lo)}, {number_text(hi)}]"))
        values["scale"] = (lo, hi)
    check = _not_measured if status == NOT_MEASURED else _measured
    values.update(check(raw, at, source))
    return Entry(**values)


def _gate(raw: dict[str, Any]) -> Gate:
    return Gate(name=raw["name"].strip(), dimension=raw["dimension"], op=raw["op"],
                threshold=raw["threshold"], reason=raw["reason"].strip())


def parse_profile(data: Any, source: str = "<profile>") -> TrustProfile:
    """Validate a parsed TOML/JSON document as a trust profile: :data:`PROFILE_SCHEMA` (types,
    ranges, unknown keys), then the semantic checks (every dimension once, value in scale,
    unique gate names); ``source`` names it in errors. Entries may come in any order; the
    profile holds them in :data:`DIMENSIONS` order."""
    doc = PROFILE_SCHEMA.check(data, source, error=AuditInputError)
    by_dim: dict[str, Entry] = {}
    first: dict[str, int] = {}
    for i, raw in enumerate(doc["entry"]):
        entry = _entry(raw, i, source)
        if entry.dimension in by_dim:
            raise _error(source, f"entry[{i}].dimension", f"each dimension once (already in "
                         f"entry[{first[entry.dimension]}])", entry.dimension)
        by_dim[entry.dimension], first[entry.dimension] = entry, i
    missing = [d for d in DIMENSIONS if d not in by_dim]
    if missing:
        raise AuditInputError(f"{source}: entry: expected an entry for each of the six "
                              f"dimensions, missing dimension(s) {', '.join(missing)} (write "
                              f"status = {NOT_MEASURED!r} with a reason for one not measured)")
    gates = [_gate(raw) for raw in doc["gate"]]
    names: dict[str, int] = {}
    for i, gate in enumerate(gates):
        if gate.name in names:
            raise _error(source, f"gate[{i}].name", f"a unique gate name (already gate"
                         f"[{names[gate.name]}])", gate.name)
        names[gate.name] = i
    return TrustProfile(name=doc["name"], description=doc["description"],
                        entries=tuple(by_dim[d] for d in DIMENSIONS), gates=tuple(gates),
                        source=source)


def example_profile_path(name: str) -> Path:
    """The path of a shipped example: ``model_a`` / ``model_b``, chapter 35.1's toy models."""
    if name not in EXAMPLE_PROFILES:
        raise AuditInputError(f"example profile {name!r}: expected one of "
                              f"{', '.join(EXAMPLE_PROFILES)}")
    return Path(str(resources.files("credrank.audit").joinpath("examples", f"{name}.toml")))


def load_profile(path: Path | str) -> TrustProfile:
    """Read and validate a trust profile: JSON when the name ends in ``.json``, else TOML.

    Read by :func:`credrank.core.structured.read_structured` (UTF-8, a UTF-8 byte-order mark
    accepted; nesting, size and number length bounded; NaN/Infinity refused in JSON), then
    :func:`parse_profile`; every error is an :class:`AuditInputError` naming the file."""
    fmt = "json" if str(path).lower().endswith(".json") else "toml"
    data = read_structured(path, what="trust profile", fmt=fmt, error=AuditInputError)
    return parse_profile(data, str(path))


# ---------------------------------------------------------------- writing


def profile_to_dict(profile: TrustProfile) -> dict[str, Any]:
    """The profile as the plain data :func:`parse_profile` reads (TOML/JSON layout)."""
    entries = []
    for e in profile.entries:
        row: dict[str, Any] = {"dimension": e.dimension, "stages": list(e.stages)}
        if not e.measured:
            row["status"] = NOT_MEASURED
            row["reason"] = e.reason
        for key in ("metric", "unit", "judge", "denominator"):
            if getattr(e, key):
                row[key] = getattr(e, key)
        if e.value is not None:
            row["value"] = e.value
        if e.interval is not None:
            row["interval"] = list(e.interval)
        if e.scale is not None:
            row["scale"] = list(e.scale)
        if e.higher_is_better is not None:
            row["higher_is_better"] = e.higher_is_better
        for key in ("command", "data", "settings", "measured_on"):
            if getattr(e, key):
                row[key] = getattr(e, key)
        if e.reads_labels is not None:
            row["reads_labels"] = e.reads_labels
        entries.append(row)
    out: dict[str, Any] = {}
    if profile.name:
        out["name"] = profile.name
    if profile.description:
        out["description"] = profile.description
    out["entry"] = entries
    out["gate"] = [{"name": g.name, "dimension": g.dimension, "op": g.op,
                    "threshold": g.threshold, "reason": g.reason} for g in profile.gates]
    return out


def profile_to_json(profile: TrustProfile) -> str:
    return json.dumps(profile_to_dict(profile), indent=2, ensure_ascii=False,
                      allow_nan=False) + "\n"


def _toml_string(text: str) -> str:
    # JSON string escapes (\" \\ \n \t \uXXXX …) are valid TOML basic-string escapes; TOML
    # also forbids a raw DEL
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007F")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (int, float)):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"cannot write a non-finite number {number} to TOML")
        return repr(number)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _toml_table(header: str, row: Mapping[str, Any]) -> list[str]:
    return ["", header, *(f"{key} = {_toml_value(value)}" for key, value in row.items())]


def profile_to_toml(profile: TrustProfile) -> str:
    """The profile as TOML text that :func:`load_profile` reads back to an equal profile."""
    data = profile_to_dict(profile)
    lines = [f"{key} = {_toml_string(data[key])}" for key in ("name", "description")
             if key in data]
    for row in data["entry"]:
        lines += _toml_table("[[entry]]", row)
    for row in data["gate"]:
        lines += _toml_table("[[gate]]", row)
    return "\n".join(lines).lstrip("\n") + "\n"


def write_profile(profile: TrustProfile, path: Path | str) -> Path:
    """Write the profile as JSON (name ends in ``.json``) or TOML; returns the path."""
    out = Path(path)
    text = profile_to_json(profile) if out.suffix.lower() == ".json" else profile_to_toml(profile)
    atomic_write_text(out, text)
    return out


# ---------------------------------------------------------------- --json documents


def labels_document(profile: TrustProfile) -> dict[str, Any]:
    """What a ``--json`` document says of evaluation labels: ``reads_labels`` (``true`` when a
    measured entry read labels; ``false`` when every measured entry says it did not; ``null``
    when one does not say, as in a hand-written profile) and ``labels_read_by`` (the
    dimensions whose measure read them)."""
    measured = [e for e in profile.entries if e.measured]
    by = [e.dimension for e in measured if e.reads_labels]
    said: bool | None = True if by else (
        False if all(e.reads_labels is False for e in measured) else None)
    return {"reads_labels": said, "labels_read_by": by}


def gate_document(results: Sequence[GateResult]) -> list[dict[str, Any]]:
    """Gate results as plain data."""
    return [{"name": r.gate.name, "dimension": r.gate.dimension, "op": r.gate.op,
             "threshold": r.gate.threshold, "reason": r.gate.reason, "outcome": r.outcome,
             "result": r.label, "passed": r.passed, "value": r.value, "detail": r.detail}
            for r in results]


def profile_document(profile: TrustProfile) -> dict[str, Any]:
    """The profile as plain data with the derived radar values (``normalised``, ``None`` when
    not measured) — for ``--json`` outputs."""
    entries = []
    for e in profile.entries:
        entries.append({"dimension": e.dimension, "stages": list(e.stages), "status": e.status,
                "reason": e.reason or None, "metric": e.metric, "unit": e.unit,
                "judge": e.judge, "denominator": e.denominator, "value": e.value,
                "interval": list(e.interval) if e.interval else None,
                "scale": list(e.scale) if e.scale else None,
                "higher_is_better": e.higher_is_better, "normalised": e.normalised,
                "command": e.command, "data": e.data, "settings": e.settings,
                "measured_on": e.measured_on or None, "reads_labels": e.reads_labels})
    return {"name": profile.name, "description": profile.description,
            "source": profile.source, "entries": entries,
            "gates": [{"name": g.name, "dimension": g.dimension, "op": g.op,
                       "threshold": g.threshold, "reason": g.reason} for g in profile.gates]}
