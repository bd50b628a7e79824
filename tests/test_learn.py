"""The learned-model stack (credrank.learn): the estimator protocol, the grouped cross-validation
shared by every learned stage, the bootstrap over groups and the versioned model file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from credrank.core.errors import FileFormatError
from credrank.core.logistic import fit_logistic
from credrank.core.schema import Field, Integer, Number, Table
from credrank.learn import cv as learn_cv
from credrank.learn.cv import (
    HIGHEST_AUC,
    LOWEST_LOG_LOSS,
    GroupedData,
    Learner,
    choose_config,
    cross_validate,
    group_bootstrap,
    nested_cross_validation,
)
from credrank.learn.estimator import Estimator, LogisticEstimator
from credrank.learn.modelfile import (
    ModelFileFormat,
    logistic_document,
    logistic_model,
    logistic_schema,
    provenance,
    with_provenance,
)


@dataclass(frozen=True)
class Cfg:
    """A toy configuration: the feature columns it reads and its L2."""

    cols: tuple[int, ...]
    l2: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"cols": list(self.cols), "l2": self.l2}


def _data(n_groups: int = 6, per_group: int = 8, seed: int = 0, lazy: bool = False
          ) -> tuple[GroupedData, np.ndarray]:
    """Items in groups: column 0 carries the label (with noise), column 1 is noise, column 2 is
    the item's index (for the leakage checks)."""
    rng = np.random.default_rng(seed)
    n = n_groups * per_group
    groups = [f"g{i // per_group}" for i in range(n)]
    y = np.array([i % 2 for i in range(n)], dtype=float)
    x = np.column_stack([y + rng.normal(0, 0.8, n), rng.normal(0, 1, n), np.arange(n)])
    if lazy:
        return GroupedData.from_rows(groups, list(y), features=lambda items: x[items]), x
    return GroupedData.from_rows(groups, list(y), x=x), x


LOGISTIC = Learner(columns=lambda c: list(c.cols))


# ---------------------------------------------------------------- the estimator protocol


@dataclass
class Recorder:
    """A toy estimator: P(y = 1) = the training share of positives (no features used); it
    records the item indices (column 2) it trained on and scored."""

    log: list[tuple[str, frozenset[int]]] = field(default_factory=list)
    share: float | None = None

    def fit(self, x: np.ndarray, y: np.ndarray) -> Recorder:
        self.share = float(np.mean(y))
        self.log.append(("fit", frozenset(int(v) for v in x[:, -1])))
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        assert self.share is not None
        self.log.append(("predict", frozenset(int(v) for v in x[:, -1])))
        return np.full(len(x), self.share)


def test_the_protocol_takes_any_estimator():
    assert isinstance(LogisticEstimator(1.0), Estimator)
    assert isinstance(Recorder(), Estimator)
    data, _ = _data()
    log: list[tuple[str, frozenset[int]]] = []
    toy = Learner(columns=lambda c: [0, 2], estimator=lambda c: Recorder(log))
    cv = nested_cross_validation(data, toy, [Cfg((0, 2))], HIGHEST_AUC, n_boot=50)
    assert isinstance(cv.model.estimator, Recorder) and len(cv.oof.y) == len(data)
    assert all(p == cv.oof.p[0] for p in cv.oof.p[:8])  # a constant per fold
    with pytest.raises(ValueError, match="not fitted"):
        LogisticEstimator(1.0).predict_proba(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="l2"):
        LogisticEstimator(0.0)


