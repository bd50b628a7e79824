"""A text longer than the embedder's window is embedded from its beginning only: every such
document is named by the indexing report, never silently cut (issue 36)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from cli_inprocess import run_cli
from credrank.documents import iter_documents
from credrank.index.embed import HashingEmbedder
from credrank.index.ingest import (
    index_documents,
    overflowing,
    prepare_documents,
    window_of,
    write_prepared,
)
from credrank.index.opener import open_store
from credrank.provenance import SourceTyper

LONG = "filler words about nothing in particular. " * 300 + "The answer sentence."


class Windowed(HashingEmbedder):
    """The hashing embedder with a window of ``window`` words (a stand-in for a model's)."""

    def __init__(self, window: int = 50) -> None:
        super().__init__(dim=32)
        self.window = window

    def truncated(self, texts: Sequence[str]) -> list[bool]:
        return [len(t.split()) > self.window for t in texts]


class Wrapper:
    """A caching wrapper as the service uses one: answers through ``inner``."""

    def __init__(self, inner: object) -> None:
        self.inner = inner


def _corpus(path: Path) -> Path:
    rows = [{"id": "short", "text": "Vitamin D and covid.", "url": "https://www.nih.gov/a"},
            {"id": "long", "text": LONG, "url": "https://www.nih.gov/b"},
            {"id": "long-title", "title": "word " * 300, "text": "short text",
             "url": "https://www.nih.gov/c"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_window_is_found_through_wrappers() -> None:
    emb = Windowed(10)
    assert window_of(emb) == 10 and window_of(Wrapper(emb)) == 10  # type: ignore[arg-type]
    over = overflowing(Wrapper(emb))  # type: ignore[arg-type]
    assert over is not None and over(["a b", "w " * 11]) == [False, True]
    assert overflowing(HashingEmbedder()) is None and window_of(HashingEmbedder()) is None


def test_index_report_names_every_truncated_document(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c.jsonl")
    emb = Windowed(50)
    with open_store(tmp_path / "idx", embedder=emb.name, dim=emb.dim, create=True) as idx:
        report = index_documents(iter_documents(corpus), idx, emb, SourceTyper([]))
        # the title is embedded with the text: a long title counts
        assert report.truncated == ["long", "long-title"] and report.window == 50
        counts = report.counts(lambda r: {}, lambda d: {}, strict=False)
        assert counts["truncated"] == {"window_tokens": 50, "count": 2,
                                       "doc_ids": ["long", "long-title"]}
        assert "2 text(s) longer than the embedder's window of 50 tokens" in report.summary()
        # a second run writes nothing: nothing to report
        again = index_documents(iter_documents(corpus), idx, emb, SourceTyper([]))
        assert again.unchanged == 3 and again.truncated == []
    # the service's path (prepare, then write) reports the same
    with open_store(tmp_path / "idx2", embedder=emb.name, dim=emb.dim, create=True) as idx:
        prepared = prepare_documents(iter_documents(corpus), idx, emb, SourceTyper([]))
        assert write_prepared(prepared, idx, emb).truncated == ["long", "long-title"]


def test_an_embedder_without_a_window_reports_none(tmp_path: Path) -> None:
    emb = HashingEmbedder(dim=32)
    with open_store(tmp_path / "idx", embedder=emb.name, dim=emb.dim, create=True) as idx:
        report = index_documents(iter_documents(_corpus(tmp_path / "c.jsonl")), idx, emb,
                                 SourceTyper([]))
    assert report.truncated == [] and report.window is None
    assert "window" not in report.summary()


@pytest.mark.slow
def test_credrank_index_names_what_minilm_cuts(tmp_path: Path) -> None:
    # the default install (ONNX MiniLM, 256 word pieces), as a user runs it: the long text is
    # split into passages; a title longer than half the window is cut to that for embedding
    # (named under titles_cut), so that every passage keeps half the window for its text
    corpus = _corpus(tmp_path / "c.jsonl")
    proc = run_cli("index", str(corpus), "--index", str(tmp_path / "idx"), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["truncated"] == {"window_tokens": 256, "count": 0, "doc_ids": []}
    assert doc["titles_cut"] == {"max_tokens": 126, "count": 1, "doc_ids": ["long-title"]}
    assert doc["indexed"] == 3
    # without splitting, both are cut and named
    proc = run_cli("index", str(corpus), "--index", str(tmp_path / "idx0"), "--json",
                   "--chunk-tokens", "0")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["truncated"] == {"window_tokens": 256, "count": 2,
                                                    "doc_ids": ["long", "long-title"]}
    said = run_cli("index", str(corpus), "--index", str(tmp_path / "idx2"),
                   "--chunk-tokens", "0")
    assert said.returncode == 0, said.stderr
    assert ("2 text(s) longer than the embedder's window of 256 tokens were embedded from "
            "their beginning only" in " ".join(said.stdout.split()))


def test_rerank_names_the_candidates_it_embedded_in_part() -> None:
    # candidates retrieved elsewhere and embedded here (POST /rerank, the adapters, rerank())
    from credrank.core.candidates import Candidates
    from credrank.rerank import GivenCandidates

    # a long text is split and scored by its best chunk (nothing cut); a title over half a
    # passage is cut to that, as `credrank index` embeds it, so no chunk is cut either
    records = [{"id": "c1", "text": "short passage"}, {"id": "c2", "text": LONG},
               {"id": "c3", "text": LONG, "vector": [0.1] * 32},  # given: not embedded here
               {"id": "c4", "title": "word " * 60, "text": "short text"}]
    given = GivenCandidates(records, Windowed(50), retrieval="cosine")
    out = given(Candidates.empty("q"))
    info = out.info["retrieval"]
    assert info["embedded"] == 3 and info["truncated"] == []
    assert info["window_tokens"] == 50
    chunked = list(out.doc_ids).index("c2")
    assert out.column("passages")[chunked] > 1 and len(out.column("text")[chunked]) < len(LONG)
    plain = GivenCandidates(records, HashingEmbedder(dim=32), retrieval="cosine")
    info = plain(Candidates.empty("q")).info["retrieval"]
    assert info["truncated"] == [] and info["window_tokens"] is None
