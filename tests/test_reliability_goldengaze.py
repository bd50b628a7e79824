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


def test_a_bad_file_is_named_with_its_line(tmp_path):
    """A short row was a ``TypeError`` traceback, a file that is not gzip said only "Not a
    gzipped file", a byte that is not UTF-8 named no file."""
    import gzip

    header = "topic_id,correct_stance,host,helpful_probability\n"
    ok = "101,helpful,a.com,0.9\n"
    cases = {"short.csv.gz": (header + ok + "101,unhelpful,short.com\n",
                              r"short\.csv\.gz:3: expected 4 columns, got 3"),
             "long.csv.gz": (header + ok + "101,helpful,b.com,0.2,x\n",
                             r"long\.csv\.gz:3: expected 4 columns, got 5")}
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(gzip.compress(text.encode("utf-8")))
        with pytest.raises(ValueError, match=message):
            load_goldengaze(path)
    plain = tmp_path / "plain.csv"
    plain.write_text(header + ok, encoding="utf-8")
    with pytest.raises(ValueError, match=r"plain\.csv: expected a gzip-compressed CSV"):
        load_goldengaze(plain)
    latin = tmp_path / "latin.csv.gz"
    latin.write_bytes(gzip.compress((header + "101,helpful,caf\xe9.com,0.9\n").encode("latin-1")))
    with pytest.raises(ValueError, match=r"latin\.csv\.gz: .*expected UTF-8 text, got the "
                                         r"byte 0xe9"):
        load_goldengaze(latin)


def test_options_the_bench_does_not_use_are_refused(tmp_path):
    """``--table`` did nothing outside demo and trec2019-hm, ``--embedder`` and ``--cache``
    nothing where no text is embedded: accepted, ignored, exit 0."""
    from credrank_bench.experiments.benches import BenchOptions, run_bench

    with pytest.raises(ValueError, match=r"bench coaid-priors: --table is not used by this "
                                         r"bench \(only by demo, trec2019-hm"):
        run_bench("coaid-priors", BenchOptions(tmp_path, tables=[tmp_path / "t.csv"]))
    with pytest.raises(ValueError, match=r"bench ra-rag-simulation: --embedder is not used"):
        run_bench("ra-rag-simulation", BenchOptions(embedder="hashing"))
    with pytest.raises(ValueError, match=r"bench goldengaze-hosts: --cache is not used"):
        run_bench("goldengaze-hosts", BenchOptions(tmp_path, cache_dir=tmp_path))
