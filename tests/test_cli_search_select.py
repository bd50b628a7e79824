"""``credrank search`` with a selector: -P values, the batch's per-query errors, the runtime
errors in the options' words, the text footer and the selection warnings on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_inprocess import run_cli
from credrank.cli.common import parse_params

HOSTS = {"gov": "https://www.cdc.gov/p{i}", "blog": "https://x{i}.blogspot.com/p",
         "news": "https://www.reuters.com/a{i}"}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small lexical index: 'zebra' matches a government page that repeats it and a long
    blog post that mentions it once (proportional exposure cannot be met on that pool of
    two); 'vitamin' matches pages of all three kinds."""
    root = tmp_path_factory.mktemp("cli-select")
    rows = [("z0", "gov", "zebra zebra zebra zebra"),
            ("z1", "blog", "a long post on many other animals that once names a zebra "
                           "among lions tigers bears wolves foxes and owls")]
    kinds = ["gov", "blog", "news"]
    words = "vitamin dose trial fever cold sleep heart risk".split()
    rows += [(f"v{i}", kinds[i % 3], f"vitamin {words[i % 8]} {words[(i + 3) % 8]} note {i}")
             for i in range(12)]
    corpus = root / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": d, "text": t, "url": HOSTS[k].format(i=n)})
                                for n, (d, k, t) in enumerate(rows)) + "\n")
    idx = root / "idx"
    res = run_cli("index", corpus, "--index", idx, "--embedder", "hashing")
    assert res.returncode == 0, res.stderr
    return idx


PROPORTIONAL = ["--lexical", "--top-k", "3", "--select", "exposure", "-P",
                "group_column=source_type", "-P", "rule=proportional", "-P", "seed=0"]


def test_parse_params_reads_values_as_set_does() -> None:
    # -P discounts=[1,0.5] was the text '[1,0.5]', refused as "expected a list"
    got = parse_params(["discounts=[1,0.5,0.3]", 'intent_set=["a","b"]', "adjust=True",
                        "p=.5", "k=3", "rule=parity", "draw=null", "x-y=1e3"])
    assert got == {"discounts": [1, 0.5, 0.3], "intent_set": ["a", "b"], "adjust": True,
                   "p": 0.5, "k": 3, "rule": "parity", "draw": None, "x_y": 1000.0}
    with pytest.raises(ValueError, match=r"^--select-param d: expected a value nested at most"):
        parse_params(["d=" + "[" * 100 + "]" * 100])


def test_select_param_takes_a_list(index: Path) -> None:
    res = run_cli("search", "vitamin", "--index", index, "--lexical", "--top-k", "3",
                  "--json", "--select", "exposure", "-P", "group_column=source_type",
                  "-P", "discounts=[1,0.5,0.25]")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["info"]["select"]["discounts"] == [1.0, 0.5, 0.25]


def test_a_batch_names_the_failing_query_and_runs_the_others(index: Path,
                                                             tmp_path: Path) -> None:
    # one query's selection error stopped the batch (the queries after it never ran) and
    # did not say which query failed
    queries = tmp_path / "q.tsv"
    queries.write_text("a1\tvitamin\na2\tzebra\na3\tvitamin dose\n")
    res = run_cli("search", "--queries", queries, "--index", index, *PROPORTIONAL)
    assert res.returncode == 1, res.stderr
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert [line["query_id"] for line in lines] == ["a1", "a2", "a3"]
    assert "hits" in lines[0] and "hits" in lines[2]
    error = lines[1]["error"]
    assert error.startswith("query a2: --select-param rule: proportional exposure on "
                            "'source_type' cannot be met")
    assert f"error: {error}" in " ".join(res.stderr.split())
    run = tmp_path / "run.txt"
    res = run_cli("search", "--queries", queries, "--index", index, *PROPORTIONAL,
                  "--trec-run", run)
    assert res.returncode == 1 and not run.exists()  # a run missing a2 would score it 0
    assert "1 of 3 queries failed" in res.stderr


def test_a_runtime_selection_error_names_the_option(index: Path) -> None:
    res = run_cli("search", "zebra", "--index", index, *PROPORTIONAL)
    assert res.returncode == 2
    assert " ".join(res.stderr.split()).startswith(
        "error: --select-param rule: proportional exposure on 'source_type' cannot be met")
    assert "ExposureSelect" not in res.stderr
    res = run_cli("search", "zebra", "--index", index, "--lexical", "--top-k", "3",
                  "-S", "exposure.group_column=source_type", "-S", "exposure.rule=proportional")
    assert res.returncode == 2
    assert " ".join(res.stderr.split()).startswith(
        "error: -S exposure.rule=proportional: proportional exposure")


def test_the_text_answer_ends_with_the_selection_and_warns(index: Path) -> None:
    # a protected value no candidate has, and the shortfall, were silent without --json
    res = run_cli("search", "vitamin", "--index", index, "--lexical", "--top-k", "4",
                  "--text", "none", "--select", "fair", "-P", "protected_column=source_type",
                  "-P", "protected_value=blogs", "-P", "p=0.9", "-P", "alpha=0.1")
    assert res.returncode == 0, res.stderr
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith("select: fair, source_type, p 0.9, α 0.1; 0 protected in the "
                           "top 4; SHORTFALL from position ")
    assert "warning: protected_value: no candidate has source_type = 'blogs'" in \
        " ".join(res.stderr.split())
    res = run_cli("search", "vitamin", "--index", index, "--lexical", "--top-k", "3",
                  "--text", "none", "--select", "exposure", "-P", "group_column=source_type",
                  "-P", "seed=0")
    footer = res.stdout.strip().splitlines()[-1]
    draw = json.loads(run_cli("search", "vitamin", "--index", index, "--lexical", "--top-k",
                              "3", "--json", "--select", "exposure", "-P",
                              "group_column=source_type", "-P", "seed=0"
                              ).stdout)["info"]["select"]["draw"]
    assert footer.startswith("select: exposure, parity on source_type: one list of the "
                             f"lottery, not sorted by score (draw={draw} replays it)")
    res = run_cli("search", "vitamin", "--index", index, "--lexical", "--top-k", "3",
                  "--text", "none", "--mode", "rrf", "--select", "coverage", "-P",
                  "lambda_ilad=0.3", "-P", "lambda_coverage=0.5")
    assert res.stdout.strip().splitlines()[-1].startswith("select: coverage, λ1 0.3, λ2 0.5;")
    assert "warning: utility_scale: coverage weighs utilities up to 0.0328" in \
        " ".join(res.stderr.split())


def test_the_footer_tells_eligible_from_kept_to_fill() -> None:
    """It said every kept candidate met min_ratio, also those kept only to fill top_k."""
    from credrank.cli.search import select_summary

    line = select_summary({"selector": "mmr", "diversity": 0.5, "eligibility": {
        "min_ratio": 0.75, "pool": 15, "eligible": 1, "kept": 3}})
    assert "1 of 15 candidates eligible (retrieval score ≥ 0.75 × the best)" in line
    assert "2 more of the best kept to fill top_k" in line
