"""The machine-text rows of the pooled and stress benches (``credrank bench … --machine-text``).

Every passage a bench can rank is scored once with
:class:`~credrank.machine_text.scorer.FastDetectScorer` (Fast-DetectGPT's analytic criterion
``d`` with SmolLM2-135M, :mod:`credrank.machine_text.statistic`; no label is read) and the
scores join the bench's index as the payload columns ``machine_text`` and
``machine_text_key`` — what ``credrank index … --score machine-text`` stores. The rows are
pipeline specs with the ``machine_text`` stage (and the ``planted`` stage for the combined row),
so a row is exactly what a user runs with ``credrank search --machine-text [--planted]``.

**Cost.** One forward pass of SmolLM2-135M per passage, at the scorer's defaults (first 128
tokens, bfloat16 where the CPU has it): about 0.2 s of wall time per passage on two free cores
(5.2 passages/s measured; more under load), so CrAM NQ's 5,000 passages take 15–30 minutes.
Hence opt-in. With a cache folder
(``credrank bench --cache DIR``) each score is kept in ``DIR/machine-text/<key>.jsonl`` — one
line per passage, the SHA-256 of its text and ``d`` — appended after each batch: an interrupted
bench resumes where it stopped, a rerun (or another bench over the same passages) pays nothing,
and scores of another key (budget, precision) are never mixed in. A last line cut short by an
interruption is ignored (and cut before the next append: that passage is scored again); any
other unreadable line is an error naming the file and the line.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.progress import OnProgress, step
from credrank.evaluate.experiment import System
from credrank.index.memory import InMemoryIndex
from credrank.pipeline.spec import PipelineSpec
from credrank.stages.machine_text import FIELD, KEY_FIELD

#: the cache's sub-folder of ``--cache``
CACHE_SUBDIR = "machine-text"
#: passages scored between two cache writes
CHUNK = 64
#: the bench rows: name -> the stages after retrieval
MACHINE_TEXT_ROWS: dict[str, tuple[dict[str, Any], ...]] = {
    "similarity × machine_text (Fast-DetectGPT, SmolLM2-135M; label-free)":
        ({"stage": "machine_text"},),
    "similarity × planted (default) × machine_text":
        ({"stage": "planted"}, {"stage": "machine_text"}),
}


@dataclass(frozen=True)
class MachineTextOption:
    """What ``--machine-text`` gives a bench: the scorer (``.key``, ``.score(texts)``;
    :class:`~credrank.machine_text.scorer.FastDetectScorer` from the CLI) and the cache folder
    (``--cache``; ``None``: scores kept for this run only)."""

    scorer: Any
    cache_dir: Path | None = None

    def apply(self, index: InMemoryIndex, *, only: Collection[str] | None = None,
              on_progress: OnProgress | None = None) -> dict[str, Any]:
        """:func:`add_machine_text` with this scorer and cache."""
        return add_machine_text(index, self.scorer, only=only, cache_dir=self.cache_dir,
                                on_progress=on_progress)

    def note(self, details: dict[str, Any]) -> str:
        """The bench note of the machine-text rows."""
        cache = (f"cached in {details['cache']}" if details["cache"] else
                 "not cached (no --cache)")
        return (f"machine-text rows: {details['documents']} passages scored with "
                f"{details['key']} ({details['newly_scored']} newly in this run, {cache}; "
                f"{details['too_short']} too short to score get the factor 1); the factor is "
                "the fixed transform 1 − 0.5·Φ(d) of the statistic, no label read")


def text_hash(text: str) -> str:
    """The cache's key of a passage: SHA-256 of its UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_file(cache_dir: Path, key: str) -> Path:
    """The cache file of the scorer key ``key`` under ``cache_dir``."""
    return Path(cache_dir) / CACHE_SUBDIR / (re.sub(r"[^A-Za-z0-9._-]+", "_", key) + ".jsonl")


