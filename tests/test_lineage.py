"""Chapter 35.7 through the provenance audit: inherited dates, the laundering ratio, its bound,
telescoping hops, re-measurements, cycles, copies without citation, and work that scales with
the reachable subgraph.

Dates: the exact chapter numbers need ``T − t`` to be exact multiples of ``τ``. The main corpus
therefore dates documents at ``T − k·365`` days with ``τ = 365d`` (exact: 0.125, 0.015625, 8,
32, 64). With calendar dates (2020-01-01, 2023-01-01, T = 2026-01-01) and ``τ = 1y = 365.25``
days the numbers are close, not exact (leap days): checked with ``pytest.approx``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from credrank.cli.provenance import app, parse_half_life
from credrank.freshness.lineage import (
    ProvenanceGraph,
    audit,
    inherited_dates,
    record_from_payload,
)

T = datetime(2026, 1, 1, tzinfo=UTC)


def ago(years: float) -> str:
    """ISO instant ``years × 365`` days before T (exact multiples of τ = 365d)."""
    return (T - timedelta(days=365 * years)).isoformat()


def _corpus() -> list[dict]:
    text = "the survey measured {} percent of households in region {} using method {}"
    rows = [
        # the 2020 origin (observed then, published a little later)
        {"id": "origin", "observed_at": ago(6), "published_at": ago(5.9)},
        {"id": "w2023", "published_at": ago(3), "cites": ["origin"]},
        {"id": "w2025", "published_at": ago(1), "cites": ["origin"]},
        # three hops ending at the same 2023 date
        {"id": "h1", "published_at": ago(5), "cites": ["origin"]},
        {"id": "h2", "published_at": ago(4), "cites": ["h1"]},
        {"id": "m2023", "published_at": ago(3), "cites": ["h2"]},
        # an independent re-measurement: its own observed_at
        {"id": "remeasure", "observed_at": ago(2), "published_at": ago(2), "cites": ["origin"]},
        # a cycle
        {"id": "c1", "published_at": ago(4), "cites": ["c2"]},
        {"id": "c2", "published_at": ago(3), "cites": ["c1"]},
        # a dangling citation
        {"id": "dangle", "published_at": ago(2), "cites": ["not-indexed"]},
    ]
    for i, r in enumerate(rows):
        r["text"] = text.format(10 + i, chr(65 + i), f"m{i}") + f" note {r['id']} " * 3
        r["url"] = f"https://example.org/{r['id']}"
    # a copy of the origin's text, published in 2024, citing nothing
    rows.append({"id": "copy2024", "text": rows[0]["text"], "published_at": ago(2),
                 "url": "https://mirror.example.net/copy"})
    return rows


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    from credrank.documents import iter_documents
    from credrank.index import open_store
    from credrank.index.embed import get_embedder
    from credrank.index.ingest import index_documents
    from credrank.provenance import SourceTyper

    root = tmp_path_factory.mktemp("lineage")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in _corpus()), encoding="utf-8")
    emb = get_embedder("hashing")
    where = root / "index"
    with open_store(where, "edge", embedder=emb.name, dim=emb.dim, create=True) as idx:
        index_documents(iter_documents(corpus), idx, emb, SourceTyper())
    return where


def _run(index_dir, *extra):
    result = CliRunner().invoke(app, ["audit", "--index", str(index_dir), "--now",
                                      "2026-01-01", "--half-life", "365d", "--json", *extra])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["credrank_provenance_audit"] == 1
    return data, {c["wrapper"]: c for c in data["candidates"]}


def test_chapter_numbers_through_the_audit(index_dir):
    data, by = _run(index_dir)
    w = by["w2023"]
    assert w["origin"] == "origin" and w["hops"] == 1
    assert w["weight_wrapper"] == 0.125 and w["weight_origin"] == 0.015625
    assert w["ratio"] == 8.0 and w["chain_ratio"] == pytest.approx(8.0, rel=1e-12)
    assert w["bound"] == 64.0
    assert [h["doc_id"] for h in w["chain"]] == ["w2023", "origin"]
    assert w["chain"][1] == {"doc_id": "origin", "edge": "cites", "date": ago(6),
                             "basis": "observed_at"}
    # a 2025 wrapper: 1/2 and ratio 32, same bound
    v = by["w2025"]
    assert v["weight_wrapper"] == 0.5 and v["ratio"] == 32.0 and v["bound"] == 64.0
    # more hops, same final date: same ratio; the hop factors telescope
    m = by["m2023"]
    assert m["hops"] == 3 and [h["doc_id"] for h in m["chain"]] == ["m2023", "h2", "h1",
                                                                      "origin"]
    assert m["ratio"] == w["ratio"] == 8.0
    assert m["chain_ratio"] == pytest.approx(8.0, rel=1e-12)
    assert by["h1"]["ratio"] == 2.0 and by["h2"]["ratio"] == 4.0
    # every ratio stays under the chapter's bound
    assert all(c["ratio"] <= c["bound"] for c in data["candidates"])
    # sorted by ratio, largest first
    assert data["candidates"][0]["wrapper"] == "w2025"


def test_remeasurement_is_not_flagged_and_dangling_is_listed(index_dir):
    data, by = _run(index_dir)
    assert "remeasure" not in by and "origin" not in by
    assert data["counts"]["independent_remeasurements"] == 1
    assert data["dangling"] == [{"doc_id": "dangle", "cites": "not-indexed"}]
    assert "dangle" not in by
    assert "copy2024" not in by  # no copy detection asked for


def test_cycle_is_reported_not_looped(index_dir):
    data, by = _run(index_dir)
    assert data["cycles"] == [["c1", "c2"]]
    # policy: the earliest publication in the cycle is its origin; c2 repeats c1
    assert by["c2"]["origin"] == "c1" and by["c2"]["ratio"] == 2.0
    assert by["c2"]["cycle"] == ["c1", "c2"] and "c1" not in by


def test_copy_without_citation_found_by_the_text_test(index_dir):
    data, by = _run(index_dir, "--copies", "text")
    c = by["copy2024"]
    assert c["origin"] == "origin" and c["chain"][1]["edge"] == "copy"
    assert c["ratio"] == 16.0 and c["bound"] == 64.0
    assert data["copies"]["mode"] == "text" and data["copies"]["searches"] >= 1
    assert "Jaccard >= 0.5" in data["copies"]["test"]


def test_human_table(index_dir):
    result = CliRunner().invoke(app, ["audit", "--index", str(index_dir), "--now",
                                      "2026-01-01", "--half-life", "365d"])
    assert result.exit_code == 0, result.output
    assert "w2023" in result.output and "cycle (reported, not followed): c1 -> c2" in \
        result.output
    assert f"m2023 ({ago(3)[:10]}) <- h2 ({ago(4)[:10]}, cites)" in result.output


def test_bad_options_are_clear_errors(index_dir, tmp_path):
    for args, needle in ((["--half-life", "0d"], "--half-life"),
                         (["--half-life", "soon"], "--half-life"),
                         (["--copies", "minhash"], "--copies"),
                         (["--now", "tomorrow"], "--now")):
        r = CliRunner().invoke(app, ["audit", "--index", str(index_dir), *args])
        assert r.exit_code == 2 and needle in r.output, r.output
    r = CliRunner().invoke(app, ["audit", "--index", str(tmp_path / "none")])
    assert r.exit_code == 2


def test_half_life_units():
    assert parse_half_life("365d") == 365.0
    assert parse_half_life("1y") == 365.25
    assert parse_half_life("2w") == 14.0 and parse_half_life("7") == 7.0


# -- pure functions ----------------------------------------------------------------------------

def _graph(rows: list[dict]) -> ProvenanceGraph:
    return ProvenanceGraph.from_payloads(rows, T)


def test_calendar_years_give_the_chapter_numbers_approximately():
    g = _graph([{"id": "o", "observed_at": "2020-01-01"},
                {"id": "w", "published_at": "2023-01-01", "cites": ["o"]}])
    (c,) = audit(g, ["o", "w"], T, 365.25).candidates
    # 2020-01-01 → 2023-01-01 is 1096 days (a leap day), 3.0007 years: approximately 8
    assert c.ratio == pytest.approx(8.0, rel=1e-3)
    assert c.weight_wrapper == pytest.approx(0.125, rel=1e-3)
    assert c.weight_origin == pytest.approx(0.015625, rel=1e-3)
    assert c.bound == pytest.approx(64.0, rel=1e-3)


def test_inherited_dates_for_the_freshness_stage():
    g = _graph([{"id": "o", "observed_at": "2020-01-01"},
                {"id": "a", "published_at": "2023-01-01", "cites": ["o"]},
                {"id": "b", "published_at": "2025-01-01", "cites": ["a", "late"]},
                {"id": "late", "published_at": "2024-01-01"},
                {"id": "u", "published_at": "2024-01-01", "cites": ["undated"]},
                {"id": "undated"}])
    got = inherited_dates(g, ["o", "a", "b", "late", "u"])
    assert set(got) == {"a", "b", "u"}
    # b reaches both 2020 (via a) and 2024 (late): the earliest evidence wins
    assert got["b"].date == datetime(2020, 1, 1, tzinfo=UTC) and got["b"].basis == "inherited:o"
    # every origin reached is undated: unknown, never the wrapper's own 2024
    assert got["u"].date is None and got["u"].basis == "inherited:undated"
    assert g.chain("b") == [("b", None), ("a", "cites"), ("o", "cites")]


def test_future_dates_are_clamped_and_anachronisms_listed():
    g = _graph([{"id": "o", "observed_at": "2020-01-01"},
                {"id": "future", "published_at": "2030-01-01", "cites": ["o"]},
                {"id": "early", "published_at": "2019-01-01", "cites": ["o"]}])
    r = audit(g, ["o", "future", "early"], T, 365.25)
    (c,) = r.candidates
    assert c.wrapper == "future" and c.t_n == T and c.ratio == pytest.approx(c.bound)
    assert r.anachronisms == ["early"]


def test_long_cycle_and_self_citation_terminate():
    n = 50
    rows = [{"id": f"n{i}", "published_at": f"{2000 + i}-01-01", "cites": [f"n{(i + 1) % n}"]}
            for i in range(n)]
    rows.append({"id": "self", "published_at": "2024-01-01", "cites": ["self"]})
    g = _graph(rows)
    r = audit(g, [f"n{i}" for i in range(n)] + ["self"], T, 365.25)
    assert r.cycles == [tuple(sorted(f"n{i}" for i in range(n)))]
    assert len(r.candidates) == n - 1  # every member but the earliest (n0) repeats it
    assert {c.origin for c in r.candidates} == {"n0"}
    assert all(c.hops >= 1 for c in r.candidates)
    assert g.record("self").parents == ()  # a self-citation is dropped


def test_malformed_payloads_are_clear_errors():
    with pytest.raises(ValueError, match="x: field 'cites'"):
        record_from_payload({"doc_id": "x", "cites": "y"})
    with pytest.raises(ValueError, match="published_at"):
        record_from_payload({"doc_id": "x", "published_at": "yesterday"})
    with pytest.raises(ValueError, match="twice"):
        r = record_from_payload({"id": "a"})
        ProvenanceGraph.from_records([r, r])


# -- work scales with the reachable subgraph ---------------------------------------------------

def _components(n_components: int, size: int) -> list[dict]:
    """Disconnected chains of ``size`` documents: c<k>-0 is observed, each next cites it."""
    rows = []
    for k in range(n_components):
        rows.append({"id": f"c{k}-0", "observed_at": "2020-01-01"})
        rows += [{"id": f"c{k}-{j}", "published_at": f"{2020 + j}-06-01",
                  "cites": [f"c{k}-{j - 1}"]} for j in range(1, size)]
    return rows


@pytest.mark.parametrize("n_components", [10, 1000])
def test_visits_equal_the_reachable_subgraph(n_components):
    size = 5
    records = {r["id"]: record_from_payload(r, T) for r in _components(n_components, size)}
    asked: list[str] = []

    def fetch(ids):
        asked.extend(ids)
        return [records[i] for i in ids if i in records]

    g = ProvenanceGraph(fetch)
    inherited_dates(g, ["c3-4"])  # the end of one chain reaches its 5 documents
    assert sorted(asked) == sorted(f"c3-{j}" for j in range(size))
    assert g.stats.fetched == g.stats.expanded == size
    # memoised: asking again, or for a node inside the chain, does no new work
    inherited_dates(g, ["c3-4", "c3-2"])
    assert g.stats.expanded == size and g.stats.fetched == size
    # the whole corpus: each document expanded once (linear, not all pairs)
    audit(g, list(records), T, 365.25)
    assert g.stats.expanded == g.stats.fetched == len(records)
    assert g.stats.edges == n_components * (size - 1)


def test_search_freshness_lineage_inherits_the_origin_date(index_dir):
    """`credrank search --freshness …,lineage=cites`: the 2023 wrapper weighs as its 2020
    origin (2^−6), not as its own publication (2^−3); a re-measurement keeps its own date."""
    from credrank.cli import app as main_app

    def factors(option: str) -> dict[str, dict]:
        res = CliRunner().invoke(main_app, [
            "search", "survey households region", "--index", str(index_dir), "--top-k", "11",
            "--fetch-k", "11", "--priors", "none", "--freshness", option, "--json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        return doc, {h["doc_id"]: h["score_breakdown"] for h in doc["hits"]}

    base = "half_life=365d,now=2026-01-01"
    _doc, plain = factors(base)
    doc, inherited = factors(base + ",lineage=cites")
    assert plain["w2023"]["freshness"] == pytest.approx(0.125)
    assert inherited["w2023"]["freshness"] == pytest.approx(0.015625)
    assert inherited["m2023"]["freshness"] == pytest.approx(0.015625)  # three hops, same origin
    assert inherited["remeasure"]["freshness"] == pytest.approx(plain["remeasure"]["freshness"])
    assert doc["info"]["lineage"]["wrappers"]["w2023"] == "origin"
    assert doc["settings"]["pushdown"] is False and doc["settings"]["freshness"]["lineage"]
    bad = CliRunner().invoke(main_app, ["search", "q", "--index", str(index_dir),
                                        "--freshness", base + ",lineage=maybe"])
    assert bad.exit_code == 2 and "lineage" in bad.output


def test_context_tiers_a_wrapper_at_the_date_the_ranking_used(index_dir):
    """``credrank context`` with ``lineage=cites``: the 2023 wrapper is tiered by its origin's
    age, as the ranking weighed it (the context read only the wrapper's own date, so the
    laundering the rule undoes reached the generator as a fresher tier); its citation still
    gives the wrapper's own date."""
    from credrank.cli import app as main_app

    def passages(freshness: str) -> dict[str, dict]:
        res = CliRunner().invoke(main_app, [
            "context", "survey households region", "--index", str(index_dir), "--top-k", "11",
            "--fetch-k", "11", "--priors", "none", "--freshness", freshness, "--half-life",
            "365d", "--json"])
        assert res.exit_code == 0, res.output
        out = {p["doc_id"]: p for p in json.loads(res.stdout)["passages"]}
        out["prompt"] = json.loads(res.stdout)["prompt"]
        return out

    base = "half_life=365d,now=2026-01-01"
    plain, chained = passages(base), passages(base + ",lineage=cites")
    w, origin = chained["w2023"]["inputs"]["freshness"], chained["origin"]["inputs"]["freshness"]
    assert w["basis"] == "inherited:origin" and w["date"] == origin["date"]
    assert w["document_date"][:10] == ago(3)[:10]
    assert w["downgrade"] == origin["downgrade"] == 6
    assert plain["w2023"]["inputs"]["freshness"]["downgrade"] == 3
    assert "date: " + ago(3)[:10] in json.dumps(chained["prompt"])


