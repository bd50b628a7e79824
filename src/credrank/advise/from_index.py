"""A profile derived from what an index holds, for ``credrank advise --index DIR`` (35.6).

A hand-written profile (:mod:`credrank.advise.pools`) states what a pool *has*; some of it can
be measured instead, from the stored payloads: whether the URLs give distinguishable source
types, whether documents carry evidence dates, whether they carry source identities that
repeat. :func:`index_facts` counts (pure: payload dicts in, numbers out, no index needed) and
:func:`derive_pool` maps the counts to the profile keys, each with the measurement it came
from and the declared rule that decided it (:class:`Derivation`). The index is one pool.

Declared rules (a capability holds when at least :data:`MIN_SHARE` of the documents carry it):

* ``provenance`` -- at least half the documents typed by their URL (the type the URL rules
  and tables gave, ``url_source_type``, other than ``unknown``) *and* at least two distinct
  such types: one type for everything distinguishes nothing. A declared type the index
  trusted (``--trust-declared``: ``provenance_rule`` ``declared``) is what the document says
  of itself, not provenance: it is counted apart (``typed_by_declaration``) and never makes
  ``provenance`` true. A payload without ``url_source_type`` (rows made by hand) counts its
  ``source_type`` unless its rule is ``declared``;
* ``dates`` -- at least half the documents carry an evidence date (``observed_at``,
  ``verified_at`` or ``published_at``). ``modified_at`` and ``retrieved_at`` (a crawl time)
  do not date the evidence (35.7) and are only reported;
* ``sources`` / ``stable_source_ids`` -- the identity of a document is its ``source_id`` when
  at least half the documents carry one, else its site: its host without a front-end label
  (``www.``, ``m.``, ``amp.``…: :func:`~credrank.provenance.hosts.bare_host`, as provenance
  types it and the provenance inventory counts it; only ``www.`` was taken off). A
  reliability prior keyed by ``host`` matches the stored host as it is. ``sources`` counts
  the distinct identities; ``stable_source_ids`` holds when at least half the documents carry
  an identity *and* at least half belong to an identity with two or more documents (an
  identity seen once cannot be compared with others). Whether identities are stable over
  time cannot be seen in one index.

Not derived, left unstated (so absent, and the advice says "not stated"):
:data:`NOT_DERIVED` gives the reason for each key. In particular ``document_scorer``: stored
index-time scores (``machine_text``, ``credibility``) and table scores (``domain_score``) are
counted, but whether one is a *validated* document-credibility scorer cannot be read from an
index.
Labels are never read (an index's ``extra`` payload may hold a data set's labels).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from credrank.advise.pools import Pool, Profile
from credrank.documents.schema import DATE_FIELDS
from credrank.provenance.hosts import bare_host, registered_domain

__all__ = [
    "EVIDENCE_DATES",
    "INDEX_FIELDS",
    "MIN_SHARE",
    "NOT_DERIVED",
    "Derivation",
    "IndexFacts",
    "derive_pool",
    "index_facts",
    "profile_from_rows",
]

#: the share of documents at which a capability counts as present (declared, a priori)
MIN_SHARE = 0.5
#: the date fields that date the evidence (35.7); the others are counted, not used
EVIDENCE_DATES: tuple[str, ...] = ("observed_at", "verified_at", "published_at")
#: the payload fields :func:`index_facts` reads (never ``extra`` or ``text``)
INDEX_FIELDS: tuple[str, ...] = ("doc_id", "url", "host", "registered_domain", "source_type",
                                 "url_source_type", "provenance_rule", "source_id",
                                 *DATE_FIELDS, "machine_text", "credibility", "domain_score")
#: profile keys an index cannot show, with the reason
NOT_DERIVED: dict[str, str] = {
    "calibration_questions": "questions the sources answered are not in an index (RA-RAG "
                             "reads them from an answers file)",
    "labelled_pages": "credibility labels are not stored in an index",
    "credible_annotations": "training annotations are not stored in an index",
    "inference_annotations": "whether each passage gets a credibility annotation at inference "
                             "is a deployment fact (domain_score coverage is reported)",
    "training_resources": "fine-tuning data, compute and access are not in an index",
    "document_scorer": "stored scores are counted (machine_text, credibility, domain_score), "
                       "but whether one is a validated credibility scorer cannot be read from "
                       "an index",
    "misinformation_examples": "labelled calibration examples are not in an index",
    "validation_examples": "a validation set is not in an index",
    "attention_access": "access to the generator's attention is a deployment fact",
    "heads": "a property of the generator, not of the index",
    "selected_heads": "a property of the generator, not of the index",
    "seconds_per_pass": "a property of the generator, not of the index",
}


@dataclass(frozen=True)
class IndexFacts:
    """Counts over an index's documents (every count over all ``documents``).
    ``by_source_type`` counts the types the searches use; ``by_url_source_type`` the types
    the URLs gave (:attr:`typed`, :attr:`distinct_types`: provenance); ``declared`` the
    documents whose type is a trusted declaration."""

    documents: int
    with_url: int
    with_host: int
    by_source_type: Mapping[str, int]
    with_date: Mapping[str, int]
    with_evidence_date: int
    with_source_id: int
    source_ids: int
    hosts: int
    identity: str
    identities: int
    in_repeated_identity: int
    documents_per_identity_max: int
    with_machine_text: int
    with_domain_score: int
    #: documents with a stored learned-credibility score (``credrank score credibility``)
    with_credibility: int = 0
    #: the source types the URLs gave (rules and tables), ``unknown`` where none did
    by_url_source_type: Mapping[str, int] = field(default_factory=dict)
    #: documents typed by a declared type the index trusted (``provenance_rule`` ``declared``)
    declared: int = 0

    @property
    def typed(self) -> int:
        """Documents typed by their URL: the URL's source type is not ``unknown``."""
        return sum(n for t, n in self.by_url_source_type.items() if t != "unknown")

    @property
    def distinct_types(self) -> int:
        """Distinct source types other than ``unknown`` among the URLs' types."""
        return sum(1 for t, n in self.by_url_source_type.items() if t != "unknown" and n)

    def share(self, count: int) -> float:
        """``count / documents`` (0.0 for an empty index)."""
        return count / self.documents if self.documents else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"documents": self.documents, "with_url": self.with_url,
                "with_host": self.with_host, "typed": self.typed,
                "distinct_types": self.distinct_types,
                "typed_by_declaration": self.declared,
                "by_source_type": dict(self.by_source_type),
                "by_url_source_type": dict(self.by_url_source_type),
                "with_date": dict(self.with_date),
                "with_evidence_date": self.with_evidence_date,
                "with_source_id": self.with_source_id, "source_ids": self.source_ids,
                "hosts": self.hosts, "identity": self.identity,
                "identities": self.identities,
                "in_repeated_identity": self.in_repeated_identity,
                "documents_per_identity_mean": (self.documents_with_identity / self.identities
                                                if self.identities else 0.0),
                "documents_per_identity_max": self.documents_per_identity_max,
                "with_machine_text": self.with_machine_text,
                "with_credibility": self.with_credibility,
                "with_domain_score": self.with_domain_score}

    @property
    def documents_with_identity(self) -> int:
        return self.with_source_id if self.identity == "source_id" else self.with_host


