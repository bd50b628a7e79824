"""The one hardened reader of the structured files credrank accepts (model files, heads files,
profiles, configs, prior files, checkpoints): bytes → UTF-8 → bounded parse.

Every structured file goes through the same steps, each with one declared policy:

1. **bytes**: the file is read whole, at most ``max_bytes`` (default
   :data:`MAX_FILE_BYTES`); a folder, a missing file or an unreadable one is an error naming
   the path;
2. **UTF-8**: a UTF-8 byte-order mark is accepted and dropped; a UTF-16/UTF-32 mark, or bytes
   that are not UTF-8, are an error naming the line and column of the first bad byte (no
   ``UnicodeDecodeError`` leaves this module);
3. **bounded parse** (:func:`parse_text`):

   * JSON: nesting is measured by a linear scan *before* parsing and refused beyond
     :data:`MAX_NESTING` levels; ``NaN`` / ``Infinity`` are refused (they are not JSON), and
     so is a number beyond the float range (``1e400``, which Python would read as infinity);
     duplicate keys are refused (the last silently winning hides mistakes);
   * TOML: :mod:`tomllib`;
   * YAML: PyYAML's safe loader **without aliases**: a ``*name`` is refused at once, so a
     few hundred bytes of nested aliases (the "billion laughs") cannot expand to gigabytes —
     write the value out instead; flow nesting (``[[[…``) is measured by a linear scan before
     the recursive parser runs;
   * for every format a number with more digits than Python converts (4,300) and a nesting
     deeper than the parser's recursion are errors, never ``ValueError`` / ``RecursionError``
     tracebacks; after parsing, nesting beyond :data:`MAX_NESTING` is refused too (TOML
     dotted keys and YAML block nesting are not bracketed);

4. the caller then checks the parsed value against a declared schema
   (:mod:`credrank.core.schema`) whose errors name the key path.

Every error is ``error(f"{path}: …")`` (default :class:`~credrank.core.errors.FileFormatError`,
a ``ValueError``), so a command prints it as ``error: …`` and exits 2.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
import re
import tomllib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from credrank.core.errors import FileFormatError

ErrorType = type[Exception]

#: the largest structured file read (bytes); a model file with a 384-d embedding is ~30 kB
MAX_FILE_BYTES = 64 * 1024 * 1024
#: the most levels of nested lists/tables a structured file may have
MAX_NESTING = 32
#: the formats :func:`read_structured` knows, by suffix
SUFFIXES = {".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml",
            ".jsonl": "jsonl"}

_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
         (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


# --------------------------------------------------------------------------------------------
# bytes and text
# --------------------------------------------------------------------------------------------
def _a(what: str) -> str:
    """``what`` with its indefinite article (``an audit config``, ``a spec``)."""
    return f"{'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"


def read_bytes(path: str | Path, *, what: str = "file", max_bytes: int = MAX_FILE_BYTES,
               error: ErrorType = FileFormatError) -> bytes:
    """The bytes of ``path`` (at most ``max_bytes``), or ``error`` naming the path."""
    p = Path(path)
    if p.is_dir():
        raise error(f"{p}: expected {_a(what)}, got a directory")
    try:
        with p.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise error(f"{p}: the {what} does not exist") from None
    except OSError as exc:
        raise error(f"{p}: cannot read the {what}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise error(f"{p}: expected {_a(what)} of at most {max_bytes:,} bytes, got a larger "
                    "file")
    return data


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    return line, offset - start + 1


def decode_utf8(data: bytes, where: str, *, error: ErrorType = FileFormatError) -> str:
    """``data`` as text: UTF-8, a UTF-8 byte-order mark dropped; other encodings are an error
    naming the line and column of the first byte that is not UTF-8."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise error(f"{where}: expected UTF-8 text, got {name} (byte-order mark); save the "
                        "file as UTF-8")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _line_col(data, exc.start)
        raise error(f"{where}: line {line}, column {col}: expected UTF-8 text, got the byte "
                    f"0x{data[exc.start]:02x}") from None
    if "\x00" in text:
        line, col = _line_col(data, data.index(b"\x00"))
        raise error(f"{where}: line {line}, column {col}: expected text, got a NUL byte "
                    "(a binary file?)")
    return text