def test_a_citation_of_a_newer_origin_is_an_anachronism_not_a_wrapper(tmp_path):
    """``info.lineage.wrappers`` listed a document citing a newer origin, though it was not
    weighed at that origin's date; it is listed under ``anachronisms`` now."""
    from credrank import Searcher
    from credrank.documents import iter_documents
    from credrank.index import open_store
    from credrank.index.embed import get_embedder
    from credrank.index.ingest import index_documents
    from credrank.provenance import SourceTyper

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in (
        {"id": "o", "text": "fuel spending survey origin", "published_at": "2025-06-01"},
        {"id": "early", "text": "fuel spending survey repeated", "published_at": "2024-01-01",
         "cites": ["o"]},
        {"id": "late", "text": "fuel spending survey repeated later",
         "published_at": "2025-09-01", "cites": ["o"]})), encoding="utf-8")
    emb = get_embedder("hashing")
    with open_store(tmp_path / "idx", "edge", embedder=emb.name, dim=emb.dim,
                    create=True) as store:
        index_documents(iter_documents(corpus), store, emb, SourceTyper())
    with Searcher.open(tmp_path / "idx") as searcher:
        spec = Searcher.spec(top_k=3, freshness="half_life=365d,now=2026-01-01,lineage=cites")
        result = searcher.search("fuel spending survey", spec)
    lineage = result.info["lineage"]
    assert lineage["wrappers"] == {"late": "o"}
    assert lineage["anachronisms"] == {"early": "o"}


