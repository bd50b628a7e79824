"""The audit's measurements (chapter 35.1): privacy, fairness, transparency, accountability,
factuality on hand-built results, and the audit config's validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from credrank.audit.measures import (
    AuditMeasureError,
    explanation_coverage,
    exposure_balance,
    faithful_breakdown,
    harmful_share,
    luhn_valid,
    pii_findings,
    privacy_leaks,
    traceability,
)
from credrank.audit.profile import DIMENSIONS, AuditInputError
from credrank.audit.run import fill_profile, measure_dimensions, parse_config
from credrank.core.candidates import Candidates


def batch(ids, types, *, prior=None, urls=None, sources=None, hosts=None, broken=False):
    n = len(ids)
    sim = np.linspace(0.9, 0.5, n)
    prior = np.full(n, 0.8) if prior is None else np.asarray(prior, dtype=float)
    score = sim * prior * (1.5 if broken else 1.0)
    return Candidates(
        query="q", doc_ids=np.array(ids, dtype=object), retrieval_score=sim,
        factors={"prior": prior}, score=score,
        meta={"source_type": np.array(types, dtype=object),
              "host": np.array(hosts or [f"h{i}.org" for i in range(n)], dtype=object),
              "url": np.array(urls or [f"https://h{i}.org/{d}" for i, d in enumerate(ids)],
                              dtype=object),
              "source_id": np.array(sources or [f"h{i}.org" for i in range(n)],
                                    dtype=object)})


def test_pii_detectors():
    text = ("write to jane.doe@example.com or call (555) 123-4567; SSN 123-45-6789; card "
            "4111 1111 1111 1111; not a card 4111 1111 1111 1112; year 2024-2025")
    kinds = [k for k, _ in pii_findings(text)]
    assert kinds == ["email", "phone", "ssn", "card"]
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert pii_findings("Metformin 500 mg twice daily; HbA1c 7.2% in 2019.") == []


@pytest.mark.parametrize(("text", "found"), [
    ("call +44 20 7946 0958 today", ["+44 20 7946 0958"]),  # the international + form
    ("+1 555-123-4567", ["+1 555-123-4567"]),
    ("1-800-555-1234", ["1-800-555-1234"]),
    ("room 12 555-123-4567", ["555-123-4567"]),
    ("ratio 1.234.567.8901", []),  # it matched 234.567.8901 inside the number
    ("id 555-123-45678", []),
    ("Tel 0049 30 1234567", []),  # the 00 prefix: out of scope, as documented
    ("+1 2 3", []),
])
def test_phone_numbers_in_their_documented_forms_never_inside_a_longer_number(text, found):
    assert [m for kind, m in pii_findings(text) if kind == "phone"] == found


def test_privacy_counts_leaking_hits():
    results = {"q1": batch(["a", "b"], ["gov", "news"]), "q2": batch(["c"], ["forum"])}
    texts = {"a": "clean", "b": "mail me: x@y.org", "c": "phone +1 555-123-4567"}
    m = privacy_leaks(results, texts)
    assert m.value == 2 and m.scale == (0.0, 3.0) and not m.higher_is_better
    assert {(d["doc_id"], tuple(d["kinds"])) for d in m.details["leaks"]} == \
        {("b", ("email",)), ("c", ("phone",))}
    assert m.interval[0] <= 2 <= m.interval[1]
    with pytest.raises(AuditMeasureError, match=r"'c'.*no text"):
        privacy_leaks(results, {"a": "", "b": ""})
    with pytest.raises(AuditMeasureError, match="no query"):
        privacy_leaks({}, texts)


def test_transparency_checks_the_breakdown_reproduces_the_score():
    good = batch(["a", "b"], ["gov", "news"])
    assert all(faithful_breakdown(h) for h in good.hits())
    bad = batch(["c"], ["gov"], broken=True)
    assert not faithful_breakdown(bad.hits()[0])
    no_host = batch(["d"], ["gov"], hosts=[None])
    m = explanation_coverage({"q1": good, "q2": bad, "q3": no_host})
    assert m.value == pytest.approx(2 / 4) and m.details["complete"] == 2
    assert m.interval[0] < 0.5 < m.interval[1]


def test_accountability_needs_url_source_and_hash():
    res = {"q": batch(["a", "b", "c", "d"], ["gov"] * 4, urls=["u1", None, "u3", "u4"],
                      sources=[None, "s", "s", None], hosts=["h", "h", "h", None])}
    m = traceability(res, {"a": "h1", "b": "h2", "d": "h4"})
    # a: host stands for the source; b has no URL, c no stored hash, d no source identity
    assert m.value == pytest.approx(1 / 4)


def test_fairness_exposure_per_merit():
    # two groups, equal merit; group "gov" takes ranks 1-2, "blog" ranks 3-4
    top = batch(["g1", "g2", "b1", "b2"], ["gov", "gov", "blog", "blog"])
    pool = batch(["g1", "g2", "b1", "b2", "x"], ["gov", "gov", "blog", "blog", "forum"])
    qrels = {"q": {"g1": 1, "g2": 1, "b1": 1, "b2": 1}}
    m = exposure_balance({"q": top}, {"q": pool}, qrels, n_resamples=50)
    e_gov = 1 / math.log2(2) + 1 / math.log2(3)
    e_blog = 1 / math.log2(4) + 1 / math.log2(5)
    assert m.value == pytest.approx(e_blog / e_gov)
    assert m.details["groups"]["forum"] == {"exposure": 0.0, "merit": 0.0}
    assert m.reads_labels
    # one group with merit: not measured (None), not 0
    assert exposure_balance({"q": top}, {"q": pool}, {"q": {"g1": 1}}) is None


def test_fairness_says_why_it_is_zero():
    """A group with merit and no exposure in the top k makes the balance 0 (a hard ranking,
    35.9): the denominator names it, so 0 is read as what it is."""
    top = batch(["g1", "g2"], ["gov", "gov"])
    pool = batch(["g1", "g2", "b1", "u1"], ["gov", "gov", "blog", None])
    m = exposure_balance({"q": top}, {"q": pool}, {"q": {"g1": 1, "b1": 1, "u1": 2}},
                         n_resamples=20)
    assert m.value == 0.0
    assert m.details["zero_exposure_groups"] == ["blog", "unknown"]
    assert "2 of them (blog, unknown) got no exposure in any top k, so the value is 0" in \
        m.denominator
    fair = exposure_balance({"q": top}, {"q": pool}, {"q": {"g1": 1}, "x": {}},
                            n_resamples=20)
    assert fair is None


def test_factuality_harmful_at_k():
    res = {"q1": batch(["a", "b", "c"], ["x"] * 3), "q2": batch(["d", "e", "f"], ["x"] * 3)}
    m = harmful_share(res, {"q1": {"a"}, "q2": set()}, 3)
    assert m.value == pytest.approx((1 / 3 + 0) / 2) and m.reads_labels
    assert m.interval[0] <= m.value <= m.interval[1]


def test_config_validation(tmp_path):
    base = {"queries": {"path": "q.jsonl"}}
    cfg = parse_config({**base, "dimensions": {"privacy": {"measure": "pii"}}}, "a.toml",
                       tmp_path)
    assert cfg.queries == tmp_path / "q.jsonl"
    with pytest.raises(AuditInputError, match=r"a.toml: dimensions\.honesty: expected one of "
                                              r"the known keys \(robustness, "):
        parse_config({**base, "dimensions": {"honesty": {"measure": "pii"}}}, "a.toml")
    with pytest.raises(AuditInputError, match=r"dimensions\.fairness\.measure: expected one of "
                                              r"exposure, not measured, got 'pii'"):
        parse_config({**base, "dimensions": {"fairness": {"measure": "pii"}}}, "a.toml")
    with pytest.raises(AuditInputError, match=r"dimensions\.privacy\.reason: expected a "
                                              r"non-empty string \(measure = \"not measured\" "
                                              r"says why\)"):
        parse_config({**base, "dimensions": {"privacy": {"measure": "not measured"}}}, "a.toml")
    with pytest.raises(AuditInputError, match=r"a.toml: sytem: expected one of the known keys"):
        parse_config({**base, "sytem": {}}, "a.toml")
    with pytest.raises(AuditInputError, match=r"a.toml: system\.fetch_k: expected an integer "
                                              r">= top_k \(5\), got 4"):
        parse_config({**base, "system": {"top_k": 5, "fetch_k": 4}}, "a.toml")
    with pytest.raises(AuditInputError, match=r"a.toml: gate\[0\]\.op: expected one of"):
        parse_config({**base, "gate": [{"name": "g", "dimension": "privacy", "op": [">="],
                                        "threshold": 0, "reason": "r"}]}, "a.toml")


def test_unmeasured_dimension_fails_its_gate(tmp_path):
    cfg = parse_config({
        "name": "t", "queries": {"path": "q.jsonl"},
        "dimensions": {"privacy": {"measure": "pii"},
                       "fairness": {"measure": "not measured", "reason": "no groups"}},
        "gate": [{"name": "no-pii", "dimension": "privacy", "op": "==", "threshold": 0,
                  "reason": "hard"},
                 {"name": "fair", "dimension": "fairness", "op": ">=", "threshold": 0.5,
                  "reason": "hard"}]}, "a.toml", tmp_path)
    results = {"q": batch(["a"], ["gov"])}
    ms, reasons = measure_dimensions(cfg, results, results, {"a": "clean"}, {"a": "h"})
    assert set(ms) == {"privacy"} and reasons["fairness"] == "no groups"
    assert reasons["robustness"] == "not configured in the audit config"
    profile = fill_profile(cfg, ms, reasons, {}, {}, {d: "s" for d in DIMENSIONS})
    assert profile.entry("fairness").value is None and not profile.entry("fairness").measured
    from credrank.audit.profile import check_gates

    outcomes = {g.gate.name: g.outcome for g in check_gates(profile)}
    assert outcomes == {"no-pii": "pass", "fair": "not measured"}


def test_a_labels_file_the_config_names_must_exist(tmp_path):
    """A misspelt ``[queries] qrels`` made fairness "not measured: data not found" and the
    audit exit 0; the config names the file, so it is an error naming the key."""
    dims = {"dimensions": {"privacy": {"measure": "pii"}}}
    for key in ("qrels", "harmful"):
        with pytest.raises(AuditInputError, match=rf"a\.toml: queries\.{key}: expected an "
                                                  r"existing file, got 'nope\.tsv'"):
            parse_config({"queries": {"path": "q.jsonl", key: "nope.tsv"}, **dims}, "a.toml",
                         tmp_path)
    (tmp_path / "qrels.tsv").write_text("q1\t0\td1\t1\n", encoding="utf-8")
    cfg = parse_config({"queries": {"path": "q.jsonl", "qrels": "qrels.tsv"}, **dims},
                       "a.toml", tmp_path)
    assert cfg.qrels == tmp_path / "qrels.tsv"


def test_harmful_share_of_passage_hits() -> None:
    """With unit passage a document holds several of the top k: harmful@k is the share of
    the top k passages from a harmful document (the audit exited 2 with 'docid appears
    twice')."""
    from credrank.audit.measures import harmful_share
    from credrank.core.candidates import Candidates

    passages = Candidates.from_records("q", ["a", "a", "b", "c"], [0.9, 0.8, 0.5, 0.4])
    assert harmful_share({"q": passages}, {"q": ["a"]}, 2).value == 1.0
    assert harmful_share({"q": passages}, {"q": ["a"]}, 3).value == pytest.approx(2 / 3)
    assert harmful_share({"q": passages}, {"q": ["c"]}, 4).value == 0.25
