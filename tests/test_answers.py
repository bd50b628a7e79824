"""CAG exact match (normalisation stated in credrank.evaluate.answers) and choose_option."""

from __future__ import annotations

import pytest

from credrank.evaluate.answers import cag_exact_match, choose_option, option_letter


@pytest.mark.parametrize(("generation", "gold", "expected"), [
    ("The capital of France is Paris.", ["Paris"], True),
    ("the capital is PARIS!", ["paris"], True),
    ("It was the U.S. Senate", ["U.S. Senate"], True),
    ("An apple a day", ["the apple"], True),          # articles dropped on both sides
    ("Parisian cafes", ["Paris"], True),              # a plain substring, as in CAG
    ("Rome", ["Paris"], False),
    ("anything", [], False),
    ("anything", ["", "  ", "the"], False),           # empty after normalisation: never
    ("Donald  Trump won", [["Trump", "Donald J. Trump"]], True),  # aliases
    ("", ["Paris"], False),
])
def test_cag_exact_match(generation: str, gold: list, expected: bool) -> None:
    assert cag_exact_match(generation, gold) is expected


CHOICES = ["Donald Trump", "Nikki Haley", "Ron DeSantis", "Trump"]


@pytest.mark.parametrize(("generation", "expected"), [
    ("B", 1),
    ("(C) Ron DeSantis", 2),
    ("b) nikki haley", 1),
    ("A: Donald Trump", 0),
    ("E) nobody", None),                 # no such label, no choice text
    ("Nikki Haley is backed by the group", 1),
    ("Donald Trump", 0),                 # "Trump" is inside "Donald Trump": dropped
    ("Trump or Nikki Haley", None),      # two independent choices
    ("A new poll shows DeSantis", 2),    # bare "A" in a sentence is no label; token overlap
    ("I don't know", None),
    ("", None),
])
def test_choose_option(generation: str, expected: int | None) -> None:
    assert choose_option(generation, CHOICES) == expected


def test_choose_option_edge_cases() -> None:
    assert choose_option("anything", []) is None
    assert option_letter(0) == "A" and option_letter(3) == "D"
    assert choose_option("A", ["yes", "no"]) == 0
