"""Declared schemas for parsed structured files: the checks of :mod:`credrank.core.validation`
addressed by key path.

Every error carries ``key_path`` (``config.groups[2]``) and ``detail`` (``expected …, got …``)
as attributes besides its message, so a front door can say it in its own vocabulary (a flag,
a JSON field).

A file format declares what it holds once, as data::

    MODEL = Table({
        "floor": Field(Number(0, 1)),
        "config": Field(Table({"groups": Field(ListOf(Text(choices=GROUPS), min_len=1)),
                               "l2": Field(Number(0))})),
        "weights": Field(ListOf(Number())),
        "note": Field(Text(), required=False, default=""),
    })
    clean = MODEL.check(data, "model.json")       # or check(data, MODEL, where, error=...)

and every violation is one error naming the file, the key path, what was expected and what
came: ``model.json: config.groups[2]: expected one of cues, url, embedding, got 'x'``.

Shared rules (those of :mod:`credrank.core.validation`): ``True``/``False`` are not numbers;
NaN, ±infinity and integers beyond the float range are not numbers; an :class:`Integer`
without bounds is still bounded to the 64-bit signed range, ``-2**63 <= n < 2**63`` (a number
a file can hold that every consumer can use); unknown keys of a :class:`Table` are refused
unless it says ``extra=True`` or gives a spec for them; a list or a table where a string is
expected is an error, never ``TypeError: unhashable type``.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from credrank.core.errors import FileFormatError
from credrank.core.validation import describe_interval, is_integer, is_number

ErrorType = type[Exception]
#: the bound of every :class:`Integer`: ``-INT_LIMIT <= n < INT_LIMIT`` (a 64-bit signed integer)
INT_LIMIT = 2**63
_MISSING: Any = object()


def got(value: Any) -> str:
    """What came, for a message: a short ``repr`` of a scalar, the kind of a container."""
    if isinstance(value, dict):
        keys = list(value)[:3]
        more = ", …" if len(value) > 3 else ""
        return ("an empty table" if not value else
                "a table with key(s) " + ", ".join(repr(str(k))[:40] for k in keys) + more)
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, datetime.date | datetime.time):  # a TOML / YAML native date or time
        return f"a {type(value).__name__} value {value.isoformat()}"
    if is_integer(value) and abs(int(value)) >= 10**20:
        return f"an integer of {len(str(abs(int(value))))} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "…"


def join(at: str, key: str | int) -> str:
    """The key path ``at`` extended by ``key`` (``a.b``, ``a[3]``)."""
    if isinstance(key, int):
        return f"{at}[{key}]"
    return f"{at}.{key}" if at else key


class SchemaError(FileFormatError):
    """A parsed value that does not follow its schema (raised when no ``error`` is given)."""


class Spec:
    """A declared expectation; :meth:`check` returns the cleaned value or raises."""

    def describe(self) -> str:  # pragma: no cover - every spec overrides it
        raise NotImplementedError

    def clean(self, value: Any, at: str, fail: Callable[[str, str, Any], Exception]) -> Any:
        raise NotImplementedError  # pragma: no cover

    def check(self, value: Any, where: str = "", *, error: ErrorType = SchemaError,
              at: str = "") -> Any:
        """``value`` cleaned, or ``error("{where}: {path}: expected …, got …")``."""
        def fail(path: str, expected: str, value: Any) -> Exception:
            prefix = ": ".join(p for p in (where, path or "(top level)") if p)
            detail = f"expected {expected}, got {got(value)}"
            exc = error(f"{prefix}: {detail}")
            try:  # for a front door that speaks another vocabulary (a flag, a JSON field)
                exc.key_path, exc.detail = path, detail  # type: ignore[attr-defined]
            except AttributeError:  # an exception type without a __dict__
                pass
            return exc

        return self.clean(value, at, fail)


@dataclass(frozen=True)
class Anything(Spec):
    """Any value (already parsed and nesting-bounded by :mod:`credrank.core.structured`)."""

    def describe(self) -> str:
        return "a value"

    def clean(self, value: Any, at: str, fail: Any) -> Any:
        return value


@dataclass(frozen=True)
class Number(Spec):
    """A finite real number in ``[low, high]`` (ends open on request) as a ``float``."""

    low: float = -math.inf
    high: float = math.inf
    open_low: bool = False
    open_high: bool = False

    def describe(self) -> str:
        where = describe_interval(self.low, self.high, open_low=self.open_low,
                                  open_high=self.open_high)
        return f"a finite number {where}".rstrip()

    def clean(self, value: Any, at: str, fail: Any) -> float:
        if not is_number(value):
            raise fail(at, self.describe(), value)
        try:
            x = float(value)
        except OverflowError:
            raise fail(at, self.describe(), value) from None
        ok = (math.isfinite(x) and (x > self.low if self.open_low else x >= self.low)
              and (x < self.high if self.open_high else x <= self.high))
        if not ok:
            raise fail(at, self.describe(), value)
        return x


@dataclass(frozen=True)
class Integer(Spec):
    """An integer (not a bool; ``2.0`` is not an integer) in ``[low, high]``, and always in
    the 64-bit signed range ``-2**63 <= n < 2**63`` (:data:`INT_LIMIT`)."""

    low: int | None = None
    high: int | None = None

    def describe(self) -> str:
        if self.low is None and self.high is None:
            return "an integer"
        if self.high is None:
            return f"an integer >= {self.low}"
        if self.low is None:
            return f"an integer <= {self.high}"
        return f"an integer in [{self.low}, {self.high}]"

    def clean(self, value: Any, at: str, fail: Any) -> int:
        if not is_integer(value):
            raise fail(at, self.describe(), value)
        if not -INT_LIMIT <= int(value) < INT_LIMIT:
            raise fail(at, f"{self.describe()} within ±2**63", value)
        if (self.low is not None and value < self.low) or (
                self.high is not None and value > self.high):
            raise fail(at, self.describe(), value)
        return int(value)


@dataclass(frozen=True)
class Text(Spec):
    """A string: non-blank unless ``allow_empty``; one of ``choices`` when given; at most
    ``max_chars`` characters when given."""

    choices: Sequence[str] | None = None
    allow_empty: bool = False
    max_chars: int | None = None
    what: str | None = None

    def describe(self) -> str:
        if self.what is not None:
            return self.what
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        return "a string" if self.allow_empty else "a non-empty string"

    def clean(self, value: Any, at: str, fail: Any) -> str:
        if not isinstance(value, str):
            raise fail(at, self.describe(), value)
        if self.choices is not None:
            if value not in self.choices:
                raise fail(at, self.describe(), value)
        elif not self.allow_empty and not value.strip():
            raise fail(at, self.describe(), value)
        if self.max_chars is not None and len(value) > self.max_chars:
            raise fail(at, f"at most {self.max_chars:,} characters", f"{len(value):,}")
        return value


@dataclass(frozen=True)
class Flag(Spec):
    """``true`` or ``false`` (no truthy stand-ins such as ``1`` or ``"yes"``)."""

    def describe(self) -> str:
        return "true or false"

    def clean(self, value: Any, at: str, fail: Any) -> bool:
        if not isinstance(value, bool):
            raise fail(at, self.describe(), value)
        return value


@dataclass(frozen=True)
class Nullable(Spec):
    """``None`` (JSON ``null``) or what ``spec`` accepts."""

    spec: Spec

    def describe(self) -> str:
        return f"{self.spec.describe()} or null"

    def clean(self, value: Any, at: str, fail: Any) -> Any:
        return None if value is None else self.spec.clean(value, at, fail)


@dataclass(frozen=True)
class AnyOf(Spec):
    """The first of ``specs`` that accepts the value (its cleaned form). When none does and
    exactly one of them took the value's shape and failed inside it (an item of a list, a key
    of a table), the error is that one's, naming the item (``selected_heads[0]: expected an
    integer >= 0, got -1``), not the list of alternatives."""

    specs: tuple[Spec, ...]

    def describe(self) -> str:
        return " or ".join(s.describe() for s in self.specs)

    def clean(self, value: Any, at: str, fail: Any) -> Any:
        inside: list[Spec] = []
        for spec in self.specs:
            try:
                return spec.clean(value, at, _probe)
            except _ProbeFailed as probe:
                if probe.args and probe.args[0] != at:
                    inside.append(spec)
        if len(inside) == 1:
            inside[0].clean(value, at, fail)  # raises, naming the item inside
        raise fail(at, self._expected(value), value)

    def _expected(self, value: Any) -> str:
        """What ``value`` was expected to be: the alternatives, less the functions when it is
        text (text meant the text form: a flag, a file or a JSON body can never hold a
        function, and "an ISO 8601 date or a function of the batch" misled a CLI or HTTP
        caller); every alternative otherwise (a library caller's ``0.5`` for a model)."""
        specs = [s for s in self.specs if not (isinstance(value, str)
                                               and isinstance(s, Function))]
        return " or ".join(s.describe() for s in specs or self.specs)


class _ProbeFailed(Exception):
    pass


def _probe(path: str, expected: str, value: Any) -> Exception:
    return _ProbeFailed(path)


@dataclass(frozen=True)
class Instance(Spec):
    """An object of ``kind`` (a class or a tuple of classes), as it came: what a constructor
    takes besides the plain values of a spec (a prior table, a policy object); ``what`` says
    it in messages."""

    kind: type | tuple[type, ...]
    what: str

    def describe(self) -> str:
        return self.what

    def clean(self, value: Any, at: str, fail: Any) -> Any:
        if not isinstance(value, self.kind):
            raise fail(at, self.describe(), value)
        return value


@dataclass(frozen=True)
class Function(Spec):
    """A callable (a plain function, a model object with ``__call__``), as it came."""

    what: str = "a function"

    def describe(self) -> str:
        return self.what

    def clean(self, value: Any, at: str, fail: Any) -> Any:
        if not callable(value):
            raise fail(at, self.describe(), value)
        return value


@dataclass(frozen=True)
class ListOf(Spec):
    """A list whose items ``item`` accepts; ``length`` or ``min_len``/``max_len`` bounds."""

    item: Spec
    min_len: int = 0
    max_len: int | None = None
    length: int | None = None
    unique: bool = False

    def describe(self) -> str:
        if self.length is not None:
            return f"a list of {self.length} item(s)"
        if self.min_len and self.max_len is not None:
            return f"a list of {self.min_len} to {self.max_len} item(s)"
        if self.min_len:
            return f"a list of at least {self.min_len} item(s)"
        if self.max_len is not None:
            return f"a list of at most {self.max_len} item(s)"
        return "a list"

    def clean(self, value: Any, at: str, fail: Any) -> list[Any]:
        if not isinstance(value, list | tuple):
            raise fail(at, self.describe(), value)
        n = len(value)
        if (self.length is not None and n != self.length) or n < self.min_len or (
                self.max_len is not None and n > self.max_len):
            raise fail(at, self.describe(), value)
        out = [self.item.clean(v, join(at, i), fail) for i, v in enumerate(value)]
        if self.unique:
            seen: set[Any] = set()
            for i, v in enumerate(out):
                key = repr(v)
                if key in seen:
                    raise fail(join(at, i), "distinct items", v)
                seen.add(key)
        return out


@dataclass(frozen=True)
class Field:
    """A key of a :class:`Table`: its ``spec``; ``required`` unless a ``default`` is given."""

    spec: Spec
    required: bool = True
    default: Any = _MISSING

    def __post_init__(self) -> None:
        if self.default is not _MISSING:
            object.__setattr__(self, "required", False)

    @property
    def has_default(self) -> bool:
        """Whether a missing key takes :attr:`default`."""
        return self.default is not _MISSING


@dataclass(frozen=True)
class Table(Spec):
    """A table (JSON object, TOML table, YAML mapping) with the declared ``fields``.

    ``extra``: ``False`` refuses unknown keys (naming them and the known ones), ``True``
    keeps them unchecked, a :class:`Spec` checks each of them. Missing optional fields take
    their ``default`` (absent from the result when there is none).
    """

    fields: Mapping[str, Field] = field(default_factory=dict)
    extra: bool | Spec = False
    what: str = "a table"

    def describe(self) -> str:
        return self.what

    def clean(self, value: Any, at: str, fail: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise fail(at, self.describe(), value)
        out: dict[str, Any] = {}
        unknown = [k for k in value if k not in self.fields]
        required = [n for n, f in self.fields.items() if f.required and n not in value]
        # a misspelt key explains a missing one, so unknown keys come first — unless no key
        # is known and several required ones are missing (another kind of object): then what
        # it lacks says more
        other_kind = len(unknown) == len(value) and len(required) >= 2
        if unknown and self.extra is False and not other_kind:
            known = ", ".join(self.fields) or "none"
            raise fail(join(at, str(unknown[0])), f"one of the known keys ({known})",
                       _Unknown(unknown[0]))
        for name, spec in self.fields.items():
            if name in value:
                out[name] = spec.spec.clean(value[name], join(at, name), fail)
            elif spec.required:
                raise fail(join(at, name), spec.spec.describe(), _Absent())
            elif spec.default is not _MISSING:
                out[name] = spec.default
        if unknown and self.extra is False:
            known = ", ".join(self.fields) or "none"
            raise fail(join(at, str(unknown[0])), f"one of the known keys ({known})",
                       _Unknown(unknown[0]))
        if isinstance(self.extra, Spec):
            for k in unknown:
                out[k] = self.extra.clean(value[k], join(at, str(k)), fail)
        elif self.extra is True:
            for k in unknown:
                out[k] = value[k]
        return out


@dataclass(frozen=True)
class MapOf(Spec):
    """A table of any keys (``key`` checks each) to values ``value`` checks."""

    value: Spec
    key: Spec = field(default_factory=lambda: Text())
    min_items: int = 0
    max_items: int | None = None

    def describe(self) -> str:
        return "a table"

    def clean(self, value: Any, at: str, fail: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise fail(at, self.describe(), value)
        if len(value) < self.min_items or (self.max_items is not None
                                          and len(value) > self.max_items):
            bound = (f"at least {self.min_items}" if self.max_items is None
                     else f"{self.min_items} to {self.max_items}")
            raise fail(at, f"a table of {bound} key(s)", value)
        out: dict[str, Any] = {}
        for k, v in value.items():
            kk = self.key.clean(k, join(at, str(k)), fail)
            out[kk] = self.value.clean(v, join(at, str(k)), fail)
        return out


class _Absent:
    def __repr__(self) -> str:
        return "nothing (the key is missing)"


class _Unknown:
    def __init__(self, key: Any = None) -> None:
        self.key = key

    def __repr__(self) -> str:
        return "an unknown key" if self.key is None else f"the unknown key {str(self.key)!r}"


def check(value: Any, spec: Spec, where: str = "", *, error: ErrorType = SchemaError) -> Any:
    """``spec.check(value, where, error=error)``."""
    return spec.check(value, where, error=error)


__all__ = ["AnyOf", "Anything", "Field", "Flag", "Function", "Instance", "Integer", "ListOf",
           "MapOf", "Nullable",
           "Number", "SchemaError", "Spec", "Table", "Text", "check", "got", "join"]
