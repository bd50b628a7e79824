"""Estimated reliabilities as a shrunk per-source prior stage."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import build_batch
from credrank.core.candidates import Candidates, StageError
from credrank.core.errors import FileFormatError
from credrank.reliability.estimate import UNKNOWN
from credrank.reliability.prior import read_estimate, reliability_table, shrink_reliability
from credrank.stages.reliability_prior import ReliabilityPrior


def test_shrinkage_formula_by_hand():
    # (n r + m λ) / (n + m): (10·0.9 + 5·0.5)/15 = 11.5/15; n = 0 → λ_type
    lam = shrink_reliability(np.array([0.9, UNKNOWN, 0.2]), np.array([10, 0, 1000]),
                             np.array([0.5, 0.8, 0.95]), m=5)
    assert lam == pytest.approx([11.5 / 15, 0.8, (200 + 4.75) / 1005])


def test_shrinkage_validation():
    with pytest.raises(ValueError, match="m:"):
        shrink_reliability(np.array([0.5]), np.array([1]), np.array([0.5]), m=0)
    with pytest.raises(ValueError, match="reliability"):
        shrink_reliability(np.array([1.5]), np.array([1]), np.array([0.5]))
    with pytest.raises(ValueError, match="shapes"):
        shrink_reliability(np.array([0.5, 0.5]), np.array([1]), np.array([0.5]))


def test_reliability_table_uses_each_source_type():
    table = reliability_table(["a1", "b1", "c1"], np.array([1.0, 0.0, UNKNOWN]),
                              np.array([5, 5, 0]),
                              {"a1": "blog", "b1": "government", "c1": None},
                              {"blog": 0.5, "government": 0.9}, m=5)
    assert table == pytest.approx({"a1": 0.75, "b1": 0.45, "c1": 0.5})


def _batch() -> Candidates:
    return build_batch([0.9, 0.8, 0.7, 0.6], ids=["d1", "d2", "d3", "d4"],
                       source_id=["known", "new", None, "odd"],
                       source_type=["blog", "government", None, "alien"],
                       host=["k.example", "n.example", None, "o.example"])


def test_stage_falls_back_to_type_prior_then_default():
    stage = ReliabilityPrior({"known": 0.83}, {"blog": 0.4, "government": 0.9})
    out = stage(_batch())
    assert out.factors["reliability"].tolist() == [0.83, 0.9, 0.5, 0.5]
    assert out.retrieval_score.tolist() == [0.9, 0.8, 0.7, 0.6]     # input untouched
    assert "reliability" not in _batch().factors


def test_stage_on_host_column_and_empty_batch():
    stage = ReliabilityPrior({"n.example": 0.1}, {}, key_column="host", name="host_rel")
    out = stage(_batch())
    assert out.factors["host_rel"].tolist() == [0.5, 0.1, 0.5, 0.5]
    assert len(stage(Candidates.empty("q"))) == 0
    assert stage.describe()["key_column"] == "host"


def test_stage_rejects_out_of_range_values():
    with pytest.raises(ValueError, match=r"table\['x'\]"):
        ReliabilityPrior({"x": 1.5}, {})
    with pytest.raises(ValueError, match="type_prior"):
        ReliabilityPrior({}, {"blog": float("nan")})
    assert issubclass(StageError, ValueError)


@pytest.mark.parametrize(("entry", "said"), [
    ({"known": False, "reliability": 0.9, "coverage": 0},
     r"sources\[1\]\.reliability: expected null \(the source is unknown\), got 0\.9"),
    ({"known": True, "reliability": 0.9, "coverage": 0},
     r"sources\[1\]\.coverage: expected at least 1 \(the source is known"),
    ({"known": False, "reliability": None, "coverage": 4},
     r"sources\[1\]\.coverage: expected 0 \(the source is unknown\), got 4"),
    ({"known": True, "reliability": None, "coverage": 3},
     r"sources\[1\]\.reliability: expected a finite number in \[0, 1\]"),
])
def test_an_estimate_whose_entries_contradict_each_other_is_refused(tmp_path, entry, said):
    # finding 10: these were read as an unknown source without a word
    path = tmp_path / "est.json"
    path.write_text(json.dumps({"sources": [
        {"source_id": "a", "known": True, "reliability": 0.5, "coverage": 2},
        {"source_id": "b", **entry}]}), encoding="utf-8")
    with pytest.raises(FileFormatError, match=said):
        read_estimate(path)
    entry.update(known=True, reliability=0.5, coverage=2)
    path.write_text(json.dumps({"sources": [{"source_id": "b", **entry}]}), encoding="utf-8")
    assert read_estimate(path) == {"b": (0.5, 2)}


def test_a_bad_type_priors_file_is_said_at_type_priors(tmp_path) -> None:
    """A prior file the reliability prior could not read was blamed on its estimate (the
    parameter whose value the message happened to name first) and, at the CLI, on
    --source-reliability; it is said at type_priors, --priors at the CLI."""
    from credrank.pipeline.compile import check_stages
    from credrank.pipeline.shortcuts import CLI, in_words
    from credrank.pipeline.spec import PipelineSpec, SpecError

    bad = tmp_path / "rel.json"  # a good estimate, but no prior file (a .json)
    bad.write_text(json.dumps({"sources": [{"source_id": "a", "known": True,
                                            "reliability": 0.5, "coverage": 2}]}),
                   encoding="utf-8")
    spec = PipelineSpec.from_dict({"stages": [{"stage": "reliability_prior",
                                               "estimate": str(bad),
                                               "type_priors": str(bad)}]})
    with pytest.raises(SpecError) as caught:
        check_stages(spec)
    assert caught.value.key_path == "stages[0].type_priors"
    assert in_words(caught.value, spec, CLI).startswith("--priors: ")