# -- bounded chains and extreme inputs (issue 23) ----------------------------------------------

def test_hop_cap_lists_the_ends_and_counts_the_rest(index_dir):
    data, by = _run(index_dir, "--max-hops-listed", "1")
    assert data["max_hops_listed"] == 1
    m = by["m2023"]
    assert m["hops"] == 3 and m["hops_elided"] == 2 and m["chain_gap"] == 1
    assert [h["doc_id"] for h in m["chain"]] == ["m2023", "origin"]
    assert m["ratio"] == 8.0 and m["log2_ratio"] == 3.0 and m["overflow"] == []
    w = by["w2023"]
    assert w["hops_elided"] == 0 and w["chain_gap"] is None and len(w["chain"]) == 2
    _data, default = _run(index_dir)
    assert default["m2023"]["hops_elided"] == 0 and len(default["m2023"]["chain"]) == 4
    table = CliRunner().invoke(app, ["audit", "--index", str(index_dir), "--now", "2026-01-01",
                                     "--half-life", "365d", "--max-hops-listed", "2"])
    assert table.exit_code == 0, table.output
    assert (f"m2023 ({ago(3)[:10]}) <- h2 ({ago(4)[:10]}, cites) <- ... 1 hops elided ... <- "
            f"origin ({ago(6)[:10]}, cites)") in table.stdout
    helped = CliRunner().invoke(app, ["audit", "--help"])
    assert "--max-hops-listed" in helped.output


