"""The freshness stage (chapter 35.7, issue 12 item 2): w(T, t) = 2^(−(T−t)/τ) on the evidence
date, the unknown-age policy, per-type/host/class half-lives, the --freshness option, and the
engine pushdown ≡ the Python path."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import build_batch
from credrank.cli import app
from credrank.combine import Combine
from credrank.core.errors import StageError
from credrank.core.pipeline import FormulaTerm
from credrank.core.ties import tie_groups
from credrank.documents import iter_documents
from credrank.freshness.config import (
    FreshnessConfig,
    config_from_dict,
    load_freshness_config,
    parse_duration,
)
from credrank.freshness.dates import FRESHNESS_FIELDS
from credrank.freshness.decay import half_life_weight
from credrank.freshness.policy import UnknownAge
from credrank.index.embed import HashingEmbedder
from credrank.index.ingest import index_documents
from credrank.index.qdrant_edge import EdgeIndex
from credrank.index.qdrant_server import QdrantServerIndex
from credrank.index.store import FRESHNESS_FIELDS as STORE_FRESHNESS_FIELDS
from credrank.index.store import FreshnessFormula
from credrank.pipeline.compile import (
    PushdownError,
    build_stages,
    check_stages,
    compile_spec,
    context,
    decide_pushdown,
)
from credrank.pipeline.shortcuts import CLI, spec_from_options
from credrank.pipeline.spec import SpecError
from credrank.provenance import SourceTyper
from credrank.select.topk import TopK
from credrank.signals.prior import load_priors, preset
from credrank.stages.freshness import FreshnessDecay
from credrank.stages.prior import SourcePrior

T = datetime(2026, 1, 1, tzinfo=UTC)


def iso(days_before: float) -> str:
    return (T - timedelta(days=days_before)).isoformat()


def batch(**columns):
    n = len(next(iter(columns.values())))
    return build_batch([0.5] * n, **columns)


# -- the weight ----------------------------------------------------------------------------------

def test_hand_computed_weights():
    b = batch(published_at=[iso(0), iso(365), iso(730), iso(182.5)])
    out = FreshnessDecay(365, now=T)(b)
    assert np.allclose(out.factors["freshness"], [1.0, 0.5, 0.25, 2 ** -0.5])
    assert list(out.column("freshness_basis")) == ["published_at"] * 4
    assert np.allclose(out.column("age_days").astype(float), [0, 365, 730, 182.5])
    info = out.info["freshness"]
    assert info["now"] == T.isoformat() and info["half_life"] == 365
    assert info["counts"] == {"dated": 4, "undated": 0, "excluded": 0, "after_now": 0,
                              "no_decay": 0}
    assert "35.7" in info["formula"]


def test_chapter_example_in_years():
    # chapter 35.7: T = 2026, τ = 1 year; a 2023 wrapper 2^-3, its 2020 origin 2^-6
    b = batch(published_at=["2023-01-01T00:00:00Z", "2020-01-01T00:00:00Z"])
    out = FreshnessDecay(parse_duration("1y"), now="2026-01-01T00:00:00Z")(b)
    days = [(T - datetime(y, 1, 1, tzinfo=UTC)).days for y in (2023, 2020)]
    assert np.allclose(out.factors["freshness"], [2 ** (-d / 365.25) for d in days])
    assert abs(out.factors["freshness"][0] - 0.125) < 1e-3


def test_date_rule_observed_then_verified_then_published_never_modified_or_retrieved():
    b = batch(observed_at=[iso(730), None, None, None],
              verified_at=[iso(10), iso(365), None, None],
              published_at=[iso(0), iso(0), iso(365), None],
              modified_at=[iso(0), iso(0), iso(0), iso(0)],
              retrieved_at=[iso(0), iso(0), iso(0), iso(0)])
    out = FreshnessDecay(365, now=T, undated=UnknownAge("penalty", 0.1))(b)
    assert list(out.column("freshness_basis")) == ["observed_at", "verified_at",
                                                   "published_at", "unknown"]
    assert np.allclose(out.factors["freshness"], [0.25, 0.5, 0.5, 0.1])
    assert out.column("age_days")[3] is None
    assert out.info["freshness"]["unknown_age"] == ["d3"]


def test_datetime_values_and_naive_now_are_utc():
    b = batch(published_at=[T.replace(tzinfo=None) - timedelta(days=365)])
    out = FreshnessDecay(365, now=T.replace(tzinfo=None))(b)
    assert np.allclose(out.factors["freshness"], [0.5])


def test_date_after_now_is_an_unknown_age_never_the_best():
    """A date after T is no usable age: the undated policy's weight (here the median of the
    dated, 0.5), flagged — never weight 1, the best of the pool (clamping gave a page dated
    in the future the top freshness)."""
    b = batch(published_at=[iso(-30), iso(365)])
    out = FreshnessDecay(365, now=T)(b)
    assert np.allclose(out.factors["freshness"], [0.5, 0.5])
    assert list(out.column("freshness_after_now")) == [True, False]
    assert out.column("age_days")[0] is None
    info = out.info["freshness"]
    assert info["after_now"] == ["d0"] and info["unknown_age"] == ["d0"]
    assert info["counts"]["after_now"] == 1 and info["counts"]["undated"] == 1
    assert info["counts"]["dated"] == 1
    penalised = FreshnessDecay(365, now=T, undated="penalty:0.1")(b)
    assert np.allclose(penalised.factors["freshness"], [0.1, 0.5])
    excluded = FreshnessDecay(365, now=T, undated="exclude")(b)
    assert list(excluded.doc_ids) == ["d1"] and excluded.info["freshness"]["excluded"] == ["d0"]


def test_inherited_origin_after_now_is_an_unknown_age():
    """A wrapper whose origin (read from the citation chain) is dated after T: unknown age,
    flagged, basis the inherited one."""
    b = batch(published_at=[iso(-30), iso(100)], inherited_at=[iso(-20), None],
              inherited_basis=["inherited:o", None])
    out = FreshnessDecay(365, now=T, undated="penalty:0.2")(b)
    assert np.allclose(out.factors["freshness"], [0.2, 2 ** (-100 / 365)])
    assert list(out.column("freshness_basis")) == ["inherited:o", "published_at"]
    assert out.info["freshness"]["after_now"] == ["d0"]


def test_now_before_every_document_is_fine():
    b = batch(published_at=[iso(-1), iso(-400), iso(-3000)])
    out = FreshnessDecay(365, now=T)(b)
    assert np.all(out.factors["freshness"] == 0.5)  # no dated candidate: the declared 0.5
    assert out.info["freshness"]["after_now"] == ["d0", "d1", "d2"]


def test_unparseable_stored_date_names_the_document():
    with pytest.raises(StageError, match=r"document 'd0'.*published_at"):
        FreshnessDecay(365, now=T)(batch(published_at=["yesterday"]))


def test_empty_batch():
    from credrank.core.candidates import Candidates
    out = FreshnessDecay(365, now=T)(Candidates.empty("q"))
    assert len(out) == 0 and out.info["freshness"]["counts"]["dated"] == 0


# -- unknown age ---------------------------------------------------------------------------------

def test_undated_neutral_is_the_median_of_the_dated():
    b = batch(published_at=[iso(0), iso(365), iso(730), None])
    out = FreshnessDecay(365, now=T)(b)
    assert out.factors["freshness"][3] == pytest.approx(0.5)  # median of 1, .5, .25
    assert out.info["freshness"]["undated"]["weight"] == pytest.approx(0.5)
    assert out.info["freshness"]["counts"]["undated"] == 1


def test_undated_neutral_without_dated_candidates_is_half():
    out = FreshnessDecay(365, now=T)(batch(published_at=[None, None]))
    assert np.allclose(out.factors["freshness"], [0.5, 0.5])


def test_undated_stated_neutral_and_penalty():
    b = batch(published_at=[iso(0), None])
    assert FreshnessDecay(365, now=T, undated=UnknownAge("neutral", 0.6))(b).factors[
        "freshness"][1] == 0.6
    out = FreshnessDecay(365, now=T, undated=UnknownAge("penalty", 0.5))(b)
    assert out.factors["freshness"][1] == 0.5
    assert out.info["freshness"]["undated"] == {"policy": "penalty:0.5", "weight": 0.5}


def test_undated_exclude_drops_and_counts():
    b = batch(published_at=[iso(0), None, iso(365), None])
    out = FreshnessDecay(365, now=T, undated=UnknownAge("exclude"))(b)
    assert list(out.doc_ids) == ["d0", "d2"]
    assert np.allclose(out.factors["freshness"], [1.0, 0.5])
    info = out.info["freshness"]
    assert info["counts"]["excluded"] == 2 and info["excluded"] == ["d1", "d3"]
    assert info["undated"]["weight"] is None


_DAYS = st.floats(min_value=0.0, max_value=20_000.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(ages=st.lists(_DAYS, min_size=0, max_size=8),
       tau=st.floats(min_value=0.5, max_value=5_000.0),
       policy=st.one_of(st.just(UnknownAge()),
                        st.builds(UnknownAge, st.just("neutral"),
                                  st.floats(min_value=0.0, max_value=1.0)),
                        st.builds(UnknownAge, st.just("penalty"),
                                  st.floats(min_value=0.0, max_value=1.0))))
def test_property_undated_never_gets_a_fabricated_boost(ages, tau, policy):
    dates = [iso(a) for a in ages]
    undated = FreshnessDecay(tau, now=T, undated=policy)(batch(published_at=[*dates, None]))
    at_t = FreshnessDecay(tau, now=T, undated=policy)(batch(published_at=[*dates, iso(0)]))
    w = undated.factors["freshness"][-1]
    stated = policy.weight(undated.factors["freshness"][:-1])
    assert w <= stated + 1e-12
    assert w <= at_t.factors["freshness"][-1]
    assert np.all((undated.factors["freshness"] >= 0) & (undated.factors["freshness"] <= 1))


# -- per-query now -------------------------------------------------------------------------------

def test_per_query_now_callable():
    dates = {"old query": T - timedelta(days=365), "new query": T}

    def q_date(b):
        return dates[b.query]

    stage = FreshnessDecay(365, now=q_date)
    for query, expected in (("old query", 1.0), ("new query", 0.5)):
        b = build_batch([0.5], query=query, published_at=[iso(365)])
        assert stage(b).factors["freshness"][0] == pytest.approx(expected)
    assert stage.config()["now"] == "per query"
    with pytest.raises(StageError, match="returned no date"):
        FreshnessDecay(365, now=lambda b: None)(batch(published_at=[iso(0)]))


def test_current_time_when_now_is_none():
    out = FreshnessDecay(365)(batch(published_at=[datetime.now(UTC).isoformat()]))
    assert out.factors["freshness"][0] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("tau", [0, -3, float("nan"), float("inf")])
def test_half_life_zero_or_negative_refused(tau):
    with pytest.raises(ValueError, match="half_life"):
        FreshnessDecay(tau)


# -- config --------------------------------------------------------------------------------------

CONFIG = """
half_life = "365d"
[source_type]
established_news = "30d"
[host]
"www.cdc.gov" = "2y"
[claim_class]
statistic = "52w"
[no_decay]
claim_class = ["historical"]
"""


def test_durations():
    assert parse_duration("365d") == 365 and parse_duration("52w") == 364
    assert parse_duration("1y") == 365.25 and parse_duration("12h") == 0.5
    assert parse_duration(10) == 10 and parse_duration("7") == 7
    for bad in ("0d", "-3d", "abc", "3m", True):
        with pytest.raises(ValueError, match="half_life"):
            parse_duration(bad)


def test_config_precedence(tmp_path):
    path = tmp_path / "fresh.toml"
    path.write_text(CONFIG)
    cfg = load_freshness_config(path)
    b = batch(published_at=[iso(365)] * 7,
              source_type=["established_news", "established_news", "established_news",
                           "blog", "established_news", "blog", "blog"],
              host=["www.cdc.gov", "www.cdc.gov", "x.example", "x.example", "x.example",
                    "x.example", "x.example"],
              claim_class=["statistic", None, None, None, "historical", None, None],
              persistent=[None, None, None, None, None, True, "true"])
    out = FreshnessDecay(config=cfg, now=T)(b)
    taus = list(out.column("freshness_half_life"))
    # class > host > source type > default; no-decay class and document opt-out: no decay
    assert taus == [364.0, 730.5, 30.0, 365.0, None, None, None]
    w = out.factors["freshness"]
    assert w[0] == pytest.approx(2 ** (-365 / 364)) and w[2] == pytest.approx(2 ** (-365 / 30))
    assert list(w[4:]) == [1.0, 1.0, 1.0]
    assert out.info["freshness"]["counts"]["no_decay"] == 3
    assert "precedence" in out.info["freshness"]["half_lives"]


def test_config_host_keys_are_hosts_and_cover_the_hosts_under_them():
    # "WWW.CDC.GOV" matched nothing, and "cdc.gov" (as `provenance hosts` prints it) did not
    # match www.cdc.gov, silently
    from credrank.freshness.config import FreshnessConfigError, config_from_dict

    cfg = config_from_dict({"half_life": "1y", "host": {"WWW.CDC.GOV.": "1d", "nih.gov": "2d",
                                                         "bücher.example": "3d"}})
    assert dict(cfg.host) == {"www.cdc.gov": 1.0, "nih.gov": 2.0, "xn--bcher-kva.example": 3.0}
    taus = cfg.half_lives(["government"] * 4, ["www.cdc.gov", "pubmed.ncbi.nlm.nih.gov",
                                               "xn--bcher-kva.example", "other.org"],
                          [None] * 4, [None] * 4)
    assert list(taus) == [1.0, 2.0, 3.0, 365.25]
    with pytest.raises(FreshnessConfigError, match=r"host\.CDC\.gov: names the host 'cdc\.gov'"):
        config_from_dict({"half_life": "1y", "host": {"cdc.gov": "1d", "CDC.gov": "2d"}})
    with pytest.raises(FreshnessConfigError, match=r"host\.cdc\.gov/x: expected a host name"):
        config_from_dict({"half_life": "1y", "host": {"cdc.gov/x": "1d"}})


def test_config_yaml_and_undated_persistent(tmp_path):
    path = tmp_path / "fresh.yaml"
    path.write_text("half_life: 10d\nno_decay:\n  field: timeless\n")
    cfg = load_freshness_config(path)
    assert cfg.no_decay_field == "timeless"
    out = FreshnessDecay(config=cfg, now=T, undated=UnknownAge("exclude"))(
        batch(published_at=[None, None], timeless=[True, False]))
    # a time-persistent claim has no decay whatever its age: kept, weight 1
    assert list(out.doc_ids) == ["d0"] and out.factors["freshness"][0] == 1.0


@pytest.mark.parametrize(("text", "match"), [
    ('[host]\n"a" = "1d"\n', r"half_life: expected .*got nothing \(the key is missing\)"),
    ('half_life = "0d"\n', "half_life"),
    ('half_life = "-3d"\n', "half_life"),
    ('half_life = "1d"\n[host]\n"a.org" = "-1d"\n', "host.a.org"),
    ('half_life = "1d"\ncolour = 1\n', "colour: expected one of the known keys"),
    ('half_life = "1d"\nno_decay = {claim_class = "x"}\n', "no_decay.claim_class"),
    ('half_life = "1d"\nno_decay = {other = 1}\n', "no_decay.other: expected one of the known"),
    ("half_life = [\n", "expected TOML"),
])
def test_config_errors_name_file_and_key(tmp_path, text, match):
    path = tmp_path / "f.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as exc:
        load_freshness_config(path)
    assert str(path) in str(exc.value)


def test_config_other_errors(tmp_path):
    with pytest.raises(ValueError, match=r"missing\.toml: the freshness config does not exist"):
        load_freshness_config(tmp_path / "missing.toml")
    (tmp_path / "f.json").write_text("{}")
    with pytest.raises(ValueError, match=r"f\.json: expected a freshness config ending in "
                                         r"\.toml or \.yaml/\.yml"):
        load_freshness_config(tmp_path / "f.json")
    with pytest.raises(ValueError, match="expected a table"):
        config_from_dict([1])


# -- the --freshness option ----------------------------------------------------------------------

def parse_freshness(text: str) -> FreshnessDecay:
    """The stage of ``--freshness TEXT``, as ``credrank search`` makes and builds it."""
    spec = spec_from_options(door=CLI, priors="none", freshness=text)
    stage = build_stages(spec, context())[0]
    assert isinstance(stage, FreshnessDecay)
    return stage


def test_parse_freshness(tmp_path):
    stage = parse_freshness("half_life=365d,now=2026-01-01,undated=penalty:0.5")
    assert stage.half_life == 365 and stage.now == T
    assert stage.undated == UnknownAge("penalty", 0.5) and stage.single
    assert parse_freshness("half_life=1y").now is None
    path = tmp_path / "f.toml"
    path.write_text(CONFIG)
    from_file = parse_freshness(f"config={path},undated=exclude")
    assert from_file.half_life == 365 and not from_file.single
    assert parse_freshness(f"config={path},half_life=10d").half_life == 10


@pytest.mark.parametrize(("text", "match"), [
    ("half_life=0d", "half_life"),
    ("half_life=-3d", "half_life"),
    ("half_life=365d,colour=red", "unknown key 'colour'"),
    ("half_life=365d,now=yesterday", "now.*'yesterday'"),
    ("half_life=365d,undated=maybe", "undated"),
    ("half_life=365d,undated=penalty", "penalty needs a factor"),
    ("now=2026-01-01", r"^--freshness half_life: expected a duration such as 365d \(or a "
                       r"config file\), got neither"),
    ("half_life", "KEY=VALUE"),
    ("half_life=1d,half_life=2d", "twice"),
    ("config=/nonexistent/f.toml", "the freshness config does not exist"),
    ("", r"^--freshness: expected KEY=VALUE"),
])
def test_parse_freshness_errors(text, match):
    with pytest.raises(ValueError, match=match):
        parse_freshness(text)


def _fused(spec) -> bool:
    """Whether the engine scores ``spec`` (decided without an index)."""
    return decide_pushdown(build_stages(spec, context()), retrieval=spec.retrieval,
                           requested=spec.pushdown).fused


def test_spec_and_pushdown_rule():
    for text in ("half_life=1y,undated=penalty:0.5", "half_life=1y,undated=neutral:0.4"):
        stage = parse_freshness(text)
        term = stage.formula_term()
        assert isinstance(term, FormulaTerm) and term.kind == "freshness" and term.stage is stage
    for stage, why in [
        (parse_freshness("half_life=1y"), "median"),
        (parse_freshness("half_life=1y,undated=exclude"), "exclude"),
        (FreshnessDecay(1, now=lambda b: T, undated=UnknownAge("penalty", 0.5)), "per-query"),
    ]:
        term = stage.formula_term()
        assert isinstance(term, str) and why in term
    spec = spec_from_options(freshness="half_life=365d")
    assert spec.pushdown is None and not _fused(spec)
    assert _fused(spec_from_options(freshness="half_life=365d,undated=penalty:0.5"))
    with pytest.raises(SpecError, match=r"undated=exclude needs the Python path.*pushdown: "
                                        r"true cannot be honoured"):
        check_stages(spec_from_options(freshness="half_life=365d,undated=exclude",
                                       pushdown=True))
    # a stage built in code, pushdown insisted on: the stage that cannot be fused is named
    stages = [SourcePrior(load_priors("current")), parse_freshness("half_life=2d"),
              Combine("multiply"), TopK(10)]
    with pytest.raises(PushdownError, match=r"stages\[1\] undated=neutral"):
        decide_pushdown(stages, requested=True)
    with pytest.raises(ValueError, match="--freshness"):
        decide_pushdown(stages, requested=True,
                        where=["--priors", "--freshness", "--mode", "--select"])


def test_store_and_freshness_agree_on_the_date_rule():
    assert STORE_FRESHNESS_FIELDS == FRESHNESS_FIELDS
    with pytest.raises(ValueError, match="half_life"):
        FreshnessFormula(T.isoformat(), 0, 0.5)
    with pytest.raises(ValueError, match="undated_weight"):
        FreshnessFormula(T.isoformat(), 1, 1.5)
    with pytest.raises(ValueError, match="UTC offset"):
        FreshnessFormula("2026-01-01", 1, 0.5)


# -- pushdown ≡ Python path ----------------------------------------------------------------------

HOSTS = ("https://www.nejm.org/doi/{i}", "https://www.cdc.gov/p{i}",
         "https://www.reuters.com/h/{i}", "https://someone{i}.blogspot.com/post",
         "https://www.reddit.com/r/health/{i}", "https://site{i}.example/x")
WORDS = ("vitamin vaccine dose trial fever cold antibiotic sleep heart risk sugar insulin "
         "statin muscle fluoride water sunscreen skin cancer melatonin child study").split()


def dated_corpus(path: Path, n: int = 240, seed: int = 1) -> None:
    """Documents with every date pattern: observed/verified/published, none (undated), only
    modified/retrieved (undated too), after T (unknown age), with equal dates (ties)."""
    rng = np.random.default_rng(seed)
    with path.open("w") as f:
        for i in range(n):
            doc = {"id": f"d{i:04d}", "text": " ".join(rng.choice(WORDS, size=20)),
                   "url": HOSTS[i % len(HOSTS)].format(i=i)}
            kind = i % 7
            age = float(rng.integers(0, 3000)) + float(rng.random())
            if kind == 0:
                doc["observed_at"], doc["published_at"] = iso(age), iso(age / 4)
            elif kind == 1:
                doc["verified_at"], doc["published_at"] = iso(age), iso(0)
            elif kind in (2, 3):
                doc["published_at"] = iso(age)
            elif kind == 4:
                doc["modified_at"], doc["retrieved_at"] = iso(1), iso(0)
            elif kind == 5:
                doc["published_at"] = iso(-float(rng.integers(1, 400)))  # after T
            else:
                doc["published_at"] = "2020-06-01T00:00:00Z"  # many equal dates
            f.write(json.dumps(doc) + "\n")


def check_equal(pushed, python):
    """Same documents and scores (1e-6), same order up to ties."""
    assert np.allclose(pushed.score, python.score, atol=1e-6)
    pg = tie_groups(pushed.doc_ids, pushed.score)
    yg = tie_groups(python.doc_ids, python.score)
    assert pg[:-1] == yg[:-1]  # the last group may be cut at the boundary
    assert pg[-1] <= yg[-1] or yg[-1] <= pg[-1]
    assert set(pushed.doc_ids) - pg[-1] == set(python.doc_ids) - yg[-1]


def stores(tmp_path):
    corpus = tmp_path / "c.jsonl"
    dated_corpus(corpus)
    emb = HashingEmbedder(64)
    edge = EdgeIndex.open(tmp_path / "idx", embedder=emb.name, dim=emb.dim, create=True)
    local = QdrantServerIndex.in_memory(emb.name, emb.dim)
    for store in (edge, local):
        report = index_documents(iter_documents(corpus), store, emb, SourceTyper(),
                                 batch_size=60)
        assert report.indexed == 240
    return emb, {"edge": edge, "qdrant-local": local}


@pytest.fixture(scope="session")
def dated_stores(tmp_path_factory):
    """Built once per session: every test of it only searches (and compiles pipelines), so
    the eight parametrizations and the breakdown test share the two stores."""
    emb, out = stores(tmp_path_factory.mktemp("dated"))
    yield emb, out
    for store in out.values():
        store.close()


@pytest.mark.parametrize("engine", ["edge", "qdrant-local"])
@pytest.mark.parametrize(("half_life", "undated"), [(365.0, 0.5), (30.0, 0.0), (2000.0, 1.0),
                                                    (365.25, 0.3)])
def test_pushdown_equals_python_path(dated_stores, engine, half_life, undated):
    emb, all_stores = dated_stores
    store = all_stores[engine]
    if not store.formula_supported:
        pytest.skip("this qdrant-client has no formula queries")
    table = preset("current")
    policy = UnknownAge("penalty", undated)
    for query in ("vitamin fever", "statin muscle risk", "sunscreen skin cancer child"):
        fetch_k, top_k = 120, 60
        qv = emb.embed([query])[0]
        pool = store.search_dense(query, qv, fetch_k, exact=True)
        stage = FreshnessDecay(half_life, now=T, undated=policy)
        python = TopK(top_k)(Combine("multiply")(stage(SourcePrior(table)(pool))))
        assert python.info["freshness"]["counts"]["undated"] > 0
        assert python.info["freshness"]["counts"]["after_now"] > 0
        spec = FreshnessFormula(T.isoformat(), half_life, undated)
        pushed = store.search_formula(query, qv, fetch_k, top_k, table.values, exact=True,
                                      freshness=spec)
        pushed = pushed.with_score(pushed.retrieval_score)
        check_equal(pushed, python)


def test_pushdown_pipeline_breakdown_matches_python(dated_stores):
    emb, all_stores = dated_stores
    store = all_stores["edge"]
    fresh = "half_life=365d,now=2026-01-01,undated=neutral:0.4"
    on = compile_spec(spec_from_options(top_k=40, fetch_k=120, freshness=fresh), store,
                      emb).pipeline
    off = compile_spec(spec_from_options(top_k=40, fetch_k=120, freshness=fresh,
                                         pushdown=False), store, emb).pipeline
    assert type(on.stages[0]).__name__ == "PushdownSearch"
    for query in ("vitamin fever", "heart risk sugar"):
        a, b = on.search(query), off.search(query)
        check_equal(a, b)
        common = sorted(set(a.doc_ids) & set(b.doc_ids))
        ia = {d: i for i, d in enumerate(a.doc_ids)}
        ib = {d: i for i, d in enumerate(b.doc_ids)}
        for name in ("prior", "freshness"):
            assert np.allclose([a.factors[name][ia[d]] for d in common],
                               [b.factors[name][ib[d]] for d in common])
        positive = [d for d in common if b.retrieval_score[ib[d]] > 0]
        assert np.allclose([a.retrieval_score[ia[d]] for d in positive],
                           [b.retrieval_score[ib[d]] for d in positive], atol=1e-5)
        assert a.info["freshness"]["now"] == b.info["freshness"]["now"]
        assert set(a.info["freshness"]["unknown_age"]) <= set(b.info["freshness"][
            "unknown_age"])


# -- the CLI -------------------------------------------------------------------------------------

runner = CliRunner()


def cli_json(index: Path, *args: str) -> dict:
    res = runner.invoke(app, ["search", "vitamin D winter", "--index", str(index), "--json",
                              "--fetch-k", "120", "--top-k", "120", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_cli_freshness_end_to_end(demo_index_hashing):
    doc = cli_json(demo_index_hashing, "--freshness", "half_life=365d,now=2026-01-01")
    assert doc["settings"]["freshness"]["half_life"] == 365
    assert doc["settings"]["pushdown"] is False  # neutral median: Python path
    info = doc["info"]["freshness"]
    assert info["counts"]["undated"] > 0 and info["unknown_age"]
    by_id = {h["doc_id"]: h for h in doc["hits"]}
    for d in info["unknown_age"]:
        assert by_id[d]["score_breakdown"]["freshness"] == pytest.approx(
            info["undated"]["weight"])
    for h in doc["hits"]:
        b = h["score_breakdown"]
        assert 0 <= b["freshness"] <= 1
        assert b["final"] == pytest.approx(max(b["retrieval_score"], 0) * b["prior"]
                                           * b["freshness"])


def test_cli_pushdown_equals_python(demo_index_hashing):
    opt = "half_life=1y,now=2026-01-01,undated=penalty:0.5"
    on = cli_json(demo_index_hashing, "--freshness", opt, "--pushdown")
    off = cli_json(demo_index_hashing, "--freshness", opt, "--no-pushdown")
    assert on["settings"]["pushdown"] is True and off["settings"]["pushdown"] is False
    a = {h["doc_id"]: h["score_breakdown"] for h in on["hits"]}
    b = {h["doc_id"]: h["score_breakdown"] for h in off["hits"]}
    assert set(a) == set(b)
    for d in a:
        assert a[d]["final"] == pytest.approx(b[d]["final"], abs=1e-6)
        assert a[d]["freshness"] == pytest.approx(b[d]["freshness"])


def test_the_counts_say_which_candidates_they_cover(demo_index_hashing):
    """``info.freshness`` counts the pool on the Python path and the hits when the engine
    weighed the pool (its formula search): ``counted_over`` says which (the same query gave
    "5 dated, 0 undated" and "8 dated, 7 undated" with nothing to tell them apart)."""
    over = {}
    for flag in ("--pushdown", "--no-pushdown"):
        res = runner.invoke(app, ["search", "vitamin D winter", "--index",
                                  str(demo_index_hashing), "--top-k", "5", "--freshness",
                                  "half_life=365d,now=2026-01-01,undated=penalty:0.3", flag,
                                  "--json"])
        assert res.exit_code == 0, res.output
        info = json.loads(res.stdout)["info"]["freshness"]
        over[flag] = (info["counted_over"], sum(info["counts"][k] for k in ("dated",
                                                                             "undated")))
    assert over["--pushdown"] == ("hits", 5)
    assert over["--no-pushdown"][0] == "pool" and over["--no-pushdown"][1] > 5


def test_a_bad_now_is_said_without_the_library_only_function(demo_index_hashing):
    """A CLI flag (or a JSON field) can never be a function: the error said "an ISO 8601 date
    … or a function of the batch"."""
    res = runner.invoke(app, ["search", "vitamin", "--index", str(demo_index_hashing),
                              "--freshness", "half_life=1y,now=soon"])
    assert res.exit_code == 2 and "expected an ISO 8601 date" in res.output
    assert "function" not in res.output


