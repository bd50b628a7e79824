"""The web page of ``credrank serve`` in a real browser.

Debian's ``chromium`` driven by Playwright for Python (pointed at the system browser with
``executable_path``; no browser download) against the real server on the demo corpus indexed
with MiniLM. The test types a demo query, checks from the DOM that the credibility-aware column
and the similarity-only column differ, that each credibility-aware hit shows its host, source
type, prior and score-breakdown bar, that switching the selection to exposure parity re-runs
the search and shows group exposures, and saves a screenshot under the test's tmp dir. Each hit
shows its snippet under its title with the query words highlighted (issue 27).

Skipped, with the reason, where ``fastapi``/``uvicorn``/``playwright`` is not installed or no
chromium can be launched (``.ci/run`` installs Debian's chromium with apt when it can).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

#: this machine refuses outgoing connections: without the background-networking flags
#: chromium keeps trying to reach Google's services
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
#: q09 "ibuprofen heart attack risk": similarity alone ranks an AI-generated page, a blog and a
#: tweet first; the priors lift the FDA and the meta-analysis above them (checked from the DOM)
QUERY_ID = "q09"
TIMEOUT_MS = 60_000


def find_chromium() -> str | None:
    """The system chromium (``chromium`` on the PATH, else ``/usr/bin/chromium``)."""
    found = shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


def demo_query(query_id: str) -> str:
    from credrank.demo_corpus import demo_dir

    for line in (demo_dir() / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            if record["id"] == query_id:
                return str(record["text"])
    raise LookupError(f"demo query {query_id} not found")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    pytest.importorskip("fastapi", reason="fastapi is not installed: `credrank serve` needs it")
    pytest.importorskip("uvicorn", reason="uvicorn is not installed: `credrank serve` needs it")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright Python package is not installed")
    executable = find_chromium()
    if executable is None:
        pytest.skip("no chromium browser: install Debian's `chromium` (apt-get install chromium); "
                    "the test never downloads a browser")
    with sync_api.sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        except sync_api.Error as exc:
            pytest.skip(f"chromium at {executable} could not be launched by playwright: "
                        f"{str(exc).splitlines()[0]}")
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def server(demo_index_minilm: Path, browser: Any) -> Iterator[Any]:
    from serving import running_server

    with running_server(demo_index_minilm) as handle:
        yield handle


@pytest.fixture
def page(browser: Any, server: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)  # the first query loads the model's weights
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server.url + "/")
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def doc_ids(page: Any, column: str) -> list[str]:
    return page.locator(f"#{column} li[data-doc-id]").evaluate_all(
        "items => items.map(li => li.dataset.docId)")


def test_columns_differ_and_preset_switch(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect(page).to_have_title(re.compile("credrank"))
    page.locator("#query").fill(demo_query(QUERY_ID))
    page.locator("#query").press("Enter")  # Enter submits
    expect(page.locator("#status")).to_have_attribute("data-state", "ok")

    cred = page.locator("#col-cred li[data-doc-id]")
    sim = page.locator("#col-sim li[data-doc-id]")
    expect(cred).to_have_count(5)  # the page's default: 5 results per column
    expect(sim).to_have_count(5)
    cred_ids, sim_ids = doc_ids(page, "col-cred"), doc_ids(page, "col-sim")
    assert cred_ids != sim_ids, "the priors should reorder this query's hits"
    assert len(set(cred_ids)) == len(cred_ids) and len(set(sim_ids)) == len(sim_ids)

    # every credibility-aware hit: host, source type, prior and a breakdown bar
    for i in range(cred.count()):
        hit = cred.nth(i)
        expect(hit.locator(".host")).not_to_be_empty()
        expect(hit.locator(".badge")).not_to_be_empty()
        expect(hit.locator(".prior")).to_have_text(re.compile(r"^prior 0\.\d\d$"))
        expect(hit.locator(".dates")).not_to_be_empty()
        for part in ("retrieval_score", "prior", "final"):
            expect(hit.locator(f".breakdown .bar-row[data-part={part}] .fill")).to_have_count(1)
        width = hit.locator(".breakdown .bar-row[data-part=final] .fill").evaluate(
            "e => e.getBoundingClientRect().width")
        assert width > 0, "the final-score bar should be drawn"
    # the rank markers agree with the two lists
    for i, doc in enumerate(cred_ids):
        move = cred.nth(i).locator(".move")
        if doc not in sim_ids:
            expect(move).to_have_text("new")
        elif sim_ids.index(doc) == i:
            expect(move).to_have_text("=")
        else:
            delta = sim_ids.index(doc) - i
            expect(move).to_have_text(("↑" if delta > 0 else "↓") + str(abs(delta)))
    # under each title, the hit's snippet (issue 27) with the query words highlighted
    from credrank.core.hittext import ELLIPSIS, SNIPPET_CHARS, query_words

    words = query_words(demo_query(QUERY_ID))
    marked = 0
    for column in (cred, sim):
        for i in range(column.count()):
            snip = column.nth(i).locator("p.snippet")
            expect(snip).to_have_count(1)
            text = snip.inner_text()
            assert 20 < len(text.strip(ELLIPSIS)) <= SNIPPET_CHARS, text
            marks = snip.locator("mark").all_inner_texts()
            assert all(any(m.lower().startswith(w) for w in words) for m in marks), marks
            marked += bool(marks)
            # the snippet sits under the title, before the host line
            order = column.nth(i).evaluate(
                "li => [...li.children].map(c => c.className)")
            assert order.index("snippet") == order.index("hit-head") + 1, order
    assert marked >= cred.count(), "the query words should be highlighted in the snippets"
    # the similarity column shows no applied prior
    expect(sim.first.locator(".breakdown .bar-row[data-part=prior]")).to_have_count(0)
    expect(page.locator("#priors-table h2")).to_contain_text("current")

    shot = tmp_path / "credrank-web.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000

    # switching the selection re-runs the search and shows the group exposures
    page.locator("#selection").select_option("exposure")
    expect(page.locator("#cred-label")).to_contain_text("exposure")
    expect(page.locator("#exposure table.groups tbody tr").first).to_be_visible()
    expect(page.locator("#status")).to_have_attribute("data-state", "ok")
    expect(cred.locator(".group-exposure")).to_have_count(cred.count())
    expect(cred.first.locator(".group-exposure")).to_contain_text("realised")
    expect(sim).to_have_count(5)
    assert doc_ids(page, "col-sim") == sim_ids, "similarity only ignores the selection"

    # and the priors preset
    page.locator("#preset").select_option("aggressive")
    expect(page.locator("#priors-table h2")).to_contain_text("aggressive")
    expect(page.locator("#status")).to_have_attribute("data-state", "ok")
    page.screenshot(path=str(tmp_path / "credrank-web-exposure.png"), full_page=True)


def test_errors_are_shown(page: Any) -> None:
    from playwright.sync_api import expect

    status = page.locator("#status")
    page.locator("#go").click()  # empty query: said on the page, nothing sent
    expect(status).to_have_attribute("data-state", "error")
    expect(status).to_contain_text("type a query")

    # a bad top-k goes to the server; its 422 message is shown
    page.locator("#query").fill(demo_query(QUERY_ID))
    page.locator("#top-k").fill("0")
    page.locator("#go").click()
    expect(status).to_have_text(re.compile(r"^Error: .*top.k.*HTTP 4\d\d", re.IGNORECASE))
    expect(page.locator("#col-cred li[data-doc-id]")).to_have_count(0)

    # and a good search afterwards clears it
    page.locator("#top-k").fill("3")
    page.locator("#go").click()
    expect(status).to_have_attribute("data-state", "ok")
    expect(page.locator("#col-cred li[data-doc-id]")).to_have_count(3)