def test_no_group_is_split_between_training_and_scoring():
    data, _ = _data(n_groups=25, per_group=3)  # 25 groups: 10 folds of 2-3 groups
    log: list[tuple[str, frozenset[int]]] = []
    toy = Learner(columns=lambda c: [0, 2], estimator=lambda c: Recorder(log))
    cv = nested_cross_validation(data, toy, [Cfg((0, 2)), Cfg((1, 2))], HIGHEST_AUC, n_boot=20)
    group_of = {i: data.groups_of(i)[0] for i in range(len(data))}
    trained: frozenset[int] = frozenset()
    n_scored = 0
    for kind, items in log:  # the fits run one at a time: a fit, then what it scores
        if kind == "fit":
            trained = items
            continue
        n_scored += 1  # none of the scored items' groups trained the model
        assert {group_of[i] for i in trained}.isdisjoint({group_of[i] for i in items})
    # 10 folds, 2 configurations: the inner fit leaving out folds {F, G} is shared by outer F
    # and outer G and scores both; the 2·10 outer fits score their fold; the refit nothing
    n_fits = sum(kind == "fit" for kind, _ in log)
    assert n_fits == 2 * (10 * 9 // 2) + 2 * 10 + 1
    assert n_scored == 2 * 2 * (10 * 9 // 2) + 2 * 10
    assert len(cv.folds) == 10 and sorted(g for f in cv.folds for g in f) == sorted(data.groups)
    for g, fold in zip(cv.oof.groups, cv.oof.folds, strict=True):
        assert g in cv.folds[fold]


def test_out_of_fold_scores_equal_a_manual_loop():
    data, x = _data()
    folds = learn_cv.group_folds(data.groups)
    (oof,) = cross_validate(data, LOGISTIC, [Cfg((0, 1), 10.0)], folds)
    groups = np.array([data.groups_of(i)[0] for i in range(len(data))])
    y = data.y
    manual = []
    for fold in folds:
        test = np.isin(groups, fold)
        model = fit_logistic(x[~test][:, [0, 1]], y[~test], 10.0)
        manual.append(model.predict_proba(x[test][:, [0, 1]]))
    assert np.array_equal(oof.p, np.concatenate(manual))  # the same bits
    assert np.array_equal(oof.y, y)
    assert oof.groups == list(groups) and oof.doc_ids == [str(i) for i in range(len(data))]


def test_a_page_judged_in_two_groups_trains_neither():
    judgements = [{"a": 1}, {"a": 0}, {"b": 1}, {"b": 0}, {"c": 1}, {"c": 0},
                  {"a": 1, "b": 1}, {"a": 1, "c": 0}]
    x = np.column_stack([np.arange(8.0), np.arange(8.0)])
    data = GroupedData.from_judgements(judgements, x=x)
    assert data.groups == ["a", "b", "c"]
    assert list(data.train_rows(["a"])) == [2, 3, 4, 5]  # 6 and 7 are judged in a too
    assert list(data.train_rows(["b"])) == [0, 1, 4, 5]  # 7 is a tie: it never trains
    assert list(data.pairs_in(["b"])) == [4, 5, 6]       # pairs ordered by group, then item
    assert [data.pair_item[i] for i in data.pairs_in(["b"])] == [2, 3, 6]
    assert [data.pair_item[i] for i in data.pairs_in(["a"])] == [0, 1, 6, 7]
    with pytest.raises(ValueError, match="expected one of x"):
        GroupedData.from_rows(["a"], [1])
    with pytest.raises(ValueError, match="expected labels 0 or 1"):
        GroupedData.from_rows(["a"], [2], x=np.zeros((1, 1)))


# ---------------------------------------------------------------- configuration choice


def test_config_choice_by_auc_and_by_log_loss():
    data, _ = _data()
    folds = learn_cv.group_folds(data.groups)
    noise, signal = Cfg((1,)), Cfg((0,))
    choice = choose_config(data, LOGISTIC, [noise, signal], folds, HIGHEST_AUC)
    assert choice.config == signal and choice.auc == choice.value > 0.7
    assert [s["cols"] for s in choice.scores] == [[1], [0]]
    assert set(choice.scores[0]) == {"cols", "l2", "auc", "n"}
    by_loss = choose_config(data, LOGISTIC, [noise, signal], folds, LOWEST_LOG_LOSS)
    assert by_loss.config == signal and by_loss.log_loss == min(
        s["log_loss"] for s in by_loss.scores)
    with pytest.raises(AttributeError, match="chosen by log_loss"):
        _ = by_loss.auc
    # a tie goes to the first configuration
    twin = Cfg((0,), 1.0 + 1e-15)
    assert choose_config(data, LOGISTIC, [signal, twin], folds).config == signal
    # undefined AUCs (one class only) never win: the first configuration, value None
    ones = GroupedData.from_rows([data.groups_of(i)[0] for i in range(len(data))],
                                 [1.0] * len(data), x=data.x)
    undefined = choose_config(ones, LOGISTIC, [noise, signal], folds)
    assert undefined.config == noise and undefined.value is None


def test_nested_choice_never_reads_the_outer_fold():
    data, _ = _data(n_groups=4)
    cv = nested_cross_validation(data, LOGISTIC, [Cfg((1,)), Cfg((0,))], HIGHEST_AUC,
                                 n_boot=100, statistics=("auc", "accuracy"))
    assert cv.folds == [("g0",), ("g1",), ("g2",), ("g3",)]
    for fold, fitted, entry in zip(cv.folds, cv.outer, cv.fold_configs(), strict=True):
        assert fitted.excluded == fold and entry["groups"] == list(fold)
        assert {data.groups_of(int(i))[0] for i in fitted.rows}.isdisjoint(fold)
        assert entry["inner_auc"] is not None
    assert cv.final.config == Cfg((0,)) and len(cv.model.rows) == len(data)
    assert set(cv.intervals) == {"auc", "accuracy"}
    lo, hi = cv.intervals["auc"].bounds
    assert lo <= cv.oof.auc() <= hi
    prov = cv.provenance("topic")
    assert prov["cv"] == "leave-one-group-out" and prov["estimator"] == "logistic"
    assert prov["configs"] == [{"cols": [1], "l2": 1.0}, {"cols": [0], "l2": 1.0}]
    with pytest.raises(ValueError, match="at least 3 groups; got 2"):
        nested_cross_validation(_data(n_groups=2)[0], LOGISTIC, [Cfg((0,))])


def test_features_are_computed_once_per_item_when_first_read():
    data, x = _data(lazy=True)
    calls: list[list[int]] = []
    base = data._features
    assert base is not None
    data._features = lambda items: (calls.append([int(i) for i in items]), base(items))[1]
    lazy = nested_cross_validation(data, LOGISTIC, [Cfg((0,)), Cfg((0, 1))], n_boot=50)
    eager = nested_cross_validation(_data()[0], LOGISTIC, [Cfg((0,)), Cfg((0, 1))], n_boot=50)
    seen = [i for call in calls for i in call]
    assert sorted(seen) == list(range(len(x)))  # every item once
    # the first read is the first inner fit's training set: every group but g1 and g0
    assert calls[0] == [i for i in range(len(x)) if i >= 16]
    assert np.array_equal(lazy.oof.p, eager.oof.p)


def test_parallel_fits_give_the_same_numbers_and_report_progress(monkeypatch):
    data, _ = _data(n_groups=5)
    configs = [Cfg((1,)), Cfg((0,), 10.0), Cfg((0, 1))]
    ticks: list[tuple[int, int]] = []
    one = nested_cross_validation(data, LOGISTIC, configs, n_boot=100,
                                  on_progress=lambda d, t: ticks.append((d, t)))
    parallel_ticks: list[tuple[int, int]] = []
    # small data runs in the calling process whatever n_jobs says: lower the bar so that the
    # worker processes really run the fits here
    monkeypatch.setattr(learn_cv, "_PARALLEL_CELLS", 0)
    two = nested_cross_validation(data, LOGISTIC, configs, n_boot=100, n_jobs=2,
                                  on_progress=lambda d, t: parallel_ticks.append((d, t)))
    assert parallel_ticks == ticks  # counted in the calling process as the fits complete
    assert np.array_equal(one.oof.p, two.oof.p)
    assert one.fold_configs() == two.fold_configs() and one.final.scores == two.final.scores
    assert one.intervals == two.intervals
    total = ticks[-1][1]
    assert [d for d, _ in ticks] == list(range(1, total + 1))
    # leave-one-group-out shares the fit leaving out {u, v}: 5·3·4/2 inner + 5·3 + 1 refit
    assert total == 5 * 3 * 4 // 2 + 5 * 3 + 1
    with pytest.raises(ValueError, match="n_jobs"):
        nested_cross_validation(data, LOGISTIC, configs, n_jobs=0)


@pytest.mark.slow  # starts two worker processes
def test_fold_parallel_chains_equal_serial_and_warm_starts_stay_at_the_optimum(monkeypatch):
    """10 folds of groups, three L2 values on the same columns: the fits of one training set
    form a warm-started chain (L2 1000 → 100 → 10); in worker processes the numbers are those
    of the serial run, and they are those of cold fits up to the optimiser's tolerance."""
    data, _ = _data(n_groups=25, per_group=4)
    configs = [Cfg((0, 1), 10.0), Cfg((0, 1), 100.0), Cfg((0, 1), 1000.0), Cfg((1,), 10.0)]
    tasks = [learn_cv._Task(c, 0 if c < 3 else 1, ("g0",), (), LogisticEstimator(1.0))
             for c in range(4)]
    assert learn_cv._chains(tasks, configs) == [[2, 1, 0], [3]]  # by decreasing L2
    serial = nested_cross_validation(data, LOGISTIC, configs, n_boot=50)
    pools: list[int] = []
    real = learn_cv.ProcessPoolExecutor

    def counted(*args: Any, **kw: Any) -> Any:
        pools.append(kw["max_workers"])
        return real(*args, **kw)

    monkeypatch.setattr(learn_cv, "ProcessPoolExecutor", counted)
    monkeypatch.setattr(learn_cv, "_PARALLEL_CELLS", 0)
    parallel = nested_cross_validation(data, LOGISTIC, configs, n_boot=50, n_jobs=2)
    assert pools == [2]  # the fits really ran in two worker processes
    assert np.array_equal(serial.oof.p, parallel.oof.p)
    assert serial.fold_configs() == parallel.fold_configs()
    assert serial.final.scores == parallel.final.scores
    # cold fits (no fit_warm): the same choices, probabilities within the tolerance
    cold = Learner(columns=lambda c: list(c.cols),
                   estimator=lambda c: _Cold(float(c.l2)))
    reference = nested_cross_validation(data, cold, configs, n_boot=50)
    assert np.allclose(serial.oof.p, reference.oof.p, atol=1e-4)
    assert serial.fold_configs() == reference.fold_configs()


class _Cold:
    """A logistic estimator without ``fit_warm``: every fit starts at zero."""

    def __init__(self, l2: float):
        self.inner = LogisticEstimator(l2)

    def fit(self, x: np.ndarray, y: np.ndarray) -> _Cold:
        self.inner.fit(x, y)
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return self.inner.predict_proba(x)


def test_warm_fit_reaches_the_cold_optimum():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 6)) * [1, 10, 0.1, 1, 5, 1] + [0, 3, -2, 0, 0, 1]
    y = (x[:, 0] + 0.1 * x[:, 1] + rng.normal(0, 1, 300) > 0.3).astype(float)
    strong = LogisticEstimator(1000.0).fit(x[:200], y[:200])  # other rows, other scaling
    for l2 in (100.0, 10.0, 1.0):
        cold = LogisticEstimator(l2).fit(x, y)
        warm = LogisticEstimator(l2).fit_warm(x, y, strong)
        assert np.allclose(warm.predict_proba(x), cold.predict_proba(x), atol=1e-4)
        assert cold.model is not None and warm.model is not None
        assert np.array_equal(warm.model.mean, cold.model.mean)
    # a start of another width, or none: a cold fit (the same bits)
    other = LogisticEstimator(1.0).fit(x[:, :3], y)
    for start in (None, other, LogisticEstimator(1.0)):
        warm = LogisticEstimator(10.0).fit_warm(x, y, start)
        assert np.array_equal(warm.predict_proba(x),
                              LogisticEstimator(10.0).fit(x, y).predict_proba(x))


