"""Tests of credrank.provenance.source_types: URL → host → registered domain → source type."""

from __future__ import annotations

import csv
import dataclasses
import inspect
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credrank import provenance
from credrank.documents.schema import SOURCE_TYPES, Document
from credrank.provenance import (
    DomainTableError,
    Provenance,
    RulesError,
    SourceTyper,
    load_domain_table,
    load_rules,
    parse_host,
    parse_url,
)
from credrank.provenance import hosts as provenance_url

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
RATINGS = SHARED_DATA / "domain_ratings" / "domain_ratings.csv"


@pytest.fixture(scope="module")
def typer() -> SourceTyper:
    return SourceTyper()


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("url", "host", "registered"),
    [
        ("https://www.cdc.gov/flu/index.html", "www.cdc.gov", "cdc.gov"),
        ("WWW.BBC.CO.UK/news", "www.bbc.co.uk", "bbc.co.uk"),
        ("http://user:secret@Example.COM:8080/x?y=1#z", "example.com", "example.com"),
        ("//cdn.example.org/lib.js", "cdn.example.org", "example.org"),
        ("https://www.gov.uk/guidance", "www.gov.uk", "www.gov.uk"),  # gov.uk is a suffix
        ("https://www.ox.ac.uk/research", "www.ox.ac.uk", "ox.ac.uk"),
        ("http://bücher.de/kontakt", "xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("http://xn--bcher-kva.de/kontakt", "xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("http://ｃｄｃ.gov/", "cdc.gov", "cdc.gov"),  # full-width letters, UTS 46 mapping
        ("http://%63dc.gov/", "cdc.gov", "cdc.gov"),  # percent-encoded host
        ("cdc.gov./vaccines", "cdc.gov", "cdc.gov"),  # trailing dot
        ("http://192.168.0.1:8000/page", "192.168.0.1", None),
        ("http://[2001:DB8::1]/", "2001:db8::1", None),
        ("medium.com/@someone/post-1", "medium.com", "medium.com"),
        ("user@example.com", "example.com", "example.com"),
        ("localhost:8080/admin", "localhost", None),
        # a backslash is a slash for browsers: the host is example.com, not evil.com
        ("https://example.com\\@evil.com/", "example.com", "example.com"),
        ("  https://www.nhs.uk/conditions/\n", "www.nhs.uk", "www.nhs.uk"),  # nhs.uk: suffix
        ("foo.blogspot.com", "foo.blogspot.com", "blogspot.com"),  # ICANN section only
    ],
)
def test_parse_host(url: str, host: str, registered: str | None) -> None:
    assert parse_host(url) == (host, registered)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "http://",
        "mailto:someone@example.org",
        "javascript:alert(1)",
        "http:/example.com",
        "http://exa mple.com/",
        "http://[::1",
        "http://example.com:99999/",
        "http://example.com:port/",
        "http://a..b.com/",
        "http://999.1.1.1/",
        "file:///etc/passwd",
    ],
)
def test_invalid_urls(typer: SourceTyper, url: str) -> None:
    parsed = parse_url(url)
    assert parsed.host is None and parsed.registered_domain is None
    assert parsed.error  # a reason is given
    prov = typer.classify(url)
    assert (prov.host, prov.source_type, prov.url_source_type, prov.rule) == (
        None, "unknown", "unknown", "none")
    assert prov.url_error == parsed.error


def test_parse_url_rejects_non_strings() -> None:
    with pytest.raises(TypeError, match="url"):
        parse_url(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="url"):
        SourceTyper().classify(3.0)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- built-in rules


