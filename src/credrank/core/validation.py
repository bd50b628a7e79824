"""Parameter and array checks: the one place every module validates its inputs (DESIGN.md §7).

In the manner of scikit-learn's ``check_scalar``: each check returns the cleaned value or
raises, and every message has one shape, ``"{name}: expected <what>, got <value>"``, so the
caller learns which field was wrong, what was expected and what came.

Rules shared by every check:

* ``True`` and ``False`` are not numbers: every integer and real-number check rejects them
  (``bool`` is a subclass of ``int`` in Python; ``numpy.bool_`` counts as a bool too);
* NaN, ±infinity and integers beyond the float range (``10**400``) are never numbers either:
  every real-number check rejects them;
* interval ends are closed unless ``open_low`` / ``open_high`` say otherwise;
* ``error`` selects the exception type (default ``ValueError``), so a module that promises
  its own error (``StageError``, ``GeneratorError``, ``TypeError`` for a wrong type) keeps it
  while sharing the rule and the message.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Sequence
from typing import Any, NoReturn

import numpy as np

ErrorType = type[Exception]


# --------------------------------------------------------------------------------------------
# message helpers
# --------------------------------------------------------------------------------------------
def shown(value: Any) -> str:
    """``repr`` of a value for a message; numpy scalars are shown as plain Python values."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def _num(x: float) -> str:
    """An interval end as people write it: ``0``, ``0.5``, ``1e-09``, ``inf``."""
    x = float(x)
    if math.isfinite(x) and x.is_integer():
        return str(int(x))
    return repr(x)


def describe_interval(low: float = -math.inf, high: float = math.inf, *,
                      open_low: bool = False, open_high: bool = False) -> str:
    """``"in [0, 1]"``, ``"in (0, 0.5]"``, ``">= 0"``, ``"> 0"``, ``"<= 1"`` or ``""``."""
    if math.isinf(low) and math.isinf(high):
        return ""
    if math.isinf(high):
        return f"{'>' if open_low else '>='} {_num(low)}"
    if math.isinf(low):
        return f"{'<' if open_high else '<='} {_num(high)}"
    return (f"in {'(' if open_low else '['}{_num(low)}, {_num(high)}"
            f"{')' if open_high else ']'}")


def fail(name: str, expected: str, got: str, *, error: ErrorType = ValueError) -> NoReturn:
    """Raise ``error("{name}: expected {expected}, got {got}")`` (``got`` already rendered)."""
    raise error(f"{name}: expected {expected}, got {got}")


# --------------------------------------------------------------------------------------------
# scalars
# --------------------------------------------------------------------------------------------
def is_integer(value: Any) -> bool:
    """An integral number that is not a bool (``int``, ``numpy.integer``)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def is_number(value: Any) -> bool:
    """A real number that is not a bool (``int``, ``float``, numpy numbers); may be NaN/inf."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None, *,
              error: ErrorType = ValueError) -> int:
    """An integer in ``[low, high]`` (either end optional; bools rejected) as an ``int``."""
    if low is None and high is None:
        what = "an integer"
    elif high is None:
        what = f"an integer >= {low}"
    elif low is None:
        what = f"an integer <= {high}"
    else:
        what = f"an integer in [{low}, {high}]"
    if not is_integer(value) or (low is not None and value < low) or (
            high is not None and value > high):
        fail(name, what, shown(value), error=error)
    return int(value)


def check_real(name: str, value: Any, low: float = -math.inf, high: float = math.inf, *,
               open_low: bool = False, open_high: bool = False,
               error: ErrorType = ValueError) -> float:
    """A finite real number in the interval from ``low`` to ``high`` as a ``float``.

    Ends are closed unless ``open_low`` / ``open_high``; bools, NaN and ±inf are rejected.
    """
    where = describe_interval(low, high, open_low=open_low, open_high=open_high)
    what = "a finite number" if not where or where[0] in "<>" else "a number"
    what = f"{what} {where}".rstrip()
    if not is_number(value):
        fail(name, what, shown(value), error=error)
    try:
        x = float(value)
    except OverflowError:  # an integer beyond the float range is not a finite number
        fail(name, what, f"an integer of {len(str(abs(int(value))))} digits", error=error)
    lo_ok = x > low if open_low else x >= low
    hi_ok = x < high if open_high else x <= high
    if not (math.isfinite(x) and lo_ok and hi_ok):
        fail(name, what, shown(value), error=error)
    return x


