"""Provenance: URL → host → registered domain → source type.

The source type of a document (the taxonomy of seed 004, :data:`credrank.documents.SOURCE_TYPES`)
is derived from *where the document comes from*, never from what its text says about itself:
no function here takes the text, so "CNN news: ..." posted on a blog host stays a ``blog``.
A record's *declared* ``source_type`` is metadata that can be spoofed; it is used only when the
configuration trusts it (``trust_declared=True``), and a disagreement with the URL is recorded
as a ``conflict`` either way.

**What ``government`` means.** The seed taxonomy has no institutional type, so ``government``
covers public, academic and health authorities: government and military hosts (``gov``,
``gov.<cc>``, ``gouv.fr``, ``gc.ca`` ...), intergovernmental bodies (``int``, ``europa.eu``),
universities (``edu``, ``ac.<cc>``, ``edu.<cc>``) and health authorities and institutions
(``who.int``, ``nhs.uk``, ``cdc.gov``, ``mayoclinic.org`` ...).

**Host parsing** (:func:`parse_url`, :func:`parse_host`). A missing scheme means ``http://``;
userinfo and port are dropped; the host is lowercased, percent-decoded, IDNA-encoded to its
ASCII (punycode) form and stripped of a trailing dot, so ``bücher.de`` and ``xn--bcher-kva.de``
are one host. Backslashes count as slashes and tabs/newlines are removed, as browsers do, so
``https://example.com\\@evil.com`` is ``example.com``. IP addresses are kept (canonical form)
with no registered domain. The registered domain comes from the public-suffix list bundled
with ``tldextract`` (ICANN section, offline snapshot: nothing is ever fetched). An invalid URL
gives host ``None``, type ``unknown`` and the reason in ``Provenance.url_error``.

**Rules** (``credrank/rules/source_types.toml``, the project's own), most specific first:

1. ``paths``: host plus a path prefix (``ncbi.nlm.nih.gov/pmc``);
2. ``hosts``: exact host (``pubmed.ncbi.nlm.nih.gov``), a leading ``www.`` ignored;
3. ``first_labels``: first label of a subdomain (``blog.example.com`` → blog);
4. ``domains``: a domain and all hosts under it, the longest match winning (``nih.gov``);
5. ``suffixes``: label suffixes, ``<cc>`` standing for a two-letter country code (``gov.<cc>``).

**User tables** (:func:`load_domain_table`): CSV files with a ``domain`` column and a
``source_type`` column and/or a score column (``score``, else ``pc1`` as in the domain-quality
ratings of Lin et al. 2023, or the ``score_column`` named). A domain cell may be ``host`` or
``host/path``. Table entries are matched by host/path, then exact host, then each parent domain
down to the registered domain, and any table match overrides every built-in rule (user
knowledge wins); among several tables, a later one overrides an earlier one for the same key.
A score only fills ``domain_score``; it never changes the type.
"""

from __future__ import annotations

import csv
import ipaddress
import math
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

import tldextract

from credrank.documents import SOURCE_TYPES, Document

__all__ = [
    "RULE_KINDS",
    "DomainTable",
    "DomainTableError",
    "ParsedURL",
    "Provenance",
    "RulesError",
    "SourceRules",
    "SourceTyper",
    "load_domain_table",
    "load_rules",
    "parse_host",
    "parse_url",
]

#: kinds of built-in rule, most specific first
RULE_KINDS: tuple[str, ...] = ("paths", "hosts", "first_labels", "domains", "suffixes")

#: score columns tried, in order, when a table names none
SCORE_COLUMNS: tuple[str, ...] = ("score", "pc1")

_CC = "<cc>"
_RULED_TYPES = tuple(t for t in SOURCE_TYPES if t != "unknown")
_LABEL_RE = re.compile(r"[a-z0-9_-]{1,63}")
_SCHEME_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9+.\-]*:")
_DROP_RE = re.compile(r"[\t\n\r]")
_IDEOGRAPHIC_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
_MAX_HOST_LEN = 253
_C0_AND_SPACE = "".join(chr(i) for i in range(0x21))


class RulesError(ValueError):
    """The built-in (or a custom) rules file is malformed."""