def test_group_bootstrap_weights_equal_the_concatenated_resamples():
    """The weighted bootstrap reads the same draws as :func:`group_resamples` and gives the
    statistics of the concatenated rows (ties in the scores included)."""
    from credrank.core.folds import group_resamples

    rng = np.random.default_rng(5)
    groups = [f"g{i // 5}" for i in range(80)] + ["solo"]
    y = rng.integers(0, 2, 81).astype(float)
    p = np.round(rng.uniform(0, 1, 81), 1)  # many ties
    got = group_bootstrap(groups, y, p, ("auc", "accuracy", "log_loss"), n_boot=300, seed=4)
    values: dict[str, list[float]] = {"auc": [], "accuracy": [], "log_loss": []}
    for idx in group_resamples(groups, 300, 4):
        for s in values:
            v = learn_cv.STATISTICS[s](y[idx], p[idx])
            if v is not None:
                values[s].append(v)
    for s, vals in values.items():
        lo, hi = np.quantile(vals, [0.025, 0.975])
        assert got[s].n_defined == len(vals)
        assert got[s].bounds == pytest.approx((lo, hi), abs=1e-12)


# ---------------------------------------------------------------- bootstrap over groups


def test_group_bootstrap_is_seeded_and_undefined_without_both_classes():
    rng = np.random.default_rng(0)
    groups = [f"g{i // 6}" for i in range(60)]
    y = np.array([i % 2 for i in range(60)], dtype=float)
    p = np.clip(0.3 * y + rng.uniform(0, 0.7, 60), 0, 1)
    first = group_bootstrap(groups, y, p, ("auc", "accuracy"), n_boot=200, seed=1)
    assert first == group_bootstrap(groups, y, p, ("auc", "accuracy"), n_boot=200, seed=1)
    assert first != group_bootstrap(groups, y, p, ("auc", "accuracy"), n_boot=200, seed=2)
    assert first["accuracy"].n_defined == 200 and first["auc"].n_defined == 200
    lo, hi = first["auc"].bounds
    assert 0.0 <= lo <= hi <= 1.0
    undefined = group_bootstrap(groups, np.ones(60), p, ("auc",), n_boot=50)
    assert undefined["auc"].bounds is None and undefined["auc"].n_defined == 0
    with pytest.raises(ValueError, match="statistics"):
        group_bootstrap(groups, y, p, ("median",))