@pytest.mark.parametrize(
    ("url", "expected", "rule"),
    [
        # PubMed and PMC live under nih.gov / .gov and must beat both
        ("https://pubmed.ncbi.nlm.nih.gov/31978945/", "peer_reviewed",
         "host:pubmed.ncbi.nlm.nih.gov"),
        ("https://www.ncbi.nlm.nih.gov/pmc/articles/PMC7092803/", "peer_reviewed",
         "path:ncbi.nlm.nih.gov/pmc"),
        ("https://pmc.ncbi.nlm.nih.gov/articles/PMC7092803/", "peer_reviewed",
         "host:pmc.ncbi.nlm.nih.gov"),
        ("https://www.ncbi.nlm.nih.gov/books/NBK1/", "government", "domain:nih.gov"),
        ("https://www.ncbi.nlm.nih.gov/pmcx", "government", "domain:nih.gov"),  # segment bound
        # dot segments resolved as the server does (it was typed by the written path)
        ("https://www.ncbi.nlm.nih.gov/x/../pmc/articles/PMC1", "peer_reviewed",
         "path:ncbi.nlm.nih.gov/pmc"),
        ("https://www.ncbi.nlm.nih.gov/pmc/../books/x", "government", "domain:nih.gov"),
        ("https://www.cdc.gov/flu/", "government", "domain:cdc.gov"),
        ("https://www.fbi.gov/news", "government", "suffix:gov"),
        ("https://www.army.mil/", "government", "suffix:mil"),
        ("https://www.who.int/news", "government", "domain:who.int"),
        ("https://www.un.int/", "government", "suffix:int"),
        ("https://www.gov.uk/guidance/x", "government", "suffix:gov.<cc>"),
        ("https://www.health.gov.au/", "government", "suffix:gov.<cc>"),
        ("https://www.ox.ac.uk/", "government", "suffix:ac.<cc>"),
        ("https://www.stanford.edu/", "government", "suffix:edu"),
        ("https://solidarites-sante.gouv.fr/", "government", "suffix:gouv.fr"),
        ("https://www.canada.ca/en/public-health.html", "government", "domain:canada.ca"),
        ("https://www.ema.europa.eu/en/medicines", "government", "host:ema.europa.eu"),
        ("https://commission.europa.eu/", "government", "suffix:europa.eu"),
        ("https://www.nhs.uk/conditions/", "government", "suffix:nhs.uk"),
        ("https://www.mayoclinic.org/diseases", "government", "domain:mayoclinic.org"),
        ("https://www.nejm.org/doi/full/10.1056/x", "peer_reviewed", "domain:nejm.org"),
        ("https://link.springer.com/article/1", "peer_reviewed", "host:link.springer.com"),
        ("https://onlinelibrary.wiley.com/doi/1", "peer_reviewed",
         "host:onlinelibrary.wiley.com"),
        ("https://www.bbc.co.uk/news/health-1", "established_news", "domain:bbc.co.uk"),
        ("https://abcnews.go.com/Health", "established_news", "host:abcnews.go.com"),
        ("https://www.webmd.com/a", "established_news", "domain:webmd.com"),
        ("https://someone.blogspot.com/2020/01/x.html", "blog", "domain:blogspot.com"),
        ("medium.com/@someone/cure-1", "blog", "domain:medium.com"),
        ("https://blog.example.com/post", "blog", "label:blog"),
        ("https://blogs.bmj.com/bmj/x", "blog", "label:blogs"),  # subdomain label beats bmj.com
        ("https://forum.example.org/t/1", "user_generated", "label:forum"),
        ("https://community.example.net/", "user_generated", "label:community"),
        ("https://www.reddit.com/r/health/", "user_generated", "domain:reddit.com"),
        ("https://en.wikipedia.org/wiki/Influenza", "user_generated", "domain:wikipedia.org"),
        ("https://answers.yahoo.com/question/1", "user_generated", "host:answers.yahoo.com"),
        ("https://x.com/someone/status/1", "user_generated", "domain:x.com"),
        # no rule: stays unknown
        ("https://example.com/", "unknown", "none"),
        ("https://blog.com/", "unknown", "none"),  # first-label rules need a subdomain
        ("https://go.com/", "unknown", "none"),
        ("https://news.yahoo.com/", "unknown", "none"),
        ("https://mygov.com/", "unknown", "none"),  # label boundary, not string suffix
        ("https://x.gov.com/", "unknown", "none"),  # <cc> is two letters only
        ("https://cdc.gov.evil.com/", "unknown", "none"),  # spoof: suffix is anchored
        ("https://arxiv.org/abs/1", "unknown", "none"),  # preprints are not peer reviewed
        ("http://192.168.0.1/", "unknown", "none"),
    ],
)
def test_builtin_rules(typer: SourceTyper, url: str, expected: str, rule: str) -> None:
    prov = typer.classify(url)
    assert (prov.source_type, prov.url_source_type, prov.rule) == (expected, expected, rule)
    assert prov.url_error is None and prov.conflict is None and prov.domain_score is None


def test_bundled_rules_are_valid_and_ai_list_exists(tmp_path: Path) -> None:
    rules = load_rules()
    types = {*rules.hosts.values(), *rules.domains.values(), *rules.first_labels.values()}
    assert types <= set(SOURCE_TYPES) - {"unknown"}
    text = (Path(provenance.__file__).parent / "source_types.toml").read_text()
    assert "[ai_generated]" in text
    # what loading checks in any other rules file: no domain rule is a public suffix
    assert rules.domains
    assert all(provenance_url.registered_domain(d) is not None for d in rules.domains)
    assert load_rules(write(tmp_path / "same.toml", text)).domains == rules.domains


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[blog]\ndomains = ["a.com"]\n[user_generated]\ndomains = ["a.com"]\n',
         "already listed under \\[blog\\]"),
        ('[opinion]\ndomains = ["a.com"]\n', "unknown section \\[opinion\\]"),
        ('[blog]\nsites = ["a.com"]\n', "unknown key 'sites'"),
        ('[blog]\ndomains = ["www.a.com"]\n', "without 'www.'"),
        ('[blog]\ndomains = ["co.uk"]\n', "public suffix"),
        ('[blog]\ndomains = "a.com"\n', "list of strings"),
        ('[blog]\npaths = ["a.com"]\n', "host/path"),
        ('[blog]\nsuffixes = ["gov.<xx>"]\n', "labels or '<cc>'"),
    ],
)
def test_bad_rules_file(tmp_path: Path, toml: str, message: str) -> None:
    path = write(tmp_path / "rules.toml", toml)
    with pytest.raises(RulesError, match=message):
        load_rules(path)


def test_custom_rules_file(tmp_path: Path) -> None:
    path = write(tmp_path / "rules.toml", '[government]\nsuffixes = ["gov.<cc>"]\n'
                 '[blog]\nhosts = ["notes.gov.uk"]\n')
    typer = SourceTyper(rules=path)
    assert typer.classify("https://www.gov.uk").source_type == "government"
    assert typer.classify("https://notes.gov.uk").source_type == "blog"  # host beats suffix
    assert typer.classify("https://www.cdc.gov").source_type == "unknown"  # no bundled rules


# --------------------------------------------------------------------------- text never decides


def test_classification_takes_no_text() -> None:
    params = list(inspect.signature(SourceTyper.classify).parameters)
    assert params == ["self", "url", "declared_source_type"]
    assert "text" not in {f.name for f in dataclasses.fields(Provenance)}


