"""Greedy generation with (and without) the CrAM intervention (chapter 35.5).

:func:`cram_generate` tokenises the rendered prompt once
(:func:`~credrank.cram.multipliers.prompt_token_multipliers`: the ids the model sees and the
per-token multipliers from the passages' scores), activates
:func:`~credrank.cram.attention.reweight` on the selected heads and decodes greedily with
``model.generate`` (``do_sample=False``; generated tokens get multiplier 1). The naive baseline
(:func:`naive_generate`) is the very same call with no heads: inside :func:`reweight` with no
heads every layer runs the family's stock eager attention, so the baseline and CrAM differ only
in the selected heads (never in the attention backend, e.g. SDPA vs eager).

:func:`cram_generate_variants` decodes several variants of *one* prompt in one batch — the
same tokens, each row with its own passage scores and its own heads (an empty head list is
the naive baseline), through ``reweight(..., row_heads=...)``: the rows have equal length, so
no padding is involved, and a finished row is padded with the pad token while the others go on.
A row of a batch can differ from the same call at batch 1 by float rounding only (the batched
matrix products reduce in another order), which can flip a greedy choice between two tokens
whose logits tie to rounding.

Declared policies: :func:`cram_generate` runs batch 1; the prompt is never truncated; with no
passages (the "no context" baseline) every multiplier is 1; the output is the decoded new
tokens with special tokens removed, stripped. Needs torch and transformers (imported lazily).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from credrank.cram.headsfile import ModelInfo
from credrank.cram.multipliers import (
    DEFAULT_FLOOR,
    DocumentMultipliers,
    encode_with_offsets,
    prompt_token_multipliers,
)

DEFAULT_MAX_NEW_TOKENS = 24


@dataclass(frozen=True)
class GenerationReport:
    """What one :func:`cram_generate` call did.

    ``cram``: the :class:`~credrank.cram.attention.CramReport` (rows reweighted, fallbacks);
    ``documents``: the per-passage multipliers and their policy (``None`` without passages);
    ``heads``: the heads used (empty: the naive baseline).
    """

    heads: tuple[tuple[int, int], ...]
    documents: DocumentMultipliers | None
    token_spans: tuple[tuple[int, int], ...]
    prompt_tokens: int
    new_tokens: int
    seconds: float
    cram: Any

    def to_json(self) -> dict[str, Any]:
        docs = self.documents
        return {"heads": [list(h) for h in self.heads],
                "multipliers": list(docs.values) if docs else [],
                "policy": docs.policy if docs else "no passages",
                "zero_range": docs.zero_range if docs else None,
                "token_spans": [list(s) for s in self.token_spans],
                "prompt_tokens": self.prompt_tokens, "new_tokens": self.new_tokens,
                "seconds": round(self.seconds, 3),
                "cram": {"calls": self.cram.calls, "rows": self.cram.rows,
                         "fallback_rows": self.cram.fallback_rows,
                         "summary": self.cram.summary()}}


def model_info(model: Any, name: str) -> ModelInfo:
    """The :class:`~credrank.cram.headsfile.ModelInfo` of a white-box ``model`` registered as
    ``name`` (raises :class:`~credrank.cram.models.WhiteBoxError` for any other model)."""
    from credrank.cram.models import check_white_box

    box = check_white_box(model)
    return ModelInfo(name=name, family=str(getattr(model.config, "model_type", "unknown")),
                     n_layers=box.num_layers, n_heads=box.num_heads)


def _greedy(model: Any, tokenizer: Any, input_ids: Any, max_new_tokens: int) -> Any:
    """``model.generate`` greedy over unpadded ``input_ids`` (pad: the tokenizer's pad token,
    else its end-of-sequence token), without gradients."""
    import torch

    pad = getattr(tokenizer, "pad_token_id", None)
    eos = getattr(tokenizer, "eos_token_id", None)
    with torch.no_grad():
        return model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                              max_new_tokens=max_new_tokens, do_sample=False,
                              temperature=None, top_p=None, top_k=None,
                              pad_token_id=pad if pad is not None else eos)


def cram_generate(model: Any, tokenizer: Any, prompt: str,
                  char_spans: Sequence[tuple[int, int]], scores: Sequence[float],
                  heads: Sequence[tuple[int, int]], *, floor: float = DEFAULT_FLOOR,
                  max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                  add_special_tokens: bool = True) -> tuple[str, GenerationReport]:
    """Greedy answer to ``prompt`` with CrAM on ``heads`` (empty: the naive baseline).

    ``char_spans[d]`` / ``scores[d]``: passage ``d``'s span in ``prompt``
    (:func:`credrank.cram.prompt.render_prompt`) and its raw credibility score for this
    query; multipliers by per-query min-max with ``floor``. ``add_special_tokens`` must be the
    rendered prompt's (:attr:`~credrank.cram.prompt.RenderedPrompt.add_special_tokens`).
    """
    import torch

    from credrank.cram.attention import reweight

    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) \
            or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens: expected an integer >= 1, got {max_new_tokens!r}")
    start = time.perf_counter()
    if char_spans:
        pm = prompt_token_multipliers(tokenizer, prompt, char_spans, scores, floor=floor,
                                      add_special_tokens=add_special_tokens)
        ids, vec, docs, spans = pm.input_ids, pm.multipliers, pm.documents, pm.token_spans
    else:
        if len(scores):
            raise ValueError(f"got no passage spans but {len(scores)} scores")
        ids, _ = encode_with_offsets(tokenizer, prompt, add_special_tokens=add_special_tokens)
        vec, docs, spans = np.ones(len(ids)), None, ()
    if not ids:
        raise ValueError("prompt: tokenised to no tokens")
    input_ids = torch.tensor([ids], dtype=torch.long)
    with reweight(model, list(heads), torch.as_tensor(vec, dtype=torch.float32)) as report:
        out = _greedy(model, tokenizer, input_ids, max_new_tokens)
    new = out[0, input_ids.shape[1]:]
    text = tokenizer.decode(new, skip_special_tokens=True).strip()
    return text, GenerationReport(heads=tuple((int(a), int(b)) for a, b in heads),
                                  documents=docs, token_spans=tuple(spans),
                                  prompt_tokens=len(ids), new_tokens=int(new.numel()),
                                  seconds=time.perf_counter() - start, cram=report)


def cram_generate_variants(model: Any, tokenizer: Any, prompt: str,
                           char_spans: Sequence[tuple[int, int]],
                           variants: Sequence[tuple[Sequence[float], Sequence[tuple[int, int]]]],
                           *, floor: float = DEFAULT_FLOOR,
                           max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                           add_special_tokens: bool = True) -> list[tuple[str, Any]]:
    """Greedy answers to one ``prompt`` under several ``(scores, heads)`` variants, one batch
    (module docstring). Returns ``(text, cram report of the batch)`` per variant, in order."""
    import torch

    from credrank.cram.attention import reweight

    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) \
            or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens: expected an integer >= 1, got {max_new_tokens!r}")
    if not variants:
        raise ValueError("variants: expected at least one (scores, heads) pair")
    if not char_spans:
        raise ValueError("cram_generate_variants needs passage spans (use cram_generate for a "
                         "prompt without passages)")
    ids: tuple[int, ...] | None = None
    rows = []
    for scores, _ in variants:
        pm = prompt_token_multipliers(tokenizer, prompt, char_spans, scores, floor=floor,
                                      add_special_tokens=add_special_tokens)
        ids = pm.input_ids if ids is None else ids
        rows.append(np.asarray(pm.multipliers, dtype=np.float32))
    assert ids is not None
    input_ids = torch.tensor([ids] * len(variants), dtype=torch.long)
    mult = torch.as_tensor(np.stack(rows), dtype=torch.float32)
    row_heads = [list(heads) for _, heads in variants]
    with reweight(model, None, mult, row_heads=row_heads) as report:
        out = _greedy(model, tokenizer, input_ids, max_new_tokens)
    return [(tokenizer.decode(out[r, len(ids):], skip_special_tokens=True).strip(), report)
            for r in range(len(variants))]


def naive_generate(model: Any, tokenizer: Any, prompt: str, *,
                   max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                   add_special_tokens: bool = True) -> tuple[str, GenerationReport]:
    """The baseline: :func:`cram_generate` with no heads (stock eager attention everywhere)."""
    return cram_generate(model, tokenizer, prompt, (), (), (), max_new_tokens=max_new_tokens,
                         add_special_tokens=add_special_tokens)
