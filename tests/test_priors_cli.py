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
    # the marker first, as every credrank JSON document (docs/json.md); it had none
    assert list(shown) == ["credrank_priors_show", "version", "types", "sources",
                           "source_types"]
    assert shown["credrank_priors_show"] == 1
    # two non-relevant items: blog moves toward 0 by at most max_change (0.05) from 0.50
    assert shown["types"]["blog"] == pytest.approx(0.45)
    assert shown["types"]["peer_reviewed"] == 0.95 and "b1" in shown["sources"]
    assert shown["source_types"] == {"b1": "blog"}
    assert runner.invoke(app, ["priors", "rollback", str(store), "0"]).exit_code == 0
    again = json.loads(runner.invoke(app, ["priors", "show", str(store)]).output)
    assert again["types"]["blog"] == 0.5 and again["version"] == 2
    history = runner.invoke(app, ["priors", "show", str(store), "--history"]).output
    entries = [json.loads(x) for x in history.splitlines()]
    assert [e["event"] for e in entries] == ["init", "update", "rollback"]
    assert all(next(iter(e)) == "credrank_priors_history" and e["credrank_priors_history"] == 1
               for e in entries)


@pytest.mark.parametrize("line,field", [('{"source_type": "blog"}', "relevant"),
                                        ('{"source_type": 3, "relevant": true}', "source_type"),
                                        # said "feedback[1] source_type", no file or line
                                        ('{"source_type": "nonsense", "relevant": true}',
                                         "source_type: expected one of peer_reviewed"),
                                        ("not json", "expected JSON")])
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


# -- reliability hardening: concurrent commands, parameter ranges, clear errors ---------------

_DRIVER = """
import json, sys
from typer.testing import CliRunner
from credrank.cli import app
store, fb, tag, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
runner = CliRunner()
print("ready", flush=True)
sys.stdin.readline()  # the start gate: every process is loaded and waiting
for i in range(k):
    res = runner.invoke(app, ["priors", "update", store, fb, "--reason", f"{tag}-{i}"])
    print(json.dumps({"code": res.exit_code, "output": res.output}), flush=True)
"""


def test_concurrent_updates_from_many_processes_are_all_kept(tmp_path):
    import subprocess
    import sys

    n, k = 8, 3
    store, fb = tmp_path / "store", tmp_path / "fb.jsonl"
    assert runner.invoke(app, ["priors", "init", str(store)]).exit_code == 0
    fb.write_text('{"source_type": "blog", "source_id": "b1", "relevant": true}\n')
    procs = [subprocess.Popen([sys.executable, "-c", _DRIVER, str(store), str(fb), str(p),
                               str(k)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for p in range(n)]
    for p in procs:  # wait until each one is loaded, then release them all together
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        results += [json.loads(line) for line in out.splitlines()]
    assert len(results) == n * k
    assert all(r["code"] == 0 for r in results), results
    printed = sorted(int(r["output"].split("version")[1]) for r in results)
    assert printed == list(range(1, n * k + 1))  # every printed version is distinct
    history = runner.invoke(app, ["priors", "show", str(store), "--history"])
    entries = [json.loads(x) for x in history.output.splitlines()]
    assert [e["version"] for e in entries] == list(range(n * k + 1))
    assert sorted(e["reason"] for e in entries[1:]) == sorted(
        f"{p}-{i}" for p in range(n) for i in range(k))
    shown = json.loads(runner.invoke(app, ["priors", "show", str(store)]).output)
    assert shown["version"] == n * k


@pytest.mark.parametrize("args,field", [(["--epsilon", "2"], "epsilon"),
                                        (["--max-change", "7"], "max_change"),
                                        (["--epsilon", "0"], "epsilon"),
                                        (["--max-change", "1.5"], "max_change")])
def test_init_parameters_checked_against_their_ranges(tmp_path, args, field):
    res = runner.invoke(app, ["priors", "init", str(tmp_path / "s"), *args])
    assert res.exit_code == 2
    assert f"error: --{field.replace('_', '-')}: expected" in res.output  # the option's name
    assert not (tmp_path / "s" / "priors.json").exists()


def test_init_with_valid_parameters(tmp_path):
    res = runner.invoke(app, ["priors", "init", str(tmp_path / "s"), "--epsilon", "0.02",
                              "--max-change", "0.1"])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "s" / "priors.json").read_text())
    assert data["epsilon"] == 0.02 and data["max_change"] == 0.1


