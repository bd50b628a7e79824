"""The RA-RAG simulation protocol: sane properties of a small run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from credrank_bench.experiments.ra_rag_simulation import (
    beta_reliabilities,
    run_simulation,
    simulate_answers,
    simulation_tables,
)


def test_beta_prior_has_mean_q():
    r = beta_reliabilities(0.7, 20_000, np.random.default_rng(0))
    assert r.mean() == pytest.approx(0.7, abs=0.01)
    with pytest.raises(ValueError, match="q"):
        beta_reliabilities(1.0, 3, np.random.default_rng(0))


def test_simulated_answers_follow_the_reliabilities():
    sim = simulate_answers(50, 400, 0.7, abstain=0.0, seed=1)
    acc = (sim.classes == sim.truth[None, :]).mean(axis=1)
    assert np.corrcoef(acc, sim.reliability)[0, 1] > 0.95
    # the truth's class id is shuffled: not always 0
    assert len(set(sim.truth.tolist())) > 1


def test_copies_are_identical_rows():
    sim = simulate_answers(5, 50, 0.7, variant="copies", n_copies=4, seed=2)
    copies = sim.classes[sim.adversarial]
    assert copies.shape[0] == 4 and (copies == copies[0]).all()


def test_small_run_properties():
    res = run_simulation(seed=0, repeats=2,
                         scenarios=(("honest", 0.7), ("copies", 0.6)))
    honest, copies = res["rows"]
    assert honest["pearson"] > 0.8 and honest["acc_iwmv"] >= honest["acc_majority"] - 0.01
    assert copies["acc_iwmv_collapsed"] > copies["acc_iwmv"]
    assert copies["adversaries_clustered"] == 6
    assert "markdown" not in res
    json.dumps(res)
    votes, estimates = simulation_tables(res)
    assert [c.name for c in votes.columns] == ["honest, q=0.7", "copies, q=0.6"]
    assert votes.mean("IWMV (paper weights)", "honest, q=0.7") == honest["acc_iwmv"]
    flags = {r.system: r.reads_labels for r in votes.rows}
    assert flags.pop("oracle weights v = S·r − 1 (true r)") is True
    assert not any(flags.values())
    assert estimates.kind == "descriptive"
    assert estimates.row("copies, q=0.6").params["adversaries_clustered"] == 6
