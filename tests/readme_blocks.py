"""The fenced code blocks of a Markdown file as data, for ``tests/test_readme.py`` (not a test
file).

:func:`read_blocks` returns every fenced block (its language word, its text with the fence's
indent removed, the line of its opening fence and the paragraph just before it).
:func:`commands` splits a shell block into logical commands (continuation lines joined, the
trailing ``# comment`` dropped, runs of blanks said as one space; in a ``console`` block only
the ``$ `` lines). A *synopsis* command shows optional parts in square brackets
(``credrank search Q --index ./idx [--json]``): :func:`minimal` is the command without them, and
:func:`synopsis_words` all its words with the brackets taken away. Brackets, ``#`` and blanks
inside quotes are text, never syntax.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: the languages whose blocks are shell commands
SHELL = frozenset({"bash", "sh", "shell", "console"})

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: ``lang`` (lower-case, ``""`` when the fence names none), ``text``,
    ``line`` (1-based, the opening fence), ``before`` (the prose paragraph above it) and
    ``source`` (the file it is in, as :func:`read_blocks` was told to name it)."""

    lang: str
    text: str
    line: int
    before: str
    source: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line} (```{self.lang})"


@dataclass(frozen=True)
class Command:
    """One logical command of a shell block and the line of its file it starts on."""

    text: str
    line: int


def read_blocks(path: Path, name: str | None = None) -> list[Block]:
    """Every fenced block of ``path``, in order, each naming its file ``name`` (default: the
    file's name); an unclosed fence is an error."""
    name = name or path.name
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, start = m.group("indent"), i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        if i == len(lines):
            raise ValueError(f"{name}:{start + 1}: a ``` fence that is never closed")
        blocks.append(Block(m.group("lang").lower(), "\n".join(body) + "\n", start + 1,
                            _paragraph_before(lines, start), name))
        i += 1
    return blocks


def _paragraph_before(lines: list[str], fence: int) -> str:
    out: list[str] = []
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    while j >= 0 and lines[j].strip() and not _FENCE.match(lines[j]):
        out.append(lines[j].strip())
        j -= 1
    return " ".join(reversed(out))


def _scan(text: str) -> Iterator[tuple[int, str, bool]]:
    """``(index, character, quoted)`` of ``text``: ``quoted`` inside '…' or "…" (the quote
    marks themselves count as quoted)."""
    quote = ""
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            yield i, ch, True
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            yield i, ch, True
        else:
            yield i, ch, False


def _drop_comment(line: str) -> str:
    for i, ch, quoted in _scan(line):
        if ch == "#" and not quoted and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def commands(block: Block) -> list[Command]:
    """The logical commands of a shell ``block`` (module docstring)."""
    raw = block.text.splitlines()
    if block.lang == "console":
        raw = [line[2:] if line.startswith("$ ") else "" for line in raw]
    out: list[Command] = []
    pending: list[str] = []
    start = 0
    for n, line in enumerate(raw):
        if not pending:
            start = n
        stripped = line.rstrip()
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(_drop_comment(line))
        text = " ".join(" ".join(pending).split())
        pending = []
        if text:
            out.append(Command(text, block.line + 1 + start))
    if pending:
        raise ValueError(f"{block.where}: the last line ends with a continuation '\\'")
    return out


def _bracket_groups(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each outermost ``[…]`` group outside quotes that starts a word."""
    groups: list[tuple[int, int]] = []
    depth, begin = 0, 0
    for i, ch, quoted in _scan(text):
        if quoted:
            continue
        if ch == "[" and (depth or i == 0 or text[i - 1].isspace()):
            if depth == 0:
                begin = i
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
            if depth == 0:
                groups.append((begin, i + 1))
    if depth:
        raise ValueError(f"an unclosed '[' in {text!r}")
    return groups


def is_synopsis(command: str) -> bool:
    """Whether ``command`` shows optional parts in ``[brackets]``."""
    return bool(_bracket_groups(command))


def minimal(command: str) -> str:
    """``command`` without its optional ``[…]`` parts (the shortest form it shows)."""
    out, last = [], 0
    for begin, end in _bracket_groups(command):
        out.append(command[last:begin])
        last = end
    out.append(command[last:])
    return " ".join("".join(out).split())


def synopsis_words(command: str) -> list[str]:
    """All the words of ``command``, the optional ones included, without the brackets."""
    chars = list(command)
    for begin, end in _bracket_groups(command):
        depth = 0
        for i in range(begin, end):
            if chars[i] == "[" and (i == begin or depth):
                chars[i], depth = " ", depth + 1
            elif chars[i] == "]" and depth:
                chars[i], depth = " ", depth - 1
    return shlex.split("".join(chars))


def words(command: str) -> list[str]:
    """The words of ``command`` as the shell splits them (quotes removed)."""
    return shlex.split(command)
