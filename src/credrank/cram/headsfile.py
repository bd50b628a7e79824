"""The CrAM heads file: the calibrated (layer, head) selection of one model, as versioned JSON.

Written by ``credrank cram calibrate``, read by ``credrank cram answer`` and
``credrank bench cram-nq --model``. Shape (version 1)::

    {"credrank_cram_heads": 1,
     "model": {"name": "smollm2", "family": "llama", "n_layers": 30, "n_heads": 9},
     "prompt_template": "credrank-cram-qa-v1+chat",
     "heads": [[layer, head], ...],            # selected, in rank order
     "ie": [[...n_heads...] × n_layers],       # indirect effect per head (calibration set)
     "ie_log": [[...]] | null,
     "validation_curve": [...],                # choose_n_heads' curve, as JSON
     "n_calib": 100, "n_valid": 100, "data": "path", "data_sha256": "…",
     "floor": 0.1, "seed": 0,
     "calibration_ids": [...], "validation_ids": [...],
     "extra": {...}}

Loading (:func:`load_heads`) reads the file with the hardened reader of
:mod:`credrank.core.structured`, checks it against the declared :data:`HEADS_SCHEMA` and the
model's shape, and names the file, the key path, what was expected and what came (a
:class:`HeadsFileError`, a ``ValueError``); :func:`check_model` refuses a
heads file written for another model (its name or its shape), naming both. The heads are only
meaningful with the prompt template they were calibrated with; a mismatch is refused by
:func:`check_template`.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from credrank.core.errors import FileFormatError
from credrank.core.files import atomic_write_text
from credrank.core.schema import Field, Integer, ListOf, Nullable, Number, Table, Text, got
from credrank.core.structured import read_structured

FORMAT_KEY = "credrank_cram_heads"
FORMAT_VERSION = 1


class HeadsFileError(FileFormatError):
    """An invalid heads file, or one that does not fit the model / prompt in use."""


@dataclass(frozen=True)
class ModelInfo:
    """The model a heads file belongs to: the ``--model`` name, the transformers
    ``model_type`` and the attention shape."""

    name: str
    family: str
    n_layers: int
    n_heads: int


@dataclass(frozen=True)
class HeadsFile:
    """A parsed heads file (see the module docstring for the JSON)."""

    model: ModelInfo
    prompt_template: str
    heads: tuple[tuple[int, int], ...]
    ie: list[list[float]]
    ie_log: list[list[float]] | None
    validation_curve: list[Any]
    n_calib: int
    n_valid: int
    data: str
    data_sha256: str
    floor: float
    seed: int
    calibration_ids: tuple[str, ...] = ()
    validation_ids: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON document (validated on the way out, as on the way in)."""
        doc = {FORMAT_KEY: FORMAT_VERSION, "model": asdict(self.model),
               "prompt_template": self.prompt_template,
               "heads": [[int(a), int(b)] for a, b in self.heads],
               "ie": plain(self.ie), "ie_log": plain(self.ie_log),
               "validation_curve": plain(self.validation_curve),
               "n_calib": self.n_calib, "n_valid": self.n_valid, "data": self.data,
               "data_sha256": self.data_sha256, "floor": self.floor, "seed": self.seed,
               "calibration_ids": list(self.calibration_ids),
               "validation_ids": list(self.validation_ids), "extra": plain(self.extra)}
        parse_heads(doc, "<to be written>")
        return doc


def plain(value: Any) -> Any:
    """``value`` as JSON data: tuples → lists, numpy / torch scalars and arrays → numbers and
    lists, dataclasses → dicts; anything else that JSON cannot hold is an error."""
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return plain(value.tolist())
    if hasattr(value, "__dataclass_fields__"):
        return plain(asdict(value))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise HeadsFileError(f"heads file: cannot write a {type(value).__name__} ({value!r:.60})")


_MATRIX = ListOf(ListOf(Nullable(Number())))
_IDS = Field(ListOf(Text(allow_empty=True)), required=False)

#: the heads file's structure (module docstring): every key, its type and range; unknown keys
#: are refused everywhere but in the free-form ``extra`` table and in the points of
#: ``validation_curve``. What depends on the model's shape (the heads' range, the matrices'
#: size) is checked after it, in :func:`parse_heads`.
HEADS_SCHEMA = Table({
    FORMAT_KEY: Field(Integer()),
    "model": Field(Table({
        "name": Field(Text()),
        "family": Field(Text(allow_empty=True)),
        "n_layers": Field(Integer(1)),
        "n_heads": Field(Integer(1)),
    })),
    "prompt_template": Field(Text(allow_empty=True)),
    "heads": Field(ListOf(ListOf(Integer(0), length=2), unique=True)),
    "ie": Field(_MATRIX),
    "ie_log": Field(Nullable(_MATRIX), required=False),
    "validation_curve": Field(ListOf(Table({
        "n_heads": Field(Integer(0)),
        "mean_p_wrong": Field(Nullable(Number())),
    }, extra=True))),
    "n_calib": Field(Integer(0)),
    "n_valid": Field(Integer(0)),
    "data": Field(Text(allow_empty=True)),
    "data_sha256": Field(Text(allow_empty=True)),
    "floor": Field(Number(0, 1, open_high=True)),  # 1: every multiplier 1, CrAM off
    "seed": Field(Integer()),
    "calibration_ids": _IDS,
    "validation_ids": _IDS,
    "extra": Field(Table(extra=True), required=False),
}, what="a heads file (a JSON object)")


