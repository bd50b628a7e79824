"""The service's JSON answers (issue 26): each built once and serialised once with orjson
(:mod:`credrank.serve.responses`), with the content of the in-process document."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from credrank.pipeline.spec import PipelineSpec
from credrank.searcher import Searcher
from credrank.serve.responses import JSON, JSON_LIBRARY, Rendered, dumps
from serving import ServerHandle, running_server
from sparse_copy import copy_index

DEMO = Path(__file__).resolve().parents[1] / "src" / "credrank" / "data" / "demo"
QUERY = "does vitamin d prevent covid"


@pytest.fixture(scope="module")
def server(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[ServerHandle]:
    where = copy_index(demo_index_hashing, tmp_path_factory.mktemp("json") / "index")
    with running_server(where, "--table", str(DEMO / "domains.csv")) as handle:
        yield handle


@pytest.fixture(scope="module")
def searcher(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Searcher]:
    """The same index in this process (its own copy: the server holds the other)."""
    where = copy_index(demo_index_hashing, tmp_path_factory.mktemp("json-in") / "index")
    with Searcher.open(where, tables=[DEMO / "domains.csv"]) as opened:
        yield opened


@pytest.mark.parametrize("request_body", [
    {"query": QUERY, "top_k": 5},
    {"query": QUERY, "top_k": 3, "fetch_k": 20, "priors": "aggressive", "mode": "linear",
     "text": "full"},
    {"query": QUERY, "top_k": 4, "select": "mmr", "select_params": {"diversity": 0.5},
     "text": "none"},
    {"query": QUERY, "pipeline": {"top_k": 4, "stages": [{"stage": "prior"},
                                                         {"stage": "combine"},
                                                         {"stage": "topk"}]}},
], ids=["defaults", "linear-full-text", "mmr-no-text", "pipeline"])
def test_search_answer_is_the_in_process_document(server: ServerHandle, searcher: Searcher,
                                                  request_body: dict[str, Any]) -> None:
    """Key for key and value for value the document of ``Searcher.search_json`` (written by
    the standard library and read back), plus ``elapsed_ms``."""
    text = request_body.get("text", "snippet")
    if "pipeline" in request_body:
        spec = PipelineSpec.from_dict(request_body["pipeline"])
    else:
        spec = Searcher.spec(
            top_k=request_body["top_k"], fetch_k=request_body.get("fetch_k"),
            priors=request_body.get("priors", "current"),
            mode=request_body.get("mode", "multiply"), select=request_body.get("select"),
            select_params=request_body.get("select_params"))
    expected = json.loads(json.dumps(searcher.search_json(QUERY, spec, text=text)))
    got = httpx.post(server.url + "/search", json=request_body, timeout=60)
    assert got.status_code == 200, got.text
    doc = json.loads(got.content)
    assert isinstance(doc.pop("elapsed_ms"), float)
    assert doc == expected


def test_answers_are_orjson_utf8(server: ServerHandle) -> None:
    """orjson writes the answers: ``application/json``, non-ASCII text as UTF-8 (not
    ``\\u`` escapes) that reads back as sent, and the body is byte for byte what orjson
    writes for its own content."""
    assert JSON_LIBRARY.startswith("orjson ")
    query = "vitamin d — ще́ 维生素 😀 covid"
    got = httpx.post(server.url + "/search", json={"query": query, "top_k": 3}, timeout=60)
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == "application/json"
    assert query.encode("utf-8") in got.content
    assert json.loads(got.content)["query"] == query
    assert got.content == orjson.dumps(json.loads(got.content))
    refused = httpx.post(server.url + "/search", json={"query": query, "top_k": 0}, timeout=60)
    assert refused.status_code == 422
    assert refused.headers["content-type"] == "application/json"
    assert refused.content == orjson.dumps(json.loads(refused.content))


def test_dumps_is_orjson_without_nan_and_falls_back_for_what_it_refuses() -> None:
    doc = {"nan": float("nan"), "inf": [float("inf"), -float("inf")], "x": 0.1, "tiny": 1e-05,
           "f32": np.float32(0.1), "array": np.arange(2, dtype=np.float32),
           "i64": np.int64(7), "f32nan": np.float32("nan"),
           "when": datetime(2020, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "day": date(2020, 1, 2),
           "path": Path("/x"), "text": "é 😀 \u2028 \x00 \"\\"}
    out = dumps(doc)
    assert out == orjson.dumps(json.loads(out))  # orjson wrote it
    back = json.loads(out)
    assert back["nan"] is None and back["inf"] == [None, None] and back["f32nan"] is None
    assert back["x"] == 0.1 and back["tiny"] == 1e-05
    assert back["f32"] == float(np.float32(0.1))  # the float64 the float32 widens to
    assert back["array"] == [0.0, 1.0] and back["i64"] == 7
    assert back["when"] == "2020-01-02T03:04:05.000006+00:00" and back["day"] == "2020-01-02"
    assert back["path"] == "/x" and back["text"] == doc["text"]
    # orjson refuses these; the standard library writes them, with the same content
    assert json.loads(dumps({"big": 10 ** 30})) == {"big": 10 ** 30}
    assert json.loads(dumps({1: "a", "b": math.inf})) == {"1": "a", "b": None}
    assert json.loads(dumps({"s": "\ud800x"})) == {"s": "\ud800x"}


def test_a_rendered_body_is_sent_as_it_is() -> None:
    body = Rendered.of({"a": [1, 2.5, "é"]})
    assert JSON(body).body == b'{"a":[1,2.5,"\xc3\xa9"]}' == bytes(body)
    assert JSON({"a": [1, 2.5, "é"]}).body == bytes(body)