def _strict_json(text: str) -> dict:
    """JSON that must hold no NaN or Infinity."""
    def refuse(name: str) -> None:
        raise AssertionError(f"non-finite number {name} in the JSON output")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("args, needle", [
    (["--half-life", "1e-300d"], "--half-life"),
    (["--half-life", "1e-11d"], "--half-life"),  # below one microsecond
    (["--half-life", "1e-400d"], "--half-life"),  # parses to 0.0
    (["--half-life", "1e400d"], "--half-life"),  # parses to inf
    (["--half-life", "9" * 400 + "y"], "--half-life"),
    (["--now", "10000-01-01"], "--now"),
    (["--now", "0000-12-31"], "--now"),
    (["--max-hops-listed", "0"], "--max-hops-listed"),
    (["--max-hops-listed", "-5"], "--max-hops-listed"),
])
def test_extreme_options_are_clear_errors(index_dir, args, needle):
    r = CliRunner().invoke(app, ["audit", "--index", str(index_dir), *args])
    assert r.exit_code == 2, r.output
    assert "error:" in r.stderr and needle in r.stderr, r.stderr
    assert "Traceback" not in r.output + r.stderr
    assert r.exception is None or isinstance(r.exception, SystemExit)


@pytest.mark.parametrize("now", ["9999-12-31", "9999-12-31T23:59:59.999999-14:00"])
def test_far_evaluation_time_gives_declared_overflow(index_dir, now):
    """T = 9999-12-31 with τ = 365 days: the bound 2^((T − t_0)/τ) ≈ 2^7980 exceeds the float
    range: null in JSON, named in ``overflow``, its exponent exact; the weights underflow to
    0.0; the ratio 2^((t_n − t_0)/τ) does not depend on T and stays 8."""
    res = CliRunner().invoke(app, ["audit", "--index", str(index_dir), "--now", now,
                                   "--half-life", "365d", "--json"])
    assert res.exit_code == 0, res.output
    data = _strict_json(res.stdout)
    w = {c["wrapper"]: c for c in data["candidates"]}["w2023"]
    assert w["bound"] is None and w["overflow"] == ["bound"]
    assert 7970 < w["log2_bound"] < 7990
    assert w["ratio"] == 8.0 and w["log2_ratio"] == 3.0
    assert w["weight_wrapper"] == 0.0 and w["weight_origin"] == 0.0
    table = CliRunner().invoke(app, ["audit", "--index", str(index_dir), "--now", now,
                                     "--half-life", "365d"])
    assert table.exit_code == 0 and "2^79" in table.stdout, table.output


