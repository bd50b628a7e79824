"""The shared parameter checks of :mod:`credrank.core.validation`: one rule, one message shape."""

from __future__ import annotations

import math

import numpy as np
import pytest

from credrank.core.errors import StageError
from credrank.core.validation import (
    as_flags,
    as_matrix,
    as_unit_vector,
    as_vector,
    check_bool,
    check_bounds,
    check_choice,
    check_finite,
    check_int,
    check_nonnegative,
    check_nonzero_rows,
    check_positive,
    check_probability,
    check_real,
    check_str,
    describe_interval,
    is_integer,
    is_number,
)


# ---------------------------------------------------------------- bools are not numbers
@pytest.mark.parametrize("flag", [True, False, np.bool_(True)])
def test_bools_are_neither_ints_nor_numbers(flag: object) -> None:
    assert not is_integer(flag) and not is_number(flag)
    with pytest.raises(ValueError, match=rf"^k: expected an integer >= 0, got {bool(flag)!r}$"):
        check_int("k", flag, 0)
    for check in (lambda: check_real("x", flag), lambda: check_probability("p", flag),
                  lambda: check_positive("t", flag), lambda: check_nonnegative("n", flag)):
        with pytest.raises(ValueError, match=r"expected a (finite )?number"):
            check()


def test_integers_and_numbers_of_numpy_are_accepted() -> None:
    assert check_int("k", np.int64(3), 1) == 3 and type(check_int("k", np.int64(3), 1)) is int
    assert check_real("x", np.float32(0.5), 0, 1) == 0.5
    assert check_probability("p", 1) == 1.0 and type(check_probability("p", 1)) is float


@pytest.mark.parametrize("value", [1.0, 2.5, "3", None, [1]])
def test_check_int_rejects_non_integers(value: object) -> None:
    with pytest.raises(ValueError, match=r"^k: expected an integer >= 1, got "):
        check_int("k", value, 1)


def test_check_int_bounds() -> None:
    assert check_int("k", 0, 0) == 0
    assert check_int("k", 5, 0, 5) == 5
    with pytest.raises(ValueError, match=r"^k: expected an integer in \[0, 5\], got 6$"):
        check_int("k", 6, 0, 5)
    with pytest.raises(ValueError, match=r"^k: expected an integer <= 5, got 6$"):
        check_int("k", 6, high=5)
    with pytest.raises(ValueError, match=r"^k: expected an integer, got 'x'$"):
        check_int("k", "x")


# ---------------------------------------------------------------- NaN / inf and interval ends
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float64("nan")])
def test_non_finite_numbers_are_rejected(bad: float) -> None:
    for check in (lambda: check_real("x", bad), lambda: check_real("x", bad, 0.0),
                  lambda: check_probability("p", bad), lambda: check_positive("t", bad)):
        with pytest.raises(ValueError, match=r": expected .*number"):
            check()


def test_closed_and_open_ends() -> None:
    assert check_real("x", 0.0, 0.0, 1.0) == 0.0 and check_real("x", 1.0, 0.0, 1.0) == 1.0
    with pytest.raises(ValueError, match=r"^x: expected a number in \(0, 1\], got 0\.0$"):
        check_real("x", 0.0, 0.0, 1.0, open_low=True)
    with pytest.raises(ValueError, match=r"^x: expected a number in \[0, 1\), got 1$"):
        check_real("x", 1, 0.0, 1.0, open_high=True)
    with pytest.raises(ValueError, match=r"^p: expected a number in \(0, 1\), got 0$"):
        check_probability("p", 0, open_low=True, open_high=True)
    assert check_probability("p", 0.5, open_low=True, open_high=True) == 0.5
    with pytest.raises(ValueError, match=r"^t: expected a finite number > 0, got 0$"):
        check_positive("t", 0)
    assert check_nonnegative("n", 0) == 0.0
    with pytest.raises(ValueError, match=r"^n: expected a finite number >= 0, got -1e-09$"):
        check_nonnegative("n", -1e-9)


def test_describe_interval() -> None:
    assert describe_interval(0, 1) == "in [0, 1]"
    assert describe_interval(0, 0.5, open_low=True) == "in (0, 0.5]"
    assert describe_interval(0) == ">= 0"
    assert describe_interval(high=1, open_high=True) == "< 1"
    assert describe_interval() == ""


def test_messages_show_numpy_scalars_as_plain_values() -> None:
    with pytest.raises(ValueError, match=r"got 1\.5$"):
        check_probability("p", np.float64(1.5))


