"""Long documents split into passages at index time and found as documents at search time
(issue 36, item 1): the split itself, MaxP in every store, re-writes, index-time scores on
every passage, ``unit: passage``, stages that count documents, and the answer past the
embedder's window found at rank 1 through ``credrank search``, ``POST /rerank`` and an
adapter — and missed without splitting. The CLI runs in process (``cli_inprocess``): what
these tests check is output, not process behaviour."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cli_inprocess import run_cli
from cli_process import assert_clean_error
from credrank.core.candidates import Candidates
from credrank.core.pipeline import Stage, by_document
from credrank.documents import Document
from credrank.index.embed import HashingEmbedder, get_embedder
from credrank.index.ingest import index_documents
from credrank.index.manifest import MANIFEST, read_manifest, reindex_hint
from credrank.index.opener import open_store
from credrank.index.passages import (
    Chunking,
    check_chunking,
    chunk_texts,
    default_chunking,
    split_spans,
    token_spans,
)
from credrank.index.scoring import set_fields
from credrank.pipeline.compile import decide_pushdown
from credrank.provenance import SourceTyper
from credrank.searcher import Searcher
from sparse_copy import copy_index

FILLER = " ".join(f"The committee met on day {i} and adjourned without a vote." for i in range(60))
ANSWER = "The capital of Freedonia is Zorbula, a city of bridges on the river Vell."
QUERY = "What is the capital of Freedonia?"


def _words(text: str) -> list[tuple[int, int]]:
    return token_spans(HashingEmbedder())([text])[0]


# -- the split ------------------------------------------------------------------------------
def test_a_text_that_fits_is_one_passage() -> None:
    assert split_spans("a b c", _words("a b c"), 3, 1) == [(0, 5)]
    assert split_spans("", [], 3, 1) == [(0, 0)]


def test_passages_fit_cover_the_text_overlap_and_end_on_sentences() -> None:
    text = FILLER + " " + ANSWER
    words = _words(text)
    spans = split_spans(text, words, 40, 8)
    assert len(spans) > 5
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (a, b), (c, d) in itertools.pairwise(spans):
        assert a < c < b <= d  # each starts after the last one's start and overlaps it
    for a, b in spans:
        inside = [w for w in words if a <= w[0] and w[1] <= b]
        assert 1 <= len(inside) <= 40
    # every passage but the last ends a sentence (one lies in the last half of each window)
    assert all(text[b - 1] == "." for _, b in spans[:-1])
    # put together without their overlaps, the passages are the text
    rebuilt = text[:spans[0][1]] + "".join(text[max(prev[1], a):b]
                                           for prev, (a, b) in itertools.pairwise(spans))
    assert rebuilt == text


def test_a_text_without_sentence_ends_is_cut_between_words() -> None:
    text = " ".join(f"w{i}" for i in range(100))
    spans = split_spans(text, _words(text), 10, 2)
    assert all(text[b:b + 1] in (" ", "") for _, b in spans)
    assert all(text[a - 1:a] in (" ", "") for a, _ in spans)


def test_titles_count_against_the_window() -> None:
    chunking = Chunking(30, 4)
    emb = HashingEmbedder()
    text = " ".join(f"w{i}." for i in range(200))
    plain, titled = chunk_texts(emb, chunking, [None, "a long title " * 5], [text, text])
    assert len(titled) > len(plain)


@pytest.mark.parametrize(("tokens", "overlap", "expected"), [
    (8, None, "chunk_tokens: expected 0 (no splitting) or at least 16 tokens, got 8"),
    (300, None, "chunk_tokens: expected at most the embedder's window of 256 tokens"),
    (64, 40, "chunk_overlap: expected at most half a passage (31 tokens with chunk_tokens "
             "64), got 40"),
    (64, -1, "chunk_overlap: expected an integer >= 0, got -1"),
    (0, 5, "chunk_overlap: only with splitting"),
])
def test_chunk_sizes_out_of_range_are_named(tokens: int, overlap: int | None,
                                            expected: str) -> None:
    with pytest.raises(ValueError, match="^" + expected.replace("(", r"\(").replace(")", r"\)")):
        check_chunking(tokens, overlap, 256)


def test_defaults() -> None:
    assert check_chunking(None, None, 256) == Chunking(256, 32)
    assert check_chunking(0, None, 256) == Chunking(0, 0)
    assert default_chunking("minilm") == Chunking(256, 32)
    assert default_chunking("hashing") == Chunking(0, 0)


# -- stores ---------------------------------------------------------------------------------
def _docs() -> list[Document]:
    docs = [Document(id="long", text=FILLER + " " + ANSWER, url="https://www.nih.gov/a",
                     title="Annual report"),
            Document(id="near", text="Freedonia has bridges and a river.",
                     url="https://blog.example.com/b")]
    docs += [Document(id=f"d{i}", text=f"Weather and sports news number {i} of the week.",
                      url=f"https://site{i}.example.org/x") for i in range(10)]
    return docs


def _index(path: Path, chunking: Chunking, engine: str = "edge") -> Any:
    emb = HashingEmbedder()
    extra: dict[str, Any] = {"qdrant_path": path / "q"} if engine == "qdrant" else {}
    store = open_store(path / "idx", engine, embedder=emb.name, dim=emb.dim, create=True,
                       chunking=chunking, **extra)
    report = index_documents(iter(_docs()), store, emb, SourceTyper([]))
    assert report.indexed == 12 and report.truncated == []
    return store


# The Qdrant Edge indexes of _docs() split (Chunking(40, 8)) and whole (Chunking(0, 0)), each
# built once per session: the tests that only read open them, the tests that write (or edit
# the manifest) take a copy (sparse_copy.copy_index), so each still starts from the index
# _index builds, without building it again.
def _built(factory: pytest.TempPathFactory, name: str, chunking: Chunking) -> Path:
    """The Qdrant Edge index of :func:`_docs` with ``chunking``, built and closed."""
    root = factory.mktemp(name)
    with _index(root, chunking):
        pass
    return root / "idx"


@pytest.fixture(scope="session")
def split_edge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built(tmp_path_factory, "passages-split", Chunking(40, 8))


@pytest.fixture(scope="session")
def whole_edge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built(tmp_path_factory, "passages-whole", Chunking(0, 0))


@pytest.mark.parametrize("engine", ["edge", "qdrant"])
def test_maxp_returns_each_document_once_at_its_best_passage(tmp_path: Path, engine: str,
                                                             request) -> None:
    if engine == "qdrant":
        pytest.importorskip("qdrant_client")
    emb = HashingEmbedder()
    qv = emb.embed([QUERY])[0]
    with (_index(tmp_path, Chunking(40, 8), engine) if engine == "qdrant"
          else open_store(request.getfixturevalue("split_edge"))) as store:
        assert store.manifest.split and store.manifest.chunking == Chunking(40, 8)
        passages = store.search_dense(QUERY, qv, 50, with_text=True, unit="passage")
        ids = list(passages.doc_ids)
        assert ids.count("long") > 5  # every passage is a point
        docs = store.search_dense(QUERY, qv, 5, with_text=True)
        assert len(set(docs.doc_ids)) == len(docs) == 5
        assert docs.doc_ids[0] == "long"
        # the document's score is its best passage's, and that passage is its text
        assert docs.retrieval_score[0] == pytest.approx(passages.retrieval_score[0])
        assert ANSWER in docs.column("text")[0] and len(docs.column("text")[0]) < 400
        assert docs.column("passages")[0] > 5
        # one row per document where documents are read whole
        rows = store.read_payloads(None, ("doc_id", "text"))
        assert sorted(r["doc_id"] for r in rows) == sorted(d.id for d in _docs())
        assert next(r for r in rows if r["doc_id"] == "long")["text"] == FILLER + " " + ANSWER
        # BM25 ranks passages too, and returns documents
        lexical = store.search_bm25("Zorbula", 3, with_text=True)
        assert lexical.doc_ids[0] == "long" and "Zorbula" in lexical.column("text")[0]


def test_the_same_documents_unsplit_miss_the_answer(whole_edge: Path) -> None:
    emb = HashingEmbedder()
    with open_store(whole_edge) as store:
        assert not store.manifest.split and len(store) == 12
        docs = store.search_dense(QUERY, emb.embed([QUERY])[0], 1)
        assert docs.doc_ids[0] != "long"  # the answer is diluted in the whole page


@pytest.mark.parametrize("engine", ["edge", "qdrant"])
def test_a_rewritten_document_loses_the_passages_it_no_longer_has(tmp_path: Path,
                                                                  engine: str,
                                                                  request) -> None:
    if engine == "qdrant":
        pytest.importorskip("qdrant_client")
    emb = HashingEmbedder()
    with (_index(tmp_path, Chunking(40, 8), engine) if engine == "qdrant"
          else open_store(copy_index(request.getfixturevalue("split_edge"),
                                     tmp_path / "idx"))) as store:
        points = len(store)
        assert points > 20
        shorter = Document(id="long", text=ANSWER, url="https://www.nih.gov/a")
        report = index_documents(iter([shorter]), store, emb, SourceTyper([]))
        assert report.indexed == 1
        assert len(store) == 12  # the passages 1… of 'long' are gone
        hits = store.search_dense(QUERY, emb.embed([QUERY])[0], 50, unit="passage")
        assert list(hits.doc_ids).count("long") == 1
        # and back: split again
        index_documents(iter(_docs()[:1]), store, emb, SourceTyper([]))
        assert len(store) == points


def test_index_time_scores_reach_every_passage(tmp_path: Path, split_edge: Path) -> None:
    emb = HashingEmbedder()
    with open_store(copy_index(split_edge, tmp_path / "idx")) as store:
        set_fields(store, {"long": {"credibility": 0.25, "credibility_key": "k"}})
        hits = store.search_dense(QUERY, emb.embed([QUERY])[0], 100, unit="passage")
        mine = [c for d, c in zip(hits.doc_ids, hits.column("credibility"), strict=True)
                if d == "long"]
        assert len(mine) > 5 and set(mine) == {0.25}


def test_pushdown_takes_the_python_path_on_split_documents(split_edge: Path,
                                                           whole_edge: Path) -> None:
    from credrank.stages.prior import SourcePrior

    with open_store(split_edge) as store:
        decision = decide_pushdown([SourcePrior()], store=store)
        assert not decision.fused and "split into passages" in (decision.reason or "")
        with pytest.raises(Exception, match="split into passages"):
            decide_pushdown([SourcePrior()], store=store, requested=True)
    with open_store(whole_edge) as store:
        assert decide_pushdown([SourcePrior()], store=store).fused


def test_searcher_unit_document_and_passage(split_edge: Path) -> None:
    emb = HashingEmbedder()
    with open_store(split_edge) as store:
        searcher = Searcher(store, emb)
        docs = searcher.search(QUERY, searcher.spec(top_k=3))
        hits = docs.hits(text="full")
        assert hits[0]["doc_id"] == "long" and ANSWER in hits[0]["text"]
        assert hits[0]["passage"]["of"] > 5 and hits[0]["passage"]["number"] > 1
        assert hits[1]["passage"] is None
        passages = searcher.search(QUERY, searcher.spec(top_k=20, unit="passage"))
        assert list(passages.doc_ids).count("long") > 1


class _Counter(Stage):
    """Counts the rows it sees and gives each the factor 1 / that count."""

    name = "count"
    counts_documents = True

    def __init__(self) -> None:
        self.seen: list[int] = []

    def transform(self, batch: Candidates) -> Candidates:
        self.seen.append(len(batch))
        return batch.with_factor(self.name, np.full(len(batch), 1 / max(len(batch), 1)))


def test_a_stage_that_counts_documents_sees_each_once() -> None:
    batch = Candidates(query="q", doc_ids=np.array(["a", "a", "b", "a", "c"], dtype=object),
                       retrieval_score=np.array([0.9, 0.8, 0.7, 0.6, 0.5]))
    stage = _Counter()
    out = stage(batch)
    assert stage.seen == [3]
    assert list(out.doc_ids) == ["a", "a", "b", "a", "c"]
    assert np.allclose(out.factors["count"], 1 / 3)
    # a stage that drops a document drops its passages
    dropped = by_document(lambda b: b.take([1, 2]), batch)
    assert list(dropped.doc_ids) == ["b", "c"]


def test_planted_and_consensus_count_documents() -> None:
    from credrank.signals.agreement import AnswerAgreement
    from credrank.stages.consensus import AnswerConsensus
    from credrank.stages.planted import PlantedEvidence
    from credrank.stages.smoothing import NeighbourSmoothing

    for cls in (PlantedEvidence, AnswerConsensus, NeighbourSmoothing, AnswerAgreement):
        assert cls.counts_documents, cls
    from credrank.select.stages import CoverageSelect, MMRSelect
    from credrank.stages.credibility import LearnedCredibilityPrior
    from credrank.stages.machine_text import MachineTextFactor

    for cls in (MMRSelect, CoverageSelect, LearnedCredibilityPrior, MachineTextFactor):
        assert not cls.counts_documents, cls


def test_five_passages_of_one_page_are_not_a_planted_group() -> None:
    from credrank.stages.planted import PlantedEvidence

    rng = np.random.default_rng(3)
    base = rng.normal(size=16)
    near = np.stack([base + 0.01 * rng.normal(size=16) for _ in range(5)])
    others = rng.normal(size=(7, 16))
    vectors = np.vstack([near, others]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    qv = vectors[0] + 0.1
    ids = ["page"] * 5 + [f"o{i}" for i in range(7)]
    sims = vectors @ (qv / np.linalg.norm(qv))
    order = np.argsort(-sims)
    batch = Candidates(query="q", doc_ids=np.array(ids, dtype=object)[order],
                       retrieval_score=sims[order].astype(np.float64),
                       vectors=vectors[order], query_vector=qv,
                       meta={"text": np.array([f"text {i}" for i in order], dtype=object)})
    stage = PlantedEvidence(min_pool=3, min_cluster=3)
    out = stage(batch)
    assert np.all(out.factors["planted"] == 1.0)
    # the same vectors as five documents are a group
    apart = Candidates(query="q", doc_ids=np.array([f"p{i}" for i in range(12)],
                                                   dtype=object)[order],
                       retrieval_score=batch.retrieval_score, vectors=batch.vectors,
                       query_vector=qv, meta=batch.meta)
    assert np.any(stage(apart).factors["planted"] < 1.0)


# -- an index made before passages ----------------------------------------------------------
def test_an_index_made_before_passages_opens_and_says_how_to_reindex(tmp_path: Path,
                                                                     whole_edge: Path) -> None:
    copy_index(whole_edge, tmp_path / "idx")
    path = tmp_path / "idx" / MANIFEST
    data = json.loads(path.read_text())
    for key in ("chunk_tokens", "chunk_overlap", "split"):
        data.pop(key)
    data["format"] = 2
    path.write_text(json.dumps(data))
    manifest = read_manifest(tmp_path / "idx")
    assert manifest is not None and manifest.before_passages
    hint = reindex_hint(tmp_path / "idx", manifest)
    assert hint is not None and "credrank index CORPUS --index NEWDIR" in hint
    emb = HashingEmbedder()
    with open_store(tmp_path / "idx") as store:  # opens and searches as before
        assert len(store.search_dense(QUERY, emb.embed([QUERY])[0], 3)) == 3


# -- as a user runs it (ONNX MiniLM, the default install) -------------------------------------
def _long_corpus(path: Path) -> Path:
    rows = [{"id": "long-answer", "url": "https://www.nih.gov/a", "title": "Annual report",
             "text": FILLER + " " + ANSWER},
            {"id": "short-other", "url": "https://example.com/b", "title": "Travel notes",
             "text": "Freedonia is a small country. Its people like bridges and rivers."}]
    # four distractors: embedded whole, the long page scores 0, below every one of them
    # ('missed' needs three above it), and split it ranks first; the 20 there were took five
    # times the model's work and tested nothing more
    rows += [{"id": f"d{i}", "url": f"https://site{i}.com/x",
              "text": f"Document {i} about weather and sports and news number {i}."}
             for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.slow
def test_cli_finds_the_answer_past_the_window_only_when_split(tmp_path: Path) -> None:
    corpus = _long_corpus(tmp_path / "c.jsonl")
    for name, extra in (("split", ()), ("whole", ("--chunk-tokens", "0"))):
        proc = run_cli("index", corpus, "--index", tmp_path / name, "--json", *extra)
        assert proc.returncode == 0, proc.stderr
    found = run_cli("search", QUERY, "--index", tmp_path / "split", "--top-k", "3", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert hits[0]["doc_id"] == "long-answer" and "Zorbula" in hits[0]["text"]
    assert hits[0]["passage"]["of"] > 1
    missed = run_cli("search", QUERY, "--index", tmp_path / "whole", "--top-k", "3", "--json")
    assert "long-answer" not in [h["doc_id"] for h in json.loads(missed.stdout)["hits"]]
    # an index splits every text one way
    again = run_cli("index", corpus, "--index", tmp_path / "split", "--chunk-tokens", "128")
    assert_clean_error(again, "index was built with passages of at most 256 tokens "
                              "overlapping by 32, not passages of at most 128 tokens")
    assert "chunk_tokens" not in again.stderr  # the library's keyword: not this command's
    bad = run_cli("index", corpus, "--index", tmp_path / "new", "--chunk-tokens", "9")
    assert_clean_error(bad, "--chunk-tokens: expected 0 (no splitting) or at least 16")
    unit = run_cli("search", QUERY, "--index", tmp_path / "split", "--unit", "page")
    assert_clean_error(unit, "--unit: expected one of document, passage, got 'page'")


@pytest.mark.slow
def test_rerank_scores_a_long_candidate_by_its_best_chunk() -> None:
    from credrank.rerank import rerank

    rows = [{"id": "long-answer", "url": "https://www.nih.gov/a", "title": "Annual report",
             "text": FILLER + " " + ANSWER},
            {"id": "short-other", "url": "https://example.com/b", "title": "Travel notes",
             "text": "Freedonia is a small country. Its people like bridges and rivers."},
            {"id": "bread", "url": "https://example.org/c", "text": "Bread with flour."}]
    out = rerank(QUERY, rows, retrieval="cosine")
    hits = out.hits(text="full")
    assert hits[0]["doc_id"] == "long-answer" and ANSWER in hits[0]["text"]
    assert hits[0]["passage"]["of"] > 1 and out.info["retrieval"]["truncated"] == []


@pytest.mark.slow
def test_rerank_over_http_and_langchain_find_the_answer_past_the_window(
        demo_index_minilm: Path) -> None:
    pytest.importorskip("langchain_core")
    import httpx
    from langchain_core.documents import Document as LCDocument

    from credrank.adapters.langchain import CredibilityCompressor
    from serving import running_server

    rows = [{"id": "long-answer", "url": "https://www.nih.gov/a", "title": "Annual report",
             "text": FILLER + " " + ANSWER},
            {"id": "short-other", "url": "https://example.com/b", "title": "Travel notes",
             "text": "Freedonia is a small country. Its people like bridges and rivers."}]
    with running_server(demo_index_minilm) as server:
        answer = httpx.post(f"{server.url}/rerank", json={
            "query": QUERY, "candidates": rows, "retrieval": "cosine", "text": "full"},
            timeout=120)
    assert answer.status_code == 200, answer.text
    hits = answer.json()["hits"]
    assert hits[0]["doc_id"] == "long-answer" and ANSWER in hits[0]["text"]
    assert hits[0]["passage"]["of"] > 1
    docs = [LCDocument(page_content=r["text"], id=r["id"],
                       metadata={"url": r["url"], "title": r["title"]}) for r in rows]
    out = CredibilityCompressor(retrieval="cosine").compress_documents(docs, QUERY)
    assert out[0].id == "long-answer"
    whole = get_embedder("minilm")
    cos = [float(np.dot(whole.embed([QUERY])[0], whole.embed([f"{r['title']}\n{r['text']}"])[0]))
           for r in rows]
    assert cos[0] < cos[1]  # embedded whole, the long page would have lost


# -- every reader and POST /index -----------------------------------------------------------
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_every_corpus_format_is_split(tmp_path: Path, fmt: str) -> None:
    from credrank.documents import iter_documents

    rows = [{"id": d.id, "text": d.text, "url": d.url, "title": d.title or ""} for d in _docs()]
    path = tmp_path / f"c.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "csv":
        import csv

        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    emb = HashingEmbedder()
    with open_store(tmp_path / "idx", embedder=emb.name, dim=emb.dim, create=True,
                    chunking=Chunking(40, 8)) as store:
        index_documents(iter_documents(path), store, emb, SourceTyper([]))
        assert store.manifest.split and store.documents() == 12 and len(store) > 20


def test_post_index_splits_what_it_writes(tmp_path: Path) -> None:
    import httpx

    from serving import running_server

    emb = HashingEmbedder()
    with open_store(tmp_path / "idx", embedder=emb.name, dim=emb.dim, create=True,
                    chunking=Chunking(40, 8)):
        pass
    rows = [{"id": d.id, "text": d.text, "url": d.url, "title": d.title} for d in _docs()]
    with running_server(tmp_path / "idx", "--api-key-env", "CREDRANK_TEST_KEY",
                        env={"CREDRANK_TEST_KEY": "k" * 16}) as server:
        wrote = httpx.post(f"{server.url}/index", json={"documents": rows},
                           headers={"X-API-Key": "k" * 16}, timeout=120)
        assert wrote.status_code == 200, wrote.text
        assert wrote.json()["indexed"] == 12
        found = httpx.post(f"{server.url}/search", json={"query": QUERY, "top_k": 3,
                                                          "text": "full"}, timeout=60)
    assert found.status_code == 200, found.text
    hit = found.json()["hits"][0]
    assert hit["doc_id"] == "long" and ANSWER in hit["text"] and hit["passage"]["of"] > 5


# -- a manifest that does not belong to its shard (issue 37, N5) ------------------------------
@pytest.mark.parametrize(("key", "value", "expected"), [
    ("point_ids", "uuid5", "declares point_ids 'uuid5', but the shard's points are keyed "
                           "otherwise (ids are 64-bit integers"),
    ("format", 1, "declares point_ids 'uuid5'"),
    ("dim", 128, "declares dim 128, but the shard's vectors have 256 dimensions"),
])
def test_a_manifest_that_disagrees_with_the_shard_is_refused(tmp_path: Path, key: str,
                                                             value: Any, expected: str,
                                                             whole_edge: Path) -> None:
    copy_index(whole_edge, tmp_path / "idx")
    path = tmp_path / "idx" / MANIFEST
    data = json.loads(path.read_text())
    data[key] = value
    if key == "format":  # a format-1 manifest has no point_ids: uuid5
        data.pop("point_ids")
    path.write_text(json.dumps(data))
    from credrank.index.errors import StoreError

    with pytest.raises(StoreError, match=expected.replace("(", r"\(")):
        open_store(tmp_path / "idx")
    proc = run_cli("search", QUERY, "--index", tmp_path / "idx")
    assert_clean_error(proc, "does not belong to this shard")