@dataclass(frozen=True)
class Derivation:
    """One profile key derived from the index: its ``value``, the measurement it came
    from (``measured``, words with the numbers) and the declared ``rule`` that decided it."""

    key: str
    value: Any
    measured: str
    rule: str

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "measured": self.measured,
                "rule": self.rule}


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())


def _site(host: str, registered: Any) -> str:
    """The site of ``host`` (:func:`~credrank.provenance.hosts.bare_host`) under its stored
    registered domain, else the one the public-suffix list gives."""
    return bare_host(host, str(registered) if _present(registered) else registered_domain(host))


def index_facts(rows: Iterable[Mapping[str, Any]]) -> IndexFacts:
    """Count what payload ``rows`` (dicts with the fields :data:`INDEX_FIELDS`; a missing
    field counts as absent) carry. Pure: no index, no labels."""
    documents = with_url = with_host = with_evidence = with_sid = 0
    with_mt = with_ds = with_cred = 0
    types: Counter[str] = Counter()
    url_types: Counter[str] = Counter()
    declared = 0
    dated: Counter[str] = Counter()
    sids: Counter[str] = Counter()
    hosts: Counter[str] = Counter()
    for row in rows:
        documents += 1
        with_url += _present(row.get("url"))
        host = row.get("host")
        if _present(host):
            with_host += 1
            hosts[_site(str(host), row.get("registered_domain"))] += 1
        stype = str(row.get("source_type")) if _present(row.get("source_type")) else "unknown"
        types[stype] += 1
        by_declaration = row.get("provenance_rule") == "declared"
        declared += by_declaration and stype != "unknown"
        url_type = row.get("url_source_type")
        if _present(url_type):
            url_types[str(url_type)] += 1
        else:  # no record of the URL's own type: the stored type, unless it was declared
            url_types["unknown" if by_declaration else stype] += 1
        for name in DATE_FIELDS:
            dated[name] += _present(row.get(name))
        with_evidence += any(_present(row.get(name)) for name in EVIDENCE_DATES)
        sid = row.get("source_id")
        if _present(sid):
            with_sid += 1
            sids[str(sid)] += 1
        with_mt += _present(row.get("machine_text"))
        with_cred += _present(row.get("credibility"))
        with_ds += _present(row.get("domain_score"))
    use_sid = documents > 0 and with_sid >= MIN_SHARE * documents
    counts = sids if use_sid else hosts
    return IndexFacts(
        documents=documents, with_url=with_url, with_host=with_host,
        by_source_type=dict(sorted(types.items(), key=lambda kv: (-kv[1], kv[0]))),
        by_url_source_type=dict(sorted(url_types.items(), key=lambda kv: (-kv[1], kv[0]))),
        declared=declared,
        with_date={name: dated[name] for name in DATE_FIELDS},
        with_evidence_date=with_evidence, with_source_id=with_sid, source_ids=len(sids),
        hosts=len(hosts), identity="source_id" if use_sid else "host",
        identities=len(counts),
        in_repeated_identity=sum(n for n in counts.values() if n >= 2),
        documents_per_identity_max=max(counts.values(), default=0),
        with_machine_text=with_mt, with_domain_score=with_ds, with_credibility=with_cred)