def test_cnn_claim_on_blog_host_stays_blog(typer: SourceTyper) -> None:
    url = "https://health-truths.blogspot.com/2021/03/vaccines.html"
    spoof = Document(id="d1", text="CNN news: doctors confirm the cure.", url=url)
    plain = Document(id="d2", text="A post about my garden.", url=url)
    assert typer.classify_document(spoof).source_type == "blog"
    assert typer.classify_document(spoof) == typer.classify_document(plain)
    assert typer.classify_document(spoof) == typer.classify(url)


@settings(max_examples=50, deadline=None)
@given(text=st.text(max_size=200), title=st.text(max_size=50))
def test_text_and_title_never_change_the_type(text: str, title: str) -> None:
    typer = SourceTyper()
    url = "https://www.cdc.gov/flu/"
    doc = Document(id="d", text=text, title=title, url=url, source_type="blog")
    assert typer.classify_document(doc) == typer.classify(url, "blog")


# --------------------------------------------------------------------------- declared metadata


def test_declared_conflict_untrusted_by_default(typer: SourceTyper) -> None:
    prov = typer.classify("https://someone.blogspot.com/x", "peer_reviewed")
    assert prov.source_type == "blog" and prov.url_source_type == "blog"
    assert prov.declared_source_type == "peer_reviewed"
    assert prov.rule == "domain:blogspot.com"
    assert prov.conflict is not None
    assert "peer_reviewed" in prov.conflict and "blog" in prov.conflict


def test_declared_trusted_when_configured() -> None:
    prov = SourceTyper(trust_declared=True).classify("https://someone.blogspot.com/x",
                                                     "peer_reviewed")
    assert (prov.source_type, prov.url_source_type, prov.rule) == (
        "peer_reviewed", "blog", "declared")
    assert prov.conflict is not None  # still recorded


def test_declared_agreeing_is_not_a_conflict(typer: SourceTyper) -> None:
    prov = typer.classify("https://www.cdc.gov/", "government")
    assert prov.conflict is None and prov.source_type == "government"


def test_declared_without_url() -> None:
    untrusted = SourceTyper().classify(None, "government")
    assert (untrusted.source_type, untrusted.declared_source_type, untrusted.rule) == (
        "unknown", "government", "none")
    assert untrusted.host is None and untrusted.url_error is None
    assert "'government' not used: the document has no URL" in str(untrusted.conflict)
    trusted = SourceTyper(trust_declared=True).classify(None, "government")
    assert (trusted.source_type, trusted.rule) == ("government", "declared")


def test_declared_unknown_is_no_claim() -> None:
    prov = SourceTyper(trust_declared=True).classify("https://www.cdc.gov/", "unknown")
    assert prov.source_type == "government" and prov.conflict is None


def test_bad_declared_type_names_value_and_choices(typer: SourceTyper) -> None:
    with pytest.raises(ValueError, match="'news'") as err:
        typer.classify("https://www.cdc.gov/", "news")
    for name in SOURCE_TYPES:
        assert name in str(err.value)


# --------------------------------------------------------------------------- user tables


def test_type_table_overrides_builtin(tmp_path: Path) -> None:
    table = write(tmp_path / "types.csv",
                  "domain,source_type\n"
                  "nytimes.com,blog\n"
                  "content-farm.example.net,ai_generated\n"
                  "patient.info/forums,user_generated\n"
                  "www.example.org,government\n")
    typer = SourceTyper([table])
    prov = typer.classify("https://www.nytimes.com/2020/x.html")
    assert (prov.source_type, prov.rule) == ("blog", "table:types.csv")
    assert typer.classify("https://a.content-farm.example.net/").source_type == "ai_generated"
    assert typer.classify("https://patient.info/forums/discuss/x").source_type == (
        "user_generated")
    assert typer.classify("https://patient.info/health/x").source_type == "unknown"
    # the path as the server resolves it: a forum page reached through a dot segment, an
    # escaped letter or a doubled slash was not a forum page; a path row of a domain covers
    # its subdomains, as its host row does (m.patient.info/forums was not one)
    for url in ("https://patient.info/doctor/../forums/discuss/y",
                "https://patient.info//forums/x", "https://patient.info/./forums/x",
                "https://patient.info/%66orums/x", "https://m.patient.info/forums/discuss/x"):
        assert typer.classify(url).source_type == "user_generated", url
    assert typer.classify("https://patient.info/forums/../doctor/z").source_type == "unknown"
    assert typer.classify("https://www.example.org/").source_type == "government"  # exact host
    assert typer.classify("https://example.org/").source_type == "unknown"
    # a table match wins even over the most specific built-in rule
    override = write(tmp_path / "o.csv", "domain,source_type\nnih.gov,government\n")
    pubmed = SourceTyper([override]).classify("https://pubmed.ncbi.nlm.nih.gov/1/")
    assert (pubmed.source_type, pubmed.rule) == ("government", "table:o.csv")


def test_score_table_gives_score_not_type(tmp_path: Path) -> None:
    table = write(tmp_path / "scores.csv",
                  "Domain,Score\ncdc.gov,0.9\nwww.cdc.gov,0.8\ntwitter.com/who,0.7\n")
    typer = SourceTyper([table])
    exact = typer.classify("https://www.cdc.gov/flu/")
    assert (exact.domain_score, exact.score_rule) == (0.8, "table:scores.csv")
    assert exact.source_type == "government" and exact.rule == "domain:cdc.gov"
    assert typer.classify("https://stacks.cdc.gov/x").domain_score == 0.9  # registered domain
    assert typer.classify("https://twitter.com/WHO/status/1").domain_score == 0.7
    assert typer.classify("https://twitter.com/whoever").domain_score is None
    assert typer.classify("https://example.com/").domain_score is None


