"""URL → source type: :class:`SourceTyper` applies user tables, then the built-in rules."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from credrank.core.validation import check_bool, check_choice, check_int, check_str
from credrank.documents.schema import SOURCE_TYPES, Document
from credrank.provenance.hosts import (
    bare_host,
    is_ip,
    normal_path,
    parent_domains,
    parse_url,
    path_match,
)
from credrank.provenance.rules import SourceRules, load_rules, suffix_match
from credrank.provenance.tables import DomainTable, load_domain_table


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
                if path_match(path, prefix):
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
    differs from the URL type, including a URL type of ``unknown`` (no rule matched, or an
    invalid / non-http(s) URL), and when such a type is declared by a document with no URL
    (``None`` or blank) and not trusted: it is ``unknown`` then, and the declared type that
    went unused is said (it was dropped without a word). ``url_error`` says why ``host`` is ``None``
    for a URL that was given; ``score_rule`` names the table that gave ``domain_score``.
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


def _declared_type(value: object) -> str | None:
    """A declared source type: ``None`` when absent or blank, else one of ``SOURCE_TYPES``
    (``TypeError`` for a non-string, ``ValueError`` for an unknown type)."""
    if value is None:
        return None
    text = check_str("declared_source_type", value, allow_empty=True,
                     what="a string or None", error=TypeError).strip()
    return check_choice("declared_source_type", text, SOURCE_TYPES) if text else None


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
        self.trust_declared = check_bool("trust_declared", trust_declared, error=TypeError)
        cache_size = check_int("cache_size", cache_size, 1)
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

    def unmatchable_warnings(self) -> list[str]:
        """What the front doors say about the rows of the tables that can never match a URL
        (:meth:`DomainTable.unmatchable_warnings`: file, line, cell), in table order."""
        return [m for table in self.tables for m in table.unmatchable_warnings()]

    def _builtin(self, host: str, bare: str, registered: str | None,
                 chain: Sequence[str]) -> tuple[str, str] | None:
        rules = self.rules
        for key in (host, bare):
            if key in rules.hosts:
                return rules.hosts[key], f"host:{key}"
        if "." not in bare:  # a single label ('gov', 'localhost') is no domain under a
            return None     # suffix: only an exact host rule may type it
        if registered is not None and bare.endswith("." + registered):  # a subdomain
            first = bare.split(".", 1)[0]
            if first in rules.first_labels:
                return rules.first_labels[first], f"label:{first}"
        for key in chain:
            if key in rules.domains:
                return rules.domains[key], f"domain:{key}"
        labels = bare.split(".")
        for pattern, stype, text in rules.suffixes:
            if suffix_match(labels, pattern):
                return stype, f"suffix:{text}"
        return None

    def _lookup_host(self, host: str, registered: str | None) -> _HostResult:
        bare = bare_host(host, registered)
        parents = parent_domains(bare, registered)
        chain = list(dict.fromkeys([host, bare, *parents]))
        if is_ip(host):  # exact host rules only
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
        declared = _declared_type(declared_source_type)
        if url is not None and not isinstance(url, str):
            raise TypeError(f"url: expected a string or None, got {type(url).__name__}")
        parsed = parse_url(url) if url is not None else None
        url_type, url_rule = "unknown", "none"
        score: float | None = None
        score_rule: str | None = None
        if parsed is not None and parsed.host is not None:
            info = self._host_info(parsed.host, parsed.registered_domain)
            bare = bare_host(parsed.host, parsed.registered_domain)
            path = normal_path(parsed.path)
            # a path row of a domain covers every host under it, as its host row does
            hosts = (parsed.host, *parent_domains(bare, parsed.registered_domain))
            found = self._types.by_path(hosts, path) or info.table_type
            if found is None:
                for prefix, stype in self.rules.paths.get(bare, ()):
                    if path_match(path, prefix):
                        found = stype, f"path:{bare}{prefix}"
                        break
            found = found or info.builtin
            if found is not None:
                url_type, url_rule = str(found[0]), found[1]
            scored = self._scores.by_path(hosts, path) or info.score
            if scored is not None:
                score, score_rule = float(scored[0]), scored[1]  # type: ignore[arg-type]

        use_declared = self.trust_declared and declared not in (None, "unknown")
        conflict = None
        has_url = url is not None and bool(url.strip())
        if has_url and declared not in (None, "unknown") and declared != url_type:
            used = ("declared type used (trust_declared=True)" if use_declared
                    else "URL type used (declared metadata not trusted)")
            if url_type != "unknown":
                why = url_rule
            elif parsed is not None and parsed.error is not None:
                why = f"invalid URL: {parsed.error}"
            else:
                why = "no rule matched"
            conflict = (f"declared source_type {declared!r} differs from {url_type!r} given by "
                        f"the URL ({why}); {used}")
        elif not has_url and declared not in (None, "unknown") and not use_declared:
            conflict = (f"declared source_type {declared!r} not used: the document has no URL "
                        "to give its type, so it is 'unknown' (declared metadata not trusted; "
                        "trust_declared=True uses it)")
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
