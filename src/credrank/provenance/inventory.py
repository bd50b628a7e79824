"""The host inventory of a corpus: which hosts its documents come from, how many documents
each, the source type each got and what typed it (a built-in rule, a user domain table, a
trusted declaration, or nothing) -- and a domain-table template for the hosts left ``unknown``.

This is the tool for closing the provenance gap: on a real corpus most hosts match no built-in
rule (:mod:`credrank.provenance`), so the source-type priors change nothing until the user
types the hosts that matter. :func:`host_counts` lists them by document count;
:func:`template_text` writes them as a domain table (``domain,source_type``, the header
:func:`~credrank.provenance.tables.load_domain_table` reads) with every type ``unknown`` for
the user to fill in.

Declared policies:

* A row is a site: a host without a leading front-end label (``www.``, ``www2.``, ``m.``,
  ``mobile.``, ``amp.``: :func:`~credrank.provenance.hosts.bare_host`), as the rules and the
  tables see it, so ``www.x.com``, ``m.x.com`` and ``x.com`` are one row -- also where ``x`` is
  a public suffix for ``www.`` (``www.nhs.uk`` and ``nhs.uk`` are the row ``nhs.uk``, whose
  ``registered_domain`` is then ``None``: the public-suffix list names none above it; there
  ``m.nhs.uk`` is a registrant's site of its own).
* Documents whose URL names no host are not dropped: they form the rows ``host = None`` with
  ``note`` ``"no URL"`` or ``"URL names no host"``. They cannot go into a domain table.
* A host whose documents got different types (a path rule, a declared type) lists every type
  in ``types``; its ``source_type`` and ``rule`` are the most frequent (ties: the first in
  :data:`~credrank.documents.schema.SOURCE_TYPES` order, then by name), and
  ``unknown_documents`` counts its documents typed ``unknown``. ``unknown_only`` keeps the
  hosts with at least one such document.
* Rows are sorted by document count (most first), then by host; ``top`` keeps the first rows
  *after* that filter, and the counts of what was left out are kept (:attr:`HostCensus.rows`
  versus :attr:`HostCensus.shown`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from credrank.documents.schema import SOURCE_TYPES
from credrank.provenance.hosts import bare_host
from credrank.provenance.source_types import SourceTyper

__all__ = [
    "HOST_FIELDS",
    "RULE_KINDS",
    "HostCensus",
    "HostRow",
    "host_counts",
    "rule_kind",
    "template_text",
]

#: the payload fields :func:`host_counts` reads (``store.read_payloads(None, HOST_FIELDS)``)
HOST_FIELDS: tuple[str, ...] = ("doc_id", "url", "host", "registered_domain", "source_type",
                                "declared_source_type", "provenance_rule")
#: what typed a document: a built-in rule, a user domain table, a trusted declared type, nothing
RULE_KINDS: tuple[str, ...] = ("builtin", "table", "declared", "none")
_BUILTIN_PREFIXES = ("path:", "host:", "label:", "domain:", "suffix:")
_TYPE_ORDER = {t: i for i, t in enumerate(SOURCE_TYPES)}
NO_URL = "no URL"
NO_HOST = "URL names no host"


def rule_kind(rule: str | None) -> str:
    """The kind of a provenance rule string (``Provenance.rule``, the payload's
    ``provenance_rule``): ``builtin`` (``path:``/``host:``/``label:``/``domain:``/``suffix:``),
    ``table`` (``table:<file>``), ``declared`` or ``none`` (also for a missing rule)."""
    if rule is None or rule == "none" or rule == "":
        return "none"
    if rule.startswith("table:"):
        return "table"
    if rule == "declared":
        return "declared"
    if rule.startswith(_BUILTIN_PREFIXES):
        return "builtin"
    raise ValueError(f"provenance_rule: expected none, declared, table:<file> or a built-in "
                     f"rule ({', '.join(p + '…' for p in _BUILTIN_PREFIXES)}), got {rule!r}")


@dataclass(frozen=True)
class HostRow:
    """One host (``None``: documents without one, ``note`` says why) and its documents."""

    host: str | None
    registered_domain: str | None
    documents: int
    source_type: str
    rule: str
    rule_kind: str
    unknown_documents: int
    types: Mapping[str, int]
    rules: Mapping[str, int]
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "registered_domain": self.registered_domain,
                "documents": self.documents, "source_type": self.source_type,
                "rule": self.rule, "rule_kind": self.rule_kind,
                "unknown_documents": self.unknown_documents, "types": dict(self.types),
                "rules": dict(self.rules), "note": self.note}


@dataclass(frozen=True)
class HostCensus:
    """The inventory: ``rows`` every host (sorted), ``shown`` those kept by the filter and
    ``top``; document totals by source type and by rule kind, over every document."""

    documents: int
    rows: tuple[HostRow, ...]
    shown: tuple[HostRow, ...]
    by_type: Mapping[str, int]
    by_rule_kind: Mapping[str, int]
    hosts_by_rule_kind: Mapping[str, int] = field(default_factory=dict)
    retyped: bool = False

    @property
    def hosts(self) -> int:
        """Distinct hosts (the rows without a host not counted)."""
        return sum(1 for r in self.rows if r.host is not None)

    @property
    def unknown_hosts(self) -> tuple[HostRow, ...]:
        """Hosts (not the host-less rows) with at least one document typed ``unknown``."""
        return tuple(r for r in self.rows if r.host is not None and r.unknown_documents)

    def summary(self) -> dict[str, Any]:
        """Totals as plain data: documents and hosts, typed / unknown (a host is typed when
        none of its documents is ``unknown``), by type and rule kind."""
        unknown = self.by_type.get("unknown", 0)
        return {"documents": self.documents, "hosts": self.hosts,
                "typed_documents": self.documents - unknown, "unknown_documents": unknown,
                "typed_hosts": self.hosts - len(self.unknown_hosts),
                "unknown_hosts": len(self.unknown_hosts),
                "documents_without_host": sum(r.documents for r in self.rows if r.host is None),
                "by_source_type": dict(self.by_type),
                "documents_by_rule_kind": dict(self.by_rule_kind),
                "hosts_by_rule_kind": dict(self.hosts_by_rule_kind),
                "retyped": self.retyped}


def _text(row: Mapping[str, Any], name: str) -> str | None:
    value = row.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"payload of {row.get('doc_id')!r}: field {name!r}: expected a "
                         f"string or null, got {type(value).__name__}")
    return value


def _typed(row: Mapping[str, Any], typer: SourceTyper | None
           ) -> tuple[str | None, str | None, str, str, str | None]:
    """(bare host, registered domain, source type, rule, note) of one payload row."""
    url = _text(row, "url")
    if typer is not None:
        prov = typer.classify(url, _text(row, "declared_source_type"))
        host, registered, stype, rule = (prov.host, prov.registered_domain, prov.source_type,
                                         prov.rule)
    else:
        host, registered = _text(row, "host"), _text(row, "registered_domain")
        stype = _text(row, "source_type") or "unknown"
        rule = _text(row, "provenance_rule") or "none"
    if stype not in SOURCE_TYPES:
        raise ValueError(f"payload of {row.get('doc_id')!r}: field 'source_type': expected one "
                         f"of {', '.join(SOURCE_TYPES)}, got {stype!r}")
    note = None
    if host is None:
        note = NO_HOST if url is not None and url.strip() else NO_URL
        return None, registered, stype, rule, note
    site = bare_host(host, registered)
    if registered is not None and site != registered and not site.endswith("." + registered):
        registered = None  # the site of a public suffix (nhs.uk of www.nhs.uk): none above it
    return site, registered, stype, rule, note


def _most(counter: Counter[str], order: Mapping[str, int] | None = None) -> str:
    return min(counter, key=lambda k: (-counter[k], (order or {}).get(k, len(order or {})), k))


def host_counts(rows: Iterable[Mapping[str, Any]], typer: SourceTyper | None = None, *,
                unknown_only: bool = False, top: int | None = None) -> HostCensus:
    """The host inventory of payload ``rows`` (dicts with the fields :data:`HOST_FIELDS`).

    Without ``typer`` each document keeps the type and rule stored in its payload (what the
    index's searches use); with one, every URL is typed again by ``typer`` (its built-in rules
    and domain tables: what ``credrank index --table`` would store). ``unknown_only`` and
    ``top`` (``>= 1``) choose the rows of :attr:`HostCensus.shown`; the totals are over every
    document. Raises ``ValueError`` for a payload field of the wrong type, an unknown source
    type or rule, or a ``top`` below 1.
    """
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
        raise ValueError(f"top: expected an integer >= 1 or None, got {top!r}")
    groups: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    by_type: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    total = 0
    for row in rows:
        host, registered, stype, rule, note = _typed(row, typer)
        kind = rule_kind(rule)
        key = (host, note)
        g = groups.setdefault(key, {"registered": registered, "types": Counter(),
                                    "rules": Counter()})
        g["types"][stype] += 1
        g["rules"][rule] += 1
        by_type[stype] += 1
        by_kind[kind] += 1
        total += 1
    out = []
    hosts_by_kind: Counter[str] = Counter()
    for (host, note), g in groups.items():
        types, rules = g["types"], g["rules"]
        rule = _most(rules)
        if host is not None:
            hosts_by_kind[rule_kind(rule)] += 1
        out.append(HostRow(host=host, registered_domain=g["registered"],
                           documents=sum(types.values()),
                           source_type=_most(types, _TYPE_ORDER), rule=rule,
                           rule_kind=rule_kind(rule),
                           unknown_documents=types.get("unknown", 0),
                           types=dict(sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))),
                           rules=dict(sorted(rules.items(), key=lambda kv: (-kv[1], kv[0]))),
                           note=note))
    # most documents first; the host-less rows after the hosts of their count
    out.sort(key=lambda r: (-r.documents, r.host is None, r.host or "", r.note or ""))
    shown = [r for r in out if r.unknown_documents] if unknown_only else out
    if top is not None:
        shown = shown[:top]
    return HostCensus(documents=total, rows=tuple(out), shown=tuple(shown),
                      by_type={t: by_type[t] for t in SOURCE_TYPES if by_type[t]},
                      by_rule_kind={k: by_kind[k] for k in RULE_KINDS if by_kind[k]},
                      hosts_by_rule_kind={k: hosts_by_kind[k] for k in RULE_KINDS
                                          if hosts_by_kind[k]},
                      retyped=typer is not None)


def template_text(rows: Iterable[HostRow], *, source: str, total_unknown: int) -> str:
    """A domain table (``domain,source_type``) for the host ``rows`` with every type
    ``unknown``, most documents first, behind ``#`` comment lines (the reader skips them) that
    say where it comes from (``source``), how many of the ``total_unknown`` unknown hosts it
    holds and how to fill it in. Host-less rows are skipped (nothing to key them by)."""
    keep = [r for r in rows if r.host is not None]
    typed = ", ".join(t for t in SOURCE_TYPES if t != "unknown")
    lines = [
        f"# credrank domain table template: the hosts typed 'unknown' in {source},",
        f"# most documents first ({len(keep)} of {total_unknown} unknown hosts).",
        "# Replace 'unknown' by one of the source types:",
        f"#   {typed}.",
        "# A table row overrides every built-in rule, for the host and every host under it",
        "# (its www. and m. front ends too; under a public suffix such as nhs.uk, only www.):",
        "# delete the rows you leave 'unknown' (they would also un-type such subdomains).",
        "# A key may be narrowed to a path ('example.com/blog'). Lines starting with '#' are",
        "# comments. Then: credrank index CORPUS --index DIR --table THIS_FILE (re-types the",
        "# documents) and check with: credrank provenance hosts --index DIR",
        "domain,source_type",
    ]
    lines += [f"{r.host},unknown" for r in keep]
    return "\n".join(lines) + "\n"
