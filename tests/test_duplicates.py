"""The fast near-duplicate finder (prefix filtering, exact verification) against the all-pairs
reference: the same pairs, the same ``J`` and the same groups on random and adversarial texts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from credrank.consensus import duplicates
from credrank.consensus.duplicates import (
    duplicate_groups,
    jaccard_matrix,
    jaccard_pairs,
    shingle_ids,
    shingles,
)


def reference_pairs(texts: list[str], t: float, size: int) -> dict[tuple[int, int], float]:
    """All pairs ``i < j`` with ``J >= t``, from Python string sets (the definition)."""
    sets = [shingles(x, size) for x in texts]
    out = {}
    for i, j in itertools.combinations(range(len(texts)), 2):
        union = len(sets[i] | sets[j])
        jac = len(sets[i] & sets[j]) / union if union else 0.0
        if jac >= t:
            out[(i, j)] = jac
    return out


def reference_groups(texts: list[str], t: float, size: int, vectors: np.ndarray | None = None,
                     cosine: float | None = None) -> list[int]:
    """Single-link groups by union-find over every pair, numbered by first member."""
    n = len(texts)
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    links = set(reference_pairs(texts, t, size))
    if cosine is not None:
        v = np.asarray(vectors, dtype=np.float64)
        norms = np.linalg.norm(v, axis=1)
        unit = v / np.where(norms > 0, norms, 1.0)[:, None]
        links |= {(i, j) for i, j in itertools.combinations(range(n), 2)
                  if unit[i] @ unit[j] >= cosine}
    for i, j in links:
        parent[find(i)] = find(j)
    names: dict[int, int] = {}
    return [names.setdefault(find(i), len(names)) for i in range(n)]


def random_texts(rng: np.random.Generator, n: int, vocab: int) -> list[str]:
    """Short texts over a small vocabulary (many shared shingles, many exact-boundary ``J``),
    with copies, edited copies, case changes, empty and one-word texts mixed in."""
    words = [f"w{i}" for i in range(vocab)] + ["Ünïcode", "ǅx", "a-b", "x.y"]
    texts: list[str] = []
    for _ in range(n):
        roll = rng.random()
        if texts and roll < 0.25:  # a copy, maybe edited
            base = texts[int(rng.integers(len(texts)))].split()
            if base and rng.random() < 0.7:
                base[int(rng.integers(len(base)))] = str(rng.choice(words))
            if rng.random() < 0.3:
                base = [*base, str(rng.choice(words))]
            text = " ".join(base)
            texts.append(text.upper() if rng.random() < 0.2 else text)
        elif roll < 0.3:
            texts.append(str(rng.choice(["", "   ", "\n\t"])))
        else:
            length = int(rng.integers(1, 14))
            texts.append(" ".join(rng.choice(words, size=length)))
    return texts


def test_shingle_ids_match_string_shingles():
    rng = np.random.default_rng(1)
    texts = [*random_texts(rng, 80, 6), "a b", "a b c", "A  b", "a", "", "a b c d e"]
    for size in (1, 2, 3, 5):
        rows, ids, sizes, n_ids = shingle_ids(texts, size)
        assert np.all(np.diff(rows) >= 0) and ids.max(initial=-1) < max(n_ids, 1)
        for i, text in enumerate(texts):
            assert sizes[i] == len(shingles(text, size)) == len(set(ids[rows == i].tolist()))
        # equal ids across texts ⇔ equal strings: compare the pairwise intersection sizes
        sets = [shingles(x, size) for x in texts]
        id_sets = [set(ids[rows == i].tolist()) for i in range(len(texts))]
        for i, j in itertools.combinations(range(len(texts)), 2):
            assert len(id_sets[i] & id_sets[j]) == len(sets[i] & sets[j])


@pytest.mark.parametrize("seed", range(12))
def test_pairs_and_groups_equal_the_all_pairs_reference(seed):
    rng = np.random.default_rng(seed)
    texts = random_texts(rng, int(rng.integers(2, 70)), int(rng.integers(3, 12)))
    for size in (1, 2, 3, 4):
        for t in (1e-9, 0.2, 1 / 3, 0.5, 2 / 3, 0.75, 0.9, 1.0, float(rng.random())):
            ref = reference_pairs(texts, t, size)
            pi, pj, jac = jaccard_pairs(texts, t, size)
            assert list(zip(pi.tolist(), pj.tolist(), strict=True)) == sorted(ref)
            assert jac.tolist() == [ref[p] for p in sorted(ref)]  # bit-identical J
            assert duplicate_groups(texts, jaccard=t, shingle=size).tolist() == \
                reference_groups(texts, t, size)


def test_groups_equal_the_dense_matrix_test():
    """The previous implementation: threshold the dense ``n × n`` matrix, then components."""
    from scipy import sparse
    from scipy.sparse import csgraph
    rng = np.random.default_rng(7)
    texts = random_texts(rng, 120, 8)
    for t in (0.3, 0.5, 1.0):
        linked = jaccard_matrix(texts) >= t
        _, labels = csgraph.connected_components(sparse.csr_matrix(np.triu(linked, 1)),
                                                 directed=False)
        assert duplicate_groups(texts, jaccard=t).tolist() == labels.tolist()


def test_adversarial_texts():
    assert duplicate_groups([]).tolist() == []
    assert duplicate_groups([""]).tolist() == [0]
    # empty texts are not copies of each other (J = 0 by declaration) unless t = 0
    assert duplicate_groups(["", "", " "]).tolist() == [0, 1, 2]
    assert duplicate_groups(["", "", " "], jaccard=0.0).tolist() == [0, 0, 0]
    assert duplicate_groups(["a", "b c", "", "d e f g"], jaccard=0.0).tolist() == [0, 0, 0, 0]
    # identical texts join at every positive threshold, t = 1 included
    same = ["one two three four"] * 5 + ["ONE two THREE four"]
    for t in (1e-12, 0.5, 1.0):
        assert duplicate_groups(same, jaccard=t).tolist() == [0] * 6
    # short texts: one shingle each, never equal to a full gram
    short = ["a b", "a b", "a b c", "a", "A"]
    assert duplicate_groups(short).tolist() == [0, 0, 1, 2, 2]
    assert jaccard_pairs(["", "", "x"], 0.5)[0].tolist() == []
    with pytest.raises(ValueError, match="positive threshold"):
        jaccard_pairs(["a", "a"], 0.0)
    with pytest.raises(ValueError, match="jaccard"):
        duplicate_groups(["a"], jaccard=1.5)


def test_flood_of_near_copies_is_exact_across_chunks(monkeypatch):
    """Every pair of a near-copy flood is a candidate; verified in several chunks (already
    joined pairs skipped), the groups stay those of the reference."""
    rng = np.random.default_rng(3)
    base = [f"w{i}" for i in range(40)]
    texts = []
    for _ in range(150):
        words = list(base)
        for _ in range(3):
            words[int(rng.integers(len(words)))] = f"x{int(rng.integers(1000))}"
        texts.append(" ".join(words))
    texts += random_texts(rng, 50, 30)
    order = rng.permutation(len(texts))
    texts = [texts[i] for i in order]
    monkeypatch.setattr(duplicates, "VERIFY_CHUNK", 97)
    monkeypatch.setattr(duplicates, "FIRST_CHUNK", 13)
    for t in (0.5, 0.8):
        assert duplicate_groups(texts, jaccard=t).tolist() == reference_groups(texts, t, 3)
        ref = reference_pairs(texts, t, 3)
        pi, pj, _ = jaccard_pairs(texts, t)
        assert list(zip(pi.tolist(), pj.tolist(), strict=True)) == sorted(ref)


@pytest.mark.parametrize("seed", range(4))
def test_cosine_links_equal_the_reference(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    texts = random_texts(rng, 60, 10)
    v = rng.normal(size=(60, 4))
    v[5] = 0.0  # a zero vector: cosine 0 with everything
    v[7] = v[3] * 2.0
    monkeypatch.setattr(duplicates, "COSINE_BLOCK", 7)
    for cosine in (0.0, 0.6, 0.95, 0.999):
        assert duplicate_groups(texts, v, cosine=cosine).tolist() == \
            reference_groups(texts, 0.5, 3, v, cosine)
    with pytest.raises(ValueError, match="expected 60 rows"):
        duplicate_groups(texts, v[:10], cosine=0.9)