def _pct(facts: IndexFacts, count: int) -> str:
    return f"{count:,} of {facts.documents:,} documents ({100 * facts.share(count):.1f}%)"


def derive_pool(facts: IndexFacts, name: str = "index", description: str = ""
                ) -> tuple[Pool, tuple[Derivation, ...]]:
    """The pool the module docstring's rules give for ``facts``, and how each key was
    derived. The pool's ``stated`` keys are the derived ones only."""
    need = f"≥ {100 * MIN_SHARE:.0f}% of the documents"
    typed_ok = facts.documents > 0 and facts.typed >= MIN_SHARE * facts.documents
    provenance = typed_ok and facts.distinct_types >= 2
    dates = facts.documents > 0 and facts.with_evidence_date >= MIN_SHARE * facts.documents
    carried = facts.documents_with_identity
    stable = (facts.documents > 0 and carried >= MIN_SHARE * facts.documents
              and facts.in_repeated_identity >= MIN_SHARE * facts.documents)
    other_dates = ", ".join(f"{n} {facts.with_date[n]:,}" for n in DATE_FIELDS
                            if n not in EVIDENCE_DATES)
    ident = ("source_id" if facts.identity == "source_id"
             else "host (fewer than half the documents carry a source_id: "
                  f"{facts.with_source_id:,})")
    derived = (
        Derivation("provenance", provenance,
                   f"{_pct(facts, facts.typed)} typed by their URL (the URL's source type "
                   f"not unknown), {facts.distinct_types} distinct types; "
                   f"{_pct(facts, facts.with_url)} have a URL"
                   + (f"; {_pct(facts, facts.declared)} typed by a trusted declared type "
                      "(not provenance: not counted)" if facts.declared else ""),
                   f"true when {need} are typed by their URL (rules and tables; a trusted "
                   "declared type does not count) and there are ≥ 2 distinct types"),
        Derivation("dates", dates,
                   f"{_pct(facts, facts.with_evidence_date)} carry an evidence date "
                   f"(observed_at, verified_at or published_at); not evidence dates: "
                   f"{other_dates}",
                   f"true when {need} carry observed_at, verified_at or published_at"),
        Derivation("sources", facts.identities,
                   f"{facts.identities:,} distinct identities; identity = {ident}",
                   "the number of distinct source identities"),
        Derivation("stable_source_ids", stable,
                   f"{_pct(facts, carried)} carry an identity; "
                   f"{_pct(facts, facts.in_repeated_identity)} belong to an identity with "
                   f"≥ 2 documents (at most {facts.documents_per_identity_max:,} per identity)",
                   f"true when {need} carry an identity and {need} share theirs with "
                   "another document; stability over time is not visible in one index"),
    )
    values = {d.key: d.value for d in derived}
    pool = Pool(name=name, description=description, **values, stated=frozenset(values))
    return pool, derived


def profile_from_rows(rows: Iterable[Mapping[str, Any]], source: str, name: str = "index"
                      ) -> tuple[Profile, IndexFacts, tuple[Derivation, ...]]:
    """A one-pool :class:`Profile` derived from payload ``rows``; ``source`` names where they
    came from (``index DIR``)."""
    facts = index_facts(rows)
    pool, derived = derive_pool(facts, name, f"derived from {source}")
    profile = Profile(source=source, name=name,
                      description=f"A profile derived from {source} (credrank advise --index)",
                      pools=(pool,))
    return profile, facts, derived
