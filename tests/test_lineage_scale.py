"""Long citation chains (issue 23): bounded reports with exact hop counts, resolution and
listing that stay linear in the graph, and listed chains that agree with the full ones.

A chain of ``L`` documents: ``d0`` observed on 1700-01-01, each next one published a day later
and citing the previous one; every ``d<i>`` (``i >= 1``) is a candidate ``i`` hops from ``d0``.
Listing every wrapper's whole chain would be ``L(L − 1)/2`` hops (50 million at ``L =
10,000``); a report lists at most ``H`` hops per wrapper.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from credrank.cli.provenance import app
from credrank.freshness.dates import FreshnessDate
from credrank.freshness.decay import log2_chain_ratio
from credrank.freshness.lineage import (
    MAX_HOPS_LISTED,
    ProvenanceGraph,
    Record,
    audit,
    record_from_payload,
)

T = datetime(2026, 1, 1, tzinfo=UTC)
T0 = datetime(1700, 1, 1, tzinfo=UTC)
UNKNOWN = FreshnessDate(None, "unknown")


def chain_rows(length: int) -> list[dict]:
    rows = [{"id": "d0", "observed_at": T0.isoformat(), "text": "a survey measured 41 percent"}]
    rows += [{"id": f"d{i}", "published_at": (T0 + timedelta(days=i)).isoformat(),
              "cites": [f"d{i - 1}"], "text": f"page {i} repeats page {i - 1}"}
             for i in range(1, length)]
    return rows


def chain_records(length: int) -> list[Record]:
    """The same chain as records built directly (no date parsing: fast at 100,000)."""
    out = [Record("d0", (), FreshnessDate(T0, "observed_at"), FreshnessDate(None, "unknown"))]
    out += [Record(f"d{i}", ((f"d{i - 1}", "cites"),), UNKNOWN,
                   FreshnessDate(T0 + timedelta(days=i), "published_at"))
            for i in range(1, length)]
    return out


def check_listed(c: dict, cap: int) -> None:
    """One candidate of the chain: exact hops and origin, a bounded chain that agrees with the
    full one at both ends, and the count of the elided hops."""
    i = int(c["wrapper"][1:])
    assert c["origin"] == "d0" and c["hops"] == i
    listed = [h["doc_id"] for h in c["chain"]]
    assert len(listed) <= cap + 1
    if i <= cap:
        assert listed == [f"d{j}" for j in range(i, -1, -1)]
        assert c["hops_elided"] == 0 and c["chain_gap"] is None
        return
    tail = (cap + 1) // 2
    head = cap - tail
    assert c["hops_elided"] == i - cap and c["chain_gap"] == head + 1
    assert listed == [f"d{j}" for j in range(i, i - head - 1, -1)] + \
        [f"d{j}" for j in range(tail - 1, -1, -1)]
    assert c["chain"][-1]["basis"] == "observed_at" and c["chain"][0]["edge"] is None


@pytest.mark.slow
def test_ten_thousand_long_chain_through_the_cli(tmp_path):
    """`credrank provenance audit --json` on a 10,000-document `cites` chain: 9,999 candidates,
    each listing at most 20 hops with its exact hop count; the document is linear in N (the
    full chains would be 50 million hops), and the table lists the same bounded chains."""
    from credrank.documents import iter_documents
    from credrank.index import open_store
    from credrank.index.embed import get_embedder
    from credrank.index.ingest import index_documents
    from credrank.provenance import SourceTyper

    n = 10_000
    corpus = tmp_path / "chain.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in chain_rows(n)), encoding="utf-8")
    emb = get_embedder("hashing")
    where = tmp_path / "index"
    with open_store(where, "edge", embedder=emb.name, dim=emb.dim, create=True) as idx:
        index_documents(iter_documents(corpus), idx, emb, SourceTyper())
    base = ["audit", "--index", str(where), "--now", "2026-01-01", "--half-life", "1y"]
    res = CliRunner().invoke(app, [*base, "--json"])
    assert res.exit_code == 0, res.output
    # linear: about 120 bytes per listed hop, never the 50 million hops of the whole chains
    assert len(res.stdout) < n * (MAX_HOPS_LISTED + 1) * 160
    data = json.loads(res.stdout)
    assert data["max_hops_listed"] == MAX_HOPS_LISTED
    assert data["counts"]["candidates"] == n - 1 and data["documents"] == n
    assert data["work"]["expanded"] == n and data["work"]["edges"] == n - 1
    cands = data["candidates"]
    assert sorted(c["hops"] for c in cands) == list(range(1, n))
    for c in cands:
        check_listed(c, MAX_HOPS_LISTED)
        assert c["overflow"] == [] and c["log2_chain_ratio"] == pytest.approx(c["log2_ratio"])
    assert cands[0]["wrapper"] == f"d{n - 1}"  # largest ratio first
    # the table: one row and one bounded chain line per candidate
    table = CliRunner().invoke(app, [*base, "--max-hops-listed", "4"])
    assert table.exit_code == 0, table.output
    chains = [line for line in table.stdout.splitlines() if line.startswith("    chain: ")]
    assert len(chains) == n - 1
    assert chains[0] == (f"    chain: d{n - 1} (1727-05-19) <- d{n - 2} (1727-05-18, cites) <- "
                         f"d{n - 3} (1727-05-17, cites) <- ... {n - 5} hops elided ... <- "
                         "d1 (1700-01-02, cites) <- d0 (1700-01-01, cites)")
    assert max(len(line) for line in chains) < 200


@pytest.mark.parametrize("order", ["origin first", "deepest first"])
def test_hundred_thousand_long_chain_resolves_iteratively_in_linear_work(order):
    """Tarjan and the inheritance are iterative: a chain of 100,000 resolves from either end
    (no recursion limit), each node expanded once and each edge walked once; the bounded
    listing and the chain exponents are memoised along the next-hop pointers."""
    n = 100_000
    records = chain_records(n)
    g = ProvenanceGraph.from_records(records)
    ids = [r.doc_id for r in records]
    if order == "deepest first":
        ids.reverse()
    got = g.resolve(ids)
    assert got[f"d{n - 1}"].hops == n - 1 and got[f"d{n - 1}"].origin == "d0"
    assert g.stats.expanded == n and g.stats.edges == n - 1
    listed = g.listed_chain(f"d{n - 1}", 6)
    assert [h.doc_id for h in listed.hops] == [f"d{n - 1}", f"d{n - 2}", f"d{n - 3}",
                                               f"d{n - 4}", "d2", "d1", "d0"]
    assert listed.elided == n - 1 - 6 and listed.gap == 4
    # every node's listing, bounded (the tail anchors are memoised, one pointer per node)
    for d in ids[::97]:
        got = g.listed_chain(d, 6)
        assert len(got.hops) <= 7 and got.hops[-1].doc_id == "d0"


def test_audit_of_a_long_chain_keeps_no_chain_and_exact_numbers():
    """The in-memory audit of 10,000: candidates hold no chain (only ``hops``), the listed
    chains are bounded, and ``log2_chain_ratio`` (a memoised sum of hop exponents) equals
    ``log2_ratio``."""
    n = 10_000
    g = ProvenanceGraph.from_records(chain_records(n))
    r = audit(g, [f"d{i}" for i in range(n)], T, 365.25, max_hops_listed=3)
    assert len(r.candidates) == n - 1 and not hasattr(r.candidates[0], "chain")
    c = r.candidates[0]
    assert c.wrapper == f"d{n - 1}" and c.hops == n - 1
    assert c.log2_ratio == pytest.approx((n - 1) / 365.25, rel=1e-12)
    assert c.log2_chain_ratio == pytest.approx(c.log2_ratio, rel=1e-9)
    for cand in r.iter_candidates():
        check_listed(cand, 3)


def _random_graph(seed: int, n: int = 60) -> list[dict]:
    """Cites among ``n`` documents (cycles included), some observed, some undated."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        row: dict = {"id": f"n{i}", "cites": [f"n{rng.randrange(n)}"
                                                for _ in range(rng.choice([0, 1, 1, 2]))]}
        kind = rng.random()
        if kind < 0.15:
            row["observed_at"] = f"{1990 + rng.randrange(30)}-01-01"
        elif kind < 0.9:
            row["published_at"] = f"{1990 + rng.randrange(30)}-06-01"
        rows.append(row)
    return rows


