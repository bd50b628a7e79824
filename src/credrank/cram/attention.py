"""The CrAM attention intervention, registered through transformers' AttentionInterface.

For each selected (layer, head) pair, query row ``i`` and key token ``j`` (chapter 35.5)::

    a'_ij = a_ij c_j / Z_i,   Z_i = Σ_{k ∈ A_i} a_ik c_k     for j ∈ A_i,   a'_ij = 0 otherwise

where ``a_ij`` is the stock post-softmax weight, ``A_i`` the allowed (unmasked) keys of row
``i`` and ``c_j ∈ [0, 1]`` the key token's multiplier (``1`` outside documents). With every
``c_j > 0`` this is exactly ``softmax_j(logit_ij + log c_j)`` over the unmasked logits.

Implementation (no monkey-patching): :func:`cram_attention_forward` is registered under
:data:`CRAM_ATTENTION` with ``AttentionInterface`` and, for the masks, transformers' stock
``eager_mask`` with ``AttentionMaskInterface``. It calls the model family's own stock
``eager_attention_forward`` (found in the attention module's modeling module: Llama's and
Qwen2's softmax in float32, GPT-2's in the model dtype), so every unselected head — and every
head when nothing is selected or no :func:`reweight` context is active — is bit-identical to
``attn_implementation="eager"``. Only the selected heads' rows are recomputed from the stock
weights (in float32) and their outputs (``a' V``) replace the stock ones; the returned weights
(``output_attentions``) are the reweighted ones.

Declared policies:

* **Masks.** A key is allowed when the 4-D mask is ``True`` (boolean) or its additive bias is
  above ``finfo.min / 2`` (the eager mask uses ``finfo.min``; ``-inf`` counts as masked). Masked
  positions stay exactly zero. Rows with no allowed key at all (padding queries) are left as the
  stock computed them and are not counted.
* **Zero mass.** A row with allowed keys whose scaled mass ``Z_i`` is zero (all its allowed keys
  have ``c = 0``) keeps its original weights; it is counted in :class:`CramReport` (per layer),
  and leaving :func:`reweight` with any such row issues a :class:`CramFallbackWarning`. No NaN or
  inf is produced.
* **Cache / decoding.** Multipliers are indexed by absolute key position: when the key length
  exceeds the supplied vector (generated tokens, with or without the KV cache) the extra keys
  get ``1``; a shorter key length (chunked prefill) uses the leading part. Layers with sliding
  or chunked attention (``layer_types`` other than ``full_attention``) cannot be selected, as
  their cache positions are not absolute.
* **Batch.** ``multipliers`` is ``[batch, key_len]`` (or 1-d for batch 1). A batch of 1 is
  broadcast; a model batch that is a multiple of it (``num_return_sequences``, beams) repeats
  each row in place (``repeat_interleave``, as ``generate`` expands inputs).
* **Per-row heads.** ``row_heads`` (optional, one head list per multiplier row) lets row ``r``
  intervene on ``heads ∪ row_heads[r]`` only: a (row, head) pair outside that set keeps the
  stock output and weights bit-for-bit, even when the same head is reweighted in another row of
  the batch. This lets head selection (:mod:`credrank.cram.heads`) evaluate many single-head
  interventions in one forward pass. The row mask is broadcast to the model batch exactly as
  the multipliers are. Without ``row_heads`` the code path is the one described above.
* **Scope.** State lives in a :mod:`contextvars` variable set by :func:`reweight` and keyed by
  the model's attention modules: other models, other threads (contexts are not inherited by new
  threads) and code outside the ``with`` block see stock attention. Training-mode dropout is
  refused.
"""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.masking_utils import eager_mask

from credrank.cram.models import WhiteBox, check_white_box, stock_eager

CRAM_ATTENTION = "credrank_cram"


class CramError(ValueError):
    """Invalid CrAM request (heads, multipliers, batch) or an unsupported attention call."""


class CramFallbackWarning(UserWarning):
    """Some reweighted rows had zero scaled mass and kept their original attention."""