def test_later_table_overrides_earlier(tmp_path: Path) -> None:
    first = write(tmp_path / "a.csv", "domain,source_type\nexample.com,blog\n")
    second = write(tmp_path / "b.csv", "domain,source_type\nexample.com,government\n")
    prov = SourceTyper([first, second]).classify("https://example.com/")
    assert (prov.source_type, prov.rule) == ("government", "table:b.csv")


def test_explicit_score_column(tmp_path: Path) -> None:
    table = write(tmp_path / "r.csv", "domain,pc1,mbfc\nexample.com,0.2,0.6\n")
    assert load_domain_table(table).scores == {"example.com": 0.2}
    assert load_domain_table(table, score_column="mbfc").scores == {"example.com": 0.6}


@pytest.mark.parametrize(
    ("content", "line", "field"),
    [
        ("domain,source_type\na.com,blog\nb.com,peer reviewed\n", 3, "source_type"),
        ("domain,score\na.com,0.5\n\nb.com,1.5\n", 4, "score"),
        ("domain,score\na.com,abc\n", 2, "score"),
        ("domain,score\na.com,nan\n", 2, "score"),
        ("domain,source_type\n,blog\n", 2, "domain"),
        ("domain,source_type\nhttps://a.com/x,blog\n", 2, "domain"),
        ("domain,source_type\na b.com,blog\n", 2, "domain"),
        ("domain,source_type\na.com,blog\nA.com,government\n", 3, "source_type"),
        ("domain,source_type\na.com,blog,extra\n", 2, None),
        ("site,source_type\na.com,blog\n", 1, "domain"),
    ],
)
def test_bad_table_rows(tmp_path: Path, content: str, line: int, field: str | None) -> None:
    path = write(tmp_path / "bad.csv", content)
    with pytest.raises(DomainTableError) as err:
        SourceTyper([path])
    message = str(err.value)
    assert f"{path}:{line}:" in message
    if field is not None:
        assert f"'{field}'" in message


def test_table_header_errors(tmp_path: Path) -> None:
    with pytest.raises(DomainTableError, match="score_column 'quality'"):
        load_domain_table(write(tmp_path / "t.csv", "domain,score\na.com,1\n"), "quality")
    with pytest.raises(DomainTableError, match="source_type"):
        load_domain_table(write(tmp_path / "u.csv", "domain,notes\na.com,x\n"))
    with pytest.raises(DomainTableError, match="empty file"):
        load_domain_table(write(tmp_path / "v.csv", ""))
    with pytest.raises(DomainTableError, match="does not exist"):
        load_domain_table(tmp_path / "missing.csv")
    with pytest.raises(TypeError, match="single path"):
        SourceTyper(str(tmp_path / "t.csv"))  # type: ignore[arg-type]


def test_real_domain_ratings() -> None:
    if not RATINGS.is_file():
        pytest.skip(f"real data absent: {RATINGS} (../shared/data beside the checkout)")
    with RATINGS.open(newline="", encoding="utf-8") as handle:
        expected = {row["domain"]: float(row["pc1"]) for row in csv.DictReader(handle)}
    table = load_domain_table(RATINGS)
    assert table.score_column == "pc1"
    assert len(table.scores) == len(expected)
    assert all(0.0 <= s <= 1.0 for s in table.scores.values())
    typer = SourceTyper([RATINGS])
    prov = typer.classify("https://www.nytimes.com/2020/03/01/health/x.html")
    assert prov.domain_score == expected["nytimes.com"]
    assert prov.source_type == "established_news"  # scores never change the type
    assert prov.score_rule == "table:domain_ratings.csv"
    # a "domain/path" row scores that path only
    path_rows = [d for d in expected if "/" in d and d.split("/", 1)[0] not in expected]
    assert path_rows, "expected some host/path rows in the ratings"
    host, rest = path_rows[0].split("/", 1)
    assert typer.classify(f"https://{host}/{rest}/item").domain_score == expected[path_rows[0]]
    assert typer.classify(f"https://{host}/zz-not-{rest}").domain_score is None


# --------------------------------------------------------------------------- batch and offline


def test_classify_many_matches_classify_and_caches_hosts(typer: SourceTyper) -> None:
    urls = ["https://www.ncbi.nlm.nih.gov/pmc/articles/PMC1/",
            "https://www.ncbi.nlm.nih.gov/books/NBK1/",
            None, "not a url", "https://www.cdc.gov/a", "https://www.cdc.gov/b"]
    declared = [None, "blog", "government", None, None, "government"]
    fresh = SourceTyper()
    batch = fresh.classify_many(urls, declared)
    assert batch == [typer.classify(u, d) for u, d in zip(urls, declared, strict=True)]
    # the host cache must not leak path-level decisions between URLs of one host
    assert [p.source_type for p in batch[:2]] == ["peer_reviewed", "government"]
    info = fresh.cache_info()
    assert info.hits >= 2  # ncbi twice, cdc twice
    with pytest.raises(ValueError, match="declared"):
        fresh.classify_many(urls, declared[:2])


