"""Resumable per-item results for long benches: a JSONL checkpoint file.

A bench that spends minutes per item (``credrank bench cram-nq --model`` on a CPU) appends
each finished item to the checkpoint as soon as it is done, so a run that is interrupted (a
killed job, a closed session) loses at most the item in flight, and the same command resumes
where it stopped.

Format (one JSON object per line):

* line 1, the header: ``{"checkpoint": KIND, "key": {...}}`` — the settings that decide the
  items' results (model, heads, prompt template, data hash, …). Reuse needs the same kind and an
  equal key; anything else is refused with the fields that differ, never silently mixed.
* every further line: one finished item, ``{"id": ID, ...}``; ids are unique.

Declared policy for a damaged file: a last line without its newline that does not parse is
the write the interruption cut short; it is discarded (the file is cut back to the last
complete line, and :attr:`Checkpoint.discarded_tail` says so) and that item is computed again.
Any other line that does not parse, lacks ``id`` or repeats one is an error naming the file and
line.

Each line is parsed by :func:`credrank.core.structured.parse_json` (nesting and number length
bounded, NaN/Infinity and duplicate keys refused: such a line "does not parse") and checked
against :data:`HEADER_SCHEMA` / :data:`ITEM_SCHEMA`; the file is read whole, at most
:data:`MAX_CHECKPOINT_BYTES`, a UTF-8 byte-order mark accepted. Errors are
:class:`CheckpointError` starting with ``FILE, line N``.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credrank.core.schema import Anything, Field, MapOf, Table, Text, got
from credrank.core.structured import parse_json, read_bytes

#: the largest checkpoint read (bytes): far above a 1,000-question bench with its texts
MAX_CHECKPOINT_BYTES = 1024 * 1024 * 1024


class CheckpointError(ValueError):
    """A checkpoint file that cannot be reused; the message names the file, line and field."""


#: line 1: the header (``key``: any JSON object, compared with the run's settings)
HEADER_SCHEMA = Table({
    "checkpoint": Field(Text(what='the kind of the header {"checkpoint": KIND, "key": {...}}')),
    "key": Field(MapOf(Anything(), key=Text(allow_empty=True))),
}, what='the header {"checkpoint": KIND, "key": {...}}')
#: every further line: one finished item (its other fields are the bench's, checked by it)
ITEM_SCHEMA = Table({"id": Field(Text(allow_empty=True))}, extra=True,
                    what='an item {"id": ID, ...}')


@dataclass
class Checkpoint:
    """An open checkpoint: the items already done (``done[id]``, with their line numbers in
    ``lines[id]``) and :meth:`append` for the next one."""

    path: Path
    kind: str
    key: dict[str, Any]
    done: dict[str, dict[str, Any]] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    discarded_tail: bool = False
    #: complete lines in the file, the header included
    n_lines: int = 0

    @classmethod
    def open(cls, path: str | Path, kind: str, key: Mapping[str, Any]) -> Checkpoint:
        """Open ``path`` for ``kind`` with settings ``key`` (JSON-serialisable): a new file gets
        the header; an existing one must match it and its items are loaded."""
        path = Path(path)
        settings: dict[str, Any] = json.loads(json.dumps(dict(key)))  # after a round trip
        ckpt = cls(path, kind, settings)
        if not path.exists() or path.stat().st_size == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w", encoding="utf-8") as fh:
                fh.write(json.dumps({"checkpoint": kind, "key": settings}, sort_keys=True) + "\n")
            ckpt.n_lines = 1
            return ckpt
        if not path.is_file():
            raise CheckpointError(f"{path}: expected a checkpoint file, got a directory or "
                                  "another non-file")
        ckpt._load()
        return ckpt

    def _load(self) -> None:
        raw = read_bytes(self.path, what="checkpoint", max_bytes=MAX_CHECKPOINT_BYTES,
                         error=CheckpointError)
        bom = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
        text = self._decode(raw[bom:])
        lines = text.split("\n")
        complete = text.endswith("\n")
        if complete:
            lines = lines[:-1]
        good_bytes = bom
        for number, line in enumerate(lines, start=1):
            where = f"{self.path}, line {number}"
            last_unfinished = number == len(lines) and not complete
            try:
                obj = parse_json(line, where, error=CheckpointError)
            except CheckpointError:
                if last_unfinished and number > 1:
                    self.discarded_tail = True
                    break
                raise
            if number == 1:
                self._check_header(obj, where)
            else:
                self._add_item(obj, number, where)
            good_bytes += len(line.encode("utf-8")) + 1
            self.n_lines = number
        if self.discarded_tail or not complete:
            # cut back to the last complete line, so appends start on a line of their own
            with self.path.open("r+b") as fh:
                fh.truncate(min(good_bytes, len(raw)))
                if not self.discarded_tail:
                    fh.seek(0, os.SEEK_END)
                    fh.write(b"\n")

    def _decode(self, raw: bytes) -> str:
        """The text of the file: UTF-8, except that a last line cut inside a character (the
        interrupted write) ends in U+FFFD so that it does not parse and is discarded."""
        for bom in (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE,
                    codecs.BOM_UTF16_BE):
            if raw.startswith(bom):
                raise CheckpointError(f"{self.path}: expected UTF-8 JSON lines, got UTF-16 or "
                                      "UTF-32 (byte-order mark)")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            last_newline = raw.rfind(b"\n")
            if not raw.endswith(b"\n") and 0 <= last_newline < exc.start:
                # the write that was cut short ended inside a character: the same policy
                return raw[:last_newline + 1].decode("utf-8", errors="replace") + "\ufffd"
            line = raw.count(b"\n", 0, exc.start) + 1
            raise CheckpointError(f"{self.path}, line {line}: expected UTF-8 JSON lines, got "
                                  f"an undecodable byte at offset {exc.start}") from None

    def _check_header(self, obj: Any, where: str) -> None:
        header = HEADER_SCHEMA.check(obj, where, error=CheckpointError)
        if header["checkpoint"] != self.kind:
            raise CheckpointError(f"{where}: checkpoint: expected {self.kind!r} (this "
                                  f"checkpoint is for {header['checkpoint']!r}, not "
                                  f"{self.kind!r}; use another file), got "
                                  f"{header['checkpoint']!r}")
        stored = header["key"]
        differ = sorted(k for k in set(stored) | set(self.key) if stored.get(k) != self.key.get(k))
        if differ:
            shown = "; ".join(f"{k}: file has {_short(stored.get(k))}, this run has "
                              f"{_short(self.key.get(k))}" for k in differ)
            raise CheckpointError(f"{where}: key: written with other settings ({shown}); use "
                                  "another file or the settings it was written with")

    def _add_item(self, obj: Any, number: int, where: str) -> None:
        item = ITEM_SCHEMA.check(obj, where, error=CheckpointError)
        item_id = item["id"]
        if item_id in self.done:
            raise CheckpointError(f"{where}: id: expected an id not seen before, got "
                                  f"{item_id!r} (already on line {self.lines[item_id]})")
        self.done[item_id] = item
        self.lines[item_id] = number

    def where(self, item_id: str) -> str:
        """``FILE, line N`` for a loaded item (for error messages)."""
        return f"{self.path}, line {self.lines.get(item_id, '?')}"

    def append(self, item: Mapping[str, Any]) -> None:
        """Write one finished item (with a string ``id`` not yet in the file) and flush it to
        disk before returning."""
        item_id = item.get("id")
        if not isinstance(item_id, str):
            raise CheckpointError(f"{self.path}: id: an item needs a string 'id', got "
                                  f"{got(item_id)}")
        if item_id in self.done:
            raise CheckpointError(f"{self.path}: id {item_id!r} is already on line "
                                  f"{self.lines[item_id]}")
        line = json.dumps(dict(item), sort_keys=True, allow_nan=False)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.n_lines += 1
        self.lines[item_id] = self.n_lines
        self.done[item_id] = json.loads(line)


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
