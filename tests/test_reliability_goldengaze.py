"""Golden-Gaze hosts (real data; skipped when ../shared/data is absent)."""

from __future__ import annotations

import json
import math

import pytest

from credrank.evaluate.stats import wilson
from credrank_bench.experiments.goldengaze import (
    POST_HOC,
    goldengaze_tables,
    load_goldengaze,
    run_goldengaze,
)

FILE = "goldengaze/goldengaze_trec2021_host_stances.csv.gz"


@pytest.fixture(scope="module")
def result(shared_data):
    path = shared_data / FILE
    if not path.is_file():
        pytest.skip(f"Golden-Gaze host file not available: {path}")
    return run_goldengaze(path, anchor_sizes=(10,), repeats=2)


def test_data_shape(shared_data):
    path = shared_data / FILE
    if not path.is_file():
        pytest.skip(f"Golden-Gaze host file not available: {path}")
    data = load_goldengaze(path)
    assert len(data.topics) == 50 and int((data.truth == 0).sum()) == 25
    assert data.classes.shape == (len(data.hosts), 50)
    assert ((data.classes >= 0) == (data.pages > 0)).all()


def test_sane_results(result):
    json.dumps(result)
    majority = result["unsupervised"]["majority"]["accuracy"]
    for entry in list(result["unsupervised"].values()) + list(result["anchored_loto"].values()):
        assert 0.0 <= entry["accuracy"] <= 1.0 and entry["n"] == 50
        lo, hi = entry["ci95"]
        assert lo <= entry["accuracy"] <= hi
    # anchored log-odds weighting beats the plain majority on the held-out topics
    assert result["anchored_loto"]["one-coin log-odds (Laplace)"]["accuracy"] >= majority
    assert result["anchored_loto"]["ridge-learned host weights"]["accuracy"] >= majority
    # the agreement consensus is flagged, not presented as truth
    assert result["diagnostics"]["trustworthy"] is False
    for corr in result["correlation"].values():
        assert corr["n"] >= 1000
        for key in ("pearson", "spearman"):
            assert corr[key] is None or math.isfinite(corr[key])
    assert "markdown" not in result


def test_tables_hold_the_result_as_data(result):
    tables = {t.key: t for t in goldengaze_tables(result)}
    assert list(tables) == ["unsupervised", "anchored_loto", "host_filters", "correlation",
                            "anchored_few"]
    loto = tables["anchored_loto"]
    assert loto.baseline == "majority" and loto.columns[0].direction == "higher"
    majority = result["unsupervised"]["majority"]["accuracy"]
    for name, entry in result["anchored_loto"].items():
        cell = loto.row(name).metrics["accuracy"]
        assert cell.mean == entry["accuracy"] and cell.n == 50
        assert (cell.ci_low, cell.ci_high) == tuple(entry["ci95"])
        assert cell.delta == pytest.approx(entry["accuracy"] - majority)
        assert cell.wins + cell.losses + cell.ties == 50
    assert loto.row(POST_HOC).notes
    for table in tables.values():
        assert all(row.reads_labels is False for row in table.rows)


def test_wilson_interval():
    lo, hi = wilson(38, 50, z=1.96)
    assert lo == pytest.approx(0.6258, abs=1e-3) and hi == pytest.approx(0.8570, abs=1e-3)
    assert wilson(0, 0) == (0.0, 1.0)