def test_store_with_out_of_range_parameters_is_not_updated(tmp_path):
    # the reproduced defect: epsilon=2, max_change=7 moved the blog prior 0.5 → 1.0 at once
    store, fb = tmp_path / "store", tmp_path / "fb.jsonl"
    runner.invoke(app, ["priors", "init", str(store)])
    path = store / "priors.json"
    data = json.loads(path.read_text())
    data["epsilon"], data["max_change"] = 2, 7
    path.write_text(json.dumps(data))
    before = path.read_text()
    fb.write_text('{"source_type": "blog", "relevant": true}\n')
    res = runner.invoke(app, ["priors", "update", str(store), str(fb), "--step", "0.5"])
    assert res.exit_code == 2
    assert "priors.json" in res.output and "epsilon" in res.output
    assert path.read_text() == before


@pytest.mark.parametrize("step", ["0", "0.6", "-1", "nan"])
def test_update_step_out_of_range(tmp_path, step):
    store, fb = tmp_path / "store", tmp_path / "fb.jsonl"
    runner.invoke(app, ["priors", "init", str(store)])
    fb.write_text('{"source_type": "blog", "relevant": true}\n')
    res = runner.invoke(app, ["priors", "update", str(store), str(fb), "--step", step])
    assert res.exit_code == 2 and "error: --step: expected" in res.output


def _no_traceback(res):
    assert res.exit_code == 2, (res.output, res.exception)
    assert "Traceback" not in res.output
    assert res.output.lstrip().startswith("error: ")


def test_show_unknown_version_is_an_error(tmp_path):
    store = tmp_path / "store"
    runner.invoke(app, ["priors", "init", str(store)])
    res = runner.invoke(app, ["priors", "show", str(store), "--version", "99"])
    _no_traceback(res)
    assert "version" in res.output and "99" in res.output


def test_update_with_missing_feedback_file_is_an_error(tmp_path):
    store = tmp_path / "store"
    runner.invoke(app, ["priors", "init", str(store)])
    res = runner.invoke(app, ["priors", "update", str(store), str(tmp_path / "missing.jsonl")])
    _no_traceback(res)
    assert "missing.jsonl" in res.output
    assert json.loads(runner.invoke(app, ["priors", "show", str(store)]).output)["version"] == 0


def test_history_with_corrupt_audit_log_is_an_error(tmp_path):
    store = tmp_path / "store"
    runner.invoke(app, ["priors", "init", str(store)])
    with (store / "audit.jsonl").open("a") as log:
        log.write('{"version": 1, "event": "upd\n')
    res = runner.invoke(app, ["priors", "show", str(store), "--history"])
    _no_traceback(res)
    assert "audit.jsonl:2" in res.output


def test_rollback_to_unknown_version_is_an_error(tmp_path):
    store = tmp_path / "store"
    runner.invoke(app, ["priors", "init", str(store)])
    res = runner.invoke(app, ["priors", "rollback", str(store), "7"])
    _no_traceback(res)
    assert "error: VERSION: expected an integer in [0, 0], got 7" in res.output


def test_init_over_an_existing_store_speaks_the_options(tmp_path):
    # it said "open it without base=" and "epsilon=0.02 differs", the library's keywords
    store = tmp_path / "store"
    assert runner.invoke(app, ["priors", "init", str(store)]).exit_code == 0
    for args, said in ((["--base", "aggressive"], "open it without --base to load it"),
                       (["--epsilon", "0.02"], "--epsilon 0.02 differs from the stored value "
                                               "0.01; it is fixed at creation"),
                       (["--max-change", "0.1"], "--max-change 0.1 differs from the stored "
                                                 "value 0.05")):
        res = runner.invoke(app, ["priors", "init", str(store), *args])
        assert res.exit_code == 2 and said in " ".join(res.output.split()), res.output


