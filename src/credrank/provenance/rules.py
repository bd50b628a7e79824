"""The built-in source-type rules (``credrank/provenance/source_types.toml``): loading and
matching."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from credrank.core.structured import parse_text, read_text
from credrank.documents.schema import SOURCE_TYPES
from credrank.provenance.hosts import LABEL_RE, HostError, normalize_host, registered_domain

#: kinds of built-in rule, most specific first
RULE_KINDS: tuple[str, ...] = ("paths", "hosts", "first_labels", "domains", "suffixes")
#: the source types a rule may give (every type but ``unknown``): the sections of a rules file
RULED_TYPES: tuple[str, ...] = tuple(t for t in SOURCE_TYPES if t != "unknown")
#: the label of a ``suffixes`` rule that stands for any two-letter country code
COUNTRY_CODE = "<cc>"


class RulesError(ValueError):
    """The built-in (or a custom) rules file is malformed."""


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
        host, _ = normalize_host(entry)
    except HostError as exc:
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
        if not LABEL_RE.fullmatch(entry):
            raise RulesError(f"{where}: expected one host label, got {entry!r}")
        return entry
    labels = entry.split(".")  # suffixes
    if not all(label == COUNTRY_CODE or LABEL_RE.fullmatch(label) for label in labels):
        raise RulesError(f"{where}: expected labels or '{COUNTRY_CODE}' separated by dots, "
                         f"got {entry!r}")
    return entry


@lru_cache(maxsize=8)
def _load_rules_cached(source: str) -> SourceRules:
    if source == "<bundled>":
        resource = resources.files("credrank.provenance").joinpath("source_types.toml")
        text = resource.read_text(encoding="utf-8")
        name = "credrank/provenance/source_types.toml"
    else:
        text = read_text(Path(source), what="rules file", error=RulesError)
        name = source
    data = parse_text(text, "toml", name, error=RulesError)

    seen: dict[tuple[str, str], str] = {}
    for section, table in data.items():
        if section not in RULED_TYPES:
            raise RulesError(f"{name}: unknown section [{section}]; expected one of "
                             f"{', '.join(RULED_TYPES)}")
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
                # the bundled file's domains are checked by the test suite
                # (tests/test_provenance.py), not at every start: the check loads the public
                # suffix list (tldextract and what it imports, ≈ 0.1 s of a `credrank search`)
                if kind == "domains" and source != "<bundled>" and registered_domain(entry) is None:
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
        key=lambda item: (-len(item[0]), item[0].count(COUNTRY_CODE)))  # exact labels beat <cc>
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


def suffix_match(labels: Sequence[str], pattern: Sequence[str]) -> bool:
    """Whether a host's ``labels`` end with the ``suffixes`` rule ``pattern`` (its
    :data:`COUNTRY_CODE` labels matching any two letters)."""
    if len(labels) < len(pattern):
        return False
    tail = labels[len(labels) - len(pattern):]
    return all(p == label or (p == COUNTRY_CODE and len(label) == 2 and label.isalpha())
               for p, label in zip(pattern, tail, strict=True))
