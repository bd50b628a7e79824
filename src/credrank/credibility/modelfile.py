"""The credibility model file (JSON, ``"credrank_credibility_model": 2``; docs/json.md).

:func:`model_document` writes what a fitted :class:`~credrank.credibility.model.CredibilityModel`
needs to predict again — the feature names and their fingerprint, the configuration, the
logistic weights, bias, mean and scale, the embedder name and dimension — with its provenance:
the training-data hash, pages, groups, the grouping, the CV metrics, the default floor, the
credrank version and (format 2) the ``provenance`` table of :mod:`credrank.learn.modelfile`
(estimator, selection rule, folds, seed, resamples, the configurations searched).
:func:`load_model` reads format 1 (no ``provenance``) and format 2 with the shared reader
(:class:`~credrank.learn.modelfile.ModelFileFormat`: the hardened
:func:`credrank.core.structured.read_structured`, the header, the format's declared schema,
:data:`MODEL_SCHEMA` for format 2), then checks the fields that depend on each other, and
returns a :class:`SavedCredibilityModel`, a ``(texts, urls) -> P(credible)`` callable for
:class:`~credrank.stages.credibility.LearnedCredibilityPrior`. Every problem is a
:class:`ModelFileError` (a ``ValueError``) naming the file, the key path, what was expected and
what came: ``model.json: logistic.scale[3]: expected a finite number > 0, got 0``.

A model reads the embedder of the index it was fitted on: :meth:`SavedCredibilityModel.check_store`
refuses an index whose manifest names another embedder (both named in the error).

``features.embedding_source`` (optional, ``head`` when absent: every file written before it)
says where the ``embedding`` group comes from (:mod:`credrank.credibility.features`):
``document`` is the index's stored vector. :attr:`SavedCredibilityModel.key` fingerprints
everything ``P(credible)`` depends on (features, configuration, weights, embedder): the
``credibility_key`` an index-time score is stored with (:mod:`credrank.credibility.indexed`),
so a refitted model (new weights) is a new key and rescores.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.embedder import Embedder
from credrank.core.errors import FileFormatError
from credrank.core.logistic import LogisticModel
from credrank.core.schema import Field, Integer, ListOf, Nullable, Number, Table, Text, got
from credrank.credibility.features import (
    CUE_NAMES,
    EMBEDDING_SOURCES,
    GROUPS,
    URL_NAMES,
    CredibilityFeaturizer,
    cue_patterns_hash,
)
from credrank.credibility.labels import GROUP_BY
from credrank.credibility.model import Config, CredibilityModel
from credrank.learn.modelfile import (
    EMBEDDER,
    SHA256,
    ModelFileFormat,
    check_sha256,
    logistic_document,
    logistic_model,
    logistic_schema,
    trained_on,
    with_provenance,
)

KEY = "credrank_credibility_model"
#: the default floor of ``λ = floor + (1 − floor) · p`` written to a new model file
DEFAULT_FLOOR = 0.3


def _absolute(path: str | Path) -> str:
    """``path`` made absolute (a relative ``labels.csv`` meant nothing once the model file
    was moved)."""
    return str(Path(path).expanduser().resolve())


def model_document(model: CredibilityModel, *, embedder_name: str, embedder_dim: int,
                   training_sha256: str, n_pages: int, n_groups: int, group_by: str,
                   metrics: Mapping[str, Any], provenance: Mapping[str, Any],
                   floor: float = DEFAULT_FLOOR, labels: Sequence[str] = (),
                   index: str | None = None, groups: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON document of a fitted ``model`` (module docstring), in the current format;
    ``labels`` (the labels files, as given), ``index`` (the index folder its pages came
    from) and ``groups`` (the topics or hosts judged, written sorted) say what data the
    model saw: a model fitted on labels of a data set is not label-free for it."""
    if model.model is None:
        raise ValueError("model: not fitted; call fit() first")
    feat = model.featurizer
    return MODEL_FILE.document({
        "features": {"groups": list(model.config.groups), "cues": list(CUE_NAMES),
                     "url": list(URL_NAMES), "head_words": feat.head_words,
                     "cue_patterns_sha256": cue_patterns_hash(),
                     **({} if feat.embedding_source == "head"
                        else {"embedding_source": feat.embedding_source})},
        "config": model.config.to_dict(),
        "logistic": logistic_document(model.model),
        "embedder": {"name": embedder_name, "dim": int(embedder_dim)},
        "training": {"sha256": training_sha256, "n_pages": int(n_pages),
                     "n_groups": int(n_groups), "group_by": group_by,
                     "groups": sorted({str(g) for g in groups}),
                     # absolute: which files it saw, wherever the model is read
                     "labels": [_absolute(x) for x in labels],
                     "index": None if index is None else _absolute(index)},
        "metrics": dict(metrics),
        "floor": float(floor),
    }, provenance)


