"""Reliability at scale (issue 15, part 4): the blocked dependence test and the pyarrow reader
return exactly what the reference implementations return.

* ``detect_dependence`` (``method="blocked"``, the default) against ``method="pairs"`` (the
  whole-matrix reference): the same ``DependenceReport`` — pairs with the same floats, the same
  clusters and candidates — on seeded synthetic data, several block sizes, and edge cases.
* ``load_answers`` (pyarrow for CSV) against ``_load_answers_python`` (the line-by-line
  reader): the same table, or the same error naming ``path:line: field``.

No timing here; the speed is measured by ``bench/scripts/bench_reliability.py``.
"""

from __future__ import annotations

import gzip
import itertools
import random

import numpy as np
import pytest

from credrank.reliability import answers as answers_module
from credrank.reliability import dependence as dependence_module
from credrank.reliability.answers import AnswersFileError, load_answers
from credrank.reliability.dependence import detect_dependence
from credrank.reliability.estimate import EncodedAnswers
from credrank_bench.experiments.ra_rag_simulation import simulate_answers


def _encoded(m: np.ndarray) -> EncodedAnswers:
    m = np.asarray(m, dtype=np.int64)
    n_c = max(int(m.max(initial=-1)) + 1, 1)
    return EncodedAnswers(tuple(f"s{i}" for i in range(m.shape[0])),
                          tuple(f"q{j}" for j in range(m.shape[1])), m,
                          tuple(tuple(str(c) for c in range(n_c)) for _ in range(m.shape[1])))


def _same(enc: EncodedAnswers, block_sizes=(None, 1, 3, 17), **kwargs):
    reference = detect_dependence(enc, method="pairs", **kwargs)
    for block_size in block_sizes:
        got = detect_dependence(enc, block_size=block_size, **kwargs)
        assert got == reference, f"block_size={block_size}, {kwargs}"
    return reference


