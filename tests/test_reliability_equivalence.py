"""The declared answer-equivalence rule (normalisation, aliases, embedding clustering)."""

from __future__ import annotations

import numpy as np
import pytest

from credrank.reliability.equivalence import AnswerEquivalence, equivalence_normalize, is_abstention


@pytest.mark.parametrize(("raw", "norm"), [
    ("The SARS-CoV-2 virus", "sars cov 2 virus"),
    ("  An   Apple! ", "apple"),
    ("Twenty-One", "21"),
    ("twenty one", "21"),
    ("three", "3"),
    ("1,000", "1000"),
    ("1,000,000 people", "1000000 people"),
    ("3.5 percent", "3.5 percent"),
    ("U.S.A.", "usa"),
    ("Don't", "dont"),
    ("ÉCOLE", "école"),
    ("", ""),
])
def test_equivalence_normalize(raw, norm):
    assert equivalence_normalize(raw) == norm


def test_normalisation_is_idempotent():
    for raw in ["The Twenty-One Pilots", "SARS-CoV-2", "a 1,000-year flood", "3.5"]:
        once = equivalence_normalize(raw)
        assert equivalence_normalize(once) == once


@pytest.mark.parametrize("text", [None, "", "  ", "IDK", "I don't know.", "i do not know",
                                  "N/A", "Unknown", "no answer"])
def test_abstentions(text):
    assert is_abstention(text)


@pytest.mark.parametrize("text", ["Paris", "0", "none of them", "no"])
def test_not_abstentions(text):
    assert not is_abstention(text)


def test_numbers_words_and_digits_are_equivalent():
    eq = AnswerEquivalence()
    assert eq.equivalent("three", "3")
    assert eq.equivalent("Forty-two", "42")
    assert not eq.equivalent("3", "4")


def test_abstentions_are_equivalent_to_nothing():
    eq = AnswerEquivalence()
    assert not eq.equivalent("IDK", "IDK")
    assert not eq.equivalent(None, None)
    assert not eq.equivalent("Paris", None)


def test_aliases_map_to_the_canonical_answer():
    eq = AnswerEquivalence(aliases={"SARS-CoV-2": ["2019-nCoV", "novel coronavirus"]})
    assert eq.equivalent("2019-nCoV", "sars cov 2")
    assert eq.equivalent("Novel Coronavirus", "SARS-CoV-2")
    assert not eq.equivalent("novel coronavirus", "5G")
    assert set(eq.aliases_of("the novel coronavirus")) == {
        "sars cov 2", "2019 ncov", "novel coronavirus"}


def test_alias_listed_under_two_canonicals_is_an_error():
    with pytest.raises(ValueError, match="listed under both"):
        AnswerEquivalence(aliases={"a1": ["x"], "b1": ["x"]})


def test_classes_are_numbered_lexicographically():
    eq = AnswerEquivalence()
    labels, ids = eq.classes(["banana", None, "Apple", "the apple", "IDK", "cherry"])
    assert labels == ["apple", "banana", "cherry"]
    assert ids.tolist() == [1, -1, 0, 0, -1, 2]


def _toy_embed(texts):
    # "paris" and "city of paris" point the same way; everything else is orthogonal
    table = {"paris": [1.0, 0.0, 0.0], "city of paris": [0.99, 0.141, 0.0],
             "lyon": [0.0, 1.0, 0.0], "marseille": [0.0, 0.0, 1.0]}
    return np.array([table[t] for t in texts])


def test_embedding_clustering_joins_similar_answers():
    eq = AnswerEquivalence(embed=_toy_embed, threshold=0.95)
    labels, ids = eq.classes(["Paris", "City of Paris", "Lyon", "Marseille"])
    assert labels == ["city of paris", "lyon", "marseille"]   # representative = smallest key
    assert ids.tolist() == [0, 0, 1, 2]
    assert eq.equivalent("paris", "city of paris")
    strict = AnswerEquivalence(embed=_toy_embed, threshold=0.999)
    assert not strict.equivalent("paris", "city of paris")


def test_bad_embedding_output_is_a_clear_error():
    eq = AnswerEquivalence(embed=lambda texts: np.zeros((len(texts), 3)))
    with pytest.raises(ValueError, match="zero vector"):
        eq.classes(["a1", "b1"])
    eq = AnswerEquivalence(embed=lambda texts: np.ones((1, 3)))
    with pytest.raises(ValueError, match="shape"):
        eq.classes(["a1", "b1"])


def test_threshold_is_validated():
    with pytest.raises(ValueError, match="threshold"):
        AnswerEquivalence(threshold=1.5)


def test_non_string_answer_is_rejected():
    with pytest.raises(TypeError, match="expected a str"):
        equivalence_normalize(3)  # type: ignore[arg-type]


def test_an_answer_made_only_of_an_article_is_kept():
    # multiple-choice "A" must not vanish into an abstention
    assert equivalence_normalize("A") == "a"
    assert not is_abstention("A")
    assert AnswerEquivalence().equivalent("A", "a")
    assert not AnswerEquivalence().equivalent("A", "B")


@pytest.mark.parametrize(("a", "b"), [
    ("-5", "5"), ("\u22125", "5"), ("C++", "C"), ("C#", "C"), ("C++", "C#"), ("½", "12"),
    ("3,14", "314"), ("10,00", "1,000"), ("1/2", "12"),
])
def test_different_answers_stay_different(a, b):
    # finding 4: the sign, attached symbols, the fraction slash and a decimal comma were
    # deleted, so these pairs were one answer class
    assert not AnswerEquivalence().equivalent(a, b)


@pytest.mark.parametrize(("a", "b"), [
    ("\u22125", "-5"), ("(-5)", "-5"), ("½", "1/2"), ("3,14", "3.14"), ("c++", "C++"),
    ("\u200bparis", "paris"), ("Pa\u00adris", "Paris"), ("\ufeffParis", "paris"),
    ("1,000", "1000"), ("SARS-CoV-2", "sars cov 2"),
])
def test_spellings_of_one_answer_stay_equivalent(a, b):
    assert AnswerEquivalence().equivalent(a, b)


@pytest.mark.parametrize("text", ["Na", "N", "na", "n"])
def test_chemical_symbols_are_answers_not_abstentions(text):
    # "n" and "na" were abstention phrases (N/A normalised), so sodium and nitrogen vanished
    assert not is_abstention(text)
    assert AnswerEquivalence().key(text) == text.lower()


@pytest.mark.parametrize("text", ["N/A", "n/a", "n / a", "N.A.", "n.a"])
def test_not_applicable_is_still_an_abstention(text):
    assert is_abstention(text) and AnswerEquivalence().key(text) is None