def check_probability(name: str, value: Any, *, open_low: bool = False,
                      open_high: bool = False, error: ErrorType = ValueError) -> float:
    """A number in the unit interval ``[0, 1]`` (ends open on request) as a ``float``."""
    return check_real(name, value, 0.0, 1.0, open_low=open_low, open_high=open_high,
                      error=error)


def check_positive(name: str, value: Any, *, error: ErrorType = ValueError) -> float:
    """A finite number ``> 0`` as a ``float``."""
    return check_real(name, value, 0.0, math.inf, open_low=True, error=error)


def check_nonnegative(name: str, value: Any, *, error: ErrorType = ValueError) -> float:
    """A finite number ``>= 0`` as a ``float``."""
    return check_real(name, value, 0.0, math.inf, error=error)


def check_bool(name: str, value: Any, *, error: ErrorType = ValueError) -> bool:
    """``True`` or ``False`` (``numpy.bool_`` too); no truthy stand-ins such as ``1``."""
    if not isinstance(value, bool | np.bool_):
        fail(name, "True or False", shown(value), error=error)
    return bool(value)


def check_choice(name: str, value: Any, choices: Collection[Any], *,
                 error: ErrorType = ValueError) -> Any:
    """``value`` if it is one of ``choices`` (compared with ``==``), else an error listing them."""
    if not any(_same(value, c) for c in choices):
        fail(name, f"one of {', '.join(str(c) for c in choices)}", shown(value), error=error)
    return value


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, bool | np.bool_) != isinstance(b, bool | np.bool_):
        return False  # True is not the choice 1
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # e.g. an array compared with a string
        return False


def check_str(name: str, value: Any, *, allow_empty: bool = False,
              what: str | None = None, error: ErrorType = ValueError) -> str:
    """A string; unless ``allow_empty``, one with a non-blank character.

    ``what`` replaces the default description (``"a non-empty string"``) in the message, e.g.
    ``"a meta column name"``.
    """
    if what is None:
        what = "a string" if allow_empty else "a non-empty string"
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        fail(name, what, shown(value), error=error)
    return value


# --------------------------------------------------------------------------------------------
# arrays
# --------------------------------------------------------------------------------------------
def _where(arr: np.ndarray, flat: int) -> str:
    """``"row 3"`` for a 1-d array, ``"entry (1, 2)"`` otherwise."""
    if arr.ndim <= 1:
        return f"row {flat}"
    return f"entry {tuple(int(i) for i in np.unravel_index(flat, arr.shape))}"


def check_finite(name: str, values: np.ndarray, *, error: ErrorType = ValueError) -> np.ndarray:
    """``values`` unchanged if every entry is finite; else an error naming the first bad one."""
    arr = np.asarray(values)
    if arr.size and not np.all(np.isfinite(arr)):
        flat = int(np.flatnonzero(~np.isfinite(arr.reshape(-1)))[0])
        fail(name, "finite numbers", f"{shown(arr.reshape(-1)[flat])} at {_where(arr, flat)}",
             error=error)
    return values


def check_bounds(name: str, values: np.ndarray, low: float = -math.inf,
                 high: float = math.inf, *, open_low: bool = False, open_high: bool = False,
                 why: str = "", error: ErrorType = ValueError) -> np.ndarray:
    """``values`` unchanged if every entry lies in the interval; else an error naming the first
    entry outside it (``why``, when given, is appended as the reason for the bound).

    NaN lies in no interval, so it is reported too; check finiteness first for the clearer
    message.
    """
    arr = np.asarray(values, dtype=np.float64)
    if not arr.size:
        return values
    flat = arr.reshape(-1)
    ok = (flat > low if open_low else flat >= low) & (flat < high if open_high else flat <= high)
    if not np.all(ok):
        i = int(np.flatnonzero(~ok)[0])
        where = describe_interval(low, high, open_low=open_low, open_high=open_high)
        fail(name, f"values {where}", f"{shown(flat[i])} at {_where(arr, i)}"
             + (f"; {why}" if why else ""), error=error)
    return values


