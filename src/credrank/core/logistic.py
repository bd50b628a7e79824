"""L2-regularised logistic regression (deterministic L-BFGS) and the text hash that keys
feature caches: the classifier behind the learned credibility and stance models."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from credrank.core.validation import as_matrix, check_positive


@dataclass(frozen=True)
class LogisticModel:
    """A fitted logistic regression on standardised features:
    ``P(y = 1 | x) = σ(b + w · (x − μ) / s)``."""

    weights: np.ndarray
    bias: float
    mean: np.ndarray
    scale: np.ndarray
    l2: float

    def decision(self, x: np.ndarray) -> np.ndarray:
        """``b + w · (x − μ) / s`` per row."""
        x = _check_matrix(x, "x", len(self.weights))
        return self.bias + ((x - self.mean) / self.scale) @ self.weights

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """``σ(decision(x))``, computed without overflow."""
        return _sigmoid(self.decision(x))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _check_matrix(x: Any, name: str, columns: int | None = None) -> np.ndarray:
    arr = as_matrix(name, x)
    if columns is not None and arr.shape[1] != columns:
        raise ValueError(f"{name}: expected {columns} feature columns; got {arr.shape[1]}")
    return arr


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, *,
                 max_iter: int = 500, start: LogisticModel | None = None) -> LogisticModel:
    """L2-regularised logistic regression, fitted by L-BFGS-B from ``w = 0, b = 0`` — or,
    with ``start`` (a warm start), from ``start``'s decision function carried into this fit's
    standardisation: ``w_j = s_j·w°_j/s°_j``, ``b = b° + Σ_j (w°_j/s°_j)(μ_j − μ°_j)`` (the
    same ``z`` for every row; zeros when that is not finite).

    Features are standardised with the training mean ``μ`` and standard deviation ``s``
    (a constant column gets ``s = 1``, so it contributes nothing). The objective is

    ``L(w, b) = (1/n) Σ_i [log(1 + e^{z_i}) − y_i z_i] + (l2 / 2n) ‖w‖²``,
    ``z_i = b + w · (x_i − μ) / s``; the intercept is not penalised.

    A single-class ``y`` is allowed: the intercept then moves towards that class, held back
    only by L-BFGS's stopping rule (predictions stay finite). Deterministic: same input, same
    model.
    """
    from scipy.optimize import minimize
    x = _check_matrix(x, "x")
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if len(y) != len(x):
        raise ValueError(f"y: expected {len(x)} labels (one per row of x); got {len(y)}")
    if len(y) == 0:
        raise ValueError("x, y: expected at least one training row; got 0")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y: expected labels 0 or 1")
    l2 = check_positive("l2", l2)
    n, dim = x.shape
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    xs = (x - mean) / scale

    theta0 = np.zeros(dim + 1)
    if start is not None:
        raw = start.weights / start.scale
        theta0[:dim] = raw * scale
        theta0[dim] = start.bias + float(raw @ (mean - start.mean))
        if not np.all(np.isfinite(theta0)):
            theta0[:] = 0.0

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:dim], theta[dim]
        z = b + xs @ w
        loss = float(np.sum(np.logaddexp(0.0, z) - y * z)) / n + 0.5 * l2 * float(w @ w) / n
        r = (_sigmoid(z) - y) / n
        grad = np.empty(dim + 1)
        grad[:dim] = xs.T @ r + l2 * w / n
        grad[dim] = r.sum()
        return loss, grad

    res = minimize(objective, theta0, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter})
    theta = np.asarray(res.x, dtype=np.float64)
    if not np.all(np.isfinite(theta)):
        raise ValueError(f"fit_logistic: the optimiser returned non-finite weights "
                         f"({res.message}); check the features for extreme values")
    return LogisticModel(weights=theta[:dim].copy(), bias=float(theta[dim]), mean=mean,
                         scale=scale, l2=float(l2))


def text_key(text: str) -> str:
    """A short hash of ``text`` (the key of the feature-row caches)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
