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
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class CheckpointError(ValueError):
    """A checkpoint file that cannot be reused; the message names the file, line and field."""


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
        key = json.loads(json.dumps(dict(key)))  # the form it takes after a round trip
        ckpt = cls(path, kind, key)
        if not path.exists() or path.stat().st_size == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w", encoding="utf-8") as fh:
                fh.write(json.dumps({"checkpoint": kind, "key": key}, sort_keys=True) + "\n")
            ckpt.n_lines = 1
            return ckpt
        if not path.is_file():
            raise CheckpointError(f"--checkpoint {path}: not a file")
        ckpt._load()
        return ckpt

    def _load(self) -> None:
        raw = self.path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            last_newline = raw.rfind(b"\n")
            if not raw.endswith(b"\n") and 0 <= last_newline < exc.start:
                # the write that was cut short ended inside a character: the same policy
                text = raw[:last_newline + 1].decode("utf-8", errors="replace") + "\ufffd"
            else:
                raise CheckpointError(f"--checkpoint {self.path}: expected UTF-8 JSON lines, "
                                      f"got an undecodable byte at offset {exc.start}") from None
        lines = text.split("\n")
        complete = text.endswith("\n")
        if complete:
            lines = lines[:-1]
        good_bytes = 0
        for number, line in enumerate(lines, start=1):
            where = f"--checkpoint {self.path}, line {number}"
            last_unfinished = number == len(lines) and not complete
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                if last_unfinished and number > 1:
                    self.discarded_tail = True
                    break
                raise CheckpointError(f"{where}: expected one JSON object, got unparseable "
                                      f"text ({exc.msg})") from None
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

    def _check_header(self, obj: Any, where: str) -> None:
        if not isinstance(obj, dict) or "checkpoint" not in obj or "key" not in obj:
            raise CheckpointError(f"{where}: expected the header {{\"checkpoint\": KIND, "
                                  f"\"key\": {{...}}}}, got {str(obj)[:120]!r}")
        if obj["checkpoint"] != self.kind:
            raise CheckpointError(f"{where}: this checkpoint is for {obj['checkpoint']!r}, "
                                  f"not {self.kind!r}; use another file")
        stored = obj["key"]
        if not isinstance(stored, dict):
            raise CheckpointError(f"{where}: field 'key': expected an object, got "
                                  f"{type(stored).__name__}")
        differ = sorted(k for k in set(stored) | set(self.key) if stored.get(k) != self.key.get(k))
        if differ:
            shown = "; ".join(f"{k}: file has {_short(stored.get(k))}, this run has "
                              f"{_short(self.key.get(k))}" for k in differ)
            raise CheckpointError(f"{where}: written with other settings ({shown}); use another "
                                  "file or the settings it was written with")

    def _add_item(self, obj: Any, number: int, where: str) -> None:
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
            raise CheckpointError(f"{where}: field 'id': expected an item with a string id, "
                                  f"got {str(obj)[:120]!r}")
        item_id = obj["id"]
        if item_id in self.done:
            raise CheckpointError(f"{where}: id {item_id!r} already on line "
                                  f"{self.lines[item_id]}")
        self.done[item_id] = obj
        self.lines[item_id] = number

    def where(self, item_id: str) -> str:
        """``--checkpoint FILE, line N`` for a loaded item (for error messages)."""
        return f"--checkpoint {self.path}, line {self.lines.get(item_id, '?')}"

    def append(self, item: Mapping[str, Any]) -> None:
        """Write one finished item (with a string ``id`` not yet in the file) and flush it to
        disk before returning."""
        item_id = item.get("id")
        if not isinstance(item_id, str):
            raise CheckpointError(f"--checkpoint {self.path}: an item needs a string 'id', got "
                                  f"{item_id!r}")
        if item_id in self.done:
            raise CheckpointError(f"--checkpoint {self.path}: id {item_id!r} is already on "
                                  f"line {self.lines[item_id]}")
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
