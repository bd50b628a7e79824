"""The credibility model file (JSON, ``"credrank_credibility_model": 1``; docs/json.md).

:func:`model_document` writes what a fitted :class:`~credrank.credibility.model.CredibilityModel`
needs to predict again — the feature names and their fingerprint, the configuration, the
logistic weights, bias, mean and scale, the embedder name and dimension — with its provenance:
the training-data hash, pages, groups, the grouping, the CV metrics, the default floor and the
credrank version. :func:`load_model` validates every field (``ValueError`` naming the file and
the field) and returns a :class:`SavedCredibilityModel`, a ``(texts, urls) -> P(credible)``
callable for :class:`~credrank.credibility.stage.LearnedCredibilityPrior`.

A model reads the embedder of the index it was fitted on: :meth:`SavedCredibilityModel.check_store`
refuses an index whose manifest names another embedder (both named in the error).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.embedder import Embedder
from credrank.core.files import save_json
from credrank.core.logistic import LogisticModel
from credrank.credibility.features import (
    CUE_NAMES,
    GROUPS,
    URL_NAMES,
    CredibilityFeaturizer,
    cue_patterns_hash,
)
from credrank.credibility.model import Config, CredibilityModel

FORMAT = 1
KEY = "credrank_credibility_model"
#: the default floor of ``λ = floor + (1 − floor) · p`` written to a new model file
DEFAULT_FLOOR = 0.3
def _credrank_version() -> str:
    try:
        return version("credrank")
    except PackageNotFoundError:  # a source checkout that is not installed
        return "unknown"


_FIELDS = ("created_by", "features", "config", "logistic", "embedder", "training", "metrics",
           "floor")


def model_document(model: CredibilityModel, *, embedder_name: str, embedder_dim: int,
                   training_sha256: str, n_pages: int, n_groups: int, group_by: str,
                   metrics: Mapping[str, Any], floor: float = DEFAULT_FLOOR) -> dict[str, Any]:
    """The JSON document of a fitted ``model`` (module docstring)."""
    if model.model is None:
        raise ValueError("model: not fitted; call fit() first")
    lr = model.model
    feat = model.featurizer
    return {
        KEY: FORMAT,
        "created_by": f"credrank {_credrank_version()}",
        "features": {"groups": list(model.config.groups), "cues": list(CUE_NAMES),
                     "url": list(URL_NAMES), "head_words": feat.head_words,
                     "cue_patterns_sha256": cue_patterns_hash()},
        "config": model.config.to_dict(),
        "logistic": {"weights": lr.weights.tolist(), "bias": float(lr.bias),
                     "mean": lr.mean.tolist(), "scale": lr.scale.tolist(), "l2": float(lr.l2)},
        "embedder": {"name": embedder_name, "dim": int(embedder_dim)},
        "training": {"sha256": training_sha256, "n_pages": int(n_pages),
                     "n_groups": int(n_groups), "group_by": group_by},
        "metrics": dict(metrics),
        "floor": float(floor),
    }


def save_model(path: str | Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` to ``path`` atomically (the old file or the new one, never half)."""
    save_json(path, document, what="model")


