"""κ-RRSS: reliable and relevant source selection, then a weighted vote (chapter 35.3).

Online, per query: inspect sources in descending vote weight ``v_s`` (ties: source id
ascending), retrieve ``k`` passages **from that source only**, generate an answer from them,
filter unsupported answers to abstention, and stop after ``K`` usable (accepted) answers or when
the sources run out; then vote ``â ∈ argmax_a Σ_{s∈𝒲} v_s 1[A_s(q) ~ a]``.

Declared rules:

* a source that returns no passage abstains **without** a generator call;
* **support rule** (:func:`lexical_support`): an answer is supported when its normalised form,
  or a normalised alias of its class, occurs as a contiguous run of whole tokens in a
  normalised passage; IDK answers and unsupported answers become abstentions;
* ``K`` bounds the accepted sources, not the calls: with many abstentions every source is
  attempted. The result counts retrieval calls, generator calls and tokens.

Budget arithmetic of the chapter: :func:`rrss_budget`, :func:`offline_answer_count`,
:func:`token_reduction`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from credrank.core.validation import (
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_real,
)
from credrank.generate.llm import Generator, GeneratorError, build_prompt
from credrank.reliability.equivalence import AnswerEquivalence, equivalence_normalize
from credrank.reliability.vote import weighted_vote

Retrieve = Callable[[str, str, int], list[str]]
SupportRule = Callable[[str, Sequence[str], AnswerEquivalence], bool]


# --------------------------------------------------------------------------------------------
# budget arithmetic
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RRSSBudget:
    """Document-input budget of all-source aggregation versus ``K`` accepted sources."""

    n_sources: int
    k: int
    K: int
    tokens_per_doc: float
    all_documents: int
    selected_documents: int
    all_tokens: float
    selected_tokens: float
    ratio: float
    reduction: float


def rrss_budget(S: int, k: int, K: int, tokens_per_doc: float) -> RRSSBudget:
    """Document-input arithmetic of κ-RRSS (chapter 35.3, "Cost and measured results").

    All sources: ``S·k`` documents, ``S·k·t`` tokens; ``K`` accepted sources: ``K·k``
    documents, ``K·k·t`` tokens; ratio ``S/K``; reduction ``1 − K·k/(S·k)``. With ``S = 1000,
    k = 5, K = 4, t = 500``: 5,000 vs 20 documents, 2.5e6 vs 10,000 tokens, 250:1, 99.6%.
    Only the document-input portion: rejected sources, prompts, outputs and filtering are not
    in it (the chapter's own caveat). Requires ``K <= S``.
    """
    S, k = check_int("S", S, 1), check_int("k", k, 1)
    K = check_int("K", K, 1, S)  # at most S accepted sources
    t = check_nonnegative("tokens_per_doc", tokens_per_doc)
    all_docs, sel_docs = S * k, K * k
    return RRSSBudget(S, k, K, t, all_docs, sel_docs, all_docs * t, sel_docs * t,
                      all_docs / sel_docs, 1.0 - sel_docs / all_docs)


def offline_answer_count(S: int, Q: int) -> int:
    """Calibration answers to generate offline: ``S·Q`` (chapter 35.3; 1,000 × 200 = 200,000),
    once — cached answers are reused across weight iterations."""
    return check_int("S", S, 1) * check_int("Q", Q, 1)


def token_reduction(without: float, with_selection: float) -> float:
    """Relative saving ``1 − with/without`` (chapter 35.3: 627,115 vs 5,415 tokens ≈ 99.136522%).
    ``without`` must be > 0."""
    without = check_positive("without", without)
    return 1.0 - check_nonnegative("with_selection", with_selection) / without


# --------------------------------------------------------------------------------------------
# support filter
# --------------------------------------------------------------------------------------------

def lexical_support(answer: str, passages: Sequence[str],
                    equivalence: AnswerEquivalence) -> bool:
    """Declared support rule: the normalised answer (or a normalised alias of its class) is a
    contiguous run of whole tokens of some normalised passage. Abstentions are unsupported."""
    forms = [f for f in equivalence.aliases_of(answer) if f]
    if not forms:
        return False
    padded = [f" {equivalence_normalize(p)} " for p in passages]
    return any(f" {form} " in text for form in forms for text in padded)


# --------------------------------------------------------------------------------------------
# the procedure
# --------------------------------------------------------------------------------------------

Status = Literal["accepted", "abstained", "unsupported", "no_passages", "error"]


@dataclass(frozen=True)
class SourceAttempt:
    """What happened when one source was tried."""

    source_id: str
    weight: float
    n_passages: int
    answer: str | None
    status: Status
    input_tokens: int = 0
    output_tokens: int = 0
    detail: str = ""


@dataclass(frozen=True)
class RRSSResult:
    """Outcome of κ-RRSS for one query.

    ``answer`` is the winning class's normalised representative (``None``: no accepted
    answer); ``answer_text`` the raw answer of the highest-weighted accepted source in that
    class; ``votes``/``ballots`` per class; cost counters per query.
    """

    query: str
    answer: str | None
    answer_text: str | None
    votes: dict[str, float]
    ballots: dict[str, int]
    tie: bool
    accepted_sources: list[str]
    attempts: list[SourceAttempt] = field(default_factory=list)
    source_calls: int = 0
    generator_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    exhausted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query, "answer": self.answer, "answer_text": self.answer_text,
            "votes": dict(self.votes), "ballots": dict(self.ballots), "tie": self.tie,
            "accepted_sources": list(self.accepted_sources),
            "attempts": [a.__dict__.copy() for a in self.attempts],
            "source_calls": self.source_calls, "generator_calls": self.generator_calls,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "exhausted": self.exhausted,
        }


def source_order(weights: Mapping[str, float]) -> list[str]:
    """Sources in descending weight; ties by source id ascending (declared)."""
    for s, v in weights.items():
        check_real(f"weights[{s!r}]", v)
    return sorted(weights, key=lambda s: (-float(weights[s]), str(s)))


def kappa_rrss(
    query: str, weights: Mapping[str, float], retrieve: Retrieve, generator: Generator, *,
    K: int = 4, k: int = 5, equivalence: AnswerEquivalence | None = None,
    support: SupportRule = lexical_support, max_tokens: int = 32,
    prompt: Callable[[str, Sequence[str]], str] = build_prompt,
    on_error: Literal["raise", "abstain"] = "raise",
) -> RRSSResult:
    """κ-RRSS for one query (chapter 35.3): select up to ``K`` usable sources, then vote.

    ``weights`` maps each *known* source to its vote weight ``v_s`` (unknown sources are left
    out by the caller); ``retrieve(query, source_id, k)`` returns that source's passages;
    ``generator`` answers the :func:`build_prompt` prompt. With ``on_error="abstain"`` a
    :class:`GeneratorError` turns the source into an abstention (status ``error``).
    """
    K = check_int("K", K, 1)
    k = check_int("k", k, 1)
    max_tokens = check_int("max_tokens", max_tokens, 1)
    check_choice("on_error", on_error, ("raise", "abstain"))
    eq = equivalence or AnswerEquivalence()
    attempts: list[SourceAttempt] = []
    accepted: list[tuple[str, float, str]] = []
    calls = gen_calls = tok_in = tok_out = 0
    order = source_order(weights)
    for source in order:
        if len(accepted) >= K:
            break
        weight = float(weights[source])
        passages = [str(p) for p in retrieve(query, source, k)][:k]
        calls += 1
        if not passages:
            attempts.append(SourceAttempt(source, weight, 0, None, "no_passages"))
            continue
        try:
            gen = generator.generate(prompt(query, passages), max_tokens=max_tokens)
        except GeneratorError as exc:
            gen_calls += 1
            if on_error == "raise":
                raise
            attempts.append(SourceAttempt(source, weight, len(passages), None, "error",
                                          detail=str(exc)))
            continue
        gen_calls += 1
        tok_in += gen.input_tokens
        tok_out += gen.output_tokens
        text = gen.text.strip()
        if eq.key(text) is None:
            status: Status = "abstained"
        elif not support(text, passages, eq):
            status = "unsupported"
        else:
            status = "accepted"
            accepted.append((source, weight, text))
        attempts.append(SourceAttempt(source, weight, len(passages), text, status,
                                      gen.input_tokens, gen.output_tokens))
    vote = weighted_vote([a for _, _, a in accepted], [w for _, w, _ in accepted], eq)
    # accepted answers are in descending weight order, so members[...][0] is the top source's
    answer_text = vote.members[vote.answer][0] if vote.answer is not None else None
    return RRSSResult(
        query=query, answer=vote.answer, answer_text=answer_text, votes=vote.votes,
        ballots=vote.ballots, tie=vote.tie, accepted_sources=[s for s, _, _ in accepted],
        attempts=attempts, source_calls=calls, generator_calls=gen_calls, input_tokens=tok_in,
        output_tokens=tok_out, exhausted=len(accepted) < K)


class KappaRRSS:
    """κ-RRSS with fixed weights, retriever and generator; ``answer(query)`` runs it.

    ``from_estimator`` takes the known sources' ``v_s`` of a fitted
    :class:`~credrank.reliability.estimate.ReliabilityEstimator` and its equivalence rule, so
    the same ``~`` is used for estimation and voting.
    """

    def __init__(self, weights: Mapping[str, float], retrieve: Retrieve, generator: Generator,
                 *, K: int = 4, k: int = 5, equivalence: AnswerEquivalence | None = None,
                 support: SupportRule = lexical_support, max_tokens: int = 32) -> None:
        source_order(weights)
        self.weights = dict(weights)
        self.retrieve = retrieve
        self.generator = generator
        self.K = check_int("K", K, 1)
        self.k = check_int("k", k, 1)
        self.equivalence = equivalence or AnswerEquivalence()
        self.support = support
        self.max_tokens = check_int("max_tokens", max_tokens, 1)

    @classmethod
    def from_estimator(cls, estimator: Any, retrieve: Retrieve, generator: Generator,
                       **kwargs: Any) -> KappaRRSS:
        kwargs.setdefault("equivalence", estimator.equivalence)
        return cls(estimator.weight_table(), retrieve, generator, **kwargs)

    def answer(self, query: str) -> RRSSResult:
        return kappa_rrss(query, self.weights, self.retrieve, self.generator, K=self.K,
                          k=self.k, equivalence=self.equivalence, support=self.support,
                          max_tokens=self.max_tokens)
