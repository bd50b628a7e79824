"""Shared parameter checks for the selection modules (one place, clear messages)."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_vector(name: str, values: Any, *, min_len: int = 0) -> np.ndarray:
    """A finite 1-d float64 array, or a ValueError naming ``name``."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-d array of numbers, got shape {arr.shape}")
    if len(arr) < min_len:
        raise ValueError(f"{name}: expected at least {min_len} values, got {len(arr)}")
    if arr.size and not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name}: value at index {bad} is {arr[bad]!r}; expected a finite number")
    return arr


def as_matrix(name: str, values: Any) -> np.ndarray:
    """A finite 2-d float64 array, or a ValueError naming ``name``."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-d array, got shape {arr.shape}")
    if arr.size and not np.all(np.isfinite(arr)):
        i, j = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name}: entry ({i}, {j}) is {arr[i, j]!r}; expected a finite number")
    return arr


def check_int(name: str, value: Any, low: int) -> int:
    """An int ``>= low`` (bools rejected), or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
    return int(value)


def check_real(name: str, value: Any, low: float, high: float, *,
               open_low: bool = False, open_high: bool = False) -> float:
    """A finite float in the stated interval, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    x = float(value)
    lo_ok = x > low if open_low else x >= low
    hi_ok = x < high if open_high else x <= high
    if not (np.isfinite(x) and lo_ok and hi_ok):
        interval = f"{'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
        raise ValueError(f"{name}: expected a number in {interval}, got {value!r}")
    return x