@pytest.mark.parametrize("now", ["0001-01-01", "0001-01-01T00:00:00+14:00"])
def test_earliest_evaluation_time_clamps_everything(index_dir, now):
    """T = 0001-01-01: every date is after T and clamped to it (age 0), so no wrapper is later
    than its origin: no candidates, finite output."""
    for extra in ((), ("--json",)):
        res = CliRunner().invoke(app, ["audit", "--index", str(index_dir), "--now", now,
                                       "--half-life", "365d", *extra])
        assert res.exit_code == 0, res.output
    data = _strict_json(res.stdout)
    assert data["counts"]["candidates"] == 0 and data["counts"]["inherited"] > 0


def test_tiny_half_life_gives_exponents_not_infinities(index_dir):
    """τ = 1e-10 days (above the one-microsecond floor): every ratio overflows and is null
    beside its finite exponent; weights are 0.0."""
    res = CliRunner().invoke(app, ["audit", "--index", str(index_dir), "--now", "2026-01-01",
                                   "--half-life", "1e-10d", "--json"])
    assert res.exit_code == 0, res.output
    data = _strict_json(res.stdout)
    for c in data["candidates"]:
        assert c["overflow"] == ["ratio", "chain_ratio", "bound"]
        assert c["ratio"] is None and 1e12 < c["log2_ratio"] < 1e15
        assert c["weight_wrapper"] == 0.0