@pytest.mark.parametrize("seed", range(8))
def test_listed_chains_and_exponents_agree_with_the_full_chains(seed):
    """On random graphs with cycles and undated intermediaries: each listed chain is the full
    chain's head and tail, the elided count is exact, and the memoised chain exponent equals
    :func:`log2_chain_ratio` over the full chain's dated entries."""
    rows = _random_graph(seed)
    g = ProvenanceGraph.from_payloads(rows, T)
    ids = [r["id"] for r in rows]
    report = audit(g, ids, T, 365.25, max_hops_listed=3)
    for cap in (1, 2, 3, 5, 8):
        for d in ids:
            full = g.chain(d)
            listed = g.listed_chain(d, cap)
            got = [(h.doc_id, h.kind) for h in listed.hops]
            hops = len(full) - 1
            assert len(got) == min(hops, cap) + 1 and listed.elided == max(hops - cap, 0)
            if listed.gap is None:
                assert got == full
            else:
                assert got[:listed.gap] == full[:listed.gap]
                assert got[listed.gap:] == full[len(full) - (len(got) - listed.gap):]
    for c in report.candidates:
        dates = []
        for h, _kind in g.chain(c.wrapper):
            rec = g.record(h)
            fd = g.evidence(h).evidence if h == c.origin else rec.naive
            if fd.date is not None:
                dates.append(-(T - fd.date).total_seconds() / 86400)
        expected = log2_chain_ratio(dates[::-1], 0.0, 365.25)
        assert c.log2_chain_ratio == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_streamed_json_is_the_report():
    """``write_json`` (one candidate per line) parses to ``to_dict()`` plus the extra keys."""
    import io

    rows = [{"id": "o", "observed_at": "2020-01-01"}] + [
        {"id": f"w{i}", "published_at": f"{2021 + i}-01-01", "cites": ["o" if i == 0 else
                                                                     f"w{i - 1}"]}
        for i in range(5)]
    g = ProvenanceGraph.from_payloads(rows, T)
    r = audit(g, [x["id"] for x in rows], T, 365.25, max_hops_listed=2)
    buf = io.StringIO()
    r.write_json(buf, {"index": "x"})
    text = buf.getvalue()
    assert json.loads(text) == {**r.to_dict(), "index": "x"}
    lines = text.splitlines()
    assert sum(line.startswith('    {"bound"') for line in lines) == 5
    empty = io.StringIO()
    audit(ProvenanceGraph.from_payloads(rows[:1], T), ["o"], T, 1.0).write_json(empty)
    assert json.loads(empty.getvalue())["candidates"] == []


def test_bad_cap_is_a_clear_error():
    g = ProvenanceGraph.from_records([record_from_payload({"id": "a"})])
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="max_hops_listed: expected an integer >= 1"):
            audit(g, ["a"], T, 1.0, max_hops_listed=bad)
