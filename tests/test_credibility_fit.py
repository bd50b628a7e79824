"""`credrank credibility fit` at scale (issue 26, item 5) and from several labelled sets (issue
25, item 3): the feature cache, several labels files, the progress bars."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from credrank.cli import app
from credrank.credibility import Config, CredibilityExample, fit_from_labels
from credrank.credibility.features import CredibilityFeaturizer, FeatureCache
from credrank.credibility.train import merge_sets, set_names
from credrank.index.embed import HashingEmbedder, get_embedder
from credrank.index.opener import open_store
from demo_labels import labels_rows, write_labels

FAST = (Config(("cues", "url"), 10.0), Config(("url",), 100.0))


class Counting:
    """The hashing embedder, counting the texts it embeds."""

    def __init__(self, dim: int = 64):
        self.inner = HashingEmbedder(dim)
        self.name, self.dim = self.inner.name, self.inner.dim
        self.texts = 0

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)


def _pages(n: int = 250) -> tuple[list[str], list[str | None]]:
    rng = np.random.default_rng(0)
    words = ["study", "evidence", "SHOCKING", "share", "university", "cure", "doctor", "now"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(3, 250)))) for _ in range(n)]
    urls = [None if i % 3 == 0 else f"https://site{i % 7}.org/p/{i}" for i in range(n)]
    texts[5] = texts[4]  # a repeated page
    urls[5] = urls[4]
    return texts, urls


def test_cached_features_equal_uncached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from credrank.credibility import features

    monkeypatch.setattr(features, "EMBED_CHUNK", 100)  # three chunks
    texts, urls = _pages()
    plain = CredibilityFeaturizer(Counting()).features(texts, urls)
    first = Counting()
    progress: list[tuple[int, int]] = []
    cached = CredibilityFeaturizer(first, cache_dir=tmp_path).features(
        texts, urls, on_progress=lambda d, t: progress.append((d, t)))
    assert np.array_equal(cached, plain)
    assert first.texts == len(texts) - 1  # each distinct page once
    assert progress[-1] == (len(texts) - 1, len(texts) - 1) and len(progress) == 3
    again = Counting()
    reread = CredibilityFeaturizer(again, cache_dir=tmp_path)
    assert np.array_equal(reread.features(texts, urls), plain) and again.texts == 0
    # a new page is embedded alone and added to the file
    more = reread.features([*texts[:3], "a page never seen"], [*urls[:3], None])
    assert again.texts == 1 and np.array_equal(more[:3], plain[:3])
    assert len(FeatureCache(tmp_path, reread.fingerprint(), reread.width).load()) == len(
        texts)
    # what a row depends on is in the file name: another head length reads nothing stale
    other = Counting()
    short = CredibilityFeaturizer(other, head_words=5, cache_dir=tmp_path)
    short.features(texts[6:16], urls[6:16])
    assert other.texts == 10 and len(list(tmp_path.glob("credibility-*.npz"))) == 2
    # an unreadable file is ignored (and replaced by the next write)
    reread.cache.path.write_bytes(b"not an npz")  # type: ignore[union-attr]
    broken = Counting()
    assert np.array_equal(CredibilityFeaturizer(broken, cache_dir=tmp_path).features(
        texts[:4], urls[:4]), plain[:4])
    assert broken.texts == 4




@pytest.fixture()
def two_sets(tmp_path: Path) -> tuple[Path, Path]:
    rows = labels_rows()
    first = sorted({t for _, _, t in rows})[:5]
    return (write_labels(tmp_path / "alpha.csv", [r for r in rows if r[2] in first]),
            write_labels(tmp_path / "beta.csv", [r for r in rows if r[2] not in first]))


@pytest.mark.slow  # nested CV fits (seconds on a busy machine)
def test_several_labels_files_are_several_sets(demo_index_hashing: Path, two_sets, tmp_path):
    a, b = two_sets
    assert set_names([a, b, tmp_path / "x" / "alpha.csv"]) == ["alpha", "beta", "alpha-2"]
    with open_store(demo_index_hashing) as idx:
        emb = get_embedder(idx.manifest.embedder)
        one = fit_from_labels(write_labels(tmp_path / "all.csv", labels_rows()), idx, emb,
                              configs=FAST, n_boot=50)
        two = fit_from_labels([a, b], idx, emb, configs=FAST, n_boot=50,
                              leave_one_set_out=True)
    rep = two.report
    assert [s["name"] for s in rep["sets"]] == ["alpha", "beta"]
    assert rep["n_pages"] == one.report["n_pages"]
    assert rep["n_groups"] == one.report["n_groups"] == 10
    groups = {g for f in rep["fold_configs"] for g in f["groups"]}
    assert {g.split(":", 1)[0] for g in groups} == {"alpha", "beta"}
    assert set(rep["per_set"]) == {"alpha", "beta"}
    assert sum(v["n_pairs"] for v in rep["per_set"].values()) == rep["n_pairs"]
    for name, entry in rep["leave_one_set_out"].items():
        assert name in ("alpha", "beta") and entry["trained_on_pages"] > 0
        assert entry["auc"] is None or 0.0 <= entry["auc"] <= 1.0
    # a page labelled in two sets keeps both sets' judgements, each in its set's namespace
    page = CredibilityExample("d1", "text", None, {"1": 1})
    merged = merge_sets([("alpha", [page]), ("beta", [CredibilityExample("d1", "text", None,
                                                                         {"1": 0})])])
    assert len(merged) == 1 and merged[0].labels == {"alpha:1": 1, "beta:1": 0}


@pytest.mark.slow  # nested CV fits (seconds on a busy machine)
def test_cli_fit_takes_several_labels_files(demo_index_hashing: Path, two_sets, tmp_path):
    a, b = two_sets
    out = tmp_path / "m.json"
    res = CliRunner().invoke(app, ["credibility", "fit", str(a), str(b), "--index",
                                   str(demo_index_hashing), "--out", str(out),
                                   "--leave-one-set-out", "--json", "--jobs", "2",
                                   "--cache", str(tmp_path / "cache")])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["labels"] == [str(a), str(b)] and set(rep["leave_one_set_out"]) == {"alpha",
                                                                                 "beta"}
    assert out.is_file() and list((tmp_path / "cache").glob("credibility-*.npz"))
    res = CliRunner().invoke(app, ["credibility", "fit", str(a), "--index",
                                   str(demo_index_hashing), "--out", str(out),
                                   "--leave-one-set-out"])
    assert res.exit_code == 2 and "at least 2 labels files" in res.output


def _fit_args(index: Path, labels: Path, out: Path) -> list[str]:
    return ["credibility", "fit", str(labels), "--index", str(index), "--out", str(out)]


@pytest.mark.slow  # nested CV fits (seconds on a busy machine)
def test_progress_is_silent_without_a_terminal(demo_index_hashing: Path, two_sets, tmp_path,
                                               monkeypatch: pytest.MonkeyPatch):
    from credrank.cli import common

    a, _ = two_sets
    res = CliRunner().invoke(app, _fit_args(demo_index_hashing, a, tmp_path / "m.json"))
    assert res.exit_code == 0, res.output
    assert res.stderr == ""  # stderr is not a terminal: no bar, no escape codes
    # on a terminal the bars show (features, then fits); --quiet silences them
    for quiet, shown in ((False, True), (True, False)):
        screen = io.StringIO()
        term = Console(file=screen, force_terminal=True, width=100, markup=False)
        monkeypatch.setattr(common, "err", term)  # the one progress helper's console
        args = _fit_args(demo_index_hashing, a, tmp_path / "m.json") + (
            ["--quiet"] if quiet else [])
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        text = screen.getvalue()
        assert ("grouped CV fits" in text and "features (pages)" in text) is shown, text
        assert (text == "") is quiet
