"""The ``Embedder`` protocol: what every embedding model offers the rest of credrank."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors (cosine = dot product)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...
