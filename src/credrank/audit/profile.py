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

Errors are :class:`AuditInputError` (a ``ValueError``) naming the file, the entry or gate and
the key, with what was expected and what was found.
"""

from __future__ import annotations

import json
import math
import operator
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "DIMENSIONS",
    "EXAMPLE_PROFILES",
    "GATE_OPS",
    "MEASURED",
    "NOT_MEASURED",
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
    "load_profile",
    "normalise",
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
MEASURED = "measured"
NOT_MEASURED = "not measured"
#: gate operators: text → comparison of (raw value, threshold)
GATE_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "<": operator.lt, ">": operator.gt,
}
#: profiles shipped with credrank (``credrank/audit/examples/NAME.toml``): chapter 35.1's toys
EXAMPLE_PROFILES: tuple[str, ...] = ("model_a", "model_b")

_TOP_KEYS = ("name", "description", "entry", "gate")
_TEXT_KEYS = ("metric", "unit", "judge", "denominator", "command", "data", "settings")
_REQUIRED_MEASURED = ("metric", "unit", "judge", "denominator", "value", "scale",
                      "higher_is_better")
_ENTRY_KEYS = ("dimension", "stages", "status", "reason", *_TEXT_KEYS, "value", "interval",
               "scale", "higher_is_better")
_GATE_KEYS = ("name", "dimension", "op", "threshold", "reason")


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
        detail = (f"{gate.dimension} = {entry.value:g} {entry.unit}".rstrip()
                  + f"; required {gate.op} {gate.threshold:g}")
        results.append(GateResult(gate, "pass" if ok else "fail", entry.value, detail))
    return results


def audit_passed(results: Sequence[GateResult]) -> bool:
    """``True`` only when every gate passed (no gates: ``True``; a not-measured gate fails)."""
    return all(r.passed for r in results)


# ---------------------------------------------------------------- parsing


def _got(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _text(value: Any, at: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str) or (nonempty and not value.strip()):
        kind = "a nonempty string" if nonempty else "a string"
        raise AuditInputError(f"{at}: expected {kind}, got {_got(value)}")
    return value.strip() if nonempty else value


def _number(value: Any, at: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AuditInputError(f"{at}: expected a number, got {_got(value)}")
    if not math.isfinite(value):
        raise AuditInputError(f"{at}: expected a finite number, got {value}")
    return float(value)


def _dimension(value: Any, where: str) -> str:
    """``value`` as one of :data:`DIMENSIONS` (the ``dimension`` key of an entry or a gate)."""
    if value not in DIMENSIONS:
        raise AuditInputError(f"{where}: key 'dimension': unknown dimension {value!r}; "
                              f"expected one of {', '.join(DIMENSIONS)}")
    return str(value)


def _pair(value: Any, at: str, what: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise AuditInputError(f"{at}: expected {what} as two numbers, got {_got(value)}")
    return _number(value[0], f"{at}[0]"), _number(value[1], f"{at}[1]")


def _parse_entry(raw: Any, index: int, source: str) -> Entry:
    where = f"{source}: entry #{index + 1}"
    if not isinstance(raw, dict):
        raise AuditInputError(f"{where}: expected a table ([[entry]]), got {_got(raw)}")
    if "dimension" not in raw:
        raise AuditInputError(f"{where}: key 'dimension': missing; expected one of "
                              f"{', '.join(DIMENSIONS)}")
    dim = _dimension(raw["dimension"], where)
    where = f"{source}: entry {dim!r}"
    for key in raw:
        if key not in _ENTRY_KEYS:
            raise AuditInputError(f"{where}: unknown key {key!r}; expected one of "
                                  f"{', '.join(_ENTRY_KEYS)}")
    status = raw.get("status", MEASURED)
    if status not in (MEASURED, NOT_MEASURED):
        raise AuditInputError(f"{where}: key 'status': expected {MEASURED!r} or "
                              f"{NOT_MEASURED!r}, got {_got(status)}")
    values: dict[str, Any] = {"dimension": dim, "status": status}

    stages = raw.get("stages", list(STAGE_DEFAULTS[dim]))
    if not isinstance(stages, list) or not stages:
        raise AuditInputError(f"{where}: key 'stages': expected a nonempty list of "
                              f"{', '.join(STAGES)}, got {_got(stages)}")
    for stage in stages:
        if stage not in STAGES:
            raise AuditInputError(f"{where}: key 'stages': unknown stage {stage!r}; expected "
                                  f"one of {', '.join(STAGES)}")
    if len(set(stages)) != len(stages):
        raise AuditInputError(f"{where}: key 'stages': repeated stage in {stages!r}")
    values["stages"] = tuple(s for s in STAGES if s in stages)  # canonical stage order

    for key in _TEXT_KEYS:
        if key in raw:
            values[key] = _text(raw[key], f"{where}: key {key!r}")
    if "higher_is_better" in raw:
        hib = raw["higher_is_better"]
        if not isinstance(hib, bool):
            raise AuditInputError(f"{where}: key 'higher_is_better': expected true or false, "
                                  f"got {_got(hib)}")
        values["higher_is_better"] = hib
    if "scale" in raw:
        lo, hi = _pair(raw["scale"], f"{where}: key 'scale'", "[min, max]")
        if not lo < hi:
            raise AuditInputError(f"{where}: key 'scale': expected min < max, got [{lo}, {hi}]")
        values["scale"] = (lo, hi)

    if status == NOT_MEASURED:
        for key in ("value", "interval"):
            if key in raw:
                raise AuditInputError(
                    f"{where}: key {key!r}: a 'not measured' entry has no {key}, got "
                    f"{_got(raw[key])}; drop it (missing is not 0) or drop status")
        if "reason" not in raw:
            raise AuditInputError(f"{where}: key 'reason': missing; a 'not measured' entry "
                                  "says why")
        values["reason"] = _text(raw["reason"], f"{where}: key 'reason'", nonempty=True)
        return Entry(**values)

    if "reason" in raw:
        raise AuditInputError(f"{where}: key 'reason': only a 'not measured' entry has a "
                              f"reason (status is {MEASURED!r})")
    for key in _REQUIRED_MEASURED:
        if key not in raw:
            raise AuditInputError(f"{where}: key {key!r}: missing; a measured entry states "
                                  f"{', '.join(_REQUIRED_MEASURED)} (or write status = "
                                  f"{NOT_MEASURED!r} with a reason)")
    for key in ("metric", "unit", "judge", "denominator"):
        if not values[key].strip():
            raise AuditInputError(f"{where}: key {key!r}: expected a nonempty string, got ''")
    value = _number(raw["value"], f"{where}: key 'value'")
    lo, hi = values["scale"]
    if not lo <= value <= hi:
        raise AuditInputError(f"{where}: key 'value': expected a number in the declared scale "
                              f"[{lo:g}, {hi:g}], got {value:g}")
    values["value"] = value
    if "interval" in raw:
        ilo, ihi = _pair(raw["interval"], f"{where}: key 'interval'", "[lo, hi]")
        if ilo > ihi:
            raise AuditInputError(f"{where}: key 'interval': expected lo ≤ hi, got "
                                  f"[{ilo:g}, {ihi:g}]")
        if not ilo <= value <= ihi:
            raise AuditInputError(f"{where}: key 'interval': expected an interval containing "
                                  f"the value {value:g}, got [{ilo:g}, {ihi:g}]")
        if ilo < lo or ihi > hi:
            raise AuditInputError(f"{where}: key 'interval': expected an interval inside the "
                                  f"declared scale [{lo:g}, {hi:g}], got [{ilo:g}, {ihi:g}]")
        values["interval"] = (ilo, ihi)
    return Entry(**values)


def _parse_gate(raw: Any, index: int, source: str) -> Gate:
    where = f"{source}: gate #{index + 1}"
    if not isinstance(raw, dict):
        raise AuditInputError(f"{where}: expected a table ([[gate]]), got {_got(raw)}")
    if isinstance(raw.get("name"), str) and raw["name"].strip():
        where = f"{source}: gate {raw['name'].strip()!r}"
    for key in raw:
        if key not in _GATE_KEYS:
            raise AuditInputError(f"{where}: unknown key {key!r}; expected one of "
                                  f"{', '.join(_GATE_KEYS)}")
    for key in _GATE_KEYS:
        if key not in raw:
            raise AuditInputError(f"{where}: key {key!r}: missing; a gate states "
                                  f"{', '.join(_GATE_KEYS)}")
    name = _text(raw["name"], f"{where}: key 'name'", nonempty=True)
    dim = _dimension(raw["dimension"], where)
    op = raw["op"]
    if op not in GATE_OPS:
        raise AuditInputError(f"{where}: key 'op': expected one of {', '.join(GATE_OPS)}, got "
                              f"{_got(op)}")
    threshold = _number(raw["threshold"], f"{where}: key 'threshold'")
    reason = _text(raw["reason"], f"{where}: key 'reason'", nonempty=True)
    return Gate(name=name, dimension=dim, op=op, threshold=threshold, reason=reason)


def parse_profile(data: Any, source: str = "<profile>") -> TrustProfile:
    """Validate a parsed TOML/JSON document (a dict) as a trust profile; ``source`` names it in
    errors. Entries may come in any order; the profile holds them in :data:`DIMENSIONS` order."""
    if not isinstance(data, dict):
        raise AuditInputError(f"{source}: expected a table, got {_got(data)}")
    for key, value in data.items():
        if key not in _TOP_KEYS:
            raise AuditInputError(f"{source}: unknown top-level key {key!r}; expected one of "
                                  f"{', '.join(_TOP_KEYS)} (entry keys go under [[entry]])")
        if key in ("name", "description"):
            _text(value, f"{source}: key {key!r}")
    raw_entries = data.get("entry")
    if not isinstance(raw_entries, list) or not raw_entries:
        raise AuditInputError(f"{source}: key 'entry': expected an array of tables ([[entry]]), "
                              f"one per dimension, got {_got(raw_entries)}")
    by_dim: dict[str, Entry] = {}
    for i, raw in enumerate(raw_entries):
        entry = _parse_entry(raw, i, source)
        if entry.dimension in by_dim:
            raise AuditInputError(f"{source}: entry #{i + 1}: key 'dimension': duplicate "
                                  f"dimension {entry.dimension!r}; each dimension appears once")
        by_dim[entry.dimension] = entry
    missing = [d for d in DIMENSIONS if d not in by_dim]
    if missing:
        raise AuditInputError(f"{source}: key 'entry': missing dimension(s) "
                              f"{', '.join(missing)}; every profile states all six (write "
                              f"status = {NOT_MEASURED!r} with a reason for one not measured)")
    raw_gates = data.get("gate", [])
    if not isinstance(raw_gates, list):
        raise AuditInputError(f"{source}: key 'gate': expected an array of tables ([[gate]]), "
                              f"got {_got(raw_gates)}")
    gates = [_parse_gate(raw, i, source) for i, raw in enumerate(raw_gates)]
    names: set[str] = set()
    for gate in gates:
        if gate.name in names:
            raise AuditInputError(f"{source}: gate {gate.name!r}: key 'name': repeated; gate "
                                  "names must be unique")
        names.add(gate.name)
    return TrustProfile(name=data.get("name", ""), description=data.get("description", ""),
                        entries=tuple(by_dim[d] for d in DIMENSIONS), gates=tuple(gates),
                        source=source)


def example_profile_path(name: str) -> Path:
    """The path of a shipped example: ``model_a`` / ``model_b``, chapter 35.1's toy models."""
    if name not in EXAMPLE_PROFILES:
        raise AuditInputError(f"example profile {name!r}: expected one of "
                              f"{', '.join(EXAMPLE_PROFILES)}")
    return Path(str(resources.files("credrank.audit").joinpath("examples", f"{name}.toml")))