def save_model(path: str | Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` to ``path`` atomically (the old file or the new one, never half)."""
    MODEL_FILE.save(path, document)


class ModelFileError(FileFormatError):
    """A credibility model file that cannot be used: the message names the file, the key path,
    what was expected and what came."""


_GROUP_LIST = ListOf(Text(choices=GROUPS), min_len=1, unique=True)

#: format 1: every key, its type and range; unknown keys are refused everywhere but in the
#: free-form ``metrics`` table. What depends on another field (the vector lengths, the feature
#: names, the hashes) is checked after it, in :func:`load_model`.
MODEL_SCHEMA_V1 = Table({
    KEY: Field(Integer()),
    "created_by": Field(Text(allow_empty=True)),
    "features": Field(Table({
        "groups": Field(_GROUP_LIST),
        "cues": Field(ListOf(Text(allow_empty=True))),
        "url": Field(ListOf(Text(allow_empty=True))),
        "head_words": Field(Integer(1)),
        "cue_patterns_sha256": Field(SHA256),
        "embedding_source": Field(Text(choices=EMBEDDING_SOURCES), default="head"),
    })),
    "config": Field(Table({"groups": Field(_GROUP_LIST), "l2": Field(Number(0))})),
    "logistic": Field(logistic_schema(Number(0))),
    "embedder": Field(EMBEDDER),
    "training": Field(Table({
        "sha256": Field(SHA256),
        "n_pages": Field(Integer(1)),
        "n_groups": Field(Integer(1)),
        "group_by": Field(Text(choices=GROUP_BY)),
        # what data the model saw (files written before these keys: unknown, [] and null)
        "labels": Field(ListOf(Text()), required=False),
        "index": Field(Nullable(Text()), required=False),
        "groups": Field(ListOf(Text(allow_empty=True)), required=False),
    })),
    "metrics": Field(Table(extra=True)),
    "floor": Field(Number(0, 1)),
}, what="a credibility model (a JSON object)")
#: the model file's structure (docs/json.md), format 2: format 1 and ``provenance``
MODEL_SCHEMA = with_provenance(MODEL_SCHEMA_V1)
#: the credibility model file: formats 1 and 2 are read, 2 is written
MODEL_FILE = ModelFileFormat(KEY, "credibility model", "credrank credibility fit",
                             ModelFileError, {1: MODEL_SCHEMA_V1, 2: MODEL_SCHEMA})
FORMAT = MODEL_FILE.current


def _fail(where: str, path: str, expected: str, value: Any) -> ModelFileError:
    return ModelFileError(f"{where}: {path}: expected {expected}, got {got(value)}")


class LazyEmbedder:
    """The embedder ``name`` (``dim`` dimensions), loaded (:func:`credrank.index.embed.
    get_embedder`) at its first :meth:`embed` call: a model that reads stored vectors never
    loads it."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, int(dim)
        self._inner: Embedder | None = None

    @property
    def loaded(self) -> bool:
        """Whether the embedder was loaded."""
        return self._inner is not None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._inner is None:
            from credrank.index.embed import get_embedder

            inner = get_embedder(self.name)
            if int(getattr(inner, "dim", -1)) != self.dim:
                raise ValueError(f"embedder {self.name!r} gives {getattr(inner, 'dim', '?')}-"
                                 f"dimensional vectors; the model needs {self.dim}")
            self._inner = inner
        return self._inner.embed(texts)


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
    embedding_source: str = "head"
    _model: CredibilityModel | None = None

    @property
    def version(self) -> int:
        """The file format version."""
        return int(self.document[KEY])

    @property
    def key(self) -> str:
        """What computes this model's ``P(credible)``: ``credibility/<embedding source>/
        <embedder>/<16 hex digits>``, the digits a sha256 of the features, the configuration,
        the logistic weights and the embedder (not the floor, applied at search time, nor
        the training provenance). The ``credibility_key`` of index-time scores."""
        doc = self.document
        used = {"features": doc["features"], "config": doc["config"],
                "logistic": doc["logistic"], "embedder": doc["embedder"],
                "embedding_source": self.embedding_source}
        digest = hashlib.sha256(json.dumps(used, sort_keys=True).encode("utf-8")).hexdigest()
        return f"credibility/{self.embedding_source}/{self.embedder_name}/{digest[:16]}"

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
        """The predicting model (made once; later calls return it whatever ``embedder``
        they pass); ``embedder`` defaults to ``get_embedder(embedder name)``, loaded when
        the model first embeds a page (:class:`LazyEmbedder`: never for a ``document`` model
        given the stored vectors), and is needed only when the configuration uses the
        ``embedding`` group."""
        if self._model is not None:
            return self._model
        emb: Embedder | None = None
        if "embedding" in self.config.groups:
            if embedder is None:  # loaded when first asked to embed: a model reading stored
                embedder = LazyEmbedder(self.embedder_name, self.embedder_dim)  # vectors never
            name = getattr(embedder, "name", None)
            if name is not None and name != self.embedder_name:
                raise ValueError(f"{self.path}: the credibility model needs embedder "
                                 f"{self.embedder_name!r}; got {name!r}")
            if int(getattr(embedder, "dim", -1)) != self.embedder_dim:
                raise ValueError(f"{self.path}: the credibility model needs "
                                 f"{self.embedder_dim}-dimensional vectors; embedder "
                                 f"{self.embedder_name!r} gives {getattr(embedder, 'dim', '?')}")
            emb = embedder
        model = CredibilityModel(CredibilityFeaturizer(emb, head_words=self.head_words,
                                                       embedding_source=self.embedding_source),
                                 self.config, self.logistic)
        self._model = model
        return model

    @property
    def needs_embedder(self) -> bool:
        """Whether predicting may call the embedder: the ``embedding`` group from the page's
        head (always), or from the document when no stored vector is given."""
        return "embedding" in self.config.groups

    def __call__(self, texts: Sequence[str], urls: Sequence[str | None], *,
                 titles: Sequence[str | None] | None = None,
                 vectors: Sequence[Any] | np.ndarray | None = None) -> np.ndarray:
        """``P(credible)`` per page (:meth:`CredibilityModel.predict`; ``titles`` and the
        index's stored ``vectors`` feed a ``document`` embedding source)."""
        return self.bind().predict(texts, urls, titles=titles, vectors=vectors)

    def summary(self) -> dict[str, Any]:
        """What ``describe()`` and the stage's config report."""
        return {"model": self.path, "version": self.version,
                "created_by": self.document["created_by"], "config": self.config.to_dict(),
                "embedder": self.embedder_name, "embedding_source": self.embedding_source,
                "key": self.key, "trained_on": self.training_data(None)}

    def training_data(self, searched: str | Path | None) -> dict[str, Any]:
        """What data the model saw (:func:`credrank.learn.modelfile.trained_on`: labels files
        and index by name, groups and pages, the training sha256) and whether its index is
        ``searched``."""
        t = self.document["training"]
        return trained_on(files=t.get("labels") or [], index=t.get("index"),
                          sha256=t["sha256"], searched=searched,
                          counts={"n_groups": t["n_groups"], "n_pages": t["n_pages"]})


def load_model(path: str | Path) -> SavedCredibilityModel:
    """Read and validate the model file at ``path`` (format 1 or 2): the hardened JSON reader
    (:func:`~credrank.core.structured.read_structured`: UTF-8, bounded size and nesting, no
    NaN/Infinity), the format marker, the format's schema, then the cross-field checks.
    Every problem is a :class:`ModelFileError` naming the file and the key path."""
    _, doc = MODEL_FILE.read(path)
    return _saved(str(path), doc)


def _saved(where: str, doc: dict[str, Any]) -> SavedCredibilityModel:
    """The cross-field checks of a schema-checked document, and the model it holds."""
    cfg, feats, lr = doc["config"], doc["features"], doc["logistic"]
    groups = tuple(g for g in GROUPS if g in cfg["groups"])
    if feats["groups"] != list(groups):
        raise _fail(where, "features.groups", f"{list(groups)} (the config's groups)",
                    feats["groups"])
    for name, expected in (("cues", CUE_NAMES), ("url", URL_NAMES)):
        if feats[name] != list(expected):
            raise ModelFileError(f"{where}: features.{name}: the model's feature names differ "
                                 f"from this credrank's ({len(feats[name])} vs {len(expected)} "
                                 "names); refit the model")
    check_sha256(feats["cue_patterns_sha256"], where, "features.cue_patterns_sha256",
                 ModelFileError)
    if feats["cue_patterns_sha256"] != cue_patterns_hash():
        raise ModelFileError(f"{where}: features.cue_patterns_sha256: the cue patterns changed "
                             "since the model was fitted; refit the model")
    check_sha256(doc["training"]["sha256"], where, "training.sha256", ModelFileError)
    dim = doc["embedder"]["dim"]
    width = (len(CUE_NAMES) * ("cues" in groups) + len(URL_NAMES) * ("url" in groups)
             + dim * ("embedding" in groups))
    logistic = logistic_model(lr, width, where, ModelFileError,
                              f" of the groups {'+'.join(groups)}")
    return SavedCredibilityModel(where, doc, Config(groups, cfg["l2"]), logistic,
                                 doc["embedder"]["name"], dim, feats["head_words"],
                                 doc["floor"], feats["embedding_source"])
