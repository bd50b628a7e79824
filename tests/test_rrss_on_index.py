"""κ-RRSS end to end on a real index: per-source retrieval, offline reader, weighted vote,
and the learned per-source prior in a search pipeline."""

from __future__ import annotations

import json

import pytest

from credrank.combine import Combine
from credrank.core.candidates import Candidates
from credrank.documents.schema import Document
from credrank.generate.llm import ExtractiveReader
from credrank.index.embed import HashingEmbedder
from credrank.index.ingest import index_documents
from credrank.index.qdrant_edge import EdgeIndex
from credrank.index.retrieve import DenseRetriever, source_passages
from credrank.provenance import SourceTyper
from credrank.reliability.rrss import kappa_rrss
from credrank.select.topk import TopK
from credrank.signals.prior import preset
from credrank.stages.reliability_prior import ShrunkReliabilityPrior

CLAIMS = {"s_good1": "The capital of Australia is Canberra.",
          "s_good2": "Canberra is the capital city of Australia.",
          "s_bad": "The capital of Australia is Sydney."}


@pytest.fixture
def index(tmp_path):
    emb = HashingEmbedder(64)
    docs = [Document(id=f"{sid}-{i}", text=text, source_id=sid,
                     url=f"https://{sid}.blogspot.com/{i}")
            for sid, text in CLAIMS.items() for i in range(2)]
    with EdgeIndex.open(tmp_path / "i", embedder=emb.name, dim=emb.dim, create=True) as idx:
        index_documents(docs, idx, emb, SourceTyper())
        yield idx, emb


def test_kappa_rrss_retrieves_per_source_and_votes(index):
    idx, emb = index
    retrieve = source_passages(idx, emb)
    assert set(retrieve("capital of Australia", "s_bad", 5)) == {CLAIMS["s_bad"]}
    weights = {"s_bad": 5.0, "s_good1": 2.0, "s_good2": 2.0}
    result = kappa_rrss("What is the capital of Australia?", weights, retrieve,
                        ExtractiveReader(), K=3, k=2)
    # one ballot per identity: 2 + 2 for Canberra against 5 for Sydney → Sydney wins by weight;
    # with K = 3 every source is called once and the counts say so
    assert result.source_calls == 3 and result.generator_calls == 3
    assert len(result.accepted_sources) == 3
    assert result.answer is not None and "sydney" in result.answer
    low = kappa_rrss("What is the capital of Australia?", {**weights, "s_bad": 1.0}, retrieve,
                     ExtractiveReader(), K=3, k=2)
    assert "canberra" in low.answer


def test_learned_source_prior_shrinks_toward_the_type(index, tmp_path):
    idx, emb = index
    estimate = tmp_path / "estimate.json"
    estimate.write_text(json.dumps({"sources": [
        {"source_id": "s_good1", "known": True, "reliability": 1.0, "coverage": 45},
        {"source_id": "s_bad", "known": True, "reliability": 0.0, "coverage": 5},
        {"source_id": "s_good2", "known": False, "reliability": None, "coverage": 0}]}))
    stage = ShrunkReliabilityPrior.from_estimate_json(str(estimate), preset("current").values)
    out = (DenseRetriever(idx, emb, 6) >> stage >> Combine() >> TopK(6)).search("capital")
    prior = dict(zip(out.doc_ids, out.factors["prior"], strict=True))
    blog = preset("current")["blog"]
    assert prior["s_good1-0"] == pytest.approx((45 * 1.0 + 5 * blog) / 50)
    assert prior["s_bad-0"] == pytest.approx((5 * 0.0 + 5 * blog) / 10)
    assert prior["s_good2-0"] == pytest.approx(blog)  # unknown source: the type prior
    # what it could use is said: two sources estimated (2 documents each), one from no answers
    assert out.info["reliability_prior"] == {"key_column": "source_id", "estimated": 4,
                                             "unknown_source": 2, "no_key": 0}
    by_host = ShrunkReliabilityPrior({"s_good1.blogspot.com": (1.0, 45)}, "current",
                                     key_column="host")
    out = (DenseRetriever(idx, emb, 6) >> by_host >> Combine() >> TopK(6)).search("capital")
    assert out.info["reliability_prior"]["estimated"] == 2
    no_ids = Candidates.from_records("q", ["a", "b"], [0.9, 0.8])  # no source ids at all
    assert stage(no_ids).info["reliability_prior"] == {
        "key_column": "source_id", "estimated": 0, "unknown_source": 0, "no_key": 2}


def test_bad_estimate_file_is_named(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"nope": 1}')
    with pytest.raises(ValueError, match="reliability estimate"):
        ShrunkReliabilityPrior.from_estimate_json(str(bad), {})


def test_cli_estimate_then_search_with_learned_priors(tmp_path):
    from typer.testing import CliRunner

    from credrank.cli import app

    runner = CliRunner()
    answers = tmp_path / "answers.csv"
    rows = ["question_id,source_id,answer"]
    for q in range(6):
        rows += [f"q{q},s_good1,yes", f"q{q},s_good2,yes", f"q{q},s_bad,no"]
    answers.write_text("\n".join(rows) + "\n")
    res = runner.invoke(app, ["reliability", "estimate", str(answers), "--json"])
    assert res.exit_code == 0, res.output
    estimate = tmp_path / "estimate.json"
    estimate.write_text(res.output)
    corpus, idx = tmp_path / "c.jsonl", tmp_path / "idx"
    corpus.write_text("\n".join(json.dumps({"id": f"{sid}", "text": text, "source_id": sid,
                                            "url": f"https://{sid}.blogspot.com/x"})
                                for sid, text in CLAIMS.items()) + "\n")
    runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder", "hashing"])
    res = runner.invoke(app, ["search", "capital of Australia", "--index", str(idx), "--json",
                              "--source-reliability", str(estimate)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    priors = {h["doc_id"]: h["score_breakdown"]["prior"] for h in doc["hits"]}
    assert priors["s_good1"] > preset("current")["blog"] > priors["s_bad"]
    # the settings say the prior ranked with (it said null: "similarity only" in json.md)
    said = doc["settings"]["priors"]
    assert said["name"] == "reliability" and said["sources"] == 3 and said["m"] == 5.0
    assert said["type_priors"] == {"name": "current", "values": dict(preset("current").values)}


def test_an_estimate_table_in_a_spec_is_taken_and_checked():
    """The catalog says ``estimate`` takes a table source → (r, n); given one in a spec, the
    path reader failed with "unhashable type: 'dict'"."""
    from credrank.pipeline.compile import build_stages, context
    from credrank.pipeline.spec import PipelineSpec

    spec = PipelineSpec.from_dict({"stages": [{"stage": "reliability_prior",
                                               "estimate": {"s_good1": [1.0, 45]}}]})
    stage = build_stages(spec, context())[0]
    assert stage.estimates == {"s_good1": (1.0, 45)}
    bad = PipelineSpec.from_dict({"stages": [{"stage": "reliability_prior",
                                              "estimate": {"s": {"r": 1}}}]})
    with pytest.raises(ValueError, match=r"estimate\['s'\]: expected \[reliability in "):
        build_stages(bad, context())