# ---------------------------------------------------------------- the model file


class ToyModelError(FileFormatError):
    pass


_V1 = Table({"credrank_toy_model": Field(Integer()), "created_by": Field(Number()),
             "logistic": Field(logistic_schema(Number(0, open_low=True)))}, what="a toy model")
TOY = ModelFileFormat("credrank_toy_model", "toy model", "credrank toy fit", ToyModelError,
                      {1: _V1, 2: with_provenance(_V1)}, make_parents=True)
PROV = provenance(estimator="logistic", selection="nested grouped CV", cv="leave-one-group-out",
                  n_folds=3, group_by="topic", seed=0, n_boot=10, configs=[{"l2": 1.0}])


def _toy_document() -> dict[str, Any]:
    est = LogisticEstimator(1.0).fit(np.array([[0.0], [1.0], [2.0], [3.0]]),
                                     np.array([0.0, 0.0, 1.0, 1.0]))
    assert est.model is not None
    doc = TOY.document({"logistic": logistic_document(est.model)}, PROV)
    doc["created_by"] = 1.0  # the toy schema wants a number here
    return doc


def test_model_file_round_trip_and_old_format(tmp_path: Path):
    doc = _toy_document()
    assert doc["credrank_toy_model"] == 2 and list(doc)[:2] == ["credrank_toy_model",
                                                                 "created_by"]
    path = tmp_path / "new" / "toy.json"
    TOY.save(path, doc)  # the missing folder is created
    fmt, read = TOY.read(path)
    assert fmt == 2 and read == json.loads(path.read_text())
    model = logistic_model(read["logistic"], 1, str(path), ToyModelError)
    assert model.predict_proba(np.array([[3.0]]))[0] > 0.5
    old = {k: v for k, v in doc.items() if k != "provenance"} | {"credrank_toy_model": 1}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert TOY.read(tmp_path / "old.json")[0] == 1


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda d: d.update(credrank_toy_model=3),
     "credrank_toy_model: expected 1 or 2 (the formats this credrank reads), got 3 (written by "
     "a newer credrank?)"),
    (lambda d: d.update(credrank_toy_model=0), "expected 1 or 2 (the formats this credrank "
                                               "reads), got 0"),
    (lambda d: d.pop("credrank_toy_model"), "not a toy model (expected a JSON object with "
                                            "'credrank_toy_model'"),
    (lambda d: d.pop("provenance"), "provenance: expected the training provenance"),
    (lambda d: d["provenance"].update(seed=-1), "provenance.seed: expected an integer >= 0"),
    (lambda d: d["provenance"].update(bogus=1), "provenance.bogus: expected one of the known"),
    (lambda d: d["logistic"]["scale"].__setitem__(0, 0), "logistic.scale[0]: expected"),
])
def test_model_file_refusals_name_file_and_key(tmp_path: Path, edit, needle: str):
    doc = _toy_document()
    edit(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ToyModelError) as info:
        TOY.read(path)
    assert str(info.value).startswith(str(path)) and needle in str(info.value)