def _need(data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in data:
        raise ValueError(f"{where}: field {name!r} missing")
    value = data[name]
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise ValueError(f"{where}: field {name!r}: expected a number, got {value!r}")
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ValueError(f"{where}: field {name!r}: expected {names}, got {value!r:.80}")
    return value


def _vector(data: Mapping[str, Any], name: str, n: int, where: str, *,
            positive: bool = False) -> np.ndarray:
    value = _need(data, name, list, where)
    if len(value) != n:
        raise ValueError(f"{where}: field {name!r}: expected {n} numbers (one per feature "
                         f"column), got {len(value)}")
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or (
                positive and x <= 0):
            need = "a finite number > 0" if positive else "a finite number"
            raise ValueError(f"{where}: field {name!r}[{i}]: expected {need}, got {x!r}")
    return np.asarray(value, dtype=np.float64)


def _number(data: Mapping[str, Any], name: str, where: str, low: float = -math.inf,
            high: float = math.inf) -> float:
    value = float(_need(data, name, (int, float), where))
    if not math.isfinite(value) or not low <= value <= high:
        raise ValueError(f"{where}: field {name!r}: expected a finite number in [{low}, {high}],"
                         f" got {value!r}")
    return value


def _names(data: Mapping[str, Any], name: str, expected: Sequence[str], where: str) -> None:
    value = _need(data, name, list, where)
    if value != list(expected):
        raise ValueError(f"{where}: field {name!r}: the model's feature names differ from this "
                         f"credrank's ({len(value)} vs {len(expected)} names); refit the model")


@dataclass
class SavedCredibilityModel:
    """A validated model file; call it as ``(texts, urls) -> P(credible)``."""

    path: str
    document: dict[str, Any]
    config: Config
    logistic: LogisticModel
    embedder_name: str
    embedder_dim: int
    head_words: int
    floor: float
    _model: CredibilityModel | None = None

    @property
    def version(self) -> int:
        """The file format version."""
        return int(self.document[KEY])

    def check_store(self, store: object) -> None:
        """``ValueError`` when ``store``'s manifest names another embedder or dimension."""
        manifest = getattr(store, "manifest", None)
        name = getattr(manifest, "embedder", None)
        if name is not None and name != self.embedder_name:
            raise ValueError(f"{self.path}: the credibility model was fitted on an index "
                             f"embedded with {self.embedder_name!r}; this index uses {name!r} "
                             "(refit it on this index with `credrank credibility fit`)")
        dim = getattr(manifest, "dim", None)
        if dim is not None and "embedding" in self.config.groups and dim != self.embedder_dim:
            raise ValueError(f"{self.path}: the credibility model expects {self.embedder_dim}-"
                             f"dimensional {self.embedder_name!r} vectors; this index has {dim}")

    def bind(self, embedder: Embedder | None = None) -> CredibilityModel:
        """The predicting model; ``embedder`` defaults to ``get_embedder(embedder name)``
        and is needed only when the configuration uses the ``embedding`` group."""
        if self._model is not None:
            return self._model
        emb: Embedder | None = None
        if "embedding" in self.config.groups:
            if embedder is None:
                from credrank.index.embed import get_embedder

                embedder = get_embedder(self.embedder_name)
            name = getattr(embedder, "name", None)
            if name is not None and name != self.embedder_name:
                raise ValueError(f"{self.path}: the credibility model needs embedder "
                                 f"{self.embedder_name!r}; got {name!r}")
            if int(getattr(embedder, "dim", -1)) != self.embedder_dim:
                raise ValueError(f"{self.path}: the credibility model needs "
                                 f"{self.embedder_dim}-dimensional vectors; embedder "
                                 f"{self.embedder_name!r} gives {getattr(embedder, 'dim', '?')}")
            emb = embedder
        model = CredibilityModel(CredibilityFeaturizer(emb, head_words=self.head_words),
                                 self.config, self.logistic)
        self._model = model
        return model

    def __call__(self, texts: Sequence[str], urls: Sequence[str | None]) -> np.ndarray:
        """``P(credible)`` per page (:meth:`CredibilityModel.predict`)."""
        return self.bind().predict(texts, urls)

    def summary(self) -> dict[str, Any]:
        """What ``describe()`` and the stage's config report."""
        return {"model": self.path, "version": self.version,
                "created_by": self.document["created_by"], "config": self.config.to_dict(),
                "embedder": self.embedder_name,
                "training_sha256": self.document["training"]["sha256"]}


def load_model(path: str | Path) -> SavedCredibilityModel:
    """Read and validate the model file at ``path`` (module docstring)."""
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{where}: cannot read the credibility model: "
                         f"{exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ValueError(f"{where}: not JSON: {exc}") from exc
    if not isinstance(data, dict) or KEY not in data:
        raise ValueError(f"{where}: not a credibility model (expected a JSON object with "
                         f"{KEY!r}; write one with `credrank credibility fit`)")
    version = _need(data, KEY, int, where)
    if version != FORMAT:
        raise ValueError(f"{where}: field {KEY!r}: this credrank reads format {FORMAT}, "
                         f"got {version}")
    unknown = sorted(set(data) - {KEY, *_FIELDS})
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
    for name in _FIELDS:
        _need(data, name, str if name == "created_by" else
              (int, float) if name == "floor" else dict, where)
    floor = _number(data, "floor", where, 0.0, 1.0)

    cfg = data["config"]
    groups = _need(cfg, "groups", list, f"{where}: config")
    if not groups or not set(groups) <= set(GROUPS) or len(set(groups)) != len(groups):
        raise ValueError(f"{where}: config: field 'groups': expected distinct names among "
                         f"{', '.join(GROUPS)}, got {groups!r}")
    groups = tuple(g for g in GROUPS if g in groups)
    config = Config(groups, _number(cfg, "l2", f"{where}: config", 0.0))

    feats = data["features"]
    fw = f"{where}: features"
    if _need(feats, "groups", list, fw) != list(config.groups):
        raise ValueError(f"{fw}: field 'groups': expected {list(config.groups)} (the config's)"
                         f", got {feats['groups']!r}")
    _names(feats, "cues", CUE_NAMES, fw)
    _names(feats, "url", URL_NAMES, fw)
    if _need(feats, "cue_patterns_sha256", str, fw) != cue_patterns_hash():
        raise ValueError(f"{fw}: field 'cue_patterns_sha256': the cue patterns changed since "
                         "the model was fitted; refit the model")
    head_words = int(_need(feats, "head_words", int, fw))
    if head_words < 1:
        raise ValueError(f"{fw}: field 'head_words': expected an integer >= 1, got {head_words}")

    emb = data["embedder"]
    ew = f"{where}: embedder"
    embedder_name = _need(emb, "name", str, ew)
    embedder_dim = int(_need(emb, "dim", int, ew))
    if embedder_dim < 1:
        raise ValueError(f"{ew}: field 'dim': expected an integer >= 1, got {embedder_dim}")

    width = (len(CUE_NAMES) * ("cues" in groups) + len(URL_NAMES) * ("url" in groups)
             + embedder_dim * ("embedding" in groups))
    lw = f"{where}: logistic"
    lr = data["logistic"]
    logistic = LogisticModel(weights=_vector(lr, "weights", width, lw),
                             bias=_number(lr, "bias", lw),
                             mean=_vector(lr, "mean", width, lw),
                             scale=_vector(lr, "scale", width, lw, positive=True),
                             l2=_number(lr, "l2", lw, 0.0))

    tw = f"{where}: training"
    tr = data["training"]
    sha = _need(tr, "sha256", str, tw)
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise ValueError(f"{tw}: field 'sha256': expected 64 hex digits, got {sha!r}")
    for name in ("n_pages", "n_groups"):
        if _need(tr, name, int, tw) < 1:
            raise ValueError(f"{tw}: field {name!r}: expected an integer >= 1, got {tr[name]}")
    if _need(tr, "group_by", str, tw) not in ("topic", "host"):
        raise ValueError(f"{tw}: field 'group_by': expected topic or host, got "
                         f"{tr['group_by']!r}")
    return SavedCredibilityModel(where, data, config, logistic, embedder_name, embedder_dim,
                                 head_words, floor)
