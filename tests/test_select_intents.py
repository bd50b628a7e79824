"""Intent sets from labels or from clustering embeddings (chapter 35.8)."""

from __future__ import annotations

import numpy as np
import pytest

from credrank.select.intents import has_labels, intents_from_clusters, intents_from_labels


def test_labels_single_multi_and_missing() -> None:
    it = intents_from_labels(["a", ["a", "b"], None, "c"])
    assert it.names == ("a", "b", "c")
    assert it.source == "labels"
    assert it.n_unlabelled == 1
    assert it.membership.tolist() == [[True, False, False], [True, True, False],
                                      [False, False, False], [False, False, True]]


def test_a_declared_intent_set_is_the_eligible_intents() -> None:
    it = intents_from_labels(["a", None], intent_set=["a", "b", "z"])
    assert it.names == ("a", "b", "z")  # intents absent from the pool still count in |𝒮|
    # a label outside 𝒮 covers nothing (S_d ∩ 𝒮), counted: it failed the whole query
    it = intents_from_labels(["a", "q", ["b", "q", "r"]], intent_set=["a", "b"])
    assert it.membership.tolist() == [[True, False], [False, False], [False, True]]
    assert it.outside_set == {"q": 2, "r": 1} and it.n_unlabelled == 1
    assert it.as_info()["outside_set"] == {"q": 2, "r": 1}


def test_empty_intent_set_is_an_error() -> None:
    with pytest.raises(ValueError, match="intent set is empty"):
        intents_from_labels([None, None])
    with pytest.raises(ValueError, match="expected a string"):
        intents_from_labels([3.5])
    assert not has_labels([None, ""]) and has_labels([None, "x"]) and not has_labels(None)


def test_clusters_recover_block_geometry() -> None:
    groups = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    same = groups[:, None] == groups[None, :]
    gram = np.where(same, 0.92, 0.25)
    np.fill_diagonal(gram, 1.0)
    w, v = np.linalg.eigh(gram)
    x = v * np.sqrt(np.clip(w, 0, None))
    it = intents_from_clusters(x, 3)
    assert it.source == "clusters" and it.names == ("cluster-0", "cluster-1", "cluster-2")
    found = it.membership.argmax(axis=1)
    assert list(found) == [0, 0, 0, 1, 1, 2, 2, 2]  # named by first appearance


def test_cluster_edge_cases() -> None:
    assert intents_from_clusters(np.array([[1.0, 0.0]]), 3).membership.shape == (1, 1)
    with pytest.raises(ValueError, match="zero vector"):
        intents_from_clusters(np.array([[1.0, 0.0], [0.0, 0.0]]), 2)
    with pytest.raises(ValueError, match="n_clusters"):
        intents_from_clusters(np.eye(3), 0)
