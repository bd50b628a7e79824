"""The library door (:class:`credrank.Searcher`): what a Python caller gives it that is not
what it takes is refused naming the argument, never run on silently or raised as an engine's
error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from credrank import Searcher, SpecError
from credrank.index.store import StoreError
from sparse_copy import copy_index

QUERY = "does vitamin d prevent covid"


@pytest.fixture()
def index(demo_index_hashing: Path, tmp_path: Path) -> Path:
    return copy_index(demo_index_hashing, tmp_path / "index")


def test_search_json_takes_no_stray_keyword(index: Path) -> None:
    """``search_json(q, top_k=3)`` answered 10 hits in a document that said ``"top_k": 3``
    (any keyword became a key of the document)."""
    with Searcher.open(index) as searcher:
        with pytest.raises(TypeError, match="top_k"):
            searcher.search_json(QUERY, top_k=3)  # type: ignore[call-arg]
        assert len(searcher.search_json(QUERY, Searcher.spec(top_k=3))["hits"]) == 3


def test_tables_as_one_path_is_refused(index: Path) -> None:
    """``tables="domains.csv"`` was read as its characters (``/: expected a domain table, got
    a directory``); the index it opened is closed again."""
    with pytest.raises(TypeError, match="got a single path; wrap it in a list"):
        Searcher.open(index, tables="/nope.csv")  # type: ignore[arg-type]
    Searcher.open(index).close()  # not left locked by the refused call


def test_keep_columns_after_close_and_a_second_open_say_what_happened(index: Path) -> None:
    searcher = Searcher.open(index)
    with pytest.raises(StoreError, match="by a store this process opened and has not closed"):
        Searcher.open(index)
    searcher.close()
    with pytest.raises(ValueError, match="closed"):  # was the engine's "Shard is not
        searcher.keep_columns()  # initialized"


def test_planted_reranks_candidates_that_came_with_scores(index: Path) -> None:
    """The planted stage compares each passage with the query: candidates with retriever
    scores (``auto`` resolving to ``given``) left the batch without a query vector, and the
    stage refused ("no query vector (lexical retrieval?)") at every door."""
    with Searcher.open(index) as searcher:
        pool = searcher.search(QUERY, Searcher.spec(top_k=20), text="full").hits()
        records = [{"id": h["doc_id"], "text": h["text"], "url": h["url"],
                    "score": h["score_breakdown"]["retrieval_score"]} for h in pool]
        for retrieval in ("auto", "given"):
            doc = searcher.rerank_json(QUERY, records, Searcher.spec(planted=True),
                                       retrieval=retrieval)
            assert doc["info"]["retrieval"]["resolved"] == "given"
            assert doc["info"]["retrieval"]["query"] == "embedded"
            assert doc["hits"] and "planted" in doc["hits"][0]["score_breakdown"]


@pytest.mark.parametrize("options", [{"lexical": "no"}, {"consensus": 0},
                                     {"smoothing": "false"}, {"planted": "no"},
                                     {"domain_scores": "no"}, {"planted": None},
                                     {"smoothing": None}, {"consensus": None}])
def test_a_flag_is_true_or_false_at_the_library_door(options: dict[str, object]) -> None:
    """``lexical="no"`` turned BM25 on and ``consensus=0`` the stage (truthy values), and
    ``planted=None`` the stage, where the CLI, HTTP and the adapters refuse them; said in a
    keyword argument's words."""
    name, value = next(iter(options.items()))
    with pytest.raises(ValueError, match=f"^{name}: expected True or False, got {value!r}$"):
        Searcher.spec(**options)


def test_a_text_top_k_beside_a_stated_fetch_k_is_the_specs_error() -> None:
    """``with_top`` compared a text ``top_k`` with the spec's ``fetch_k`` before checking it
    (``TypeError: '<' not supported``)."""
    from credrank.pipeline.shortcuts import with_top

    spec = Searcher.spec(fetch_k=20)
    with pytest.raises(SpecError, match="top_k"):
        with_top(spec, {"top_k": "5"})
    # a numpy integer is an integer: a top_k above the spec's fetch_k resets it, as 50 does
    import numpy as np

    assert with_top(spec, {"top_k": np.int64(50)}).top_k == 50


def test_searcher_spec_has_no_door_keyword() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'door'"):
        Searcher.spec(door=None)


