"""Consensus at scale: the batched reader gives the reader's own answers, and the stage's
report is the same as the per-label scans it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from credrank.consensus.readers import extractive_answers
from credrank.core.candidates import Candidates
from credrank.generate.llm import ExtractiveReader
from credrank.stages.consensus import AnswerConsensus, _members

WORDS = ["Hamlet", "hamlet's", "wrote", "writing", "written", "Shakespeare", "Marlowe", "play",
         "plays", "the", "a", "of", "in", "1601", "1599", "who", "is", "tragedy", "scholars",
         "agree", "Dr.", "U.S.", "e.g.", "(born", "1564)", "—", "écrit", "naïve", "“quoted”",
         "it's", "i", "...", "?!", "Mr", "london", "Londoners", "performing", "performed"]
SPACES = [" ", " ", " ", "  ", "\n", "\t", "\u00a0", "\u2003", "\x1c", ". ", "! ", "? ", "?\n"]


def random_passage(rng: np.random.Generator) -> str:
    out = []
    for _ in range(int(rng.integers(0, 40))):
        out.append(str(rng.choice(WORDS)))
        out.append(str(rng.choice(SPACES)))
    return "".join(out)


QUESTIONS = ["who wrote hamlet", "Who wrote Hamlet?", "when was hamlet written",
             "what is the tragedy of the plays performed in london", "the of a", "",
             "naïve écrit?", "who is Dr. Marlowe (born 1564)"]


@pytest.mark.parametrize("seed", range(6))
def test_batched_reader_equals_the_reader(seed: int) -> None:
    rng = np.random.default_rng(seed)
    reader = ExtractiveReader()
    passages = [random_passage(rng) for _ in range(150)] + ["", "   ", ".", "Hamlet."]
    for question in QUESTIONS:
        assert extractive_answers(question, passages) == \
            [reader.answer(question, [p]) for p in passages]


def test_members_equal_the_scans() -> None:
    rng = np.random.default_rng(2)
    for _ in range(20):
        n, count = int(rng.integers(1, 60)), int(rng.integers(1, 8))
        labels = rng.integers(-1, count, size=n)
        got = _members(labels, count)
        assert [g.tolist() for g in got] == \
            [np.flatnonzero(labels == c).tolist() for c in range(count)]


def test_stage_report_on_a_large_pool() -> None:
    """Groups of copies and competing answers over a few hundred passages, checked against
    the definitions."""
    rng = np.random.default_rng(4)
    base = ["William Shakespeare wrote Hamlet around 1600 in London for the Globe.",
            "Christopher Marlowe wrote Hamlet in 1601 according to a forged letter.",
            "Hamlet was written by Francis Bacon, some people claim without evidence."]
    texts = []
    for i in range(300):
        t = str(rng.choice(base))
        texts.append(t if rng.random() < 0.5 else f"{t} Variant {i} adds words here now.")
    batch = Candidates.from_records("who wrote hamlet", [f"d{i}" for i in range(300)],
                                    rng.uniform(0.2, 0.9, 300),
                                    metadata=[{"text": t} for t in texts])
    out = AnswerConsensus(threshold=0.0)(batch)
    info = out.info["consensus"]
    groups = np.asarray(out.column("answer_group"), dtype=np.int64)
    expected_copies = [[f"d{i}" for i in np.flatnonzero(groups == g)]
                       for g in np.unique(groups) if np.count_nonzero(groups == g) > 1]
    assert info["duplicate_groups"] == expected_copies
    answers = list(out.column("answer"))
    for entry in info["answers"]:
        assert entry["doc_ids"] == [f"d{i}" for i in range(300) if answers[i] ==
                                    entry["answer"]]
    assert info["warnings"] == []


def _pool(n: int, seed: int = 7) -> Candidates:
    rng = np.random.default_rng(seed)
    base = ["William Shakespeare wrote Hamlet around 1600 in London for the Globe.",
            "Christopher Marlowe wrote Hamlet in 1601 according to a forged letter."]
    texts = [base[int(rng.integers(0, 2))] + " " + random_passage(rng) for _ in range(n)]
    return Candidates(query="who wrote hamlet", doc_ids=np.array([f"d{i}" for i in range(n)],
                                                                 dtype=object),
                      retrieval_score=rng.uniform(0.1, 0.9, size=n),
                      meta={"text": np.array(texts, dtype=object)})


def test_max_read_reads_the_heaviest_voices_only() -> None:
    """Above max_read the reader sees the max_read passages of largest weight; the others
    have no answer, their own duplicate group and the factor ``unanswered``."""
    batch = _pool(150)
    seen: list[list[str]] = []

    def reader(query: str, passages: list[str]) -> list[str]:
        seen.append(list(passages))
        return extractive_answers(query, passages)

    out = AnswerConsensus(reader=reader, max_read=40, unanswered=0.7,
                          on_contested="apply").transform(batch)
    heaviest = set(np.argsort(-batch.retrieval_score, kind="stable")[:40].tolist())
    texts = list(batch.column("text"))
    assert seen == [[texts[i] for i in sorted(heaviest)]]
    info = out.info["consensus"]
    assert (info["read"], info["not_read"], info["max_read"]) == (40, 110, 40)
    answers = out.column("answer")
    groups = out.column("answer_group")
    for i in range(150):
        if i not in heaviest:
            assert answers[i] is None
            assert out.factors["consensus"][i] == 0.7
            assert list(groups).count(groups[i]) == 1


def test_max_read_above_the_pool_changes_nothing() -> None:
    batch = _pool(60)
    a = AnswerConsensus(max_read=None).transform(batch)
    b = AnswerConsensus(max_read=60).transform(batch)
    c = AnswerConsensus().transform(batch)  # the default reads 100
    for other in (b, c):
        np.testing.assert_array_equal(a.factors["consensus"], other.factors["consensus"])
        assert list(a.column("answer")) == list(other.column("answer"))
        assert list(a.column("answer_group")) == list(other.column("answer_group"))
        assert a.info["consensus"]["answers"] == other.info["consensus"]["answers"]


def test_over_an_index_the_stage_reads_the_text_it_needs(demo_index_hashing) -> None:
    """Built over an index, the stage takes the text of the candidates it reads from the
    index (the retriever returns no text) and answers as it does with the text given."""
    from credrank.searcher import Searcher

    spec = {"fetch_k": 40, "top_k": 10,
            "stages": [{"stage": "prior"}, {"stage": "consensus", "max_read": 25},
                       {"stage": "combine"}, {"stage": "topk"}]}
    searcher = Searcher.open(demo_index_hashing)
    try:
        from credrank.pipeline.spec import PipelineSpec

        compiled = searcher.compile(PipelineSpec.from_dict(spec))
        stage = next(s for s in compiled.stages if isinstance(s, AnswerConsensus))
        assert stage.text_store is not None and "text" not in stage.reads
        out = compiled.pipeline.search("does vitamin d prevent covid")
        pool = compiled.pipeline.stages[0].search("does vitamin d prevent covid")
        assert pool.column("text")[0] is None  # the retriever brought no text
        info = out.info["consensus"]
        assert info["read"] == 25 and info["not_read"] == len(pool) - 25
        assert any(a is not None for a in out.column("answer"))
    finally:
        searcher.close()