def test_cli_table_and_errors(demo_index_hashing):
    res = runner.invoke(app, ["search", "vitamin D winter", "--index", str(demo_index_hashing),
                              "--freshness", "half_life=365d,now=2000-01-01"])
    assert res.exit_code == 0, res.output
    assert "freshness" in res.output and "dated after now" in res.output
    for bad, match in (("half_life=0d", "half_life"), ("half_life=-3d", "half_life"),
                       ("half_life=1y,when=now", "unknown key"),
                       ("half_life=1y,now=soon", "now")):
        res = runner.invoke(app, ["search", "vitamin", "--index", str(demo_index_hashing),
                                  "--freshness", bad])
        assert res.exit_code != 0 and match in res.output, res.output
    res = runner.invoke(app, ["search", "vitamin", "--index", str(demo_index_hashing),
                              "--freshness", "half_life=1y,undated=exclude", "--pushdown"])
    assert res.exit_code != 0 and "exclude" in res.output


def test_freshness_config_roundtrip_describe():
    cfg = FreshnessConfig(half_life=10, host={"a.org": 2})
    stage = FreshnessDecay(config=cfg, now=T)
    assert stage.describe()["half_lives"]["host"] == {"a.org": 2.0}


# -- declared ranges (issue 37 N14) ----------------------------------------------------------------

