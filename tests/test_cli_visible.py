"""A page's terminal control sequences are shown, never sent, in the CLI's human output."""

from __future__ import annotations

import json
from pathlib import Path

from cli_inprocess import run_cli
from credrank.cli.visible import visible, visible_text

EVIL = {"id": "e1", "title": "Evil \u001b[31mred\u001b[0m \u001b]0;pwned\u0007",
        "text": "vitamin d text with \u001b[2J a clear screen\u009b and\ttabs\nlines",
        "url": "https://example.org/x"}


def test_control_characters_become_their_pictures() -> None:
    shown = visible_text(EVIL["text"])
    assert "\u001b" not in shown and "\u009b" not in shown and "\u241b[2J" in shown
    assert "\t" in shown and "\n" in shown  # layout characters stay
    doc = visible({"hits": [{"title": EVIL["title"], "rank": 1}], "query": "q"})
    assert doc["hits"][0]["rank"] == 1 and "\u001b" not in doc["hits"][0]["title"]


def test_search_shows_no_escape_from_a_document(tmp_path: Path) -> None:
    """An ESC [ 2 J in a page's text reached the terminal raw (a cleared screen, a window
    title set by the page); --json keeps the data exact."""
    corpus = tmp_path / "evil.jsonl"
    corpus.write_text(json.dumps(EVIL) + "\n", encoding="utf-8")
    assert run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing",
                   "-q").returncode == 0
    text = run_cli("search", "vitamin", "--index", tmp_path / "idx")
    assert text.returncode == 0 and "\u001b" not in text.stdout and "\u241b" in text.stdout
    data = run_cli("search", "vitamin", "--index", tmp_path / "idx", "--json", "--text",
                   "full")
    assert json.loads(data.stdout)["hits"][0]["text"] == EVIL["text"]
