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

Loading validates every field and names the file and the field; :func:`check_model` refuses a
heads file written for another model (its name or its shape), naming both. The heads are only
meaningful with the prompt template they were calibrated with; a mismatch is refused by
:func:`check_template`.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT_KEY = "credrank_cram_heads"
FORMAT_VERSION = 1


class HeadsFileError(ValueError):
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


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (the calibration data's fingerprint)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _get(doc: dict[str, Any], key: str, where: str, kinds: Any, what: str) -> Any:
    if key not in doc:
        raise HeadsFileError(f"{where}: field {key!r} is missing (expected {what})")
    value = doc[key]
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise HeadsFileError(f"{where}: field {key!r}: expected {what}, got {value!r}")
    if not isinstance(value, kinds):
        raise HeadsFileError(f"{where}: field {key!r}: expected {what}, got "
                             f"{type(value).__name__}")
    return value


def _matrix(value: Any, where: str, key: str, n_layers: int, n_heads: int) -> list[list[float]]:
    ok = isinstance(value, list) and len(value) == n_layers and all(
        isinstance(row, list) and len(row) == n_heads and all(
            v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in row)
        for row in value)
    if not ok:
        raise HeadsFileError(f"{where}: field {key!r}: expected {n_layers} rows (layers) of "
                             f"{n_heads} numbers (heads)")
    return [[float("nan") if v is None else float(v) for v in row] for row in value]


def parse_heads(doc: Any, where: str) -> HeadsFile:
    """Validate a heads JSON document (``where`` names it in errors)."""
    if not isinstance(doc, dict):
        raise HeadsFileError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    version = doc.get(FORMAT_KEY)
    if version != FORMAT_VERSION:
        raise HeadsFileError(f"{where}: field {FORMAT_KEY!r}: expected {FORMAT_VERSION} (a "
                             f"credrank CrAM heads file), got {version!r}")
    m = _get(doc, "model", where, dict, "an object with name, family, n_layers, n_heads")
    mw = f"{where}: model"
    info = ModelInfo(name=_get(m, "name", mw, str, "a string"),
                     family=_get(m, "family", mw, str, "a string"),
                     n_layers=_get(m, "n_layers", mw, int, "an integer"),
                     n_heads=_get(m, "n_heads", mw, int, "an integer"))
    if info.n_layers < 1 or info.n_heads < 1:
        raise HeadsFileError(f"{mw}: n_layers and n_heads must be >= 1, got {info.n_layers}, "
                             f"{info.n_heads}")
    heads_raw = _get(doc, "heads", where, list, "a list of [layer, head] pairs")
    heads: list[tuple[int, int]] = []
    for pair in heads_raw:
        if not (isinstance(pair, list) and len(pair) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) for v in pair)
                and 0 <= pair[0] < info.n_layers and 0 <= pair[1] < info.n_heads):
            raise HeadsFileError(f"{where}: field 'heads': {pair!r} is not a [layer, head] pair "
                                 f"within {info.n_layers} layers × {info.n_heads} heads")
        heads.append((pair[0], pair[1]))
    if len(set(heads)) != len(heads):
        raise HeadsFileError(f"{where}: field 'heads': a (layer, head) pair repeats")
    ie = _matrix(_get(doc, "ie", where, list, "a matrix"), where, "ie", info.n_layers,
                 info.n_heads)
    ie_log_raw = doc.get("ie_log")
    ie_log = None if ie_log_raw is None else _matrix(ie_log_raw, where, "ie_log", info.n_layers,
                                                     info.n_heads)
    floor = _get(doc, "floor", where, int | float, "a number in (0, 1]")
    if not 0 < floor <= 1:
        raise HeadsFileError(f"{where}: field 'floor': expected a number in (0, 1], got {floor}")
    counts = {k: _get(doc, k, where, int, "an integer >= 0") for k in ("n_calib", "n_valid",
                                                                        "seed")}
    if counts["n_calib"] < 0 or counts["n_valid"] < 0:
        raise HeadsFileError(f"{where}: fields 'n_calib' / 'n_valid' must be >= 0")
    ids = {}
    for key in ("calibration_ids", "validation_ids"):
        value = doc.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise HeadsFileError(f"{where}: field {key!r}: expected a list of question ids")
        ids[key] = tuple(value)
    extra = doc.get("extra", {})
    if not isinstance(extra, dict):
        raise HeadsFileError(f"{where}: field 'extra': expected an object")
    return HeadsFile(
        model=info,
        prompt_template=_get(doc, "prompt_template", where, str, "a string"),
        heads=tuple(heads), ie=ie, ie_log=ie_log,
        validation_curve=_get(doc, "validation_curve", where, list, "a list"),
        n_calib=counts["n_calib"], n_valid=counts["n_valid"],
        data=_get(doc, "data", where, str, "a string"),
        data_sha256=_get(doc, "data_sha256", where, str, "a hex string"),
        floor=float(floor), seed=counts["seed"], extra=extra, **ids)


def save_heads(path: str | Path, heads: HeadsFile) -> Path:
    """Write ``heads`` to ``path`` (JSON, atomically: a temporary file then a rename)."""
    path = Path(path)
    doc = heads.to_json()
    tmp = path.with_name(path.name + ".partial")
    try:
        tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def load_heads(path: str | Path, *, model: ModelInfo | None = None,
               prompt_template: str | None = None) -> HeadsFile:
    """Read and validate a heads file; with ``model`` (and ``prompt_template``) also refuse it
    when it was calibrated for another model or prompt (:func:`check_model`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HeadsFileError(f"{path}: cannot read the heads file: {exc}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HeadsFileError(f"{path}: not JSON ({exc})") from exc
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