def test_half_life_range_is_the_same_at_every_door(demo_index_hashing, tmp_path):
    # a half-life of 1e-320 days zeroed every score (a numpy RuntimeWarning on the CLI)
    for value in ("1e-320", "0.00001", "1001y", 1e-320, 365.25 * 1000 + 1):
        with pytest.raises(ValueError, match=r"^half_life: expected .* between 1 second"):
            FreshnessDecay(value)
    assert FreshnessDecay(1 / 86400).half_life == pytest.approx(1 / 86400)
    assert FreshnessDecay("1000y").half_life == 365250.0
    with pytest.raises(ValueError, match="between 1 second"):
        parse_duration("1e-320")
    # a config file: the default and every table's half-lives
    for text, where in (('half_life = 1e-320\n', "half_life"),
                        ('half_life = "1y"\n[host]\n"a.org" = "2000y"\n', "host.a.org")):
        path = tmp_path / "fresh.toml"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=rf"fresh\.toml: {where}: expected .*1000 years"):
            load_freshness_config(path)
    with pytest.raises(ValueError, match="half_life: expected a half-life between 1 second"):
        FreshnessConfig(half_life=1e-320)
    # the CLI: exit 2 naming the flag's key, no warning, no traceback
    res = runner.invoke(app, ["search", "vitamin D winter", "--index", str(demo_index_hashing),
                              "--freshness", "half_life=1e-320"])
    assert res.exit_code == 2, res.output
    assert "half_life" in res.output and "between 1 second" in res.output
    assert "Traceback" not in res.output and "RuntimeWarning" not in res.output


def test_no_denormal_weight_or_score_leaves(demo_index_hashing):
    # the shortest half-life over a year-old document: 2^-31557600 underflows to 0 exactly;
    # a weight of 2^-1060 (a denormal) is 0 too
    assert half_life_weight(np.array([1060.0, 1.0]), 1.0).tolist() == [0.0, 0.5]
    doc = cli_json(demo_index_hashing, "--freshness", "half_life=0.0000115741,now=2026-01-01")
    for hit in doc["hits"]:
        assert hit["score"] == 0.0 or abs(hit["score"]) >= 2.2250738585072014e-308
    batch = build_batch([0.9, 0.8])
    assert batch.with_score(np.array([1e-310, 0.5])).score.tolist() == [0.0, 0.5]


def test_config_source_types_are_checked(tmp_path):
    """A misspelt source type (``peer_reviewd``) matched no document and was echoed as if it
    did; prior files already refused one."""
    path = tmp_path / "fr.toml"
    path.write_text('half_life = "1y"\n[source_type]\npeer_reviewd = "5y"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"source_type\.peer_reviewd: expected one of "
                                         r"peer_reviewed, "):
        load_freshness_config(path)