def test_no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    provenance_url._extractor.cache_clear()
    provenance_url._resolve_host.cache_clear()
    typer = SourceTyper([write(tmp_path / "t.csv", "domain,score\nbbc.co.uk,0.7\n")])
    prov = typer.classify("https://www.bbc.co.uk/news")
    assert (prov.registered_domain, prov.source_type, prov.domain_score) == (
        "bbc.co.uk", "established_news", 0.7)
    assert parse_host("https://a.b.example.co.jp/") == ("a.b.example.co.jp", "example.co.jp")


# --------------------------------------------------------------------------- hardening

_HARDENING_TYPER = SourceTyper()
_GOV_TARGETS = ("nih.gov/x", "www.cdc.gov/", "gov.uk/guidance", "pubmed.ncbi.nlm.nih.gov/1",
                "user@nih.gov:80/", "someone.blogspot.com/")


@pytest.mark.parametrize(
    "url",
    [
        "javascript://nih.gov/%0aalert(1)",
        "JavaScript://www.cdc.gov/",
        "vbscript://nih.gov/",
        "data://nih.gov/text",
        "file://nih.gov/",
        "tel://nih.gov",
        "foo://nih.gov/",
        "ftp://ftp.cdc.gov/pub",
        "java\tscript://nih.gov/",  # browsers drop the tab: still javascript:
        "javascript:\\\\nih.gov/",  # backslashes count as slashes
    ],
)
def test_non_http_schemes_are_never_typed(typer: SourceTyper, url: str) -> None:
    # old code: the host (nih.gov, cdc.gov) was parsed whatever the scheme -> government
    parsed = parse_url(url)
    assert parsed.host is None and parsed.registered_domain is None
    assert parsed.error is not None and "http" in parsed.error and "scheme" in parsed.error
    prov = typer.classify(url)
    assert (prov.host, prov.source_type, prov.url_source_type, prov.rule) == (
        None, "unknown", "unknown", "none")
    assert prov.url_error == parsed.error


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("nih.gov/x", "government"),  # no scheme: taken as http://
        ("//www.cdc.gov/", "government"),
        ("HTTPS://NIH.GOV/", "government"),
        ("http://nih.gov:8080/x", "government"),
        ("nih.gov:80/x", "government"),  # host:port without a scheme is still http://
    ],
)
def test_http_and_scheme_less_urls_are_typed(typer: SourceTyper, url: str,
                                             expected: str) -> None:
    prov = typer.classify(url)
    assert prov.source_type == expected and prov.url_error is None


@pytest.mark.parametrize("url", ["https://gov/x", "https://gov./x", "gov", "http://GOV/",
                                 "https://int/", "https://mil/", "https://edu/"])
def test_single_label_host_matches_no_suffix_rule(typer: SourceTyper, url: str) -> None:
    # old code: suffix:gov / suffix:int ... matched the bare TLD itself -> government
    prov = typer.classify(url)
    assert prov.host is not None and "." not in prov.host
    assert (prov.source_type, prov.url_source_type, prov.rule) == ("unknown", "unknown", "none")


def test_single_label_host_still_matches_an_exact_host_rule(tmp_path: Path) -> None:
    rules = write(tmp_path / "r.toml", '[blog]\nhosts = ["intranet"]\nsuffixes = ["gov"]\n')
    typer = SourceTyper(rules=rules)
    assert typer.classify("http://intranet/x").source_type == "blog"
    assert typer.classify("http://gov/x").source_type == "unknown"
    assert typer.classify("http://a.gov/x").source_type == "blog"


def test_multi_label_public_suffix_hosts_keep_their_rules(typer: SourceTyper) -> None:
    # gov.uk is itself the UK government site: two labels, the suffix rule applies
    assert typer.classify("https://gov.uk/").rule == "suffix:gov.<cc>"
    assert typer.classify("https://www.fbi.gov/").rule == "suffix:gov"


@pytest.mark.parametrize("url", ["https://xn--nih.gov/", "https://XN--NIH.gov/x",
                                 "http://xn--a.gov/", "https://xn--.gov/",
                                 "https://www.xn--nih.gov/", "https://cdc.xn--abc.gov/"])
def test_invalid_idna_label_is_an_error_not_a_match(typer: SourceTyper, url: str) -> None:
    # old code: any ASCII 'xn--' label was accepted and the gov suffix matched -> government
    parsed = parse_url(url)
    assert parsed.host is None and parsed.error is not None and "xn--" in parsed.error
    prov = typer.classify(url)
    assert (prov.source_type, prov.url_source_type, prov.rule) == ("unknown", "unknown", "none")
    assert prov.url_error == parsed.error


def test_valid_punycode_still_parses() -> None:
    assert parse_host("https://XN--BCHER-KVA.de/") == ("xn--bcher-kva.de", "xn--bcher-kva.de")
    assert parse_host("https://www.bücher.de/") == ("www.xn--bcher-kva.de", "xn--bcher-kva.de")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://example.com/", "no rule matched"),
        ("https://gov/", "no rule matched"),
        ("javascript:alert(1)", "invalid URL"),
        ("foo://nih.gov/", "invalid URL"),
        ("https://xn--nih.gov/", "invalid URL"),
        ("http://exa mple.com/", "invalid URL"),
    ],
)
def test_declared_type_conflicts_with_an_unknown_url_type(url: str, why: str) -> None:
    # old code: a conflict was reported only when the URL type was known
    untrusted = SourceTyper().classify(url, "peer_reviewed")
    assert (untrusted.source_type, untrusted.url_source_type) == ("unknown", "unknown")
    assert untrusted.conflict is not None
    assert "'peer_reviewed'" in untrusted.conflict and "'unknown'" in untrusted.conflict
    assert why in untrusted.conflict and "URL type used" in untrusted.conflict
    trusted = SourceTyper(trust_declared=True).classify(url, "peer_reviewed")
    assert (trusted.source_type, trusted.url_source_type, trusted.rule) == (
        "peer_reviewed", "unknown", "declared")
    assert trusted.conflict is not None and "declared type used" in trusted.conflict