def _float_array(name: str, values: Any, ndim: int, error: ErrorType) -> np.ndarray:
    """``values`` as a float64 array with ``ndim`` dimensions (finiteness not checked)."""
    what = f"a {ndim}-d array of numbers"
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        fail(name, what, shown(values), error=error)
    if arr.ndim != ndim:
        fail(name, what, f"shape {arr.shape}", error=error)
    return arr


def as_vector(name: str, values: Any, *, min_len: int = 0, length: int | None = None,
              low: float = -math.inf, high: float = math.inf, open_low: bool = False,
              open_high: bool = False, error: ErrorType = ValueError) -> np.ndarray:
    """A finite 1-d float64 array (at least ``min_len`` long, exactly ``length`` when given,
    every value in the interval from ``low`` to ``high``), or an error naming ``name``."""
    arr = _float_array(name, values, 1, error)
    if length is not None and len(arr) != length:
        fail(name, f"{length} values", f"{len(arr)}", error=error)
    if len(arr) < min_len:
        fail(name, f"at least {min_len} values", f"{len(arr)}", error=error)
    check_finite(name, arr, error=error)
    return check_bounds(name, arr, low, high, open_low=open_low, open_high=open_high,
                        error=error)


def as_unit_vector(name: str, values: Any, *, length: int | None = None,
                   error: ErrorType = ValueError) -> np.ndarray:
    """A finite 1-d float64 array of values in ``[0, 1]`` (probabilities, priors, shares)."""
    return as_vector(name, values, length=length, low=0.0, high=1.0, error=error)


def as_matrix(name: str, values: Any, *, error: ErrorType = ValueError) -> np.ndarray:
    """A finite 2-d float64 array, or an error naming ``name``."""
    return check_finite(name, _float_array(name, values, 2, error), error=error)


def as_flags(name: str, values: Any, *, error: ErrorType = ValueError) -> np.ndarray:
    """A boolean array (any shape) from booleans or 0/1 numbers; anything else is an error."""
    arr = np.asarray(values)
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind in "iuf":
        ok = np.isin(arr, (0, 1))
        if not ok.all():
            flat = int(np.flatnonzero(~ok.reshape(-1))[0])
            fail(name, "boolean (0/1) flags",
                 f"{shown(arr.reshape(-1)[flat])} at {_where(arr, flat)}", error=error)
        return arr.astype(bool)
    for flat, v in enumerate(arr.reshape(-1)):  # object or string arrays: entry by entry
        if not (isinstance(v, bool | np.bool_) or (is_number(v) and v in (0, 1))):
            fail(name, "boolean (0/1) flags", f"{shown(v)} at {_where(arr, flat)}",
                 error=error)
    return arr.astype(bool)


def check_nonzero_rows(name: str, matrix: np.ndarray, *, why: str = "",
                       labels: Sequence[str] | None = None,
                       error: ErrorType = ValueError) -> np.ndarray:
    """``matrix`` unchanged if no row is all zeros (a zero vector has no direction, so its
    cosine is undefined); else an error naming the first zero row (and its label if given)."""
    m = np.asarray(matrix)
    zero = ~np.any(m != 0, axis=1) if m.ndim == 2 else np.zeros(0, dtype=bool)
    if np.any(zero):
        bad = int(np.flatnonzero(zero)[0])
        label = f" ({labels[bad]!r})" if labels is not None else ""
        fail(name, "nonzero rows" + (f" ({why})" if why else ""),
             f"a zero vector at row {bad}{label}", error=error)
    return matrix