# ---------------------------------------------------------------- other scalars
def test_check_bool_choice_and_str() -> None:
    assert check_bool("flag", np.bool_(False)) is False
    with pytest.raises(ValueError, match=r"^flag: expected True or False, got 1$"):
        check_bool("flag", 1)
    assert check_choice("mode", "a", ("a", "b")) == "a"
    assert check_choice("rule", None, ("a", None)) is None
    with pytest.raises(ValueError, match=r"^mode: expected one of a, b, got 'c'$"):
        check_choice("mode", "c", ("a", "b"))
    with pytest.raises(ValueError, match="expected one of 1, 2, got True"):
        check_choice("n", True, (1, 2))  # True is not the choice 1
    with pytest.raises(ValueError, match="got array"):
        check_choice("mode", np.array(["a", "b"]), ("a", "b"))
    assert check_str("name", "x") == "x" and check_str("name", "", allow_empty=True) == ""
    with pytest.raises(ValueError, match=r"^name: expected a non-empty string, got ' '$"):
        check_str("name", " ")
    with pytest.raises(TypeError, match=r"^col: expected a column name, got 3$"):
        check_str("col", 3, what="a column name", error=TypeError)


def test_error_type_is_selectable() -> None:
    with pytest.raises(StageError, match=r"^k: expected an integer >= 1, got 0$"):
        check_int("k", 0, 1, error=StageError)


# ---------------------------------------------------------------- arrays
def test_as_vector_rejects_nan_inf_and_names_the_row() -> None:
    np.testing.assert_array_equal(as_vector("u", [1, 2]), [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^u: expected finite numbers, got nan at row 1$"):
        as_vector("u", [0.0, np.nan])
    with pytest.raises(ValueError, match=r"^u: expected finite numbers, got inf at row 0$"):
        as_vector("u", [np.inf])
    with pytest.raises(ValueError, match=r"^u: expected a 1-d array of numbers, got shape"):
        as_vector("u", [[1.0]])
    with pytest.raises(ValueError, match=r"^u: expected a 1-d array of numbers, got \['a'\]$"):
        as_vector("u", ["a"])
    with pytest.raises(ValueError, match=r"^u: expected 3 values, got 2$"):
        as_vector("u", [1.0, 2.0], length=3)
    with pytest.raises(ValueError, match=r"^u: expected at least 1 values, got 0$"):
        as_vector("u", [], min_len=1)
    with pytest.raises(ValueError, match=r"^w: expected values >= 0, got -1\.0 at row 1$"):
        as_vector("w", [1.0, -1.0], low=0.0)
    with pytest.raises(ValueError, match=r"^w: expected values > 0, got 0\.0 at row 0$"):
        as_vector("w", [0.0], low=0.0, open_low=True)


def test_as_unit_vector_and_as_matrix() -> None:
    assert as_unit_vector("p", [0.0, 1.0]).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match=r"^p: expected values in \[0, 1\], got 1\.5 at row 0$"):
        as_unit_vector("p", [1.5])
    with pytest.raises(ValueError,
                       match=r"^P: expected finite numbers, got nan at entry \(1, 0\)$"):
        as_matrix("P", [[1.0, 0.0], [np.nan, 1.0]])
    with pytest.raises(ValueError, match=r"^P: expected a 2-d array of numbers, got shape \(2,\)$"):
        as_matrix("P", [1.0, 2.0])


def test_check_finite_and_bounds_keep_their_input() -> None:
    arr = np.array([0.2, 0.4])
    assert check_finite("x", arr) is arr and check_bounds("x", arr, 0, 1) is arr
    assert check_bounds("x", np.zeros(0), 1, 2).size == 0
    with pytest.raises(StageError, match=r"^f: expected values in \[0, 1\], got 2\.0 at row 1; "
                                         r"because$"):
        check_bounds("f", np.array([0.5, 2.0]), 0, 1, why="because", error=StageError)


def test_as_flags() -> None:
    assert as_flags("f", [True, False]).tolist() == [True, False]
    assert as_flags("f", [1, 0]).tolist() == [True, False]
    assert as_flags("f", np.array([1, True], dtype=object)).tolist() == [True, True]
    with pytest.raises(ValueError, match=r"^f: expected boolean \(0/1\) flags, got 0\.5 at row 1$"):
        as_flags("f", [1.0, 0.5])
    with pytest.raises(ValueError, match=r"got 'yes' at row 0$"):
        as_flags("f", ["yes"])


def test_check_nonzero_rows() -> None:
    x = np.array([[1.0, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match=r"^v: expected nonzero rows \(cosine\), got a zero "
                                         r"vector at row 1$"):
        check_nonzero_rows("v", x, why="cosine")
    with pytest.raises(ValueError, match=r"row 1 \('b'\)$"):
        check_nonzero_rows("v", x, labels=["a", "b"])
    assert check_nonzero_rows("v", np.eye(2)) is not None