class DomainTableError(ValueError):
    """A user domain table is malformed; the message names file, line and field."""


class _HostError(ValueError):
    pass


# --------------------------------------------------------------------------- host parsing


@lru_cache(maxsize=1)
def _extractor() -> tldextract.TLDExtract:
    # the snapshot bundled with tldextract; no URL list, no disk cache: never fetches
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def _ascii_label(label: str) -> str:
    if label.isascii():
        return label.lower()
    try:
        import idna

        return idna.encode(label, uts46=True).decode("ascii").lower()
    except ImportError:  # pragma: no cover - idna ships with httpx
        pass
    except (UnicodeError, ValueError) as exc:
        raise _HostError(f"label {label!r} is not a valid internationalised name ({exc})") from exc
    try:  # pragma: no cover
        return label.encode("idna").decode("ascii").lower()
    except UnicodeError as exc:  # pragma: no cover
        raise _HostError(f"label {label!r} is not a valid internationalised name") from exc


def _normalize_host(raw: str) -> tuple[str, bool]:
    """Canonical ASCII host and whether it is an IP address; raises _HostError."""
    text = unquote(raw).strip().translate(_IDEOGRAPHIC_DOTS)
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if text.endswith("."):
        text = text[:-1]
    if not text:
        raise _HostError("empty host")
    try:
        return str(ipaddress.ip_address(text)).lower(), True
    except ValueError:
        pass
    labels = [_ascii_label(label) for label in text.split(".")]
    for label in labels:
        if not label:
            raise _HostError(f"host {raw!r} has an empty label")
        if not _LABEL_RE.fullmatch(label):
            raise _HostError(f"host {raw!r} has an invalid label {label!r}")
    if labels[-1].isdigit():
        raise _HostError(f"host {raw!r} looks like an IPv4 address but is not a valid one")
    host = ".".join(labels)
    if len(host) > _MAX_HOST_LEN:
        raise _HostError(f"host is {len(host)} characters long, more than {_MAX_HOST_LEN}")
    return host, False


def _registered_domain(host: str) -> str | None:
    result = _extractor()(host)
    if result.domain and result.suffix:
        return f"{result.domain}.{result.suffix}"
    return None


@lru_cache(maxsize=1 << 16)
def _resolve_host(raw: str) -> tuple[str | None, str | None, str | None]:
    """(host, registered_domain, error) for a raw host string, cached."""
    try:
        host, is_ip = _normalize_host(raw)
    except _HostError as exc:
        return None, None, str(exc)
    return host, (None if is_ip else _registered_domain(host)), None


class ParsedURL(NamedTuple):
    """A URL reduced to what provenance needs; ``error`` says why ``host`` is ``None``."""

    host: str | None
    registered_domain: str | None
    path: str
    error: str | None


def _invalid(reason: str) -> ParsedURL:
    return ParsedURL(None, None, "", reason)


def parse_url(url: str) -> ParsedURL:
    """Parse ``url`` into host, registered domain and path, offline.

    Never raises for a bad URL string (the reason goes to ``error``); raises ``TypeError``
    when ``url`` is not a string.
    """
    if not isinstance(url, str):
        raise TypeError(f"url: expected a string, got {type(url).__name__}")
    text = _DROP_RE.sub("", url).strip(_C0_AND_SPACE)
    if not text:
        return _invalid("empty URL")
    text = text.replace("\\", "/")
    scheme = _SCHEME_RE.match(text)
    if scheme and text[scheme.end():].startswith("//"):
        pass
    elif text.startswith("//"):
        text = "http:" + text
    elif scheme and not text[scheme.end():scheme.end() + 1].isdigit():
        name = scheme.group(0)[:-1]
        return _invalid(f"no '//' after the scheme '{name}:', so the URL names no host")
    else:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        raw_host = parts.hostname
        _ = parts.port  # validates the port
    except ValueError as exc:
        return _invalid(f"unparseable URL: {exc}")
    if not raw_host:
        return _invalid("the URL has no host")
    host, registered, error = _resolve_host(raw_host)
    if error is not None:
        return _invalid(error)
    return ParsedURL(host, registered, parts.path, None)