def read_cache(path: Path) -> dict[str, float | None]:
    """``text hash -> d`` (``None``: too short to score) of a cache file; ``{}`` when absent.
    An unfinished last line (no newline: an interrupted write) is ignored; any other line
    that is not ``{"sha256": str, "d": number | null}`` raises ``ValueError`` naming it."""
    if not path.exists():
        return {}
    raw = path.read_text(encoding="utf-8")
    lines = raw.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        lines.pop()  # cut short by an interruption: scored again
    out: dict[str, float | None] = {}
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            digest, d = record["sha256"], record["d"]
            if not isinstance(digest, str) or not (d is None or isinstance(d, (int, float))):
                raise TypeError("sha256 must be a string and d a number or null")
            if d is not None and not np.isfinite(d):
                raise TypeError("d must be finite")
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}, line {number}: expected {{\"sha256\": str, \"d\": "
                             f"number | null}}, got {line[:80]!r} ({exc})") from None
        out[digest] = None if d is None else float(d)
    return out


def _drop_cut_tail(path: Path) -> None:
    """Cut a last line left unfinished by an interrupted write (no newline), so that the next
    append starts on a line of its own."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


def score_texts(texts: Sequence[str], scorer: Any, *, cache_dir: Path | None = None,
                on_count: Callable[[int, int], None] | None = None) -> np.ndarray:
    """``d`` of each text (float64, ``nan`` when too short to score), each distinct text
    scored once by ``scorer`` (``.key``, ``.score(texts)``) unless ``cache_dir`` holds it
    (module docstring); ``on_count(done, total)`` after each chunk, ``total`` the distinct
    texts the cache did not hold."""
    hashes = [text_hash(t) for t in texts]
    path = cache_file(cache_dir, scorer.key) if cache_dir is not None else None
    known = read_cache(path) if path is not None else {}
    todo: dict[str, str] = {}
    for digest, text in zip(hashes, texts, strict=True):
        if digest not in known:
            todo.setdefault(digest, text)
    pending = list(todo.items())
    if path is not None and pending:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            _drop_cut_tail(path)
    for start in range(0, len(pending), CHUNK):
        chunk = pending[start:start + CHUNK]
        values = np.asarray(scorer.score([t for _, t in chunk]), dtype=np.float64)
        lines = []
        for (digest, _), d in zip(chunk, values, strict=True):
            known[digest] = float(d) if np.isfinite(d) else None
            lines.append(json.dumps({"sha256": digest, "d": known[digest]}) + "\n")
        if path is not None:
            with path.open("a", encoding="utf-8") as fh:
                fh.writelines(lines)
        if on_count is not None:
            on_count(start + len(chunk), len(pending))
    return np.array([np.nan if known[h] is None else known[h] for h in hashes],
                    dtype=np.float64)


def add_machine_text(index: InMemoryIndex, scorer: Any, *, only: Collection[str] | None = None,
                     cache_dir: Path | None = None, on_progress: OnProgress | None = None
                     ) -> dict[str, Any]:
    """Score the ``text`` of the documents of ``index`` (those in ``only``, default all) and
    store ``d`` and the scorer's key in its meta columns :data:`FIELD` and :data:`KEY_FIELD`
    (documents left out keep no score: a row that meets one fails loudly, the stage's
    ``missing = error``). Returns what was scored, for the bench's details."""
    ids = [str(d) for d in index.doc_ids]
    rows = [i for i, d in enumerate(ids) if only is None or d in only]
    texts_col = index.meta.get("text")
    if texts_col is None:
        raise ValueError("machine-text rows: the bench index has no text column")
    texts = [str(texts_col[i]) for i in rows]
    tick = step(on_progress, "machine-text scores (SmolLM2, passages)")
    done = [0]

    def count(n: int, total: int) -> None:
        done[0] = n
        if tick is not None:
            tick(n, total)

    d = score_texts(texts, scorer, cache_dir=cache_dir, on_count=count)
    values: list[Any] = [None] * len(ids)
    keys: list[Any] = [None] * len(ids)
    for i, value in zip(rows, d, strict=True):
        values[i] = None if np.isnan(value) else float(value)
        keys[i] = scorer.key
    index.meta[FIELD] = np.asarray(values, dtype=object)
    index.meta[KEY_FIELD] = np.asarray(keys, dtype=object)
    scored = [v for v in d if np.isfinite(v)]
    return {"key": scorer.key, "documents": len(rows), "distinct_texts": len(set(texts)),
            "newly_scored": done[0], "too_short": len(rows) - len(scored),
            "cache": str(cache_file(cache_dir, scorer.key)) if cache_dir is not None else None,
            "median_d": float(np.median(scored)) if scored else None}


def machine_text_systems(top_k: int, fetch_k: int) -> dict[str, System]:
    """The machine-text rows (:data:`MACHINE_TEXT_ROWS`) as spec systems: no label read."""
    return {name: System.of_spec(PipelineSpec.of(*stages, top_k=top_k, fetch_k=fetch_k),
                                 params={"stages": [s["stage"] for s in stages]})
            for name, stages in MACHINE_TEXT_ROWS.items()}


__all__ = ["CACHE_SUBDIR", "MACHINE_TEXT_ROWS", "MachineTextOption", "add_machine_text",
           "cache_file", "machine_text_systems", "read_cache", "score_texts", "text_hash"]
