"""Consensus at scale: the batched reader gives the reader's own answers, and the stage's
report is the same as the per-label scans it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from credrank.consensus.stage import AnswerConsensus, _members, extractive_answers
from credrank.core.candidates import Candidates
from credrank.generate.llm import ExtractiveReader

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