def parse_host(url: str) -> tuple[str | None, str | None]:
    """``(host, registered_domain)`` of ``url``; ``(None, None)`` for an invalid URL.

    The host keeps its subdomains (``www.cdc.gov``); the registered domain is the label
    under the public suffix (``cdc.gov``, ``bbc.co.uk``), ``None`` for IP addresses and
    hosts without a public suffix.
    """
    parsed = parse_url(url)
    return parsed.host, parsed.registered_domain


def _bare(host: str, registered: str | None) -> str:
    """Host without a leading ``www.`` label when that label is a subdomain."""
    if registered is not None and host.startswith("www.") and len(host) > len(registered):
        return host[4:]
    return host


def _parents(bare: str, registered: str | None) -> list[str]:
    """``bare`` and each parent domain down to the registered domain (empty if none)."""
    if registered is None:
        return []
    labels = bare.split(".")
    stop = registered.count(".") + 1
    return [".".join(labels[i:]) for i in range(len(labels) - stop + 1)]


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _path_match(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


# --------------------------------------------------------------------------- built-in rules


@dataclass(frozen=True)
class SourceRules:
    """Parsed rules file (see the module docstring for the matching order)."""

    source: str
    paths: Mapping[str, tuple[tuple[str, str], ...]]  # host -> ((prefix, type), ...) longest first
    hosts: Mapping[str, str]
    first_labels: Mapping[str, str]
    domains: Mapping[str, str]
    suffixes: tuple[tuple[tuple[str, ...], str, str], ...]  # (labels, type, pattern), longest first


def _rule_host(entry: str, where: str) -> str:
    if entry.startswith("www."):
        raise RulesError(f"{where}: write {entry!r} without 'www.' (it is ignored on hosts)")
    try:
        host, _ = _normalize_host(entry)
    except _HostError as exc:
        raise RulesError(f"{where}: {exc}") from exc
    return host


def _rule_entry(kind: str, entry: str, where: str) -> str:
    if kind in ("hosts", "domains"):
        return _rule_host(entry, where)
    if kind == "paths":
        host, sep, rest = entry.partition("/")
        if not sep or not rest.strip("/"):
            raise RulesError(f"{where}: expected 'host/path', got {entry!r}")
        return _rule_host(host, where) + "/" + rest.strip("/").lower()
    if kind == "first_labels":
        if not _LABEL_RE.fullmatch(entry):
            raise RulesError(f"{where}: expected one host label, got {entry!r}")
        return entry
    labels = entry.split(".")  # suffixes
    if not all(label == _CC or _LABEL_RE.fullmatch(label) for label in labels):
        raise RulesError(f"{where}: expected labels or '{_CC}' separated by dots, got {entry!r}")
    return entry


@lru_cache(maxsize=8)
def _load_rules_cached(source: str) -> SourceRules:
    if source == "<bundled>":
        resource = resources.files("credrank").joinpath("rules/source_types.toml")
        text = resource.read_text(encoding="utf-8")
        name = "credrank/rules/source_types.toml"
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise RulesError(f"{source}: cannot read rules file: {exc}") from exc
        name = source
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"{name}: invalid TOML: {exc}") from exc

    seen: dict[tuple[str, str], str] = {}
    for section, table in data.items():
        if section not in _RULED_TYPES:
            raise RulesError(f"{name}: unknown section [{section}]; expected one of "
                             f"{', '.join(_RULED_TYPES)}")
        if not isinstance(table, dict):
            raise RulesError(f"{name}: [{section}] must be a table, got {type(table).__name__}")
        for kind, entries in table.items():
            where = f"{name} [{section}] {kind}"
            if kind not in RULE_KINDS:
                raise RulesError(f"{name} [{section}]: unknown key {kind!r}; expected one of "
                                 f"{', '.join(RULE_KINDS)}")
            if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
                raise RulesError(f"{where}: expected a list of strings")
            for raw in entries:
                entry = _rule_entry(kind, raw.strip().lower(), where)
                if kind == "domains" and _registered_domain(entry) is None:
                    raise RulesError(f"{where}: {entry!r} is a public suffix (no host is "
                                     "under it as a domain); list it under suffixes")
                if (kind, entry) in seen:
                    raise RulesError(f"{where}: {entry!r} is already listed under "
                                     f"[{seen[kind, entry]}] {kind}")
                seen[kind, entry] = section

    paths: dict[str, list[tuple[str, str]]] = {}
    by_kind: dict[str, dict[str, str]] = {kind: {} for kind in RULE_KINDS}
    for (kind, entry), stype in seen.items():
        if kind == "paths":
            host, _, rest = entry.partition("/")
            paths.setdefault(host, []).append(("/" + rest, stype))
        else:
            by_kind[kind][entry] = stype
    suffixes = sorted(
        ((tuple(pattern.split(".")), stype, pattern)
         for pattern, stype in by_kind["suffixes"].items()),
        key=lambda item: (-len(item[0]), item[0].count(_CC)))  # exact labels beat <cc>
    return SourceRules(
        source=name,
        paths={h: tuple(sorted(v, key=lambda item: -len(item[0]))) for h, v in paths.items()},
        hosts=by_kind["hosts"],
        first_labels=by_kind["first_labels"],
        domains=by_kind["domains"],
        suffixes=tuple(suffixes),
    )