def load_profile(path: Path | str) -> TrustProfile:
    """Read and validate a trust profile: JSON when the name ends in ``.json``, else TOML."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AuditInputError(f"{source}: cannot read the profile: {exc}") from None
    if source.lower().endswith(".json"):
        try:
            data = json.loads(text, parse_constant=_reject_constant(source))
        except json.JSONDecodeError as exc:
            raise AuditInputError(f"{source}: invalid JSON: line {exc.lineno}: {exc.msg}") \
                from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise AuditInputError(f"{source}: invalid TOML: {exc}") from None
    return parse_profile(data, source)


def _reject_constant(source: str) -> Callable[[str], float]:
    def reject(name: str) -> float:
        raise AuditInputError(f"{source}: invalid JSON: expected finite numbers, got {name}")
    return reject


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
        for key in ("command", "data", "settings"):
            if getattr(e, key):
                row[key] = getattr(e, key)
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
    out.write_text(text, encoding="utf-8")
    return out


# ---------------------------------------------------------------- --json documents


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
                "command": e.command, "data": e.data, "settings": e.settings})
    return {"name": profile.name, "description": profile.description,
            "source": profile.source, "entries": entries,
            "gates": [{"name": g.name, "dimension": g.dimension, "op": g.op,
                       "threshold": g.threshold, "reason": g.reason} for g in profile.gates]}