def _with_copies(seed: int, n: int = 40, n_q: int = 60) -> np.ndarray:
    """Independent sources of mixed reliability, exact copies, near copies and a ring."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 5, n_q)
    r = rng.uniform(0.05, 0.95, n)
    m = np.where(rng.random((n, n_q)) < r[:, None], truth[None, :],
                 rng.integers(0, 5, (n, n_q)))
    m = np.where(rng.random((n, n_q)) < rng.uniform(0, 0.5), -1, m)
    m[1] = m[0]                                            # an exact copy
    m[3] = np.where(rng.random(n_q) < 0.95, m[2], (m[2] + 1) % 5)   # a near copy
    ring = (truth + 1) % 5
    for i in range(n - 5, n):                              # a ring sharing one wrong sheet
        m[i] = np.where(rng.random(n_q) < 0.7, ring, m[i])
    return m


@pytest.mark.parametrize("seed", range(6))
def test_blocked_equals_reference_on_random_data(seed):
    m = _with_copies(seed)
    report = _same(_encoded(m))
    assert report.pairs and report.clusters


@pytest.mark.parametrize(("variant", "q", "abstain", "seed"), [
    ("honest", 0.6, 0.1, 0), ("adversarial", 0.5, 0.3, 1), ("copies", 0.7, 0.0, 2),
    ("copies", 0.55, 0.5, 3)])
def test_blocked_equals_reference_on_the_simulation(variant, q, abstain, seed):
    sim = simulate_answers(60, 80, q, abstain=abstain, variant=variant, seed=seed)
    _same(sim.encoded(), block_sizes=(None, 7))


@pytest.mark.parametrize("kwargs", [
    {"near_duplicate": 0.0}, {"near_duplicate": 1.0}, {"min_excess": 0.0},
    {"min_excess": 0.0, "z_min": -1.0}, {"z_min": 0.0}, {"min_overlap": 1},
    {"min_overlap": 50}, {"min_excess": 1.0}, {"doc_threshold": 0.0}])
def test_blocked_equals_reference_at_extreme_thresholds(kwargs):
    _same(_encoded(_with_copies(7, n=25, n_q=30)), block_sizes=(None, 4), **kwargs)


@pytest.mark.parametrize("seed", range(40))
def test_blocked_equals_reference_on_random_shapes_and_thresholds(seed):
    # small random problems near every threshold: sizes, classes, abstentions, copies, blocks
    rng = np.random.default_rng(1000 + seed)
    n, n_q, k = int(rng.integers(2, 40)), int(rng.integers(1, 50)), int(rng.integers(1, 6))
    truth = rng.integers(0, k, n_q)
    r = rng.uniform(0, 1, n)
    m = np.where(rng.random((n, n_q)) < r[:, None], truth, rng.integers(0, k, (n, n_q)))
    m = np.where(rng.random((n, n_q)) < rng.uniform(0, 0.6), -1, m)
    for _ in range(int(rng.integers(0, 4))):
        a, b = rng.integers(0, n, 2)
        m[a] = np.where(rng.random(n_q) < 0.9, m[b], m[a])
    kwargs = {"near_duplicate": float(rng.choice([0.5, 0.8, 0.9, 1.0])),
              "min_overlap": int(rng.integers(1, 8)),
              "min_excess": float(rng.choice([0.0, 0.1, 0.25, 0.5])),
              "z_min": float(rng.choice([-1.0, 0.0, 1.0, 3.0]))}
    _same(_encoded(m), block_sizes=(None, int(rng.integers(1, 10))), **kwargs)


def test_edge_cases_disjoint_identical_single_answer_and_silent_sources():
    rng = np.random.default_rng(11)
    n_q = 40
    truth = rng.integers(0, 4, n_q)
    honest = np.where(rng.random((12, n_q)) < 0.75, truth, rng.integers(0, 4, (12, n_q)))
    disjoint = np.full((2, n_q), -1)
    disjoint[0, :20] = truth[:20]                           # answers only the first half
    disjoint[1, 20:] = (truth[20:] + 1) % 4                 # only the second half, all wrong
    identical = np.repeat(honest[:1], 3, axis=0)            # three identical sources
    single = np.full((1, n_q), -1)
    single[0, 5] = truth[5]                                 # one answer
    silent = np.full((1, n_q), -1)                          # no answer at all
    m = np.vstack([honest, disjoint, identical, single, silent])
    report = _same(_encoded(m))
    assert ["s0", "s14", "s15", "s16"] in report.candidates


def test_unresolved_questions_ties_and_tiny_inputs():
    # two sources that disagree everywhere: every question a 1-1 tie
    _same(_encoded(np.array([[0, 1, 2, 0, 1, 2], [1, 2, 0, 1, 2, 0]])))
    # ties on some questions, agreement on others
    m = np.array([[0, 0, 1, 1, 0, 2, 2, 1], [0, 0, 1, 0, 1, 2, 2, 1],
                  [0, 1, 1, 0, 1, 2, 0, 1], [1, 0, 1, 1, 0, 2, 2, -1]])
    _same(_encoded(m), min_overlap=1, min_excess=0.0, z_min=0.0)
    _same(_encoded(np.array([[0, 1, -1]])))                  # one source
    _same(_encoded(np.full((3, 4), -1)))                     # nobody answers
    _same(_encoded(np.zeros((3, 0), dtype=np.int64)))         # no question
    # no source: both refuse with the same error (IWMV needs a source)
    empty = _encoded(np.zeros((0, 3), dtype=np.int64))
    with pytest.raises(ValueError) as ref:
        detect_dependence(empty, method="pairs")
    with pytest.raises(ValueError) as got:
        detect_dependence(empty)
    assert str(got.value) == str(ref.value)


def test_documents_give_the_same_pairs_and_clusters():
    m = _with_copies(5, n=20, n_q=30)
    text = "the same press release about the vaccine trial results published today"
    docs = {"s4": [text], "s9": [text + " again"], "s12": ["something else entirely here"]}
    enc = _encoded(m)
    report = _same(enc, documents=docs)
    assert any({p.source_a, p.source_b} == {"s4", "s9"} and p.document_overlap == 1.0
               for p in report.pairs)


def test_sparse_one_hot_path_gives_the_same_report(monkeypatch):
    monkeypatch.setattr(dependence_module, "_DENSE_ONE_HOT", 0)
    report = _same(_encoded(_with_copies(3)), block_sizes=(None, 6))
    assert report.clusters


def test_many_answer_classes_per_question():
    # open answers: up to 30 classes per question, with a copied pair
    rng = np.random.default_rng(4)
    m = np.where(rng.random((30, 25)) < 0.5, 0, rng.integers(1, 30, (30, 25)))
    m[7] = m[6]
    report = _same(_encoded(m))
    assert ["s6", "s7"] in report.clusters


def test_method_and_block_size_are_validated():
    enc = _encoded(np.array([[0, 1], [0, 1]]))
    with pytest.raises(ValueError, match="method"):
        detect_dependence(enc, method="lsh")
    with pytest.raises(ValueError, match="block_size"):
        detect_dependence(enc, block_size=0)
    with pytest.raises(ValueError, match="max_sources=1"):
        detect_dependence(enc, max_sources=1)


# -- the pyarrow reader ---------------------------------------------------------------------

def _random_csv(seed: int) -> str:
    rng = random.Random(seed)
    answers = ["Paris", "paris", "Lyon", "I don't know", "IDK", "", " Rome ", "N/A", "NA",
               "null", "1,000"[:1], "Zürich", "naïve café", "twenty-one", "21", "None"]
    header = ["question_id", "source_id", "answer"]
    extra = rng.random() < 0.5
    if extra:
        header.append("note")
    rng.shuffle(header)
    lines = [",".join(header)]
    pairs = list(itertools.product(range(12), range(9)))
    rng.shuffle(pairs)
    for q, s in pairs[: rng.randrange(1, len(pairs))]:
        row = {"question_id": rng.choice([f"q{q}", f" q{q}", f"q{q} "]),
               "source_id": rng.choice([f"s{s}", f"s{s}\t", str(s + 100)]),
               "answer": rng.choice(answers), "note": rng.choice(["", "x", "a b"])}
        lines.append(",".join(row[h] for h in header))
        if rng.random() < 0.05:
            lines.append("")                               # blank lines are skipped
    end = rng.choice(["\n", "\r\n"])
    return end.join(lines) + (end if rng.random() < 0.8 else "")


@pytest.mark.parametrize("seed", range(12))
def test_pyarrow_reader_equals_the_line_reader(write, monkeypatch, seed):
    text = _random_csv(seed)
    path = write("a.csv", text)
    expected = answers_module._load_answers_python(path)

    def no_fallback(*_args, **_kwargs):
        raise AssertionError("plain CSV fell back to the line-by-line reader")

    monkeypatch.setattr(answers_module, "_load_answers_python", no_fallback)
    assert load_answers(path) == expected
    assert load_answers(write("a.csv.gz", gzip.compress(text.encode()))) == expected


@pytest.mark.parametrize("content", [
    'question_id,source_id,answer\nq1,s1,"Paris, France"\nq2,s1,x\n',   # quotes
    "\ufeffquestion_id,source_id,answer\nq1,s1,x\n",                      # byte-order mark
    "question_id,source_id,answer\nq1,s1\nq2,s2,y\n",                     # short row: abstains
    "question_id,source_id,answer\rq1,s1,x\rq2,s1,y\r",                   # lone CR line ends
    "\nquestion_id,source_id,answer\nq1,s1,x\n",                          # blank first line
    "question_id,source_id,answer,answer\nq1,s1,x,y\n",                   # duplicate column
])
def test_files_the_fast_path_declines_give_the_line_readers_result(write, content):
    path = write("a.csv", content)
    try:
        expected = answers_module._load_answers_python(path)
    except AnswersFileError as exc:
        with pytest.raises(AnswersFileError) as err:
            load_answers(path)
        assert str(err.value) == str(exc)
    else:
        assert load_answers(path) == expected


@pytest.mark.parametrize(("content", "needle"), [
    ("question_id,source_id,answer\nq1,s1,x\nq2,s1,y\nq1,s1,z\n",
     "a.csv:4: fields 'question_id','source_id': duplicate pair ('q1', 's1'), first seen on "
     "line 2"),
    # the same pair after stripping the ids
    ("question_id,source_id,answer\nq1,s1,x\n q1,s1 ,z\n",
     "a.csv:3: fields 'question_id','source_id': duplicate pair ('q1', 's1')"),
    ("question_id,source_id,answer\nq1,s1,x\n  ,s2,y\n", "a.csv:3: field 'question_id'"),
    ("question_id,source_id,answer\nq1,s1,x\nq2,,y\n", "a.csv:3: field 'source_id'"),
    ("question_id,source_id,answer\nq1,s1,x\nq2,s1,y,extra\n",
     "a.csv:3: row has more values than the 3 header columns"),
    ("question_id,source_id,answer\nq1,s1,x\nq2\n",
     "a.csv:3: field 'source_id': missing; the row ends after 1 of the header's 3 values"),
    ("question_id,source\nq1,s1\n", "a.csv:1: header: expected columns"),
    ("question_id,source_id,answer\n\n", "no answer rows"),
    ("", "a.csv:1: header"),
    ('question_id,source_id,answer\nq1,s1,"Lyon\nq2,s1,x\n', "a.csv:2: expected well-formed CSV"),
])
def test_pyarrow_reader_errors_name_file_line_and_field(write, content, needle):
    path = write("a.csv", content)
    with pytest.raises(AnswersFileError) as err:
        load_answers(path)
    assert needle in str(err.value)
    with pytest.raises(AnswersFileError) as ref:
        answers_module._load_answers_python(path)
    assert str(err.value) == str(ref.value)


def test_not_utf8_names_the_line(write):
    path = write("a.csv", b"question_id,source_id,answer\nq1,s1,x\nq2,s1,caf\xe9\n")
    with pytest.raises(AnswersFileError, match=r"a\.csv:3: expected UTF-8 text, got the byte 0xe9 "
                                             r"at column 10$"):
        load_answers(path)
    gz = write("a.jsonl.gz", gzip.compress(
        b'{"question_id": "q1", "source_id": "s1", "answer": "\xff"}\n'))
    with pytest.raises(AnswersFileError, match=r"a\.jsonl\.gz:1: expected UTF-8 text, got the "
                                             r"byte 0xff at column 53$"):
        load_answers(gz)


def test_truncated_gzip_csv_is_still_an_error(write):
    data = gzip.compress(("question_id,source_id,answer\n" + "".join(
        f"q{i},s{i % 7},x\n" for i in range(500))).encode())
    with pytest.raises(AnswersFileError, match=r"a\.csv\.gz: expected a complete gzip"):
        load_answers(write("a.csv.gz", data[: len(data) // 2]))