def test_every_disagreeing_declared_type_is_a_conflict(typer: SourceTyper) -> None:
    urls = ["https://www.cdc.gov/", "https://example.com/a", "https://example.org/b",
            "javascript:alert(1)", "https://gov/", "https://xn--nih.gov/"]
    provs = typer.classify_many(urls, ["blog"] * len(urls))
    assert all(p.conflict is not None for p in provs)
    # agreeing, 'unknown' and absent declared types are no claim against the URL
    assert typer.classify("https://example.com/", "unknown").conflict is None
    assert typer.classify("https://example.com/", None).conflict is None
    assert typer.classify("https://www.cdc.gov/", "government").conflict is None


@pytest.mark.parametrize("url", [None, "", "   "])
def test_no_url_says_the_declared_type_went_unused(url: str | None) -> None:
    # without a URL the type is unknown unless the declared one is trusted; an untrusted one is
    # said to go unused (it was dropped without a word)
    prov = SourceTyper().classify(url, "blog")
    assert prov.source_type == "unknown"
    assert prov.conflict is not None and prov.conflict.startswith(
        "declared source_type 'blog' not used: the document has no URL")
    trusted = SourceTyper(trust_declared=True).classify(url, "blog")
    assert trusted.source_type == "blog" and trusted.conflict is None
    assert SourceTyper().classify(url, "unknown").conflict is None  # no claim


_SCHEMES = st.from_regex(r"[a-zA-Z][a-zA-Z0-9+.\-]{0,12}", fullmatch=True).filter(
    lambda s: s.lower() not in ("http", "https"))
_AFTER_SCHEME = st.one_of(
    st.sampled_from(_GOV_TARGETS).map(lambda t: "//" + t),
    st.sampled_from(_GOV_TARGETS),
    st.text(max_size=60).map(lambda t: "//" + t),
    # 'name:8080' without '//' is host:port (documented), so no digit right after the colon
    st.text(max_size=60).filter(lambda t: not t.lstrip("\t\n\r")[:1].isdigit()),
)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(scheme=_SCHEMES, rest=_AFTER_SCHEME,
       declared=st.sampled_from([None, *SOURCE_TYPES]))
def test_property_non_http_scheme_is_always_unknown(scheme: str, rest: str,
                                                    declared: str | None) -> None:
    url = f"{scheme}:{rest}"
    prov = _HARDENING_TYPER.classify(url, declared)
    assert prov.url_source_type == "unknown" and prov.host is None
    assert prov.url_error is not None and "http" in prov.url_error
    assert prov.source_type == "unknown"  # not trusted by default
    assert (prov.conflict is not None) == (declared not in (None, "unknown"))


@settings(max_examples=200, derandomize=True, deadline=None)
@given(url=st.one_of(st.none(), st.text(max_size=120),
                     st.builds(lambda a, b: f"https://{a}/{b}", st.text(max_size=40),
                               st.text(max_size=20))),
       declared=st.sampled_from([None, "", " ", *SOURCE_TYPES]),
       trust=st.booleans())
def test_property_classify_never_raises(url: str | None, declared: str | None,
                                        trust: bool) -> None:
    prov = SourceTyper(trust_declared=trust).classify(url, declared)
    assert prov.source_type in SOURCE_TYPES and prov.url_source_type in SOURCE_TYPES
    assert (prov.host is None) or prov.url_error is None


@pytest.mark.parametrize(("url", "stype", "rule"), [
    # Blogger's country domains: one platform, one type (they were unknown)
    ("https://x.blogspot.co.uk/a", "blog", "suffix:blogspot.co.<cc>"),
    ("https://x.blogspot.com.au/a", "blog", "suffix:blogspot.com.<cc>"),
    ("https://x.blogspot.it/", "blog", "suffix:blogspot.<cc>"),
    # another front end of the same site gets the site's rules (only www. was taken off)
    ("https://m.abcnews.go.com/x", "established_news", "host:abcnews.go.com"),
    ("https://m.ncbi.nlm.nih.gov/pmc/articles/PMC1/", "peer_reviewed", "path:ncbi.nlm.nih.gov/pmc"),
    ("https://www2.blog.example.com/", "blog", "label:blog"),
    ("https://mobile.forum.example.com/", "user_generated", "label:forum"),
    # a page an AMP cache serves is the publisher's
    ("https://www.google.com/amp/s/www.nytimes.com/2020/x.amp.html", "established_news",
     "domain:nytimes.com"),
    ("https://www-nytimes-com.cdn.ampproject.org/c/s/www.nytimes.com/x.html",
     "established_news", "domain:nytimes.com"),
    ("https://www.google.com/search?q=nytimes", "unknown", "none"),
])
def test_the_same_site_is_typed_the_same_whatever_the_link(url: str, stype: str,
                                                            rule: str) -> None:
    prov = SourceTyper().classify(url, None)
    assert (prov.source_type, prov.rule) == (stype, rule)


# --------------------------------------------------------------------------- public suffixes


