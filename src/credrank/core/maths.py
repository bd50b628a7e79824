"""Small maths every layer shares: row normalisation, cosine matrices, ROC AUC and shrinkage.

Each function states its zero-division policy; none returns NaN or infinity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation ``u_i = e_i / ‖e_i‖`` (float32).

    Zero-norm policy: an all-zero row stays zero, so its cosine with anything is 0.
    """
    x = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarities ``cos(e_i, e_j) = e_i·e_j / (‖e_i‖ ‖e_j‖)``, float64,
    clipped to [−1, 1] (rounding can leave a dot product of unit vectors just outside).

    Zero-norm policy: a zero row has cosine 0 with every row, itself included. Callers for whom
    a zero embedding is an error (the diversity measures of chapter 35.8) check before calling.
    """
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1)
    unit = v / np.where(norms > 0, norms, 1.0)[:, None]
    return np.clip(unit @ unit.T, -1.0, 1.0)


def roc_auc(labels: Sequence[object] | np.ndarray,
            scores: Sequence[float] | np.ndarray) -> float | None:
    """Area under the ROC curve, ``P(s⁺ > s⁻) + ½ P(s⁺ = s⁻)`` over positive/negative pairs.

    Computed in the Mann–Whitney form ``(Σ rank_pos − n_pos(n_pos + 1)/2) / (n_pos · n_neg)``
    with average ranks (a tie between a positive and a negative counts one half). ``labels``
    are booleans or 0/1 (``True``/``1`` positive). Empty-class policy: ``None`` when either class
    is empty — the AUC is undefined there, and no number stands in for it.
    """
    from scipy.stats import rankdata
    y = np.asarray(labels)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if y.ndim != 1 or len(y) != len(s):
        raise ValueError(f"scores: expected {len(y)} values (one per label), got {len(s)}")
    if y.dtype != bool:
        values = set(np.unique(y).tolist())
        if not values <= {0, 1}:
            raise ValueError(f"labels: expected booleans or 0/1, got values {sorted(values)}")
        y = y.astype(bool)
    if s.size and not np.all(np.isfinite(s)):
        raise ValueError("scores: expected finite numbers")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def shrink(successes: np.ndarray | float, trials: np.ndarray | float, prior: np.ndarray | float,
           strength: float) -> np.ndarray:
    """Shrinkage toward a prior: ``λ = (k + m·λ₀) / (n + m)`` with ``k`` successes in ``n``
    trials and pseudo-count ``m`` (seed 004's priors learned from counts; chapter 35.3's
    reliability ``(n_s r_s + m λ_type) / (n_s + m)`` is the case ``k = n_s r_s``).

    Vectorised over equal shapes. Zero-division policy: where ``n + m = 0`` (no data and
    ``m = 0``) the result is the prior ``λ₀``. Raises ``ValueError`` for negative counts or
    strength, ``k > n``, or non-finite input.
    """
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    lam = np.asarray(prior, dtype=np.float64)
    if isinstance(strength, bool) or not np.isfinite(strength) or strength < 0:
        raise ValueError(f"strength: expected a finite pseudo-count >= 0, got {strength!r}")
    if not (k.shape == n.shape == lam.shape):
        raise ValueError(f"shapes differ: successes {k.shape}, trials {n.shape}, prior "
                         f"{lam.shape}; expected equal shapes")
    for name, arr in (("successes", k), ("trials", n), ("prior", lam)):
        if arr.size and not np.all(np.isfinite(arr)):
            raise ValueError(f"{name}: expected finite numbers")
    if np.any(n < 0) or np.any(k < 0) or np.any(k > n + 1e-9):
        raise ValueError("successes, trials: expected 0 <= successes <= trials")
    m = float(strength)
    denom = n + m
    safe = np.where(denom > 0, denom, 1.0)
    return np.where(denom > 0, (k + m * lam) / safe, lam)