def test_a_spec_its_constructor_made_is_validated_before_it_runs(index: Path) -> None:
    """``PipelineSpec`` is exported and its constructor does not validate: an unknown stage
    was a ``KeyError``, ``retrieval="sparse"`` ran dense retrieval, ``top_k=3`` without a
    selector answered 9 hits, ``top_k=-1`` named ``fetch_k``. Such a spec is validated (and
    completed) when it is used, as ``PipelineSpec.from_dict`` validates."""
    from credrank import PipelineSpec
    from credrank.pipeline.spec import StageSpec

    with Searcher.open(index) as searcher:
        assert len(searcher.search(QUERY, PipelineSpec(top_k=3))) == 3
        for spec, said in ((PipelineSpec(stages=(StageSpec("foo", {}),)), r"stages\[0\]\.stage"),
                           (PipelineSpec(retrieval="sparse"), "retrieval: expected one of"),
                           (PipelineSpec(top_k=-1), r"top_k: expected an integer in \[1")):
            with pytest.raises(SpecError, match=said):
                searcher.search(QUERY, spec)
        made = PipelineSpec.from_dict({"top_k": 3, "stages": ["prior"]})
        assert made.checked is made  # validated when made: not again


@pytest.mark.parametrize(("options", "said"), [
    ({"priors": "nope"}, "priors: 'nope' is neither a preset"),
    ({"credibility_model": "/nope.json"}, "credibility_model: /nope.json: "),
    ({"stance_model": "/nope.json"}, "stance_model: /nope.json: "),
])
def test_a_file_option_is_checked_by_searcher_spec_in_its_words(options: dict[str, str],
                                                                said: str) -> None:
    """``Searcher.spec(priors="nope")`` was accepted and the search said ``stages[0].priors``
    (``stages[1].model`` for the models): the CLI and the adapters name the option."""
    with pytest.raises(ValueError, match="^" + re.escape(said)):
        Searcher.spec(**options)


def test_demo_refuses_a_users_index_and_bad_folders(index: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``credrank demo --index DIR`` added the demo's 120 documents to a user's index (and
    measured the mix), and another embedder's index, a file or a read-only folder was a
    traceback with exit 1."""
    import json

    from credrank.cli import run

    corpus = tmp_path / "mine.jsonl"
    corpus.write_text(json.dumps({"id": "mine-1", "text": "my own document"}) + "\n",
                      encoding="utf-8")
    assert run(["index", str(corpus), "--index", str(tmp_path / "mine"), "--embedder",
                "hashing", "-q"]) == 0
    capsys.readouterr()
    assert run(["demo", "--index", str(tmp_path / "mine"), "--embedder", "hashing", "-q"]) == 2
    err = capsys.readouterr().err
    assert "holds an index of which 1 of 1 documents are not the demo corpus's" in err
    (tmp_path / "file.json").write_text("{}", encoding="utf-8")
    assert run(["demo", "--index", str(tmp_path / "file.json"), "--embedder", "hashing",
                "-q"]) == 2
    assert "expected an index directory, got a file" in capsys.readouterr().err
    # the demo's own index is taken again
    for _ in range(2):
        assert run(["demo", "--index", str(tmp_path / "demo"), "--embedder", "hashing", "-q",
                    "--json"]) == 0
        capsys.readouterr()


def test_arguments_of_the_wrong_kind_are_named(index: Path) -> None:
    """``check=5`` failed at the first stage with "'int' object is not callable",
    ``keep_columns("yes")`` was taken as true, ``credrank.rerank`` with a text as its typer
    failed with "cannot create weak reference to 'str' object" and with ``top_k=1`` named an
    internal function."""
    import credrank

    with Searcher.open(index) as searcher:
        with pytest.raises(TypeError, match=r"^check: expected a callable .*, got int"):
            searcher.search("vitamin d", check=5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^keep: expected True or False, got 'yes'"):
            searcher.keep_columns("yes")  # type: ignore[arg-type]
    records = [{"id": "a", "text": "vitamin d and covid"}]
    with pytest.raises(TypeError, match=r"^typer: expected a SourceTyper or None, got str"):
        credrank.rerank("vitamin d", records, "hashing", None, "x")
    with pytest.raises(TypeError, match=r"rerank\(\) got an unexpected keyword argument"):
        credrank.rerank("vitamin d", records, "hashing", top_k=1)
