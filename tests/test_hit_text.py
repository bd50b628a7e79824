"""Every hit carries its text (issue 27): the snippet rule, ``Candidates.hits(text=…)``, the
library (``Searcher``), ``credrank search --text … --json`` (in process), ``POST
/search`` and ``/rerank`` on a real server — one vocabulary (``full | snippet | none``, default
``snippet`` of at most 240 characters) and one validator (:mod:`credrank.core.hittext`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cli_inprocess import run_cli
from cli_process import CREDRANK
from credrank.core.hittext import (
    DEFAULT_TEXT,
    ELLIPSIS,
    SNIPPET_CHARS,
    STOPWORDS,
    TEXT_CHOICES,
    check_text,
    highlights,
    query_words,
    snippet,
)
from sparse_copy import copy_index

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "src" / "credrank" / "data" / "demo"
QUERY = "does vitamin d prevent covid"


def corpus() -> dict[str, dict]:
    out = {}
    for line in (DEMO / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            out[record["id"]] = record
    return out


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def assert_snippet_of(snip: str, full: str, query: str) -> None:
    """``snip`` is a snippet of ``full`` by the stated rule: a piece of the text of at most
    SNIPPET_CHARS characters, ``…`` exactly where it was cut, the query words in it when the
    text has them."""
    body = snip.removeprefix(ELLIPSIS).removesuffix(ELLIPSIS)
    text = flat(full)
    assert body in text
    assert len(body) <= SNIPPET_CHARS
    assert snip.startswith(ELLIPSIS) == (not text.startswith(body))
    assert snip.endswith(ELLIPSIS) == (not text.endswith(body))
    if highlights(text, query):
        assert highlights(body, query), f"no query word in {snip!r}"


# -- the rule ------------------------------------------------------------------------------------

def test_vocabulary_and_validator() -> None:
    assert TEXT_CHOICES == ("full", "snippet", "none") and DEFAULT_TEXT == "snippet"
    assert SNIPPET_CHARS == 240
    for value in TEXT_CHOICES:
        assert check_text(value) == value
    for bad in ("FULL", "", None, 1, "snippets"):
        with pytest.raises(ValueError, match=r"^--text: expected one of full, snippet, none"):
            check_text(bad, "--text")


def test_snippet_window_around_the_query_words() -> None:
    head = " ".join(f"filler{i}" for i in range(60))
    tail = " ".join(f"after{i}" for i in range(60))
    middle = "Vitamin D supplementation did not prevent COVID-19 infection in a large trial."
    text = f"{head} {middle} {tail}"
    snip = snippet(text, QUERY)
    assert snip.startswith(ELLIPSIS) and snip.endswith(ELLIPSIS)
    assert middle in snip
    assert_snippet_of(snip, text, QUERY)
    # cut at word boundaries: the first and last words are whole words of the text
    words = set(text.split())
    body = snip.strip(ELLIPSIS).split()
    assert body[0] in words and body[-1] in words


def test_snippet_edge_cases() -> None:
    assert snippet("Short\n  text,   kept whole.", "anything") == "Short text, kept whole."
    long = " ".join(f"word{i}" for i in range(100))
    opening = snippet(long, "nothing matches")  # no query word: the opening window
    assert opening.startswith("word0 ") and opening.endswith(ELLIPSIS)
    assert len(opening) <= SNIPPET_CHARS + 1
    assert len(snippet("x" * 1000, "x")) == SNIPPET_CHARS + 1  # one long word: a hard cut
    assert query_words("Does the vitamin D prevent COVID?") == ["vitamin", "prevent", "covid"]
    assert query_words("what is it") == ["what", "is", "it"]  # only stopwords: all count
    assert highlights("Prevention of covid-19", "prevent covid") == [(0, 10), (14, 19)]
    # the best window holds the most distinct query words
    text = ("vitamin " + "x " * 200 + "vitamin covid prevent " + "y " * 200)
    assert "vitamin covid prevent" in snippet(text, QUERY)


def _reference_highlights(text: str, query: str) -> list[tuple[int, int]]:
    """The rule as the module docstring says it, word by word (what the page's app.js does)."""
    words = query_words(query)
    return [(m.start(), m.end()) for m in re.finditer(r"\w+", text)
            if any(m.group().lower().startswith(w) for w in words)]


@pytest.mark.parametrize("query", [QUERY, "influenza vaccine side effects", "Echinacea colds",
                                   "what is it", "covid-19 vaccines in children", ""])
def test_highlights_follow_the_rule_on_the_demo_texts(query: str) -> None:
    """One pattern scan per text (cached per query) finds exactly the words that the
    word-by-word rule finds, on every demo text."""
    texts = [json.loads(line)["text"] for line in
             (DEMO / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    for text in texts:
        assert highlights(text, query) == _reference_highlights(text, query), text[:80]


def test_a_word_is_credited_to_the_first_query_word_that_starts_it() -> None:
    # "vaccines" starts with both "vacc" and "vaccine": the window counts it once, for "vacc"
    from credrank.core.hittext import _matches

    assert [w for *_, w in _matches("Vaccines work; vaccination too", "vacc vaccine")] == \
        ["vacc", "vacc"]
    assert [w for *_, w in _matches("Vaccines work", "vaccine vacc")] == ["vaccine"]
    # case as Python's case-insensitive patterns fold it: the three Greek sigmas are one
    assert highlights("ΣΟΦΙΑ and σοφία", "σοφια") == [(0, 5)]
    # (str.lower() makes the last capital sigma a final "ς"; a query typed with "σ" matches)
    assert highlights("ΟΔΥΣΣΕΑΣ", "\u03bf\u03b4\u03c5\u03c3\u03c3\u03b5\u03b1\u03c3") == [(0, 8)]
    assert highlights("no query word here", "the of") == []


def test_page_stopwords_are_the_same() -> None:
    js = (ROOT / "src" / "credrank" / "serve" / "static" / "app.js").read_text(encoding="utf-8")
    block = re.search(r"const STOPWORDS = new Set\(\((.*?)\)\.split", js, re.S)
    assert block is not None
    assert set(" ".join(re.findall(r'"([^"]*)"', block.group(1))).split()) == STOPWORDS


# -- hits() --------------------------------------------------------------------------------------

def test_candidates_hits_text(make_batch) -> None:
    long = " ".join(f"w{i}" for i in range(100)) + " vitamin d and covid " + "z " * 100
    batch = make_batch([0.9, 0.5, 0.1], query=QUERY, title=["T0", "T1", None],
                       text=[long, "short one", None])
    snip = batch.hits()  # default: snippet
    assert [h["title"] for h in snip] == ["T0", "T1", None]
    assert_snippet_of(snip[0]["text"], long, QUERY)
    assert snip[1]["text"] == "short one" and snip[2]["text"] is None
    assert batch.hits("full")[0]["text"] == long
    assert all("text" not in h for h in batch.hits("none"))
    assert len(batch.hits(snippet_chars=50)[0]["text"]) <= 52
    with pytest.raises(ValueError, match=r"^text: expected one of full, snippet, none"):
        batch.hits("all")


# -- the library -------------------------------------------------------------------------------

def test_searcher_hits_carry_text(demo_index_hashing: Path) -> None:
    from credrank.searcher import Searcher

    docs = corpus()
    with Searcher.open(demo_index_hashing) as searcher:
        # the default search (the engine's formula search cut to top_k) asks the engine for
        # the text of the top_k points in the same query; nothing is read afterwards
        stages = searcher.pipeline(None).stages
        assert [s.name for s in stages] == ["pushdown"] and "text" in stages[0].fields
        hits = searcher.search(QUERY).hits()
        assert len(hits) == 10
        for hit in hits:
            assert hit["title"] == docs[hit["doc_id"]].get("title")
            assert_snippet_of(hit["text"], docs[hit["doc_id"]]["text"], QUERY)
        full = searcher.search(QUERY, text="full").hits("full")
        assert [h["text"] for h in full] == [docs[h["doc_id"]]["text"] for h in full]
        assert all("text" not in h for h in searcher.search(QUERY).hits("none"))
        # text="none": nothing read, the hits' text is null
        assert [s.name for s in searcher.pipeline(None, "none").stages] == ["pushdown"]
        assert "text" not in (searcher.pipeline(None, "none").stages[0].fields or ())
        assert all(h["text"] is None for h in searcher.search(QUERY, text="none").hits())

        # the Python path: the pool is retrieved without text; the final top_k are read by id
        python = Searcher.spec(top_k=4, pushdown=False)
        read: list[list[str]] = []
        original = searcher.store.read_payloads

        def spy(doc_ids=None, fields=("doc_id", "url", "text")):
            read.append(list(doc_ids or []))
            return original(doc_ids, fields)

        searcher.store.read_payloads = spy  # type: ignore[method-assign]
        try:
            result = searcher.search(QUERY, python)
        finally:
            del searcher.store.read_payloads
        assert [s.name for s in searcher.pipeline(python).stages][-1] == "fetch_text"
        assert read == [list(result.doc_ids)] and len(read[0]) == 4
        for hit in result.hits():
            assert_snippet_of(hit["text"], docs[hit["doc_id"]]["text"], QUERY)

        doc = searcher.search_json(QUERY, text="full")
        assert doc["settings"]["text"] == "full" and "snippet_chars" not in doc["settings"]
        assert all(h["text"] == docs[h["doc_id"]]["text"] for h in doc["hits"])
        doc = searcher.search_json(QUERY)
        assert doc["settings"]["text"] == "snippet"
        assert doc["settings"]["snippet_chars"] == SNIPPET_CHARS
        with pytest.raises(ValueError, match=r"^text: expected"):
            searcher.search(QUERY, text="some")
        rerank = searcher.rerank_json(QUERY, [{"id": "a", "text": "Vitamin D and COVID."},
                                              {"id": "b", "text": "Nothing related."}])
        assert {h["doc_id"]: h["text"] for h in rerank["hits"]} == {
            "a": "Vitamin D and COVID.", "b": "Nothing related."}


# -- the CLI, as a user runs it -------------------------------------------------------------

@pytest.fixture(scope="module")
def cli_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CREDRANK.exists():
        pytest.skip("the credrank console script is not installed")
    where = tmp_path_factory.mktemp("hit-text-cli")
    lines = (DEMO / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:30]
    (where / "small.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_cli("index", "small.jsonl", "--index", "idx", "--embedder", "hashing", cwd=where)
    assert proc.returncode == 0, proc.stderr
    return where


def test_cli_search_json_text(cli_dir: Path) -> None:
    docs = corpus()
    base = ("search", QUERY, "--index", "idx", "--top-k", "3", "--json")
    by_mode = {}
    for mode in ("default", "snippet", "full", "none"):
        extra = () if mode == "default" else ("--text", mode)
        proc = run_cli(*base, *extra, cwd=cli_dir)
        assert proc.returncode == 0, proc.stderr
        by_mode[mode] = json.loads(proc.stdout)
    assert by_mode["default"]["hits"] == by_mode["snippet"]["hits"]
    for hit in by_mode["snippet"]["hits"]:
        assert hit["title"] == docs[hit["doc_id"]].get("title")
        assert_snippet_of(hit["text"], docs[hit["doc_id"]]["text"], QUERY)
    assert by_mode["snippet"]["settings"]["text"] == "snippet"
    assert by_mode["snippet"]["settings"]["snippet_chars"] == SNIPPET_CHARS
    for hit in by_mode["full"]["hits"]:
        assert hit["text"] == docs[hit["doc_id"]]["text"]
    assert by_mode["none"]["settings"]["text"] == "none"
    assert all("text" not in h for h in by_mode["none"]["hits"])
    assert all(h["title"] for h in by_mode["none"]["hits"])
    # the ranking is the same whatever the text
    ids = [[h["doc_id"] for h in doc["hits"]] for doc in by_mode.values()]
    assert all(i == ids[0] for i in ids)

    # for people (a pipe here: a record per hit): each hit's title and, under it, its snippet
    proc = run_cli("search", QUERY, "--index", "idx", "--top-k", "2", cwd=cli_dir)
    assert proc.returncode == 0, proc.stderr
    top = by_mode["snippet"]["hits"][0]
    assert f"title: {top['title']}" in proc.stdout and "text: " in proc.stdout
    assert ELLIPSIS in proc.stdout or top["text"][:20] in proc.stdout


def test_cli_bad_text_value(cli_dir: Path) -> None:
    proc = run_cli("search", QUERY, "--index", "idx", "--text", "everything", cwd=cli_dir)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error: --text: expected one of full, snippet, none, got 'everything'" in proc.stderr


# -- the service ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    pytest.importorskip("fastapi")
    from serving import running_server

    where = tmp_path_factory.mktemp("hit-text-serve") / "index"
    copy_index(demo_index_hashing, where)
    with running_server(where, "--table", str(DEMO / "domains.csv")) as handle:
        yield handle


def post(server, path: str, body: dict) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=60)


def test_http_search_text(server) -> None:
    docs = corpus()
    default = post(server, "/search", {"query": QUERY, "top_k": 4})
    assert default.status_code == 200, default.text
    body = default.json()
    assert body["settings"]["text"] == "snippet"
    assert body["settings"]["snippet_chars"] == SNIPPET_CHARS
    for hit in body["hits"]:
        assert hit["title"] == docs[hit["doc_id"]].get("title")
        assert_snippet_of(hit["text"], docs[hit["doc_id"]]["text"], QUERY)
    full = post(server, "/search", {"query": QUERY, "top_k": 4, "text": "full"}).json()
    assert [h["text"] for h in full["hits"]] == [docs[h["doc_id"]]["text"]
                                                 for h in full["hits"]]
    none = post(server, "/search", {"query": QUERY, "top_k": 4, "text": "none"}).json()
    assert all("text" not in h for h in none["hits"]) and none["settings"]["text"] == "none"
    # the Python path (a selector) and a sent pipeline carry it too
    mmr = post(server, "/search", {"query": QUERY, "top_k": 3, "select": "mmr",
                                   "select_params": {"diversity": 0.5}}).json()
    assert all(h["text"] for h in mmr["hits"])
    spec = post(server, "/search", {"query": QUERY, "pipeline": body["pipeline"],
                                    "text": "full"})
    assert spec.status_code == 200, spec.text
    assert spec.json()["hits"][0]["text"] == docs[spec.json()["hits"][0]["doc_id"]]["text"]


@pytest.mark.parametrize("value", ["all", "", "FULL", 1, None, True])
def test_http_bad_text_is_422_naming_the_field(server, value) -> None:
    for path, extra in (("/search", {}), ("/rerank", {"candidates": [{"id": "a",
                                                                     "text": "x"}]})):
        response = post(server, path, {"query": QUERY, "text": value, **extra})
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["errors"][0]["field"] == "text"
        assert body["detail"].startswith("text: expected")


def test_http_rerank_and_schema(server) -> None:
    body = post(server, "/rerank", {"query": QUERY, "text": "snippet", "candidates": [
        {"id": "a", "text": "Vitamin D does not prevent COVID-19.", "title": "A"},
        {"id": "b", "text": "Unrelated.", "title": "B"}]}).json()
    assert {h["doc_id"]: (h["title"], h["text"]) for h in body["hits"]} == {
        "a": ("A", "Vitamin D does not prevent COVID-19."), "b": ("B", "Unrelated.")}
    schema = httpx.get(server.url + "/openapi.json").json()["components"]["schemas"]
    field = schema["SearchRequest"]["properties"]["text"]
    assert field["enum"] == list(TEXT_CHOICES) and field["default"] == DEFAULT_TEXT


def test_ascii_matching_compiles_nothing_and_agrees_with_the_pattern() -> None:
    """On ASCII text and query words the matches come from ``str.find`` (no pattern compiled
    per query) and are exactly the regular expression's: same starts, ends and credited
    words, over random texts and queries (prefixes, repeats, case, digits, underscores)."""
    import random

    from credrank.core import hittext

    rng = random.Random(38)
    alphabet = "abAB_1 .-,"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        query = " ".join("".join(rng.choice("abAB_1") for _ in range(rng.randint(1, 4)))
                         for _ in range(rng.randint(1, 4)))
        words, pattern = hittext._word_matcher(query)
        expected = [] if pattern is None else [
            (m.start(), m.end(), words[m.lastindex - 1]) for m in pattern.finditer(text)]
        assert hittext._matches(text, query) == expected, (text, query)
    before = hittext._word_matcher.cache_info().misses
    for i in range(50):
        snippet("word " * 100 + f"vitamin{i} trial", f"vitamin{i} trial q{i}")
    assert hittext._word_matcher.cache_info().misses == before
