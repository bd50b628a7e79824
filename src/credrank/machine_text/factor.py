"""From the machine-text statistic to a ranking factor: a fixed transform, no labels.

The statistic ``d`` (:mod:`credrank.machine_text.statistic`) is a z-score against the scoring
model's own samples: a passage drawn from SmolLM2 at temperature 1 scores about ``N(0, 1)``,
machine-decoded text above, human text near or below 0. The factor reads ``d`` through that
reference distribution, with a declared centre ``c`` and scale ``s``::

    m(d) = Φ((d − c) / s)                       ∈ (0, 1): how machine-like, Φ the normal CDF
    f(d) = 1 − (1 − floor) · m(d)               ∈ (floor, 1]

so a passage well below the centre keeps its score (``f → 1``), one at the centre loses half
of ``1 − floor``, and none is removed (``floor > 0``). The defaults ``c = 0``, ``s = 1`` are
the statistic's own null distribution (the paper's reading of the criterion, not a value
fitted on labelled data); ``f`` is monotone decreasing in ``d``, finite, and in
``(floor, 1]``. A passage too short to score (``d`` undefined) gets ``f = 1`` (declared:
nothing machine-like was observed).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

#: the defaults of the transform (module docstring)
FLOOR = 0.5
CENTER = 0.0
SCALE = 1.0


def machine_likeness(d: np.ndarray, center: float = CENTER, scale: float = SCALE) -> np.ndarray:
    """``m(d) = Φ((d − center) / scale)`` (module docstring); ``nan`` stays ``nan``."""
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale: expected a finite number > 0, got {scale!r}")
    return ndtr((np.asarray(d, dtype=np.float64) - center) / scale)


def machine_text_factor(d: np.ndarray, *, floor: float = FLOOR, center: float = CENTER,
                        scale: float = SCALE) -> np.ndarray:
    """``f(d) = 1 − (1 − floor) · Φ((d − center) / scale)``, ``1`` where ``d`` is ``nan``
    (module docstring). ``floor`` in ``(0, 1]``."""
    floor = float(floor)
    if not np.isfinite(floor) or not 0 < floor <= 1:
        raise ValueError(f"floor: expected a number in (0, 1] (a machine-like passage is "
                         f"demoted, never removed), got {floor!r}")
    m = machine_likeness(d, center, scale)
    f = 1.0 - (1.0 - floor) * np.nan_to_num(m, nan=0.0)
    return np.clip(f, floor, 1.0)


__all__ = ["CENTER", "FLOOR", "SCALE", "machine_likeness", "machine_text_factor"]