def test_extreme_dates_in_the_data_are_finite():
    """An origin observed in year 1 and a wrapper dated 9999 (clamped to T), with τ = 1 day:
    the ratio 2^(~739,000) is declared as an overflow; τ under a microsecond is refused."""
    g = _graph([{"id": "o", "observed_at": "0001-01-01"},
                {"id": "w", "published_at": "9999-12-31", "cites": ["o"]}])
    (c,) = audit(g, ["o", "w"], T, 1.0).candidates
    assert c.ratio is None and c.bound is None and c.chain_ratio is None
    assert c.t_n == T and c.log2_ratio == c.log2_bound == pytest.approx(739_617, abs=1)
    assert c.weight_origin == 0.0
    d = audit(g, ["o", "w"], T, 1.0).to_dict()["candidates"][0]
    assert d["overflow"] == ["ratio", "chain_ratio", "bound"]
    for tau in (1e-300, 5e-324, 0.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="half_life"):
            audit(g, ["w"], T, tau)


def test_decay_never_overflows_or_divides_zero_by_zero():
    from credrank.freshness.decay import (
        chain_ratio,
        distortion_bound,
        distortion_ratio,
        exp2_declared,
        log2_distortion_ratio,
    )

    assert exp2_declared(3.0) == 8.0 and exp2_declared(1024.0) is None
    assert exp2_declared(-5000.0) == 0.0 and exp2_declared(1023.5) is not None
    with pytest.raises(ValueError, match="log2"):
        exp2_declared(float("nan"))
    # a ratio beyond the float range: ValueError (not OverflowError), the exponent exact
    with pytest.raises(ValueError, match="ratio"):
        distortion_ratio(2000.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="bound"):
        distortion_bound(0.0, 2000.0, 1.0)
    assert log2_distortion_ratio(2000.0, 0.0, 1.0) == 2000.0
    # weights that underflow to 0 (2^-100000): the chain product is summed as exponents, 2^100
    assert chain_ratio([0.0, 50.0, 100.0], 1e5, 1.0) == 2.0 ** 100
    with pytest.raises(ValueError, match="log2_ratio"):
        log2_distortion_ratio(1e300, -1e300, 1e-300)