def test_init_opens_an_existing_store_of_another_base_without_base(tmp_path):
    """``priors init S`` on a store made from a prior file was refused ("open it without
    --base", which was not given): the default base was compared with the stored one."""
    prior = tmp_path / "mine.toml"
    prior.write_text('name = "mine"\nbase = "current"\nblog = 0.7\n', encoding="utf-8")
    store = tmp_path / "store"
    assert runner.invoke(app, ["priors", "init", str(store), "--base", str(prior)]
                         ).exit_code == 0
    res = runner.invoke(app, ["priors", "init", str(store)])
    assert res.exit_code == 0 and "version 0" in res.output, res.output
    res = runner.invoke(app, ["priors", "init", str(store), "--base", "current"])
    assert res.exit_code == 2 and "open it without --base" in " ".join(res.output.split())


def test_init_refuses_an_index_folder(tmp_path):
    """``priors init`` wrote a store's files into an index's folder."""
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "manifest.json").write_text("{}", encoding="utf-8")
    res = runner.invoke(app, ["priors", "init", str(tmp_path / "idx")])
    _no_traceback(res)
    assert "holds a credrank index; a feedback store goes in a folder of its own" in res.output
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == ["manifest.json"]


# -- issue 41: every bad line, JSONL lines, plain versions, a failed write, a lost log ---------

def _init(tmp_path, updates=0):
    store, fb = tmp_path / "store", tmp_path / "fb.jsonl"
    assert runner.invoke(app, ["priors", "init", str(store)]).exit_code == 0
    fb.write_text('{"source_type": "blog", "relevant": true}\n')
    for _ in range(updates):
        assert runner.invoke(app, ["priors", "update", str(store), str(fb)]).exit_code == 0
    return store, fb


def _version(store):
    return json.loads(runner.invoke(app, ["priors", "show", str(store)]).output)["version"]


def test_update_lists_every_bad_line_and_applies_none(tmp_path):
    # only the first bad line was said; the others were never mentioned
    store, fb = _init(tmp_path)
    fb.write_text('{"source_type": "blog", "relevant": true}\n'
                  '{"source_type": "blog"}\n'
                  'not json\n'
                  '{"source_type": "blog", "relevant": false}\n'
                  '{"source_type": "website", "relevant": true}\n')
    res = runner.invoke(app, ["priors", "update", str(store), str(fb)])
    _no_traceback(res)
    assert "3 lines rejected, nothing was applied" in res.output
    for line, said in ((2, "relevant: expected true or false"), (3, "column 1: expected JSON"),
                       (5, "source_type: expected one of")):
        assert f"fb.jsonl:{line}: {said}" in res.output
    assert "fb.jsonl:1" not in res.output and "fb.jsonl:4" not in res.output
    assert _version(store) == 0


def test_update_lists_the_first_bad_lines_and_counts_the_rest(tmp_path):
    store, fb = _init(tmp_path)
    fb.write_text('{"relevant": true}\n' * 25)
    res = runner.invoke(app, ["priors", "update", str(store), str(fb)])
    _no_traceback(res)
    assert "25 lines rejected" in res.output and "fb.jsonl:20:" in res.output
    assert "fb.jsonl:21:" not in res.output and "… and 5 more" in res.output


def test_feedback_lines_end_at_newline_only(tmp_path):
    # str.splitlines() broke a record at a raw U+2028 inside a string, and a form feed
    # shifted every later line number by one
    store, fb = _init(tmp_path)
    fb.write_text('{"source_type": "blog", "source_id": "a\u2028b", "relevant": true}\r\n'
                  '\x0c\n'
                  '{"source_type": "blog", "relevant": "yes"}\n', encoding="utf-8")
    res = runner.invoke(app, ["priors", "update", str(store), str(fb)])
    _no_traceback(res)
    assert "fb.jsonl:3: relevant: expected true or false, got 'yes'" in res.output
    assert "fb.jsonl:1" not in res.output
    fb.write_text('{"source_type": "blog", "source_id": "a\u2028b", "relevant": true}\r\n'
                  '\x0c\n\u0085\n', encoding="utf-8")
    res = runner.invoke(app, ["priors", "update", str(store), str(fb)])
    assert res.exit_code == 0, res.output
    shown = json.loads(runner.invoke(app, ["priors", "show", str(store)]).output)
    assert list(shown["sources"]) == ["a\u2028b"]