@pytest.mark.parametrize(("host", "site"), [
    ("www.police.uk", "police.uk"), ("www.nhs.uk", "nhs.uk"),
    # under a public suffix m., mobile. and amp. are a registrant's own names
    ("m.nhs.uk", "m.nhs.uk"), ("mobile.co.uk", "mobile.co.uk"), ("amp.co.uk", "amp.co.uk"),
    ("nhs.uk", "nhs.uk"), ("www2.gov.uk", "gov.uk"), ("www.cdc.gov", "cdc.gov"),
    ("www.com", "www.com"), ("m.com", "m.com"), ("www.localhost", "www.localhost"),
    ("thames-valley.police.uk", "thames-valley.police.uk"),
])
def test_the_site_of_a_front_end_of_a_public_suffix(host: str, site: str) -> None:
    """``www.X`` was its own site when X is a public suffix (``www.police.uk`` vs
    ``police.uk``): the list makes ``www.police.uk`` a registered domain, and only a front end
    *below* the registered domain was taken off."""
    parsed = parse_url(f"https://{host}/")
    assert parsed.host is not None
    assert provenance_url.bare_host(parsed.host, parsed.registered_domain) == site


def test_a_table_row_of_a_public_suffix_types_its_front_ends(tmp_path: Path) -> None:
    """A table row ``police.uk`` typed ``police.uk`` only, not ``www.police.uk``."""
    table = write(tmp_path / "t.csv", "domain,source_type\npolice.uk,blog\n"
                                      "police.uk/news,established_news\n")
    typer = SourceTyper([table])
    for url in ("https://police.uk/x", "https://www.police.uk/x"):
        assert (typer.classify(url).source_type, typer.classify(url).rule) == (
            "blog", "table:t.csv"), url
    # m.police.uk is a registered domain under the suffix, as thames-valley.police.uk is
    assert typer.classify("https://m.police.uk/x").rule == "suffix:police.uk"
    assert typer.classify("https://www.police.uk/news/1").source_type == "established_news"
    # another site under the suffix is not the suffix's own: its built-in rule stays
    assert typer.classify("https://thames-valley.police.uk/").rule == "suffix:police.uk"
    # and the first label of a front end is no subdomain label rule
    assert SourceTyper().classify("https://www.nhs.uk/").rule == "suffix:nhs.uk"


def test_rows_that_can_never_match_are_listed_with_their_lines(tmp_path: Path) -> None:
    """``DomainTable.unmatchable`` held the keys only, and no front door said anything."""
    table = write(tmp_path / "t.csv", "domain,score\nok.com,0.5\nexa\u2013mple.com,0.4\n"
                                      "\nbad..host.org/x,0.3\n")
    loaded = load_domain_table(table)
    assert [(r.line, r.cell) for r in loaded.unmatchable] == [(3, "exa\u2013mple.com"),
                                                             (5, "bad..host.org/x")]
    messages = SourceTyper([table]).unmatchable_warnings()
    assert messages == loaded.unmatchable_warnings() and len(messages) == 2
    assert messages[0].startswith(f"{table}:3: field 'domain': expected a valid host name, "
                                  "got 'exa\u2013mple.com' (")
    assert messages[1].endswith("no URL can match it, so the row is not used")
    assert SourceTyper([write(tmp_path / "u.csv", "domain,score\nok.com,1\n")]
                       ).unmatchable_warnings() == []


def test_real_domain_ratings_unmatchable_rows() -> None:
    if not RATINGS.is_file():
        pytest.skip(f"real data absent: {RATINGS} (../shared/data beside the checkout)")
    rows = load_domain_table(RATINGS).unmatchable
    assert len(rows) == 4 and all("\u2013" in r.cell for r in rows)


# --------------------------------------------------------------------------- provenance audit

#: a citation graph around T = 2024-06-01: an origin, a wrapper, a wrapper published after T,
#: a chain through an intermediary published after T, and an origin observed after T
AUDIT_ROWS = [
    {"id": "origin", "observed_at": "2020-01-01T00:00:00Z", "published_at": "2020-01-01"},
    {"id": "wrapper", "published_at": "2022-01-01", "cites": ["origin"]},
    {"id": "late", "published_at": "2025-06-01", "cites": ["origin"]},
    {"id": "mid", "published_at": "2025-01-01", "cites": ["origin"]},
    {"id": "via-mid", "published_at": "2023-01-01", "cites": ["mid"]},
    {"id": "future-origin", "observed_at": "2025-03-01", "published_at": "2024-01-01"},
    {"id": "undated", "cites": []},
]


@pytest.fixture(scope="module")
def audit_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import json

    from cli_inprocess import run_cli

    root = tmp_path_factory.mktemp("audit")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({**r, "text": f"page {r['id']} on measles"}) + "\n"
                              for r in AUDIT_ROWS), encoding="utf-8")
    where = root / "index"
    done = run_cli("index", str(corpus), "--index", str(where), "--embedder", "hashing")
    assert done.returncode == 0, done.stderr
    return where


def _audit(index: Path, *extra: str) -> tuple[int, str, str]:
    from cli_inprocess import run_cli

    done = run_cli("provenance", "audit", "--index", str(index), "--half-life", "365d", *extra)
    return done.returncode, done.stdout, done.stderr