def read_text(path: str | Path, *, what: str = "file", max_bytes: int = MAX_FILE_BYTES,
              error: ErrorType = FileFormatError) -> str:
    """:func:`read_bytes` then :func:`decode_utf8`."""
    return decode_utf8(read_bytes(path, what=what, max_bytes=max_bytes, error=error),
                       str(path), error=error)


# --------------------------------------------------------------------------------------------
# nesting
# --------------------------------------------------------------------------------------------
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_too_deep(text: str, limit: int = MAX_NESTING) -> bool:
    """Whether a JSON text nests lists/objects more than ``limit`` levels (the top-level
    object counts as 1): a linear scan without recursion, before parsing."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > limit:
                return True
        elif tok in "]}":
            depth -= 1
    return False


def nesting_exceeds(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` nests lists/dicts more than ``limit`` levels (a scalar is 0 levels);
    iterative, so any depth is measured without recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, dict):
            x = list(x.values())
        elif not isinstance(x, list | tuple):
            continue
        if d + 1 > limit:
            return True
        stack.extend((y, d + 1) for y in x)
    return False


# --------------------------------------------------------------------------------------------
# parsers
# --------------------------------------------------------------------------------------------
class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses aliases (``*name``) where they appear, and a key
    given twice in one mapping (PyYAML kept the last, silently; JSON and TOML refuse it)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"expected unique keys, got {key!r} twice (first at line "
                        f"{seen[key].line + 1})", key_node.start_mark)
                seen[key] = key_node.start_mark
            except TypeError:  # an unhashable key: PyYAML's own check says it
                pass
        return super().construct_mapping(node, deep=deep)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "expected a plain value, got an alias (*" + str(event.anchor)
                + "): aliases are not accepted (they can expand a small file to gigabytes); "
                "write the value out", event.start_mark)
        return super().compose_node(parent, index)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"expected a finite number, got {name} (not JSON)")


def _nonfinite_path(value: Any, path: str = "") -> str | None:
    """The key path (``a.b[0]``, as the schema names keys) of the first non-finite float in a
    parsed JSON value, in document order; ``None`` when there is none."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "the value"
    if isinstance(value, dict):
        for key, item in value.items():
            found = _nonfinite_path(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _nonfinite_path(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _short(literal: str) -> str:
    return literal if len(literal) <= 40 else f"{literal[:20]}…({len(literal):,} characters)"


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"expected unique keys, got {key!r} twice")
        out[key] = value
    return out


#: what the decoder's messages mean, said as what was expected (it said "expected JSON, got
#: expecting value": its own words after ours)
_JSON_EXPECTED = {
    "Expecting value": "a value",
    "Expecting property name enclosed in double quotes": "a key in double quotes",
    "Expecting ':' delimiter": "':' after the key",
    "Expecting ',' delimiter": "',' or the closing bracket",
    "Unterminated string starting at": "the string's closing quote",
    "Extra data": "nothing after the value",
}


def _json_problem(exc: json.JSONDecodeError, text: str) -> str:
    """``expected JSON (…), got …`` for a decoding error: what the decoder wanted, and what it
    found at the position (the end of the text, or the next characters)."""
    wanted = _JSON_EXPECTED.get(exc.msg)
    if wanted is None:
        return f"expected JSON, got a problem: {exc.msg.lower()}"
    rest = "" if exc.msg.startswith("Unterminated") else text[exc.pos:].lstrip()
    if not rest:
        found = "the end of the text (cut short?)"
    else:
        found = repr(rest[:20] + ("…" if len(rest) > 20 else ""))
    return f"expected JSON ({wanted}), got {found}"


def parse_json(text: str, where: str, *, error: ErrorType = FileFormatError,
               max_nesting: int = MAX_NESTING) -> Any:
    """One JSON value from ``text`` (see the module docstring for the bounds)."""
    if json_too_deep(text, max_nesting):
        raise error(f"{where}: expected nesting at most {max_nesting} levels deep, got deeper")
    overflow: list[str] = []

    def read_float(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            overflow.append(literal)
        return value

    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=read_float,
                           object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        at = (f"line {exc.lineno}, column {exc.colno}" if "\n" in text.rstrip("\r\n")
              else f"column {exc.colno}")
        raise error(f"{where}: {at}: {_json_problem(exc, text)}") from None
    except RecursionError:
        raise error(f"{where}: expected nesting at most {max_nesting} levels deep, got "
                    "deeper") from None
    except ValueError as exc:  # NaN/Infinity, duplicate keys, integers of > 4,300 digits
        at = _bad_literal(text)
        raise error(f"{where}: {at}{_value_message(exc)}") from None
    if overflow:  # a float literal beyond the float range (1e400) reads as inf: refused
        raise error(f"{where}: {_bad_literal(text)}{_nonfinite_path(value)}: expected a finite "
                    f"number, got {float(overflow[0])} (the literal {_short(overflow[0])} is "
                    "beyond the float range, about 1.8e308)")
    return value


_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"|NaN|-?Infinity|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')


def _refused_number(literal: str) -> bool:
    """A NaN/Infinity literal, an integer of more than 4,300 digits, or a float beyond range."""
    if literal in ("NaN", "Infinity", "-Infinity"):
        return True
    if not any(c in literal for c in ".eE"):
        return len(literal.lstrip("-")) > 4300
    return not math.isfinite(float(literal))


def _bad_literal(text: str) -> str:
    """``"line L, column C: "`` of the first NaN, Infinity, over-long integer or out-of-range
    float outside a string of a JSON text (``""`` when there is none: e.g. a duplicate
    key)."""
    for m in _LITERAL.finditer(text):
        if not m.group().startswith('"') and _refused_number(m.group()):
            line = text.count("\n", 0, m.start()) + 1
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            return (f"line {line}, column {col}: " if "\n" in text.rstrip("\r\n")
                    else f"column {col}: ")
    return ""


def _value_message(exc: BaseException) -> str:
    text = str(exc)
    if "integer string conversion" in text:
        return "expected a number of at most 4,300 digits, got a longer one"
    return text


def parse_toml(text: str, where: str, *, error: ErrorType = FileFormatError) -> Any:
    """One TOML document from ``text``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where}: expected TOML, got {exc}") from None
    except RecursionError:
        raise error(f"{where}: expected nesting at most {MAX_NESTING} levels deep, got "
                    "deeper") from None
    except ValueError as exc:
        raise error(f"{where}: {_value_message(exc)}") from None


def yaml_flow_too_deep(text: str, limit: int = MAX_NESTING) -> bool:
    """Whether the flow collections (``[…]``, ``{…}``) of a YAML text nest more than ``limit``
    levels: a linear scan that skips quoted scalars and comments, before the (slow, recursive)
    parser. Brackets inside plain scalars count too, so the bound is conservative: only text
    with more than ``limit`` of them open at once is refused here."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c in "[{":
            depth += 1
            if depth > limit:
                return True
        elif c in "]}":
            depth = max(depth - 1, 0)
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n"):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == "'":
            end = text.find("'", i + 1)
            while end >= 0 and text.startswith("''", end):
                end = text.find("'", end + 2)
            i = n if end < 0 else end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j
        i += 1
    return False


def parse_yaml(text: str, where: str, *, error: ErrorType = FileFormatError,
               max_nesting: int = MAX_NESTING) -> Any:
    """One YAML document from ``text`` (safe loader, no aliases; empty → ``None``)."""
    if yaml_flow_too_deep(text, max_nesting):
        raise error(f"{where}: expected nesting at most {max_nesting} levels deep, got deeper")
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise error(f"{where}: {at}{problem}") from None
    except yaml.YAMLError as exc:
        raise error(f"{where}: expected YAML, got {exc}") from None
    except RecursionError:
        raise error(f"{where}: expected nesting at most {MAX_NESTING} levels deep, got "
                    "deeper") from None
    except ValueError as exc:
        raise error(f"{where}: {_value_message(exc)}") from None


def parse_text(text: str, fmt: str, where: str, *, error: ErrorType = FileFormatError,
               max_nesting: int = MAX_NESTING) -> Any:
    """``text`` parsed as ``fmt`` (``json``, ``toml`` or ``yaml``), nesting bounded."""
    if fmt == "json":
        data = parse_json(text, where, error=error, max_nesting=max_nesting)
    elif fmt == "toml":
        data = parse_toml(text, where, error=error)
    elif fmt == "yaml":
        data = parse_yaml(text, where, error=error, max_nesting=max_nesting)
    else:
        raise ValueError(f"fmt: expected json, toml or yaml, got {fmt!r}")
    if nesting_exceeds(data, max_nesting):
        raise error(f"{where}: expected nesting at most {max_nesting} levels deep, got deeper")
    return data


def format_of(path: str | Path, formats: Iterable[str], *, what: str = "file",
              error: ErrorType = FileFormatError) -> str:
    """The format of ``path`` from its suffix, one of ``formats``; an error otherwise."""
    allowed = tuple(formats)
    fmt = SUFFIXES.get(Path(path).suffix.lower())
    if fmt not in allowed:
        names = " or ".join(f".{f}" if f != "yaml" else ".yaml/.yml" for f in allowed)
        raise error(f"{path}: expected {_a(what)} ending in {names}, got "
                    f"{Path(path).suffix or 'no suffix'!r}")
    return fmt


def read_structured(path: str | Path, *, what: str = "file",
                    formats: Iterable[str] = ("json", "toml", "yaml"), fmt: str | None = None,
                    max_bytes: int = MAX_FILE_BYTES, max_nesting: int = MAX_NESTING,
                    error: ErrorType = FileFormatError) -> Any:
    """The parsed content of the structured file at ``path`` (module docstring): the format
    from ``fmt`` or the suffix (one of ``formats``); ``error`` naming the path otherwise."""
    if fmt is None:
        fmt = format_of(path, formats, what=what, error=error)
    text = read_text(path, what=what, max_bytes=max_bytes, error=error)
    return parse_text(text, fmt, str(path), error=error, max_nesting=max_nesting)


# --------------------------------------------------------------------------------------------
# strict CSV
# --------------------------------------------------------------------------------------------
#: the longest CSV value read (characters): the csv module's default field limit, checked
#: here on every value so that the bound holds whatever the process-wide limit is
MAX_CSV_CHARS = 131_072


def csv_records(lines: Iterable[str], where: str, *, delimiter: str = ",",
                error: ErrorType = FileFormatError,
                name: Callable[[int], str] | None = None,
                may_span: Callable[[int], bool] | None = None,
                max_chars: int = MAX_CSV_CHARS) -> Iterator[tuple[int, list[str]]]:
    """``(line number, values)`` for each row of a CSV text, header included: strict.

    Declared policies: a value never spans lines unless ``may_span(column)`` says its column
    may (page text) — a quoted value that runs past the end of its line (an unterminated
    quote, which would otherwise swallow the rows after it into one value) is an error naming
    the line where that value began; a value over ``max_chars`` characters is an error naming
    its line and column; any other CSV error (a stray quote in strict mode, the csv module's
    own field limit) is an error naming its line. ``name(i)`` names column ``i`` in messages
    (default ``column i+1``).
    """
    reader = csv.reader(lines, delimiter=delimiter, strict=True)

    def column(i: int) -> str:
        return name(i) if name is not None else f"column {i + 1}"

    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            hint = (f" (a quoted field that begins on line {start} is never closed: "
                    "unterminated quote?)" if "end of data" in str(exc) else "")
            raise error(f"{where}:{start}: expected well-formed CSV, got a parse error "
                        f"({exc}){hint}") from None
        for i, value in enumerate(row):
            if len(value) > max_chars:
                raise error(f"{where}:{start}: {column(i)}: expected at most {max_chars:,} "
                            f"characters, got {len(value):,}")
        if reader.line_num > start:
            for i, value in enumerate(row):
                if ("\n" in value or "\r" in value) and not (may_span and may_span(i)):
                    raise error(f"{where}:{start}: {column(i)}: expected a value on one line, "
                                f"got a quoted value running on to line {reader.line_num} "
                                "(unterminated quote?)")
        yield start, row


class CsvRows:
    """The data rows of a CSV text as ``(line number, {column: value})``, the first non-blank
    row being the header (:attr:`header` once iteration has begun); see :func:`csv_rows`."""

    def __init__(self, lines: Iterable[str], where: str, *, required: Sequence[str] = (),
                 delimiter: str = ",", what: str = "file", error: ErrorType = FileFormatError,
                 multiline: Collection[str] = (), max_chars: int = MAX_CSV_CHARS) -> None:
        self._lines, self.where, self.required = lines, where, tuple(required)
        self.delimiter, self.what, self.error = delimiter, what, error
        self.multiline, self.max_chars = frozenset(multiline), max_chars
        self.header: list[str] | None = None

    def _name(self, i: int) -> str:
        h = self.header
        return f"field {h[i]!r}" if h is not None and i < len(h) else f"column {i + 1}"

    def _may_span(self, i: int) -> bool:
        h = self.header
        return h is not None and i < len(h) and h[i] in self.multiline

    def __iter__(self) -> Iterator[tuple[int, dict[str, str | None]]]:
        where, error = self.where, self.error
        for start, row in csv_records(self._lines, where, delimiter=self.delimiter,
                                      error=error, name=self._name, may_span=self._may_span,
                                      max_chars=self.max_chars):
            if self.header is None:
                if not row:
                    continue
                header = [h.lstrip("\ufeff").strip() if i == 0 else h.strip()
                          for i, h in enumerate(row)]
                seen: dict[str, int] = {}
                for i, h in enumerate(header):  # unnamed columns (a spreadsheet's trailing
                    if h and h in seen:  # empty ones) are read by no name: they may repeat
                        raise error(f"{where}:{start}: header: expected each column named "
                                    f"once, got {h!r} twice (columns {seen[h] + 1} and "
                                    f"{i + 1})")
                    seen[h] = i
                missing = [f for f in self.required if f not in header]
                if missing:
                    raise error(f"{where}:{start}: header: expected columns "
                                f"{list(self.required)}, missing {missing}; got {header}")
                self.header = header
                continue
            if not row:
                continue
            header = self.header
            if len(row) > len(header):
                raise error(f"{where}:{start}: row has more values than the {len(header)} "
                            f"header columns (expected at most {len(header)}, got {len(row)})")
            yield start, {h: (row[i] if i < len(row) else None) for i, h in enumerate(header)}
        if self.header is None:
            wanted = (f"columns {list(self.required)}" if self.required
                      else "a header line naming the columns")
            raise error(f"{where}:1: header: expected {wanted}, got an empty {self.what}")


def csv_rows(lines: Iterable[str], where: str, *, required: Sequence[str] = (),
             delimiter: str = ",", what: str = "file", error: ErrorType = FileFormatError,
             multiline: Collection[str] = (), max_chars: int = MAX_CSV_CHARS) -> CsvRows:
    """The data rows of a CSV text (:func:`csv_records`), the first non-blank row being the
    header, as an iterable :class:`CsvRows`.

    Declared policies besides :func:`csv_records`': only the columns named in ``multiline``
    may hold values spanning lines; the header must hold every ``required`` column (an error
    naming the header found; header names are stripped, a UTF-8 byte-order mark before the
    first one dropped) and name each column once (a name given twice is an error naming it
    and both columns: the later value would silently replace the earlier); a row with more
    values than the header is an error; a missing trailing value is ``None``; blank lines are
    skipped; a text without a header is an error.
    """
    return CsvRows(lines, where, required=required, delimiter=delimiter, what=what,
                   error=error, multiline=multiline, max_chars=max_chars)


def read_csv(path: str | Path, *, required: Sequence[str] = (), delimiter: str = ",",
             what: str = "CSV file", max_bytes: int = MAX_FILE_BYTES,
             error: ErrorType = FileFormatError, multiline: Collection[str] = (),
             max_chars: int = MAX_CSV_CHARS) -> CsvRows:
    """:func:`csv_rows` of the file at ``path`` after :func:`read_text` (UTF-8, BOM dropped)."""
    text = read_text(path, what=what, max_bytes=max_bytes, error=error)
    return csv_rows(io.StringIO(text, newline=""), str(path), required=required,
                    delimiter=delimiter, what=what, error=error, multiline=multiline,
                    max_chars=max_chars)


def jsonl_values(path: str | Path, *, what: str = "JSONL file",
                 error: ErrorType = FileFormatError) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed value)`` per non-blank line of the JSON Lines file ``path``,
    streamed (an evaluation set may be larger than :data:`MAX_FILE_BYTES`, so it is not read
    whole and each line is parsed as it comes): ``error`` naming ``what`` when the file is
    absent, and the line for a line that is not JSON."""
    p = Path(path)
    if not p.exists():
        raise error(f"path: {what} not found at {p}")
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{p}:{lineno}: not valid JSON ({exc})") from None


__all__ = ["MAX_CSV_CHARS", "MAX_FILE_BYTES", "MAX_NESTING", "CsvRows", "csv_records",
           "csv_rows", "decode_utf8", "format_of", "json_too_deep", "jsonl_values",
           "nesting_exceeds",
           "parse_json", "parse_text", "parse_toml", "parse_yaml", "read_bytes", "read_csv",
           "read_structured", "read_text", "yaml_flow_too_deep"]