@pytest.mark.parametrize("given", ["1.0", "1_0", "+1", " 1", "١"])
def test_a_version_is_a_plain_decimal_integer(tmp_path, given):
    # `rollback S 1.0` restored version 1 and `1_0` version 10
    store, _ = _init(tmp_path, updates=2)
    res = runner.invoke(app, ["priors", "rollback", str(store), given])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "VERSION" in res.output and "a plain decimal integer" in res.output
    assert _version(store) == 2
    res = runner.invoke(app, ["priors", "show", str(store), "--version", given])
    assert res.exit_code == 2 and "--version" in res.output
    assert "a plain decimal integer" in res.output
    res = runner.invoke(app, ["priors", "rollback", str(store), "1"])
    assert res.exit_code == 0 and "version 3 (= version 1)" in res.output


@pytest.mark.parametrize("command", ["update", "rollback"])
def test_author_errors_name_the_option(tmp_path, command):
    store, fb = _init(tmp_path)
    target = str(fb) if command == "update" else "0"
    res = runner.invoke(app, ["priors", command, str(store), target, "--author", ""])
    _no_traceback(res)
    assert "error: --author: expected a non-empty string, got ''" in res.output


@pytest.mark.parametrize("command", ["init", "show"])
def test_a_store_argument_that_is_a_file_is_said_to_be_one(tmp_path, command):
    # it said "[Errno 17] File exists: 'fb1.jsonl'"
    path = tmp_path / "fb1.jsonl"
    path.write_text('{"source_type": "blog", "relevant": true}\n')
    res = runner.invoke(app, ["priors", command, str(path)])
    _no_traceback(res)
    assert "fb1.jsonl: expected a feedback store folder, got a file" in res.output


def test_a_failed_audit_write_is_an_error_and_the_version_is_not_saved(tmp_path):
    # the reproduced defect: an error was printed, yet the version went 6 → 7
    store, fb = _init(tmp_path, updates=2)
    (store / "audit.jsonl").unlink()
    (store / "audit.jsonl").mkdir()
    res = runner.invoke(app, ["priors", "update", str(store), str(fb)])
    _no_traceback(res)
    assert f"{store / 'audit.jsonl'}: cannot write: Is a directory" in res.output
    assert _version(store) == 2


def test_a_lost_audit_log_is_an_error_and_the_next_write_warns(tmp_path):
    # `show --history` printed nothing, exit 0, for a store with 3 versions
    store, fb = _init(tmp_path, updates=2)
    (store / "audit.jsonl").unlink()
    res = runner.invoke(app, ["priors", "show", str(store), "--history"])
    _no_traceback(res)
    assert "audit.jsonl: the audit log is missing or empty" in res.output
    res = runner.invoke(app, ["priors", "update", str(store), str(fb)])
    assert res.exit_code == 0 and "version 3" in res.output
    assert "warning:" in res.output and "a new audit log starts at version 3" in res.output
    history = runner.invoke(app, ["priors", "show", str(store), "--history"])
    (entry,) = [json.loads(x) for x in history.output.splitlines()]
    assert entry["version"] == 3 and "starts here" in entry["note"]
    res = runner.invoke(app, ["priors", "rollback", str(store), "0"])
    assert res.exit_code == 0 and "warning" not in res.output


def test_show_of_a_hand_edited_store_names_the_field(tmp_path):
    # a version without its timestamp: a Rich traceback (KeyError 'timestamp')
    store, _ = _init(tmp_path, updates=1)
    data = json.loads((store / "priors.json").read_text())
    del data["versions"][1]["timestamp"]
    (store / "priors.json").write_text(json.dumps(data))
    for args in ([], ["--history"]):
        res = runner.invoke(app, ["priors", "show", str(store), *args])
        _no_traceback(res)
        assert "priors.json: versions[1].timestamp: expected" in res.output


def test_update_help_gives_the_rule():
    res = runner.invoke(app, ["priors", "update", "--help"])
    assert res.exit_code == 0
    assert "λ ← clip(λ + clamp((1 − (1 − η)^n) · (r̄ − λ), −c, c), ε, 1)" in res.output