def test_a_model_file_of_another_kind_is_refused(tmp_path: Path):
    from credrank.credibility.modelfile import MODEL_FILE as CREDIBILITY
    from credrank.signals.stance import MODEL_FILE as STANCE
    from credrank.signals.stance import StanceModelError

    path = tmp_path / "toy.json"
    TOY.save(path, _toy_document())
    for kind in (CREDIBILITY, STANCE):
        with pytest.raises(kind.error, match=rf"not a {kind.what} .*`{kind.command}`"):
            kind.read(path)
    assert STANCE.error is StanceModelError and STANCE.current == CREDIBILITY.current == 2
    with pytest.raises(ToyModelError, match=r"logistic\.weights: expected 2 numbers"):
        logistic_model(_toy_document()["logistic"], 2, "m.json", ToyModelError)


# ---------------------------------------------------------------- one CV for every stage


def test_credibility_and_stance_go_through_the_same_cv(monkeypatch):
    from credrank.credibility import Config, CredibilityExample, CredibilityFeaturizer
    from credrank.credibility import grouped_cross_validation as credibility_cv
    from credrank.index.embed import HashingEmbedder
    from credrank.signals.stance_model import StanceExample, StanceFeaturizer
    from credrank.signals.stance_model import grouped_cross_validation as stance_cv

    calls: list[str] = []
    real = learn_cv.nested_cross_validation

    def spy(*args: Any, **kwargs: Any) -> learn_cv.NestedCV:
        calls.append(args[3].measure)
        return real(*args, **kwargs)

    monkeypatch.setattr(learn_cv, "nested_cross_validation", spy)
    pages = [CredibilityExample(f"{t}-{i}", "A clinical trial." if i % 2 else "BUY NOW!!!",
                                f"http://{t}{i}.{'gov' if i % 2 else 'biz'}/", {t: i % 2})
             for t in ("t1", "t2", "t3") for i in range(4)]
    credibility_cv(pages, CredibilityFeaturizer(None), (Config(("cues", "url"), 10.0),),
                   n_boot=20)
    pairs = [StanceExample(t, f"does {t} help?", f"{t} {'works' if i % 2 else 'fails'}.",
                           i % 2, f"{t}-{i}") for t in ("a", "b", "c") for i in range(4)]
    stance_cv(pairs, StanceFeaturizer(HashingEmbedder(16), use_embedding=False), n_boot=20)
    assert calls == ["auc", "log_loss"]
