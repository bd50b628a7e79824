"""Passage readers of answer consensus: one answer per passage (:data:`PassageReader`).

:func:`extractive_answers` runs the offline :class:`~credrank.generate.llm.ExtractiveReader`
on each passage alone; :func:`generator_answers` puts any
:class:`~credrank.generate.llm.Generator` behind the same call. The stage that votes with them
is :class:`~credrank.stages.consensus.AnswerConsensus`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from credrank.core.validation import check_int
from credrank.generate.llm import (  # the reader's own split, words and stems (one rule)
    _SENTENCE,
    _STOPWORDS,
    _WORD,
    ExtractiveReader,
    Generator,
    _stem,
    build_prompt,
)

#: ``reader(query, passages) -> one answer per passage``
PassageReader = Callable[[str, Sequence[str]], list[str]]


_READER = ExtractiveReader()


#: the reader's word stems, kept across calls (a pure function of the word; bounded memory)
_stem_cached = functools.lru_cache(maxsize=1 << 17)(_stem)


def extractive_answers(query: str, passages: Sequence[str]) -> list[str]:
    """The offline reader's answer of ``query`` from each passage alone (its rule:
    :class:`~credrank.generate.llm.ExtractiveReader`), equal to
    ``[ExtractiveReader().answer(query, [p]) for p in passages]``.

    Faster on a large pool: the best sentence of every passage is found here by the reader's
    own rule (most distinct question content words, the earliest on ties), each distinct word
    stemmed once (a bounded cache kept across calls); a passage whose best sentence shares no
    content word gets the reader's abstention; the reader then extracts the answer from the
    best sentence alone (a sentence of the reader's split is its own split, so its answer is
    the passage's). The private helpers of :mod:`credrank.generate.llm` are imported so that
    the rule stays one; ``tests/test_consensus_scale.py`` checks the equality."""
    q_words = set(map(_stem_cached, _WORD.findall(query)))
    content = {w for w in q_words if w and w not in _STOPWORDS}
    abstain = _READER.answer(query, [""])
    out = []
    for passage in passages:
        best, best_score = "", 0
        for sentence in _SENTENCE.split(passage.strip()):
            score = len(content.intersection(map(_stem_cached, _WORD.findall(sentence))))
            if score > best_score:
                best, best_score = sentence, score
        out.append(_READER.answer(query, [best]) if best_score else abstain)
    return out


def generator_answers(generator: Generator, *, max_tokens: int = 32) -> PassageReader:
    """A passage reader that asks ``generator`` once per passage with
    :func:`~credrank.generate.llm.build_prompt` (question + that passage)."""
    max_tokens = check_int("max_tokens", max_tokens, 1)

    def read(query: str, passages: Sequence[str]) -> list[str]:
        return [generator.generate(build_prompt(query, [p]), max_tokens=max_tokens).text
                for p in passages]
    read.__name__ = f"generator_answers({type(generator).__name__})"
    return read
