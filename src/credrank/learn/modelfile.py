"""The versioned model file of a learned stage (JSON): one reader and writer for every kind.

A model file is a JSON object whose *header* names its kind and format —
``{"credrank_<kind>_model": N, "created_by": "credrank VERSION", …}`` — followed by what the
kind needs to predict again (its features, configuration, the logistic weights, the embedder)
and its *training provenance*: ``training`` (the kind's data hash and counts), ``metrics``
(the cross-validation report) and, from format 2 on, ``provenance``: how the model was made
(:data:`PROVENANCE`: the estimator, the selection rule, the folds, the grouping, the seed, the
number of bootstrap resamples and the configurations searched).

:class:`ModelFileFormat` is one kind's file: its header key, the formats it reads (one
declared :class:`~credrank.core.schema.Table` per format: a new format adds a schema, the old
ones keep being read), the command that writes it and its error class. :meth:`~ModelFileFormat.
read` reads with the hardened reader (:func:`~credrank.core.structured.read_structured`:
UTF-8, bounded size and nesting, no NaN/Infinity, no duplicate keys), checks the header (not a
model of this kind; a format this credrank does not read, with a hint when it is newer) and
the format's schema; the kind then checks the fields that depend on each other. Every problem
is the kind's error (a :class:`~credrank.core.errors.FileFormatError`) naming the file, the
key path, what was expected and what came. :meth:`~ModelFileFormat.save` writes atomically
(the old file or the new one, never half).

The logistic block (:func:`logistic_document`, :func:`logistic_model`) is shared:
``P(y = 1 | x) = σ(bias + weights · (x − mean) / scale)`` over the kind's feature columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.errors import FileFormatError
from credrank.core.files import save_json
from credrank.core.logistic import LogisticModel
from credrank.core.schema import Field, Integer, ListOf, Number, Table, Text, got
from credrank.core.structured import read_structured

#: a SHA-256 as 64 lower-case hex digits (checked again by :func:`check_sha256`)
SHA256 = Text(what="64 hex digits")
#: the embedder block of a model file: the embedder's name and dimension
EMBEDDER = Table({"name": Field(Text()), "dim": Field(Integer(1))})

#: the training provenance of a format-2 model file (module docstring)
PROVENANCE = Table({
    "estimator": Field(Text()),
    "selection": Field(Text()),
    "cv": Field(Text()),
    "n_folds": Field(Integer(1)),
    "group_by": Field(Text()),
    "seed": Field(Integer(0)),
    "n_boot": Field(Integer(1)),
    "configs": Field(ListOf(Table(extra=True, what="a configuration (a table)"), min_len=1)),
}, what="the training provenance (a table)")


def created_by() -> str:
    """``"credrank VERSION"`` (``unknown`` for a source checkout that is not installed)."""
    try:
        return f"credrank {version('credrank')}"
    except PackageNotFoundError:  # a source checkout that is not installed
        return "credrank unknown"


def provenance(*, estimator: str, selection: str, cv: str, n_folds: int, group_by: str,
               seed: int, n_boot: int, configs: Sequence[Mapping[str, Any]]
               ) -> dict[str, Any]:
    """The ``provenance`` table (:data:`PROVENANCE`)."""
    return {"estimator": estimator, "selection": selection, "cv": cv, "n_folds": int(n_folds),
            "group_by": group_by, "seed": int(seed), "n_boot": int(n_boot),
            "configs": [dict(c) for c in configs]}


def same_folder(a: str | Path | None, b: str | Path | None) -> bool | None:
    """Whether two folders are one (compared resolved); ``None`` when either is unknown."""
    if a is None or b is None:
        return None
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def trained_on(*, files: Sequence[str], index: str | None, sha256: str,
               counts: Mapping[str, int], searched: str | Path | None) -> dict[str, Any]:
    """What data a model saw, as a search's ``settings`` say it (``trained_on``): its labels
    ``files`` and its training ``index`` by *name* (the file and folder names: settings are
    echoed by the service, which never shows a server path), the ``counts`` (groups or
    topics, pages or pairs), the training ``sha256``, and ``fitted_on_this_index``: whether
    ``index`` is the index ``searched`` (``None`` when either is unknown: a model that names
    no index, candidates from elsewhere). A model fitted on labels of the index it ranks is
    not label-free for that index."""
    return {"labels": [Path(f).name for f in files],
            "index": None if index is None else Path(index).name,
            **{k: int(v) for k, v in counts.items()}, "sha256": sha256,
            "fitted_on_this_index": same_folder(index, searched)}


def fitted_here_note(kind: str, seen: Mapping[str, Any]) -> str | None:
    """The note of a stage's ``info`` when its model was fitted on labels of pages of the
    index searched (``seen``: :func:`trained_on`), else ``None``."""
    if not seen.get("fitted_on_this_index"):
        return None
    files = ", ".join(seen.get("labels") or []) or "its labels"
    return (f"the {kind} model was fitted on labels ({files}) of pages of this index: its "
            "ranking of this index is not label-free")


def with_provenance(schema: Table) -> Table:
    """``schema`` with the required ``provenance`` table (a format-1 schema → format 2)."""
    return Table({**schema.fields, "provenance": Field(PROVENANCE)}, extra=schema.extra,
                 what=schema.what)


def logistic_schema(l2: Number) -> Table:
    """The ``logistic`` block (``weights``, ``bias``, ``mean``, ``scale`` > 0, ``l2``)."""
    return Table({
        "weights": Field(ListOf(Number())),
        "bias": Field(Number()),
        "mean": Field(ListOf(Number())),
        "scale": Field(ListOf(Number(0, open_low=True))),
        "l2": Field(l2),
    })


def logistic_document(model: LogisticModel) -> dict[str, Any]:
    """The ``logistic`` block of a fitted model."""
    return {"weights": model.weights.tolist(), "bias": float(model.bias),
            "mean": model.mean.tolist(), "scale": model.scale.tolist(), "l2": float(model.l2)}


def logistic_model(block: Mapping[str, Any], width: int, where: str,
                   error: type[FileFormatError], columns: str = "") -> LogisticModel:
    """The :class:`~credrank.core.logistic.LogisticModel` of a schema-checked ``logistic``
    block whose vectors must hold ``width`` numbers (``columns`` says which columns, for the
    message)."""
    vectors = {}
    for name in ("weights", "mean", "scale"):
        value = block[name]
        if len(value) != width:
            raise error(f"{where}: logistic.{name}: expected {width} numbers (one per feature "
                        f"column{columns}), got {len(value)}")
        vectors[name] = np.asarray(value, dtype=np.float64)
    return LogisticModel(weights=vectors["weights"], bias=float(block["bias"]),
                         mean=vectors["mean"], scale=vectors["scale"], l2=float(block["l2"]))


def check_sha256(value: str, where: str, at: str, error: type[FileFormatError]) -> str:
    """``value`` when it is 64 lower-case hex digits, else ``error`` naming ``at``."""
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise error(f"{where}: {at}: expected 64 hex digits, got {got(value)}")
    return value


@dataclass(frozen=True)
class ModelFileFormat:
    """One kind of model file (module docstring).

    ``schemas`` maps every format this credrank reads to its declared structure; the highest
    is the one written. ``what`` names the file in messages (``not a {what}``), ``command`` is
    the one that writes it, ``error`` the kind's error class; ``make_parents`` creates missing
    folders of the output path on :meth:`save`."""

    key: str
    what: str
    command: str
    error: type[FileFormatError]
    schemas: Mapping[int, Table]
    make_parents: bool = False

    @property
    def current(self) -> int:
        """The format written."""
        return max(self.schemas)

    def readable(self) -> str:
        """The formats read, in words (``1 or 2``)."""
        formats = [str(f) for f in sorted(self.schemas)]
        return formats[0] if len(formats) == 1 else f"{', '.join(formats[:-1])} or {formats[-1]}"

    def header(self) -> dict[str, Any]:
        """``{key: current format, "created_by": "credrank VERSION"}``."""
        return {self.key: self.current, "created_by": created_by()}

    def document(self, body: Mapping[str, Any], provenance: Mapping[str, Any]
                 ) -> dict[str, Any]:
        """The header, ``body`` and the ``provenance`` table: a current-format document."""
        return {**self.header(), **body, "provenance": dict(provenance)}

    def check(self, doc: Any, where: str) -> tuple[int, dict[str, Any]]:
        """``(format, cleaned document)``: the header, then the format's schema."""
        if not isinstance(doc, dict) or self.key not in doc:
            raise self.error(f"{where}: not a {self.what} (expected a JSON object with "
                             f"{self.key!r}, got {got(doc)}; write one with `{self.command}`)")
        fmt = Integer().check(doc[self.key], where, error=self.error, at=self.key)
        if fmt not in self.schemas:
            newer = " (written by a newer credrank?)" if fmt > self.current else ""
            raise self.error(f"{where}: {self.key}: expected {self.readable()} (the formats "
                             f"this credrank reads), got {fmt}{newer}")
        return fmt, self.schemas[fmt].check(doc, where, error=self.error)

    def read(self, path: str | Path) -> tuple[int, dict[str, Any]]:
        """Read and :meth:`check` the file at ``path`` (module docstring)."""
        doc = read_structured(path, what=self.what, fmt="json", error=self.error)
        return self.check(doc, str(path))

    def save(self, path: str | Path, document: Mapping[str, Any]) -> None:
        """Write ``document`` to ``path`` atomically (the old file or the new one, never
        half)."""
        target = Path(path)
        if self.make_parents and not target.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
        save_json(target, document, what=self.what)