def load_rules(path: str | Path | None = None) -> SourceRules:
    """Load and validate a rules file; ``None`` loads the bundled ``source_types.toml``.

    Raises :class:`RulesError` naming the file, section and key of a bad entry, an unknown
    section or an entry listed under two types.
    """
    return _load_rules_cached("<bundled>" if path is None else str(Path(path)))


def _suffix_match(labels: Sequence[str], pattern: Sequence[str]) -> bool:
    if len(labels) < len(pattern):
        return False
    tail = labels[len(labels) - len(pattern):]
    return all(p == label or (p == _CC and len(label) == 2 and label.isalpha())
               for p, label in zip(pattern, tail, strict=True))


# --------------------------------------------------------------------------- user tables


@dataclass(frozen=True)
class DomainTable:
    """A user table: ``types`` and ``scores`` keyed by ``host`` or ``host/path``.

    Keys are lowercase punycode; a ``www.`` is kept, so ``www.x.com`` and ``x.com`` may carry
    different values (the exact host is tried first). ``unmatchable`` lists cells kept
    verbatim because they are not valid host names (e.g. containing an en dash) and so can
    never match a URL.
    """

    path: Path
    types: Mapping[str, str]
    scores: Mapping[str, float]
    score_column: str | None
    unmatchable: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.path.name


def _table_key(cell: str, where: str) -> tuple[str, bool]:
    """(key, matchable) for a table's domain cell; raises DomainTableError."""
    text = cell.strip()
    if not text:
        raise DomainTableError(f"{where}: expected a domain such as 'example.com', got an "
                               "empty cell")
    if any(ch.isspace() for ch in text):
        raise DomainTableError(f"{where}: expected a domain without spaces, got {cell!r}")
    if "://" in text:
        raise DomainTableError(f"{where}: expected a bare domain such as 'example.com' "
                               f"(optionally 'example.com/path'), got the URL {cell!r}")
    host, _, rest = text.partition("/")
    host = host.lower()
    try:
        host, _ = _normalize_host(host)
        matchable = True
    except _HostError:
        host, matchable = host.rstrip("."), False
    if not host:
        raise DomainTableError(f"{where}: expected a domain before the path, got {cell!r}")
    rest = rest.strip("/").lower()
    return (f"{host}/{rest}" if rest else host), matchable


