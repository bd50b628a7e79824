"""Label hygiene of the learned stages (credibility, stance): which data a model saw, in its
file and in a search's settings; labelled sets that overlap or repeat; one duplicate-label
policy; one ``--jobs`` option; registered models checked when the service starts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.credibility import Config, fit_from_labels
from credrank.credibility.labels import read_labels
from credrank.credibility.modelfile import load_model as load_credibility
from credrank.credibility.modelfile import save_model
from credrank.credibility.train import check_distinct
from credrank.index.embed import get_embedder
from credrank.index.opener import open_store
from credrank.learn.cv import majority
from credrank.learn.modelfile import same_folder, trained_on
from credrank.serve.config import check_learned_models
from credrank.signals.stance import fit_pairs, read_pairs
from credrank.signals.stance import load_model as load_stance
from credrank.signals.stance import save_model as save_stance
from demo_labels import labels_rows, write_labels

FAST = (Config(("cues", "url"), 10.0), Config(("url",), 100.0))


def _fit(labels, index: Path, **kw):
    with open_store(index) as idx:
        return fit_from_labels(labels, idx, get_embedder(idx.manifest.embedder), configs=FAST,
                               n_boot=50, **kw)


# ---------------------------------------------------------------- overlapping sets (item 2)


@pytest.mark.slow  # nested CV fits (seconds on a busy machine)
def test_leave_one_set_out_with_a_covered_set_reports_it_and_goes_on(demo_index_hashing: Path,
                                                                      tmp_path: Path):
    rows = labels_rows()
    topics = sorted({t for _, _, t in rows})
    big = write_labels(tmp_path / "big.csv", rows)
    # every page of `part` is judged in `big` too: holding `big` out leaves nothing to train on
    part = write_labels(tmp_path / "part.csv", [r for r in rows if r[2] in topics[:4]])
    result = _fit([big, part], demo_index_hashing, leave_one_set_out=True)
    lodo = result.report["leave_one_set_out"]
    assert list(lodo) == ["big", "part"]
    assert lodo["big"]["auc"] is None and lodo["big"]["config"] is None
    assert "every page of the other sets is judged in big" in lodo["big"]["reason"]
    assert lodo["big"]["trained_on_pages"] == 0 and lodo["big"]["n_pairs"] == len(rows)
    # the other set is estimated on the pages of `big` it does not judge
    assert "reason" not in lodo["part"] and lodo["part"]["trained_on_pages"] > 0
    assert lodo["part"]["config"] is not None
    assert result.report["cv_auc"] is not None  # the main model is fitted as usual
    res = CliRunner().invoke(app, ["credibility", "fit", str(big), str(part), "--index",
                                   str(demo_index_hashing), "--out", str(tmp_path / "m.json"),
                                   "--leave-one-set-out", "--jobs", "1"])
    assert res.exit_code == 0, res.output
    assert "every page of the other sets is judged in big" in " ".join(res.output.split())


def test_a_labels_file_given_twice_is_refused(demo_index_hashing: Path, tmp_path: Path):
    a = write_labels(tmp_path / "a.csv", labels_rows())
    copy = tmp_path / "sub" / "a-copy.csv"
    copy.parent.mkdir()
    # the same rows in another order: the same labelled set
    write_labels(copy, list(reversed(labels_rows())))
    other = write_labels(tmp_path / "b.csv", labels_rows()[:30])
    check_distinct([read_labels(a), read_labels(other)])  # distinct sets pass
    with pytest.raises(ValueError, match=r"a.csv \(file 2\) is the same file as .*a.csv "
                                         r"\(file 1\)"):
        check_distinct([read_labels(a), read_labels(a)])
    with pytest.raises(ValueError, match=r"a-copy.csv \(file 3\) is the same rows"):
        check_distinct([read_labels(a), read_labels(other), read_labels(copy)])
    for args in ([a, a], [a, tmp_path / "." / "a.csv"], [a, copy]):
        res = CliRunner().invoke(app, ["credibility", "fit", *map(str, args), "--index",
                                       str(demo_index_hashing), "--out",
                                       str(tmp_path / "m.json")])
        assert res.exit_code == 2, res.output
        assert "give each labelled set once" in " ".join(res.output.split())
        assert not (tmp_path / "m.json").exists()


# ---------------------------------------------------------------- what a model saw (3, 4)


@pytest.fixture(scope="module")
def credibility_model(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory
                      ) -> Path:
    where = tmp_path_factory.mktemp("cred")
    labels = write_labels(where / "demo-labels.csv", labels_rows())
    model = where / "cred.json"
    save_model(model, _fit(labels, demo_index_hashing).document)
    return model


def _pairs_rows() -> list[tuple[str, str, str, int]]:
    """Stance pairs on pages of the demo index (texts read from it): the stance is the
    credibility label (any 0/1 with both values per topic serves)."""
    return [(t, f"does the treatment of {t} help?", d, y) for d, y, t in labels_rows()]


@pytest.fixture(scope="module")
def stance_model(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("stance")
    pairs = write_labels(where / "demo-pairs.csv", _pairs_rows(),
                   header=("topic", "query", "doc_id", "stance"))
    with open_store(demo_index_hashing) as idx:
        data = read_pairs(pairs, idx)
    model = where / "stance.json"
    save_stance(model, fit_pairs(data, get_embedder("hashing"), n_boot=50).document)
    return model


@pytest.mark.slow  # a credibility and a stance fit
def test_model_files_list_their_groups_and_absolute_files(credibility_model: Path,
                                                          stance_model: Path,
                                                          demo_index_hashing: Path):
    cred = json.loads(credibility_model.read_text(encoding="utf-8"))["training"]
    assert cred["groups"] == sorted({t for _, _, t in labels_rows()})
    assert len(cred["groups"]) == cred["n_groups"]
    assert Path(cred["labels"][0]).is_absolute()
    stance = json.loads(stance_model.read_text(encoding="utf-8"))["training"]
    assert stance["topics"] == sorted({t for t, *_ in _pairs_rows()})
    assert len(stance["topics"]) == stance["n_topics"]
    assert Path(stance["rows"]["file"]).is_absolute()
    assert stance["rows"]["file"] == str(stance_model.parent.resolve() / "demo-pairs.csv")
    assert same_folder(stance["rows"]["index"], demo_index_hashing)
    load_credibility(credibility_model)  # the new keys are read back
    load_stance(stance_model)


def _search(index: Path, *args: str) -> dict:
    res = CliRunner().invoke(app, ["search", "Does vitamin D prevent COVID-19?", "--index",
                                   str(index), *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.slow  # a credibility and a stance fit, searches
def test_search_settings_say_which_data_a_model_saw(credibility_model: Path, stance_model: Path,
                                                    demo_index_hashing: Path, tmp_path: Path):
    doc = _search(demo_index_hashing, "--credibility-model", str(credibility_model),
                  "--stance-model", str(stance_model))
    seen = doc["settings"]["credibility"]["trained_on"]
    assert seen["labels"] == ["demo-labels.csv"]  # by name: no path
    assert seen["index"] == demo_index_hashing.name and seen["fitted_on_this_index"] is True
    assert seen["n_groups"] == len({t for _, _, t in labels_rows()})
    model = json.loads(credibility_model.read_text(encoding="utf-8"))
    assert seen["sha256"] == model["training"]["sha256"]
    assert "not label-free" in doc["info"]["credibility_prior"]["note"]
    assert "not label-free" in doc["info"]["agreement"]["note"]
    assert doc["settings"]["stance"]["trained_on"]["fitted_on_this_index"] is True
    # another index (a copy, elsewhere): the models did not see it, and nothing is noted
    other = tmp_path / "other-index"
    shutil.copytree(demo_index_hashing, other)
    doc = _search(other, "--credibility-model", str(credibility_model), "--stance-model",
                  str(stance_model))
    assert doc["settings"]["credibility"]["trained_on"]["fitted_on_this_index"] is False
    assert "note" not in doc["info"]["credibility_prior"]
    assert "note" not in doc["info"]["agreement"]


@pytest.mark.slow  # a stance fit
def test_stance_stage_says_which_data_its_model_saw(stance_model: Path,
                                                    demo_index_hashing: Path):
    from credrank.stages.stance import StanceAgreement, _bound

    model, source = _bound(stance_model, "hashing", None, demo_index_hashing)
    stage = StanceAgreement(model, source=source)
    seen = stage.config()["stance_model"]["trained_on"]
    assert seen["labels"] == ["demo-pairs.csv"] and seen["fitted_on_this_index"] is True
    assert seen["n_topics"] == len({t for t, *_ in _pairs_rows()})
    assert "/" not in json.dumps({k: seen[k] for k in ("labels", "index")})
    _, elsewhere = _bound(stance_model, "hashing", None, None)
    assert elsewhere["trained_on"]["fitted_on_this_index"] is None  # not an index search


def test_trained_on_names_files_and_compares_folders(tmp_path: Path):
    (tmp_path / "idx").mkdir()
    seen = trained_on(files=[str(tmp_path / "a" / "labels.csv")], index=str(tmp_path / "idx"),
                      sha256="0" * 64, counts={"n_groups": 3}, searched=tmp_path / "." / "idx")
    assert seen == {"labels": ["labels.csv"], "index": "idx", "n_groups": 3,
                    "sha256": "0" * 64, "fitted_on_this_index": True}
    assert trained_on(files=[], index=None, sha256="0" * 64, counts={},
                      searched=tmp_path)["fitted_on_this_index"] is None
    assert same_folder(tmp_path / "idx", tmp_path) is False


# ---------------------------------------------------------------- duplicate labels (item 5)


def test_duplicate_stance_rows_follow_the_majority_policy(write):
    text = {"1": "zinc helps colds and is recommended", "0": "zinc does not help colds"}
    rows = [("t1", "does zinc help?", "a", "1"), ("t1", "does zinc help?", "a", "0"),
            ("t1", "does zinc help?", "a", "0"),   # a: 0 wins 2 to 1 (line 2 outvoted)
            ("t1", "does zinc help?", "b", "1"), ("t1", "does zinc help?", "b", "0"),  # tie
            ("t1", "does zinc help?", "c", "1"), ("t1", "does zinc help?", "c", "1")]
    path = write("p.csv", "topic,query,doc_id,stance,text\n" + "".join(
        f"{t},{q},{d},{s},{text[s]}\n" for t, q, d, s in rows))
    pairs = read_pairs(path)
    got = {e.doc_id: e.stance for e in pairs.examples}
    assert got == {"a": 0, "c": 1}  # the first row's stance (1) is not kept for a
    assert got["a"] == majority([1, 0, 0]) and majority([1, 0]) is None
    assert pairs.rejected == {"duplicate (topic, doc_id)": 3,
                              "duplicate (topic, doc_id), stances tied": 2}
    assert pairs.rejected_lines["duplicate (topic, doc_id), stances tied"] == [5, 6]
    assert pairs.outvoted == 1 and "a in t1: 1 of 3 rows outvoted" in pairs.outvoted_examples[0]
    assert len(pairs.examples) + sum(pairs.rejected.values()) == pairs.rows
    assert pairs.report()["outvoted"] == 1


# ---------------------------------------------------------------- --jobs (item 6)


def test_fit_commands_share_one_jobs_option():
    from credrank.cli.helptext import HELP

    texts = [HELP[key] for key in HELP if key in (("credibility", "fit"), ("stance", "fit"),
                                                   "credibility fit", "stance fit")]
    assert len(texts) == 2
    blocks = []
    for text in texts:
        flat = " ".join(text.split())
        start = flat.index("--jobs <int range>")
        blocks.append(flat[start:flat.index("]", start) + 1])
    assert blocks[0] == blocks[1] and "0: one per CPU core" in blocks[0]
    assert "[default: 0; x>=0]" in blocks[0]


def test_stance_fit_takes_jobs_zero(write, tmp_path: Path):
    text = {"1": "zinc helps colds and is recommended", "0": "zinc does not help colds"}
    body = "topic,query,doc_id,stance,text\n" + "".join(
        f"t{k},does zinc help?,d{k}{s}{i},{s},{text[s]} {i}\n"
        for k in range(3) for s in "01" for i in range(2))
    res = CliRunner().invoke(app, ["stance", "fit", str(write("p.csv", body)), "--embedder",
                                   "hashing", "--out", str(tmp_path / "m.json"), "--jobs", "0",
                                   "--json"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["stance", "fit", str(tmp_path / "p.csv"), "--out",
                                   str(tmp_path / "m.json"), "--jobs", "-1"])
    assert res.exit_code == 2


# ---------------------------------------------------------------- serve --model (item 7)


@pytest.mark.slow  # a credibility fit
def test_registered_models_are_read_at_start(credibility_model: Path, stance_model: Path,
                                             demo_index_hashing: Path, tmp_path: Path):
    with open_store(demo_index_hashing) as idx:
        check_learned_models({"cred": credibility_model, "stance": stance_model}, idx)
        damaged = tmp_path / "bad.json"
        damaged.write_text(credibility_model.read_text(encoding="utf-8")[:200],
                           encoding="utf-8")
        with pytest.raises(ValueError, match=r"models: bad: .*bad.json"):
            check_learned_models({"bad": damaged}, idx)
        other = json.loads(stance_model.read_text(encoding="utf-8"))
        other["embedder"]["name"] = "minilm"
        (tmp_path / "st.json").write_text(json.dumps(other), encoding="utf-8")
        with pytest.raises(ValueError, match=r"models: st: .*'minilm'.*'hashing'"):
            check_learned_models({"st": tmp_path / "st.json"}, idx)
        prior = tmp_path / "prior.toml"  # not a model: read when a request names it
        prior.write_text("not = [checked", encoding="utf-8")
        check_learned_models({"prior": prior}, idx)
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    res = CliRunner().invoke(app, ["serve", "--index", str(demo_index_hashing), "--model",
                                   f"bad={damaged}"])
    assert res.exit_code == 2, res.output
    assert "--model bad:" in res.output and "bad.json" in res.output


def test_the_service_says_the_served_index_by_no_path_in_a_credibility_warning(
        credibility_model: Path, demo_index_hashing: Path, tmp_path: Path) -> None:
    """The credibility stage's warning names the command that scores an index, with the
    index's folder: over HTTP that folder was the server's absolute path."""
    import asyncio

    from serving import asgi_client, in_process

    where = tmp_path / "served"
    shutil.copytree(demo_index_hashing, where)

    async def scenario() -> dict[str, Any]:
        with in_process(where, models={"cred": credibility_model}) as served:
            async with asgi_client(served) as client:
                res = await client.post("/search", json={
                    "query": "vitamin d covid", "credibility_model": "cred"})
                assert res.status_code == 200, res.text
                return res.json()

    doc = asyncio.run(scenario())
    said = json.dumps(doc["info"]["credibility_prior"])
    assert "score credibility" in said  # the warning is there
    assert str(where) not in said and str(where.resolve()) not in said
    assert str(credibility_model) not in said
