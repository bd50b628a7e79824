"""A long title cannot shrink a document's passages (credrank.index.passages.title_share): it
counts for at most half a passage, is embedded cut to that half, and the documents whose title
was cut are reported (``titles_cut``). Before, a title that filled the window left every
passage 8 tokens (overlapping by 4): one document of 3,000 words became 2,949 points that all
embedded the same title, for minutes of CPU, and its text was not searched at all."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from cli_inprocess import run_cli
from credrank.documents import Document
from credrank.index.embed import HashingEmbedder
from credrank.index.ingest import index_documents
from credrank.index.opener import open_store
from credrank.index.passages import (
    Chunking,
    chunk_texts,
    cut_titles,
    title_share,
    token_spans,
    window_budget,
)
from credrank.provenance import SourceTyper

TITLE = " ".join(["headline"] * 100)
TEXT = " ".join(f"word{j}" for j in range(200))


class Windowed(HashingEmbedder):
    """The hashing embedder with a window of ``window`` words (a stand-in for a model's)."""

    def __init__(self, window: int) -> None:
        super().__init__(dim=32)
        self.window = window

    def truncated(self, texts: Sequence[str]) -> list[bool]:
        return [len(t.split()) > self.window for t in texts]


def test_a_title_counts_for_at_most_half_a_passage() -> None:
    chunking = Chunking(30, 4)  # 28 tokens of its own: a title takes at most 13 and a break
    assert title_share(chunking) == 13
    assert window_budget(chunking, 100) == window_budget(chunking, 13) == 14
    assert window_budget(chunking, 5) == 22 and window_budget(chunking, 0) == 28
    emb = HashingEmbedder()
    [cut, short, none] = cut_titles(emb, chunking, [TITLE, "a short title", None])
    assert cut is not None and cut.split() == ["headline"] * 13 and TITLE.startswith(cut)
    assert (short, none) == ("a short title", None)
    # without splitting the whole text is cut by the model (and reported): titles as given
    assert cut_titles(emb, Chunking(0, 0), [TITLE]) == [TITLE]
    [spans] = chunk_texts(emb, chunking, [TITLE], [TEXT])
    assert chunk_texts(emb, chunking, [cut], [TEXT]) == [spans]
    # each passage holds at least half the window of text: 200 words in steps of >= 10
    assert len(spans) <= 200 // (14 - 4) + 1
    words = token_spans(emb)([TEXT])[0]
    assert all(sum(a <= s and e <= b for s, e in words) >= 10 for a, b in spans[:-1])


def test_indexing_embeds_the_cut_title_and_reports_it(tmp_path: Path) -> None:
    emb = Windowed(30)
    docs = [Document(id="T", title=TITLE, text=TEXT, url="https://www.nih.gov/a"),
            Document(id="S", title="Short", text=TEXT, url="https://www.nih.gov/b")]
    with open_store(tmp_path / "idx", embedder=emb.name, dim=emb.dim, create=True,
                    chunking=Chunking(30, 4)) as idx:
        report = index_documents(iter(docs), idx, emb, SourceTyper([]))
        points = len(idx)
        [row] = idx.read_payloads(["T"], fields=("title",))
    # no passage overflows the window: the text of every passage is embedded
    assert report.truncated == [] and report.titles_cut == ["T"]
    counts = report.counts(lambda r: {}, lambda d: {}, strict=False)
    assert counts["titles_cut"] == {"max_tokens": 13, "count": 1, "doc_ids": ["T"]}
    assert "1 title(s) longer than half a passage (13 tokens) were embedded cut" in \
        report.summary()
    assert points <= 2 * (200 // 10 + 1)
    assert row["title"] == TITLE  # the stored title is whole


def test_credrank_index_reports_cut_titles(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "T", "title": TITLE, "text": TEXT}) + "\n",
                      encoding="utf-8")
    proc = run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing",
                   "--chunk-tokens", "30", "--chunk-overlap", "4", "--json", "-q")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["titles_cut"] == {"max_tokens": 13, "count": 1, "doc_ids": ["T"]}
    assert doc["passages"]["points"] <= 200 // 10 + 1
