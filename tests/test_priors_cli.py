"""``credrank priors``: init, update from a feedback file, show, rollback, and use in search."""

import json

import pytest
from typer.testing import CliRunner

from credrank.cli import app

runner = CliRunner()


def test_update_show_rollback(tmp_path):
    store, fb = tmp_path / "store", tmp_path / "fb.jsonl"
    assert runner.invoke(app, ["priors", "init", str(store)]).exit_code == 0
    fb.write_text('{"source_type": "blog", "relevant": false}\n'
                  '{"source_type": "blog", "source_id": "b1", "relevant": false}\n')
    res = runner.invoke(app, ["priors", "update", str(store), str(fb), "--step", "0.3"])
    assert res.exit_code == 0 and "version 1" in res.output
    shown = json.loads(runner.invoke(app, ["priors", "show", str(store)]).output)
    # two non-relevant items: blog moves toward 0 by at most max_change (0.05) from 0.50
    assert shown["types"]["blog"] == pytest.approx(0.45)
    assert shown["types"]["peer_reviewed"] == 0.95 and "b1" in shown["sources"]
    assert runner.invoke(app, ["priors", "rollback", str(store), "0"]).exit_code == 0
    again = json.loads(runner.invoke(app, ["priors", "show", str(store)]).output)
    assert again["types"]["blog"] == 0.5 and again["version"] == 2
    history = runner.invoke(app, ["priors", "show", str(store), "--history"]).output
    assert [json.loads(x)["event"] for x in history.splitlines()] == ["init", "update",
                                                                       "rollback"]


@pytest.mark.parametrize("line,field", [('{"source_type": "blog"}', "relevant"),
                                        ('{"source_type": 3, "relevant": true}', "source_type"),
                                        ("not json", "not valid JSON")])
def test_bad_feedback_lines_are_named(tmp_path, line, field):
    store, fb = tmp_path / "store", tmp_path / "fb.jsonl"
    runner.invoke(app, ["priors", "init", str(store)])
    fb.write_text('{"source_type": "blog", "relevant": true}\n' + line + "\n")
    res = runner.invoke(app, ["priors", "update", str(store), str(fb)])
    assert res.exit_code == 2
    assert "fb.jsonl:2" in res.output and field in res.output


def test_search_uses_the_store(tmp_path):
    corpus, idx, store = tmp_path / "c.jsonl", tmp_path / "idx", tmp_path / "store"
    corpus.write_text(json.dumps({"id": "a", "text": "vitamin d trial",
                                  "url": "https://x.blogspot.com/p"}) + "\n")
    runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder", "hashing"])
    runner.invoke(app, ["priors", "init", str(store), "--base", "aggressive"])
    res = runner.invoke(app, ["search", "vitamin", "--index", str(idx), "--json",
                              "--priors-store", str(store)])
    assert res.exit_code == 0, res.output
    prior = json.loads(res.output)["hits"][0]["score_breakdown"]["prior"]
    from credrank.signals.prior import preset

    assert prior == pytest.approx(preset("aggressive")["blog"])
