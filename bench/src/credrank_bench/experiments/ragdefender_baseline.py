"""RAGDefender's own package as a side-by-side baseline row (benches only, never the product).

RAGDefender (Kim et al., ACSAC 2025; ``pip install ragdefender``, the ``baselines`` extra)
filters a retrieved set ``R`` without an LLM: it estimates how many passages are adversarial
and drops them. Its reference code embeds the passages itself with a sentence-transformers
model fetched from the Hugging Face hub; credrank runs it offline on the *bench's own* MiniLM
vectors instead: :class:`GivenVectors` is the object its ``embedder=`` accepts (anything with
``encode(texts, convert_to_tensor=True)``), answering each passage with the vector the pool
already holds. So the row compares the defences on the same pools and the same embeddings.

A dropped passage gets the factor 0 (it sorts after every survivor); survivors keep their
similarity order, which is what ``defend()`` returns. The reference package needs torch,
scikit-learn and pandas: :func:`ragdefender_available` says why the row cannot run when they
are missing, and the bench notes it instead of the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.pipeline import Stage

#: the package version the row was written against (its API: ``RAGDefender.defend``)
RAGDEFENDER_VERSION = "0.2.0"
INSTALL = f"pip install 'ragdefender=={RAGDEFENDER_VERSION}' (or: pip install -e '.[baselines]')"


def ragdefender_available() -> str | None:
    """``None`` when the reference package imports; else why not (with the install line)."""
    try:
        import ragdefender  # noqa: F401
    except Exception as exc:  # ImportError, or a missing dependency of it
        return f"ragdefender not importable ({type(exc).__name__}: {exc}); {INSTALL}"
    return None


class GivenVectors:
    """An ``embedder=`` for RAGDefender that returns vectors already computed (no model)."""

    def __init__(self, texts: Sequence[str], vectors: np.ndarray):
        self._rows = {t: i for i, t in enumerate(texts)}
        self._vectors = np.asarray(vectors, dtype=np.float32)

    def encode(self, texts: Sequence[str], convert_to_tensor: bool = False, **_: Any) -> Any:
        missing = [t for t in texts if t not in self._rows]
        if missing:
            raise KeyError(f"GivenVectors: no vector for {len(missing)} passage(s)")
        out = self._vectors[[self._rows[t] for t in texts]]
        if convert_to_tensor:
            import torch
            return torch.from_numpy(out.copy())
        return out


class RAGDefenderReference(Stage):
    """Adds the factor ``ragdefender_ref``: 0 for the passages the reference package drops
    from the pool, 1 for the rest (single-hop mode, its defaults)."""

    name = "ragdefender_ref"

    def transform(self, batch: Candidates) -> Candidates:
        n = len(batch)
        if n == 0:
            return batch.with_factor(self.name, np.ones(0), 0.0, 1.0)
        if batch.vectors is None:
            raise StageError("ragdefender_ref: the batch has no vectors")
        from ragdefender import RAGDefender

        texts = [str(t) for t in batch.column("text")]
        # identical texts share one vector: the reference encodes by text
        defender = RAGDefender(embedder=GivenVectors(texts, batch.vectors),
                               task_type="single_hop", device="cpu")
        _, removed = defender.defend(batch.query, texts, return_indices=True)
        f = np.ones(n)
        f[list(removed)] = 0.0
        return batch.with_factor(self.name, f, 0.0, 1.0).with_info(
            ragdefender_ref={"removed": len(removed), "version": RAGDEFENDER_VERSION})
