"""Fast-DetectGPT's analytic criterion (Bao et al., ICLR 2024), as a pure function of logits.

Fast-DetectGPT scores a passage ``x = (x_1 … x_T)`` by its *conditional probability
curvature*: how much more likely the observed tokens are under a scoring model ``p`` than
tokens drawn, position by position, from a sampling model ``q`` given the same prefix. With
``q = p`` (one model samples and scores, the paper's "analytic" variant, its Eq. 5 and
Appendix; reference code ``get_sampling_discrepancy_analytic`` in
github.com/baoguangsheng/fast-detect-gpt, ``scripts/fast_detect_gpt.py``) the expectation and
variance over the samples are exact sums over the vocabulary ``V``, so no sample is drawn::

    ℓ_t  = log p(x_t | x_<t)                                 (the observed token)
    μ_t  = Σ_v p_v log p_v                                   (E_{x̃~p} log p(x̃_t | x_<t))
    σ²_t = Σ_v p_v (log p_v)² − μ_t²                          (Var_{x̃~p} log p(x̃_t | x_<t))

    d(x) = (Σ_t ℓ_t − Σ_t μ_t) / sqrt(Σ_t σ²_t)

with ``p_v = p(v | x_<t)`` and ``t`` over the scored positions (every token but the first,
which has no prefix). ``d`` is a z-score: for a passage *sampled from p itself* at
temperature 1 the numerator has mean 0 and variance ``Σ_t σ²_t``, so ``d`` is about
``N(0, 1)``. Machine-written text (decoded greedily, with low temperature or nucleus
sampling) picks tokens more likely than a sample would: ``d > 0``; human text picks less
likely ones: ``d`` near or below 0. Higher = more machine-like.

:func:`criterion_numpy` is the reference (float64, one passage). The scorer runs the batched
form: :func:`token_terms_torch` gives each scored position's terms (the positions of several
passages packed together, no padding) and :func:`criterion_from_terms` sums one passage's. A
test checks that both agree on hand-made logits.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def criterion_numpy(logits: np.ndarray, tokens: np.ndarray) -> float:
    """``d(x)`` of one passage (module docstring), in float64.

    Args:
        logits: ``(T, V)``: row ``t`` holds the scoring model's logits for the token at
            position ``t + 1`` (the prediction after reading ``x_0 … x_t``).
        tokens: ``(T,)``: the observed next tokens ``x_1 … x_T``.

    Returns ``nan`` when ``Σ_t σ²_t = 0`` (every prediction a point mass) or ``T = 0``.
    """
    z = np.asarray(logits, dtype=np.float64)
    tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
    if z.ndim != 2 or z.shape[0] != len(tokens):
        raise ValueError(f"logits: expected shape ({len(tokens)}, V), got {z.shape}")
    if len(tokens) == 0:
        return float("nan")
    log_p = z - z.max(axis=1, keepdims=True)
    log_p = log_p - np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    p = np.exp(log_p)
    observed = log_p[np.arange(len(tokens)), tokens]
    mu = (p * log_p).sum(axis=1)
    var = (p * log_p ** 2).sum(axis=1) - mu ** 2
    total_var = float(var.sum())
    if total_var <= 0:
        return float("nan")
    return float((observed.sum() - mu.sum()) / np.sqrt(total_var))


def token_terms_torch(logits: Any, tokens: Any) -> tuple[Any, Any]:
    """The per-position terms of ``d`` (module docstring): ``(ℓ_t − μ_t, σ²_t)`` of each
    scored position, as two float64 tensors of shape ``(N,)``.

    Args:
        logits: ``(N, V)`` float32 tensor, one row per scored position (the prediction of
            the observed token ``tokens[i]``); it is overwritten (turned into
            log-probabilities in place: the batch's largest tensor is not copied).
        tokens: ``(N,)`` long tensor, the observed tokens.
    """
    import torch  # lazy: the lm extra

    log_p = logits if logits.dtype == torch.float32 else logits.float()
    log_p.sub_(torch.logsumexp(log_p, dim=-1, keepdim=True))
    observed = log_p.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    p_log_p = log_p.exp().mul_(log_p)  # p·log p: the one more (N, V) tensor
    mu = p_log_p.sum(-1)
    second = torch.einsum("nv,nv->n", p_log_p, log_p)  # Σ_v p (log p)²
    var = (second - mu * mu).clamp_min(0)
    return observed.double() - mu.double(), var.double()


def criterion_from_terms(excess: np.ndarray, var: np.ndarray, budget: int | None = None
                         ) -> float:
    """``d = Σ_t (ℓ_t − μ_t) / sqrt(Σ_t σ²_t)`` over the first ``budget`` scored positions
    (all when ``None``) of one passage's terms; ``nan`` when ``Σ_t σ²_t = 0``. A passage
    scored once at a long budget gives ``d`` at every shorter one (the model is causal)."""
    excess = np.asarray(excess, dtype=np.float64)[:budget]
    total = float(np.asarray(var, dtype=np.float64)[:budget].sum())
    return float(excess.sum() / np.sqrt(total)) if total > 0 else float("nan")


__all__ = ["criterion_from_terms", "criterion_numpy", "token_terms_torch"]