def test_audit_dates_after_now_are_listed_never_rewritten(audit_index: Path) -> None:
    """A date after --now was moved to --now: a wrapper published after T was shown with
    t_n = T, an intermediary after T with T, and (both dates then equal) candidates vanished
    without a word. Now dates stay as written; what is dated after T is listed, never a
    candidate."""
    import json

    code, out, err = _audit(audit_index, "--now", "2024-06-01", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["after_now"]["doc_ids"] == ["future-origin", "late", "mid"]
    assert doc["after_now"]["count"] == 3 and "never moved to T" in doc["after_now"]["policy"]
    by = {c["wrapper"]: c for c in doc["candidates"]}
    assert sorted(by) == ["via-mid", "wrapper"] and doc["counts"]["candidates"] == 2
    assert by["wrapper"]["t_n"].startswith("2022-01-01")
    chain = {h["doc_id"]: h["date"] for h in by["via-mid"]["chain"]}
    assert chain["mid"].startswith("2025-01-01")  # as written (it was 2024-06-01, T)
    assert chain["origin"].startswith("2020-01-01")
    assert by["via-mid"]["ratio"] == pytest.approx(2 ** ((365 * 3 + 1) / 365))
    code, text, err = _audit(audit_index, "--now", "2024-06-01")
    assert code == 0, err
    assert ("dated after T (never candidates; dates as written): 3 documents: future-origin, "
            "late, mid") in text
    assert "mid (2025-01-01, cites)" in text
    # the earliest T: every dated document is after it, none is a candidate, and it says so
    code, out, err = _audit(audit_index, "--now", "0001-01-01", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["counts"]["candidates"] == 0
    assert doc["after_now"]["count"] == 6 and "undated" not in doc["after_now"]["doc_ids"]


@pytest.mark.parametrize("now", ["", "  "])
def test_audit_blank_now_is_a_usage_error(audit_index: Path, now: str) -> None:
    """A blank --now was an AssertionError traceback."""
    code, out, err = _audit(audit_index, "--now", now)
    assert (code, out) == (2, "")
    assert err == ("error: --now: expected an ISO 8601 date such as 2024-05-01 or "
                   f"2024-05-01T12:00:00Z, got {now!r}\n")


def test_audit_neighbours_only_with_copies(audit_index: Path) -> None:
    """--neighbours without --copies was accepted and thrown away (JSON neighbours null)."""
    code, out, err = _audit(audit_index, "--now", "2024-06-01", "--neighbours", "3")
    assert (code, out) == (2, "")
    assert err.startswith("error: --neighbours 3: only with --copies text or embedding")
    code, out, err = _audit(audit_index, "--now", "2024-06-01", "--neighbours", "3",
                            "--copies", "text", "--json")
    assert code == 0, err
    import json

    assert json.loads(out)["copies"]["neighbours"] == 3


def test_audit_stdout_on_a_full_disk_is_one_error_line(audit_index: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``credrank provenance audit … > /dev/full`` was a traceback (OSError ENOSPC): the
    command wrote to its own stream, past the guard every command's stdout has."""
    import io
    import sys

    from credrank.cli import run

    for extra in ((), ("--json",)):
        errors = io.StringIO()
        # a new /dev/full each time: the failed command points its stdout at the null device;
        # as a process's stdout is (errors="surrogateescape"), which the command's own
        # stream (typer.get_text_stream, errors="strict") wrapped again, past the guard
        with open("/dev/full", "w", encoding="utf-8", errors="surrogateescape") as full:
            monkeypatch.setattr(sys, "stdout", full)
            monkeypatch.setattr(sys, "stderr", errors)
            code = run(["provenance", "audit", "--index", str(audit_index), "--now",
                        "2024-06-01", *extra])
            monkeypatch.undo()
        assert (code, errors.getvalue()) == (1, "error: stdout: No space left on device\n")


def test_audit_progress_help_says_what_a_log_gets(audit_index: Path) -> None:
    """The help said progress is never shown when stderr is a file or a pipe; a log gets a
    plain line every $CREDRANK_PROGRESS_INTERVAL seconds."""
    from cli_inprocess import run_cli

    text = " ".join(run_cli("provenance", "audit", "--help").stdout.split())
    assert "when stderr is a file or a pipe" not in text
    assert "a plain line every 30 s in a file or a pipe ($CREDRANK_PROGRESS_INTERVAL" in text
    done = run_cli("provenance", "audit", "--index", str(audit_index), "--now", "2024-06-01",
                   env={"CREDRANK_PROGRESS_INTERVAL": "0"})
    assert done.returncode == 0 and "documents read: " in done.stderr


def test_a_row_naming_a_public_suffix_says_it_types_that_host_alone(tmp_path: Path) -> None:
    """``gov.uk,government`` typed none of the sites under it (data.gov.uk, each a registered
    domain of its own) and nothing said so; the template promises a row covers the hosts
    under it. It is said (a site's row is not), and the row still types the host itself."""
    table = write(tmp_path / "t.csv", "domain,source_type\ngov.uk,government\n"
                                      "bbc.co.uk,established_news\ncom,blog\n")
    loaded = load_domain_table(table)
    assert [(r.line, r.cell) for r in loaded.suffixes] == [(2, "gov.uk"), (4, "com")]
    messages = SourceTyper([table]).unmatchable_warnings()
    assert len(messages) == 2 and messages[0].startswith(
        f"{table}:2: field 'domain': 'gov.uk' is a public suffix: the row types the host "
        "gov.uk itself, never a site under it")
    typer = SourceTyper([table])
    assert typer.classify("https://gov.uk/x").source_type == "government"
    assert typer.classify("https://news.bbc.co.uk/a").source_type == "established_news"