@dataclass
class CramReport:
    """Counts collected while a :func:`reweight` context is active.

    ``calls``: attention calls on layers with selected heads; ``rows``: query rows reweighted
    (batch × selected heads × queries, summed over calls); ``fallback_rows``: rows whose
    allowed keys all had ``c = 0`` and kept their original weights; ``fallback_by_layer``: the
    same per layer index.
    """

    calls: int = 0
    rows: int = 0
    fallback_rows: int = 0
    fallback_by_layer: dict[int, int] = field(default_factory=dict)

    def summary(self) -> str:
        """One line for logs and warnings."""
        layers = ", ".join(f"layer {k}: {v}" for k, v in sorted(self.fallback_by_layer.items()))
        tail = f" ({layers})" if layers else ""
        return (f"CrAM reweighted {self.rows} rows in {self.calls} attention calls; "
                f"{self.fallback_rows} rows had zero scaled mass and kept their original "
                f"attention{tail}")


def _expand_rows(t: torch.Tensor, batch: int, what: str) -> torch.Tensor:
    rows = t.shape[0]
    if rows == batch:
        return t
    if rows == 1:
        return t.expand(batch, *t.shape[1:])
    if batch % rows == 0:
        return t.repeat_interleave(batch // rows, dim=0)
    raise CramError(f"{what} have {rows} rows but the model batch is {batch}: give one "
                    "row per sequence (or one row for all)")


@dataclass
class _Activation:
    heads: dict[int, tuple[int, ...]]
    multipliers: torch.Tensor  # float32 [batch, prompt_len], on CPU until first use
    report: CramReport
    # per layer: bool [rows, len(heads[layer])], True where that row reweights that head
    row_masks: dict[int, torch.Tensor] | None = None
    # attribution patching: per layer, a strength t per selected head (0: stock, 1: CrAM)
    blend: dict[int, torch.Tensor] | None = None

    def row_mask(self, layer: int, batch: int, device: torch.device) -> torch.Tensor | None:
        if self.row_masks is None:
            return None
        m = self.row_masks[layer]
        if m.device != device:
            m = self.row_masks[layer] = m.to(device)
        return _expand_rows(m, batch, "row_heads")

    def key_multipliers(self, batch: int, key_len: int, device: torch.device) -> torch.Tensor:
        m = self.multipliers
        if m.device != device:
            m = self.multipliers = m.to(device)
        rows, length = m.shape
        if key_len > length:
            m = torch.cat([m, m.new_ones(rows, key_len - length)], dim=1)
        elif key_len < length:
            m = m[:, :key_len]
        return _expand_rows(m, batch, "multipliers")


_ACTIVE: contextvars.ContextVar[dict[int, tuple[_Activation, int]] | None] = \
    contextvars.ContextVar("credrank_cram_active", default=None)


def _allowed(attention_mask: torch.Tensor | None, key_len: int) -> torch.Tensor | None:
    """Boolean allowed-key mask broadcastable to ``[batch, heads, q, k]`` (None: all allowed)."""
    if attention_mask is None:
        return None
    mask = attention_mask[..., :key_len]
    if mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min / 2


def _reweight_heads(module: Any, layer: int, heads: tuple[int, ...], activation: _Activation,
                    query: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, out: torch.Tensor,
                    weights: torch.Tensor,
                    row_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n_heads, q_len, key_len = weights.shape
    if out.shape[:3] != (batch, q_len, n_heads):
        raise CramError(f"{type(module).__name__}: unexpected stock output shape "
                        f"{tuple(out.shape)} for weights {tuple(weights.shape)}")
    if n_heads % value.shape[1]:
        raise CramError(f"{type(module).__name__}: {n_heads} query heads over {value.shape[1]} "
                        "key/value heads")
    n_rep = n_heads // value.shape[1]
    idx = torch.tensor(heads, device=weights.device, dtype=torch.long)
    w = weights.index_select(1, idx).float()  # [B, S, Q, K]
    c = activation.key_multipliers(batch, key_len, weights.device)[:, None, None, :]
    allowed = _allowed(attention_mask, key_len)
    scaled = w * c
    if allowed is not None:
        scaled = scaled * allowed
        has_allowed = allowed.any(dim=-1, keepdim=True)
    else:
        has_allowed = torch.ones((), dtype=torch.bool, device=w.device)
    z = scaled.sum(dim=-1, keepdim=True)
    ok = (z > 0) & torch.isfinite(z)
    new = torch.where(ok, scaled / torch.where(ok, z, torch.ones_like(z)), w)
    if activation.blend is not None:  # a' (t) = a + t (a_CrAM − a): linear in t, a at t = 0
        t = activation.blend[layer].to(device=w.device, dtype=w.dtype)
        new = w + t[None, :, None, None] * (new - w)
    bad = (has_allowed & ~ok).expand(batch, len(heads), q_len, 1)
    if row_mask is not None:
        bad = bad & row_mask[:, :, None, None]
    fallback = int(bad.sum())
    report = activation.report
    report.calls += 1
    report.rows += (batch * len(heads) if row_mask is None else int(row_mask.sum())) * q_len
    if fallback:
        report.fallback_rows += fallback
        report.fallback_by_layer[layer] = report.fallback_by_layer.get(layer, 0) + fallback
    v = value.index_select(1, torch.div(idx, n_rep, rounding_mode="floor"))
    head_out = torch.matmul(new.to(value.dtype), v)  # [B, S, Q, D]
    out = out.clone()
    weights = weights.clone()
    if row_mask is None:
        out[:, :, idx] = head_out.transpose(1, 2).to(out.dtype)
        weights[:, idx] = new.to(weights.dtype)
    else:  # (row, head) pairs outside the row's set keep the stock values bit-for-bit
        out[:, :, idx] = torch.where(row_mask[:, None, :, None],
                                     head_out.transpose(1, 2).to(out.dtype), out[:, :, idx])
        weights[:, idx] = torch.where(row_mask[:, :, None, None], new.to(weights.dtype),
                                      weights[:, idx])
    return out, weights


def cram_attention_forward(module: Any, query: torch.Tensor, key: torch.Tensor,
                           value: torch.Tensor, attention_mask: torch.Tensor | None,
                           scaling: float | None = None, dropout: float = 0.0,
                           **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Stock eager attention of the module's family, then CrAM on the selected heads.

    Signature of transformers' attention functions: ``query`` ``[B, H, Q, D]``, ``key`` /
    ``value`` ``[B, H_kv, K, D]``, a 4-D additive (or boolean) mask; returns the output
    ``[B, Q, H, D]`` and the post-softmax weights ``[B, H, Q, K]``.
    """
    stock = stock_eager(module)
    if stock is None:
        raise CramError(f"{type(module).__name__} has no stock eager_attention_forward to wrap")
    if scaling is not None:
        kwargs["scaling"] = scaling
    out, weights = stock(module, query, key, value, attention_mask, dropout=dropout, **kwargs)
    active = _ACTIVE.get()
    entry = active.get(id(module)) if active else None
    if entry is None:
        return out, weights
    activation, layer = entry
    heads = activation.heads.get(layer)
    if not heads:
        return out, weights
    if dropout and getattr(module, "training", False):
        raise CramError("CrAM reweighting in training mode with attention dropout is not "
                        "supported: call model.eval()")
    if weights is None:
        raise CramError(f"{type(module).__name__}: the stock eager function returned no weights")
    row_mask = activation.row_mask(layer, weights.shape[0], weights.device)
    return _reweight_heads(module, layer, heads, activation, query, value, attention_mask,
                           out, weights, row_mask)


def register() -> None:
    """Register :data:`CRAM_ATTENTION` (attention function and eager mask). Idempotent."""
    AttentionInterface.register(CRAM_ATTENTION, cram_attention_forward)
    AttentionMaskInterface.register(CRAM_ATTENTION, eager_mask)


def _check_heads(heads: Sequence[tuple[int, int]], box: WhiteBox) -> dict[int, tuple[int, ...]]:
    by_layer: dict[int, set[int]] = {}
    for pair in heads:
        try:
            layer, head = pair
        except (TypeError, ValueError) as exc:
            raise CramError(f"heads: expected (layer, head) pairs, got {pair!r}") from exc
        for name, v, n in (("layer", layer, box.num_layers), ("head", head, box.num_heads)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or not 0 <= v < n:
                raise CramError(f"heads: {name} in {pair!r} must be an integer in 0..{n - 1}")
        if box.layer_types[int(layer)] != "full_attention":
            raise CramError(f"heads: layer {layer} uses {box.layer_types[int(layer)]!r}; only "
                            "full-attention layers can be reweighted (absolute key positions)")
        by_layer.setdefault(int(layer), set()).add(int(head))
    return {layer: tuple(sorted(hs)) for layer, hs in by_layer.items()}


def _check_multipliers(multipliers: Any) -> torch.Tensor:
    m = torch.as_tensor(multipliers).detach()
    if m.dtype == torch.bool or not (m.is_floating_point() or m.dtype in
                                     (torch.int8, torch.int16, torch.int32, torch.int64,
                                      torch.uint8)):
        raise CramError(f"multipliers: expected real numbers, got dtype {m.dtype}")
    m = m.to(device="cpu", dtype=torch.float32)
    if m.ndim == 1:
        m = m.unsqueeze(0)
    if m.ndim != 2 or m.shape[0] < 1 or m.shape[1] < 1:
        raise CramError(f"multipliers: expected shape [batch, key_len], got {tuple(m.shape)}")
    bad = ~torch.isfinite(m) | (m < 0) | (m > 1)
    if bool(bad.any()):
        b, j = (int(x) for x in torch.nonzero(bad)[0])
        raise CramError(f"multipliers: every value must be a finite number in [0, 1]; row {b} "
                        f"position {j} is {float(m[b, j])!r}")
    return m.clone()


def _row_masks(heads: Sequence[tuple[int, int]], row_heads: Sequence[Sequence[tuple[int, int]]],
               box: WhiteBox, n_rows: int
               ) -> tuple[dict[int, tuple[int, ...]], dict[int, torch.Tensor]]:
    if isinstance(row_heads, str | bytes) or not isinstance(row_heads, Sequence) \
            or len(row_heads) == 0:
        raise CramError("row_heads: expected a non-empty sequence with one list of (layer, "
                        "head) pairs per multiplier row")
    if n_rows not in (1, len(row_heads)):
        raise CramError(f"row_heads has {len(row_heads)} rows but multipliers have {n_rows}: "
                        "give one multiplier row per row_heads entry (or one row for all)")
    common = _check_heads(heads, box)
    per_row = [_check_heads(list(r), box) for r in row_heads]
    union: dict[int, set[int]] = {layer: set(hs) for layer, hs in common.items()}
    for sel in per_row:
        for layer, hs in sel.items():
            union.setdefault(layer, set()).update(hs)
    by_layer = {layer: tuple(sorted(hs)) for layer, hs in union.items()}
    masks: dict[int, torch.Tensor] = {}
    for layer, hs in by_layer.items():
        mask = torch.zeros(len(per_row), len(hs), dtype=torch.bool)
        for r, sel in enumerate(per_row):
            chosen = set(common.get(layer, ())) | set(sel.get(layer, ()))
            for k, h in enumerate(hs):
                mask[r, k] = h in chosen
        masks[layer] = mask
    return by_layer, masks


@contextmanager
def _activate(model: Any, box: WhiteBox, activation: _Activation) -> Iterator[None]:
    """Route ``model``'s attention modules to ``activation`` and switch the model to
    :data:`CRAM_ATTENTION` for the ``with`` block; both are restored on exit."""
    register()
    current = _ACTIVE.get() or {}
    if any(mid in current for mid in box.modules):
        raise CramError("CrAM is already active on this model; nested reweight() on the same "
                        "model is not supported")
    token = _ACTIVE.set({**current, **{mid: (activation, layer)
                                       for mid, layer in box.modules.items()}})
    previous = model.config._attn_implementation
    try:
        model.set_attn_implementation(CRAM_ATTENTION)
        yield
    finally:
        if previous is not None:
            model.set_attn_implementation(previous)
        _ACTIVE.reset(token)


@contextmanager
def attribution_patch(model: Any, multipliers: Any) -> Iterator[tuple[torch.Tensor, CramReport]]:
    """Attribution patching of CrAM: one differentiable strength per head (chapter 35.5).

    Every head of every full-attention layer computes ``a'(t) = a + t_lh (a^CrAM − a)`` with
    ``a^CrAM`` the CrAM weights of the module docstring and ``t`` the yielded ``[layers, heads]``
    float32 tensor of zeros with ``requires_grad``. At ``t = 0`` the forward values are the
    stock ones; ``∂f/∂t_lh`` at ``t = 0`` is the first-order effect on any output ``f`` of
    switching CrAM on for head ``(l, h)`` alone (``t_lh = 1``), for all heads in one backward
    pass: ``f(t = e_lh) ≈ f(0) + ∂f/∂t_lh``. Run the forward pass with gradients enabled and
    the model in ``eval()``; heads of non-full-attention layers get no strength (gradient 0).
    """
    box = check_white_box(model)
    m = _check_multipliers(multipliers)
    t = torch.zeros(box.num_layers, box.num_heads, dtype=torch.float32, requires_grad=True)
    layers = [layer for layer in range(box.num_layers)
              if box.layer_types[layer] == "full_attention"]
    all_heads = tuple(range(box.num_heads))
    activation = _Activation(heads={layer: all_heads for layer in layers}, multipliers=m,
                             report=CramReport(), blend={layer: t[layer] for layer in layers})
    with _activate(model, box, activation):
        yield t, activation.report


@contextmanager
def reweight(model: Any, heads: Sequence[tuple[int, int]] | None, multipliers: Any, *,
             row_heads: Sequence[Sequence[tuple[int, int]]] | None = None
             ) -> Iterator[CramReport]:
    """Activate CrAM on ``model`` for the ``with`` block; yields the live :class:`CramReport`.

    ``heads``: the selected (layer, head) pairs (empty: stock eager attention everywhere).
    ``multipliers``: ``[batch, key_len]`` token multipliers ``c_j ∈ [0, 1]`` for the prompt
    (a tensor or array; 1-d means batch 1), e.g. from
    :func:`credrank.cram.multipliers.prompt_token_multipliers`. The model's attention
    implementation is switched to :data:`CRAM_ATTENTION` (``set_attn_implementation``) and
    restored on exit. Leaving with fallback rows issues a :class:`CramFallbackWarning`.

    ``row_heads`` (optional): one list of (layer, head) pairs per multiplier row; row ``r``
    then reweights ``heads ∪ row_heads[r]`` and leaves every other head stock (bit-identical),
    so a batch can hold a different intervention per row. ``multipliers`` must then have one
    row per entry (or a single row for all). ``heads=None`` means no common heads. With
    ``row_heads`` the report's ``rows`` and ``fallback_rows`` count only the (row, head) pairs
    actually reweighted.
    """
    box = check_white_box(model)
    heads = [] if heads is None else heads
    m = _check_multipliers(multipliers)
    if row_heads is None:
        by_layer, masks = _check_heads(heads, box), None
    else:
        by_layer, masks = _row_masks(heads, row_heads, box, m.shape[0])
    activation = _Activation(heads=by_layer, multipliers=m, report=CramReport(),
                             row_masks=masks)
    with _activate(model, box, activation):
        yield activation.report
    if activation.report.fallback_rows:
        warnings.warn(activation.report.summary(), CramFallbackWarning, stacklevel=3)