def _matrix(value: list[list[float | None]], where: str, key: str, n_layers: int,
            n_heads: int) -> list[list[float]]:
    """A schema-checked matrix of the model's shape (``null`` → NaN)."""
    if len(value) != n_layers:
        raise HeadsFileError(f"{where}: {key}: expected {n_layers} rows (layers) of {n_heads} "
                             f"numbers (heads), got {len(value)} rows")
    for i, row in enumerate(value):
        if len(row) != n_heads:
            raise HeadsFileError(f"{where}: {key}[{i}]: expected {n_heads} numbers (heads), "
                                 f"got {len(row)}")
    return [[float("nan") if v is None else v for v in row] for row in value]


def parse_heads(doc: Any, where: str) -> HeadsFile:
    """Validate a parsed heads document (``where`` names it in errors): the format marker,
    :data:`HEADS_SCHEMA`, then the checks against the model's shape. Every problem is a
    :class:`HeadsFileError` naming ``where``, the key path, what was expected and what came."""
    if not isinstance(doc, dict) or FORMAT_KEY not in doc:
        raise HeadsFileError(f"{where}: not a heads file (expected a JSON object with "
                             f"{FORMAT_KEY!r}, got {got(doc)}; write one with `credrank cram "
                             "calibrate`)")
    version = Integer().check(doc[FORMAT_KEY], where, error=HeadsFileError, at=FORMAT_KEY)
    if version != FORMAT_VERSION:
        raise HeadsFileError(f"{where}: {FORMAT_KEY}: expected {FORMAT_VERSION} (a credrank "
                             f"CrAM heads file of this version), got {version}")
    d = HEADS_SCHEMA.check(doc, where, error=HeadsFileError)
    info = ModelInfo(**d["model"])
    for i, (layer, head) in enumerate(d["heads"]):
        if layer >= info.n_layers or head >= info.n_heads:
            raise HeadsFileError(f"{where}: heads[{i}]: expected a (layer, head) pair within "
                                 f"{info.n_layers} layers × {info.n_heads} heads, got "
                                 f"{[layer, head]}")
    ie_log = d.get("ie_log")
    return HeadsFile(
        model=info, prompt_template=d["prompt_template"],
        heads=tuple((layer, head) for layer, head in d["heads"]),
        ie=_matrix(d["ie"], where, "ie", info.n_layers, info.n_heads),
        ie_log=None if ie_log is None else _matrix(ie_log, where, "ie_log", info.n_layers,
                                                   info.n_heads),
        validation_curve=d["validation_curve"], n_calib=d["n_calib"], n_valid=d["n_valid"],
        data=d["data"], data_sha256=d["data_sha256"], floor=d["floor"], seed=d["seed"],
        calibration_ids=tuple(d.get("calibration_ids", ())),
        validation_ids=tuple(d.get("validation_ids", ())), extra=d.get("extra", {}))


def save_heads(path: str | Path, heads: HeadsFile) -> Path:
    """Write ``heads`` to ``path`` (JSON, atomically: :func:`~credrank.core.files.
    atomic_write_text`, which refuses to replace a device, a pipe or a folder)."""
    path = Path(path)
    atomic_write_text(path, json.dumps(heads.to_json(), indent=1) + "\n")
    return path


def load_heads(path: str | Path, *, model: ModelInfo | None = None,
               prompt_template: str | None = None) -> HeadsFile:
    """Read and validate a heads file; with ``model`` (and ``prompt_template``) also refuse it
    when it was calibrated for another model or prompt (:func:`check_model`).

    The file is read by the hardened JSON reader
    (:func:`~credrank.core.structured.read_structured`: UTF-8, bounded size and nesting, no
    NaN/Infinity or duplicate keys) and checked by :func:`parse_heads`; every problem is a
    :class:`HeadsFileError` naming the file."""
    path = Path(path)
    doc = read_structured(path, what="heads file", fmt="json", error=HeadsFileError)
    heads = parse_heads(doc, str(path))
    if model is not None:
        check_model(heads, model, str(path))
    if prompt_template is not None:
        check_template(heads, prompt_template, str(path))
    return heads


def check_model(heads: HeadsFile, model: ModelInfo, where: str = "heads file") -> None:
    """Refuse ``heads`` unless it was written for ``model`` (same name and attention shape)."""
    h = heads.model
    if (h.name, h.n_layers, h.n_heads) != (model.name, model.n_layers, model.n_heads):
        raise HeadsFileError(
            f"{where}: the heads were calibrated for model {h.name!r} ({h.family}, "
            f"{h.n_layers} layers × {h.n_heads} heads) but the model in use is {model.name!r} "
            f"({model.family}, {model.n_layers} layers × {model.n_heads} heads); calibrate "
            "this model with `credrank cram calibrate`")


def check_template(heads: HeadsFile, prompt_template: str, where: str = "heads file") -> None:
    """Refuse ``heads`` calibrated with another prompt template."""
    if heads.prompt_template != prompt_template:
        raise HeadsFileError(f"{where}: the heads were calibrated with the prompt template "
                             f"{heads.prompt_template!r} but the prompt in use is "
                             f"{prompt_template!r}")
