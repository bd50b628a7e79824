"""κ-RRSS: source order, per-source retrieval, support filter, stopping at K, cost counters."""

from __future__ import annotations

import pytest

from credrank.generate.llm import ExtractiveReader, Generation, build_prompt, parse_prompt
from credrank.reliability.equivalence import AnswerEquivalence
from credrank.reliability.estimate import ReliabilityEstimator
from credrank.reliability.rrss import KappaRRSS, kappa_rrss, lexical_support, source_order

PASSAGES = {
    "s1": [],
    "s2": ["Paris is the capital of France."],
    "s3": ["The capital of France is Paris.", "France is in Europe."],
    "s4": ["France has many cities."],
    "s5": ["Paris, the French capital, hosts the Louvre."],
    "s6": ["Lyon is the capital of France."],
}
SCRIPT = {"s2": "I don't know", "s3": "Paris", "s4": "Lyon", "s5": "paris", "s6": "Lyon"}
WEIGHTS = {"s1": 3.0, "s2": 2.5, "s3": 2.0, "s4": 1.0, "s5": 0.5, "s6": -0.2}


class Scripted:
    """Answers per source (recognised from the prompt's passages), fixed token counts."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, prompt: str, *, max_tokens: int = 64) -> Generation:
        self.prompts.append(prompt)
        _, passages = parse_prompt(prompt)
        source = next(s for s, p in PASSAGES.items() if p and p[0] == passages[0])
        return Generation(SCRIPT[source], input_tokens=100, output_tokens=3)


def retrieve(query: str, source: str, k: int) -> list[str]:
    retrieve.calls.append((query, source, k))
    return PASSAGES[source][:k]


retrieve.calls = []  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _reset():
    retrieve.calls.clear()


def test_stops_at_K_usable_answers_and_counts_costs():
    gen = Scripted()
    res = kappa_rrss("capital of France?", WEIGHTS, retrieve, gen, K=2, k=5)
    assert [a.status for a in res.attempts] == [
        "no_passages", "abstained", "accepted", "unsupported", "accepted"]
    assert [a.source_id for a in res.attempts] == ["s1", "s2", "s3", "s4", "s5"]
    assert res.accepted_sources == ["s3", "s5"]
    assert res.source_calls == 5          # s6 never tried
    assert res.generator_calls == 4       # s1 had no passages: no call
    assert (res.input_tokens, res.output_tokens) == (400, 12)
    assert res.answer == "paris" and res.answer_text == "Paris"
    assert res.votes == {"paris": pytest.approx(2.5)} and not res.exhausted
    assert all(src == s for (_, src, k), s in zip(retrieve.calls, "s1 s2 s3 s4 s5".split(),
                                                   strict=True))
    assert all(k == 5 for _, _, k in retrieve.calls)


def test_exhaustion_attempts_every_source_and_votes_with_signed_weights():
    res = kappa_rrss("capital of France?", WEIGHTS, retrieve, Scripted(), K=10)
    assert res.exhausted and res.source_calls == 6
    assert res.accepted_sources == ["s3", "s5", "s6"]
    assert res.votes == {"paris": pytest.approx(2.5), "lyon": pytest.approx(-0.2)}
    assert res.answer == "paris"


def test_empty_vote_when_nothing_is_accepted():
    weights = {"s1": 1.0, "s2": 0.5, "s4": 0.2}
    res = kappa_rrss("q?", weights, retrieve, Scripted(), K=2)
    assert res.answer is None and res.answer_text is None and res.votes == {}
    assert res.exhausted and res.source_calls == 3 and res.generator_calls == 2


def test_source_order_ties_by_id_and_validates():
    assert source_order({"b": 1.0, "a": 1.0, "c": 2.0}) == ["c", "a", "b"]
    with pytest.raises(ValueError, match=r"weights\['x'\]"):
        source_order({"x": float("nan")})


def test_support_rule_uses_tokens_and_aliases():
    eq = AnswerEquivalence(aliases={"SARS-CoV-2": ["novel coronavirus"]})
    assert lexical_support("SARS-CoV-2", ["It is caused by the novel coronavirus."], eq)
    assert lexical_support("sars cov 2", ["Caused by SARS-CoV-2."], eq)
    assert not lexical_support("Par", ["Paris is big."], eq)        # whole tokens only
    assert not lexical_support("IDK", ["IDK"], eq)


def test_extractive_reader_end_to_end_from_an_estimator():
    answers = {f"src{i}": {f"q{j}": "x" for j in range(3)} for i in range(3)}
    answers["bad"] = {f"q{j}": f"y{j}" for j in range(3)}
    est = ReliabilityEstimator().fit(answers)
    docs = {
        "src0": ["COVID-19 is caused by the SARS-CoV-2 virus."],
        "src1": ["The SARS-CoV-2 virus causes COVID-19 in humans."],
        "src2": ["Nothing relevant here."],
        "bad": ["COVID-19 is caused by 5G towers."],
    }
    rrss = KappaRRSS.from_estimator(est, lambda q, s, k: docs[s][:k], ExtractiveReader(), K=3)
    res = rrss.answer("What virus causes COVID-19?")
    assert res.answer == "sars cov 2"
    assert res.accepted_sources[:2] == ["src0", "src1"]
    assert res.input_tokens > 0 and res.generator_calls == res.source_calls


def test_prompt_round_trip():
    prompt = build_prompt("Who?  ", ["one\npassage", "two"])
    assert parse_prompt(prompt) == ("Who?", ["one passage", "two"])


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="K"):
        kappa_rrss("q", WEIGHTS, retrieve, Scripted(), K=0)
    with pytest.raises(ValueError, match="on_error"):
        kappa_rrss("q", WEIGHTS, retrieve, Scripted(), on_error="ignore")  # type: ignore[arg-type]