def test_an_origin_newer_than_the_wrapper_never_makes_it_fresher():
    """An origin dated after the document that cites it is an anachronism (a data error), not
    older evidence: the document keeps its own date (it weighed as the newer origin, twice
    as fresh; a future origin even gave it 1.0)."""
    from datetime import UTC, datetime

    from conftest import build_batch
    from credrank.stages.freshness import FreshnessDecay

    now = datetime(2026, 1, 1, tzinfo=UTC)
    batch = build_batch(
        [0.5, 0.5, 0.5], ids=["older", "anach", "future"],
        published_at=["2024-01-01T00:00:00+00:00", "2019-01-01T00:00:00+00:00",
                      "2025-06-01T00:00:00+00:00"],
        inherited_at=["2020-01-01T00:00:00+00:00", "2020-01-02T00:00:00+00:00",
                      "2031-01-01T00:00:00+00:00"],
        inherited_basis=["inherited:o1", "inherited:o2", "inherited:o3"])
    w, _ = FreshnessDecay("365d", now=now, lineage="cites").weights(batch, now)
    own = FreshnessDecay("365d", now=now).weights(
        build_batch([0.5, 0.5], ids=["anach", "future"],
                    published_at=["2019-01-01T00:00:00+00:00", "2025-06-01T00:00:00+00:00"]),
        now)[0]
    origin_age = (now - datetime(2020, 1, 1, tzinfo=UTC)).days
    assert w[0] == pytest.approx(2 ** (-origin_age / 365))  # older evidence: the origin's date
    assert list(w[1:]) == pytest.approx(list(own))  # their own dates stand


def test_an_undirected_copy_pair_is_counted_once(tmp_path):
    # two copies of one text on one date: no direction, no edge; the pair was counted from
    # both ends (8 reported for 4 pairs)
    from credrank.documents import iter_documents
    from credrank.index import open_store
    from credrank.index.embed import get_embedder
    from credrank.index.ingest import index_documents
    from credrank.provenance import SourceTyper

    text = "households in the region spent more on fuel this winter, the survey found"
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in (
        {"id": "a", "text": text, "published_at": "2024-01-01"},
        {"id": "b", "text": text, "published_at": "2024-01-01"},
        {"id": "c", "text": "an unrelated page on gardening tomatoes", "published_at":
         "2024-01-01"})), encoding="utf-8")
    emb = get_embedder("hashing")
    with open_store(tmp_path / "idx", "edge", embedder=emb.name, dim=emb.dim,
                    create=True) as store:
        index_documents(iter_documents(corpus), store, emb, SourceTyper())
    data, _ = _run(tmp_path / "idx", "--copies", "text")
    assert data["copies"]["undirected"] == 1