def load_domain_table(path: str | Path, score_column: str | None = None) -> DomainTable:
    """Read a CSV domain table.

    Header: ``domain`` plus ``source_type`` (values in ``SOURCE_TYPES``) and/or a score
    column: ``score_column`` if given, else ``score``, else ``pc1``; scores must be finite
    numbers in [0, 1]. Column names are matched case-insensitively. Blank lines are skipped.
    A key repeated with a different value is an error. Every error names file, line and
    field (:class:`DomainTableError`).
    """
    p = Path(path)
    try:
        handle = p.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise DomainTableError(f"{p}: cannot read domain table: {exc}") from exc
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
            if header is None:
                raise DomainTableError(f"{p}:1: empty file; expected a header 'domain,"
                                       "source_type' or 'domain,score'")
            columns = [name.strip().lower() for name in header]
            if len(set(columns)) != len(columns):
                raise DomainTableError(f"{p}:1: duplicate column names in {header}")
            if "domain" not in columns:
                raise DomainTableError(f"{p}:1: field 'domain': no 'domain' column; found "
                                       f"{', '.join(header)}")
            if score_column is not None:
                if score_column.strip().lower() not in columns:
                    raise DomainTableError(f"{p}:1: score_column {score_column!r} is not a "
                                           f"column; found {', '.join(header)}")
                score_col: str | None = score_column.strip().lower()
            else:
                score_col = next((c for c in SCORE_COLUMNS if c in columns), None)
            type_col = "source_type" if "source_type" in columns else None
            if type_col is None and score_col is None:
                raise DomainTableError(
                    f"{p}:1: expected a 'source_type' column or a score column "
                    f"({', '.join(SCORE_COLUMNS)}, or score_column=...); found {', '.join(header)}")
            i_domain = columns.index("domain")
            i_type = columns.index(type_col) if type_col else None
            i_score = columns.index(score_col) if score_col else None

            types: dict[str, str] = {}
            scores: dict[str, float] = {}
            first_line: dict[str, int] = {}
            unmatchable: list[str] = []
            for row in reader:
                line = reader.line_num
                if not any(cell.strip() for cell in row):
                    continue
                if len(row) != len(columns):
                    raise DomainTableError(f"{p}:{line}: expected {len(columns)} fields "
                                           f"({', '.join(header)}), got {len(row)}")
                key, matchable = _table_key(row[i_domain], f"{p}:{line}: field 'domain'")
                if not matchable:
                    unmatchable.append(key)
                if i_type is not None:
                    stype = row[i_type].strip()
                    if stype not in SOURCE_TYPES:
                        raise DomainTableError(
                            f"{p}:{line}: field 'source_type': expected one of "
                            f"{', '.join(SOURCE_TYPES)}, got {row[i_type]!r}")
                    if types.get(key, stype) != stype:
                        raise DomainTableError(
                            f"{p}:{line}: field 'source_type': {key!r} is already typed "
                            f"{types[key]!r} on line {first_line[key]}, here {stype!r}")
                    types[key] = stype
                if i_score is not None:
                    cell = row[i_score].strip()
                    try:
                        score = float(cell)
                    except ValueError:
                        score = math.nan
                    if not (math.isfinite(score) and 0.0 <= score <= 1.0):
                        raise DomainTableError(
                            f"{p}:{line}: field {score_col!r}: expected a number in [0, 1], "
                            f"got {row[i_score]!r}")
                    if scores.get(key, score) != score:
                        raise DomainTableError(
                            f"{p}:{line}: field {score_col!r}: {key!r} already scored "
                            f"{scores[key]} on line {first_line[key]}, here {score}")
                    scores[key] = score
                first_line.setdefault(key, line)
        except csv.Error as exc:
            raise DomainTableError(f"{p}:{reader.line_num}: malformed CSV: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise DomainTableError(f"{p}: not UTF-8 text: {exc}") from exc
    return DomainTable(path=p, types=types, scores=scores, score_column=score_col,
                       unmatchable=tuple(unmatchable))


class _Lookup:
    """Merged table entries: plain keys and, per host, path prefixes (longest first)."""

    def __init__(self) -> None:
        self.keys: dict[str, tuple[object, str]] = {}
        self._paths: dict[str, dict[str, tuple[object, str]]] = {}
        self.paths: dict[str, tuple[tuple[str, object, str], ...]] = {}

    def add(self, key: str, value: object, rule: str) -> None:
        host, sep, rest = key.partition("/")
        if sep:
            self._paths.setdefault(host, {})["/" + rest] = (value, rule)
        else:
            self.keys[key] = (value, rule)

    def freeze(self) -> None:
        self.paths = {host: tuple(sorted(((pre, v, r) for pre, (v, r) in entries.items()),
                                         key=lambda item: -len(item[0])))
                      for host, entries in self._paths.items()}

    def by_path(self, hosts: Iterable[str], path: str) -> tuple[object, str] | None:
        for host in hosts:
            for prefix, value, rule in self.paths.get(host, ()):
                if _path_match(path, prefix):
                    return value, rule
        return None

    def by_host(self, chain: Iterable[str]) -> tuple[object, str] | None:
        for key in chain:
            if key in self.keys:
                return self.keys[key]
        return None


# --------------------------------------------------------------------------- classification


@dataclass(frozen=True)
class Provenance:
    """Where a document comes from and the source type that follows.

    ``source_type`` is the type used downstream; ``url_source_type`` is what the URL rules and
    tables said (``unknown`` when nothing matched); ``rule`` names what decided
    (``path:…``, ``host:…``, ``label:…``, ``domain:…``, ``suffix:…``, ``table:<file>``,
    ``declared`` or ``none``). ``conflict`` is set when a declared type other than ``unknown``
    differs from a known URL type. ``url_error`` says why ``host`` is ``None`` for a URL that
    was given; ``score_rule`` names the table that gave ``domain_score``.
    """

    url: str | None
    host: str | None
    registered_domain: str | None
    source_type: str
    url_source_type: str
    declared_source_type: str | None
    rule: str
    domain_score: float | None
    conflict: str | None
    url_error: str | None = None
    score_rule: str | None = None


class _HostResult(NamedTuple):
    table_type: tuple[object, str] | None
    builtin: tuple[str, str] | None
    score: tuple[object, str] | None


def _check_declared(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"declared_source_type: expected a string or None, got "
                        f"{type(value).__name__}")
    text = value.strip()
    if not text:
        return None
    if text not in SOURCE_TYPES:
        raise ValueError(f"declared_source_type: unknown source type {value!r}; expected one "
                         f"of {', '.join(SOURCE_TYPES)}")
    return text


class SourceTyper:
    """Classify URLs into source types from built-in rules and optional user tables.

    ``tables``: paths of CSV domain tables (or loaded :class:`DomainTable` objects), later
    ones overriding earlier ones. ``trust_declared``: use a record's declared source type
    (other than ``unknown``) instead of the URL's. ``score_column``: score column of the
    tables (default: ``score``, else ``pc1``). ``rules``: a rules file replacing the bundled
    one. Host-level results are kept in an LRU cache of ``cache_size`` hosts.
    """

    def __init__(
        self,
        tables: Sequence[str | Path | DomainTable] = (),
        *,
        trust_declared: bool = False,
        score_column: str | None = None,
        rules: str | Path | SourceRules | None = None,
        cache_size: int = 1 << 16,
    ) -> None:
        if isinstance(tables, (str, Path)):
            raise TypeError("tables: expected a sequence of paths, got a single path; "
                            "wrap it in a list")
        if not isinstance(trust_declared, bool):
            raise TypeError(f"trust_declared: expected a bool, got "
                            f"{type(trust_declared).__name__}")
        if not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"cache_size: expected a positive integer, got {cache_size!r}")
        self.trust_declared = trust_declared
        self.rules = rules if isinstance(rules, SourceRules) else load_rules(rules)
        self.tables: tuple[DomainTable, ...] = tuple(
            t if isinstance(t, DomainTable) else load_domain_table(t, score_column)
            for t in tables)
        self._types = _Lookup()
        self._scores = _Lookup()
        for table in self.tables:
            rule = f"table:{table.name}"
            for key, stype in table.types.items():
                self._types.add(key, stype, rule)
            for key, score in table.scores.items():
                self._scores.add(key, score, rule)
        self._types.freeze()
        self._scores.freeze()
        self._host_info = lru_cache(maxsize=cache_size)(self._lookup_host)

    def _builtin(self, host: str, bare: str, registered: str | None,
                 chain: Sequence[str]) -> tuple[str, str] | None:
        rules = self.rules
        for key in (host, bare):
            if key in rules.hosts:
                return rules.hosts[key], f"host:{key}"
        if registered is not None and bare != registered:
            first = bare.split(".", 1)[0]
            if first in rules.first_labels:
                return rules.first_labels[first], f"label:{first}"
        for key in chain:
            if key in rules.domains:
                return rules.domains[key], f"domain:{key}"
        labels = bare.split(".")
        for pattern, stype, text in rules.suffixes:
            if _suffix_match(labels, pattern):
                return stype, f"suffix:{text}"
        return None

    def _lookup_host(self, host: str, registered: str | None) -> _HostResult:
        bare = _bare(host, registered)
        parents = _parents(bare, registered)
        chain = list(dict.fromkeys([host, bare, *parents]))
        if _is_ip(host):  # exact host rules only
            builtin = ((self.rules.hosts[host], f"host:{host}")
                       if host in self.rules.hosts else None)
        else:
            builtin = self._builtin(host, bare, registered, parents)
        return _HostResult(self._types.by_host(chain), builtin, self._scores.by_host(chain))

    def classify(self, url: str | None, declared_source_type: str | None = None) -> Provenance:
        """Source type of a document from its URL and (optionally trusted) declared type.

        Takes no text on purpose: what a document says about itself never changes its type.
        Raises ``ValueError`` for a declared type outside ``SOURCE_TYPES``, ``TypeError``
        for a non-string URL.
        """
        declared = _check_declared(declared_source_type)
        if url is not None and not isinstance(url, str):
            raise TypeError(f"url: expected a string or None, got {type(url).__name__}")
        parsed = parse_url(url) if url is not None else None
        url_type, url_rule = "unknown", "none"
        score: float | None = None
        score_rule: str | None = None
        if parsed is not None and parsed.host is not None:
            info = self._host_info(parsed.host, parsed.registered_domain)
            bare = _bare(parsed.host, parsed.registered_domain)
            path = parsed.path.lower()
            found = self._types.by_path((parsed.host, bare), path) or info.table_type
            if found is None:
                for prefix, stype in self.rules.paths.get(bare, ()):
                    if _path_match(path, prefix):
                        found = stype, f"path:{bare}{prefix}"
                        break
            found = found or info.builtin
            if found is not None:
                url_type, url_rule = str(found[0]), found[1]
            scored = self._scores.by_path((parsed.host, bare), path) or info.score
            if scored is not None:
                score, score_rule = float(scored[0]), scored[1]  # type: ignore[arg-type]

        use_declared = self.trust_declared and declared not in (None, "unknown")
        conflict = None
        if declared not in (None, "unknown") and url_type != "unknown" and declared != url_type:
            used = ("declared type used (trust_declared=True)" if use_declared
                    else "URL type used (declared metadata not trusted)")
            conflict = (f"declared source_type {declared!r} differs from {url_type!r} given by "
                        f"the URL ({url_rule}); {used}")
        return Provenance(
            url=url,
            host=parsed.host if parsed else None,
            registered_domain=parsed.registered_domain if parsed else None,
            source_type=declared if use_declared else url_type,  # type: ignore[arg-type]
            url_source_type=url_type,
            declared_source_type=declared,
            rule="declared" if use_declared else url_rule,
            domain_score=score,
            conflict=conflict,
            url_error=parsed.error if parsed else None,
            score_rule=score_rule,
        )

    def classify_document(self, document: Document) -> Provenance:
        """:meth:`classify` on ``document.url`` and ``document.source_type`` only."""
        return self.classify(document.url, document.source_type)

    def classify_many(
        self,
        urls: Iterable[str | None],
        declared: Iterable[str | None] | None = None,
    ) -> list[Provenance]:
        """:meth:`classify` over parallel sequences; host lookups are cached across calls."""
        url_list = list(urls)
        if declared is None:
            declared_list: list[str | None] = [None] * len(url_list)
        else:
            declared_list = list(declared)
            if len(declared_list) != len(url_list):
                raise ValueError(f"declared: expected {len(url_list)} entries (one per URL), "
                                 f"got {len(declared_list)}")
        return [self.classify(u, d) for u, d in zip(url_list, declared_list, strict=True)]

    def cache_info(self) -> object:
        """Statistics of the per-host LRU cache (``functools`` ``CacheInfo``)."""
        return self._host_info.cache_info()
