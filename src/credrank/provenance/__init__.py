"""Provenance: URL → host → registered domain → source type.

The source type of a document (the taxonomy of seed 004,
:data:`credrank.documents.schema.SOURCE_TYPES`) is derived from *where the document comes from*,
never from what its text says about itself: no function here takes the text, so "CNN news: ..."
posted on a blog host stays a ``blog``. A record's *declared* ``source_type`` is metadata that can
be spoofed; it is used only when the configuration trusts it (``trust_declared=True``), and a
disagreement with the URL is recorded as a ``conflict`` either way -- also when the URL gives
``unknown`` (no rule matched, or the URL is invalid or not http(s)). A record with no URL at
all (``None`` or blank) is ``unknown`` unless its declared type is trusted, and an untrusted
declared type is recorded as a ``conflict`` saying it went unused (it was dropped without a
word).

**What ``government`` means.** The seed taxonomy has no institutional type, so ``government``
covers public, academic and health authorities: government and military hosts (``gov``,
``gov.<cc>``, ``gouv.fr``, ``gc.ca`` ...), intergovernmental bodies (``int``, ``europa.eu``),
universities (``edu``, ``ac.<cc>``, ``edu.<cc>``) and health authorities and institutions
(``who.int``, ``nhs.uk``, ``cdc.gov``, ``mayoclinic.org`` ...).

**Host parsing** (:func:`parse_url`, :func:`parse_host`). Only ``http`` and ``https`` URLs
name a web host: any other scheme (``javascript:``, ``vbscript:``, ``data:``, ``file://``,
``tel:``, ``ftp://`` ...) gives host ``None``, type ``unknown`` and a ``url_error`` saying the
scheme is not http(s). A string without a scheme (``cdc.gov/x``, ``//cdc.gov``, and
``host:port`` such as ``localhost:8080``) is treated as ``http://`` and may be typed;
userinfo and port are dropped; the host is lowercased, percent-decoded, IDNA-encoded to its
ASCII (punycode) form and stripped of a trailing dot, so ``bücher.de`` and ``xn--bcher-kva.de``
are one host; an ``xn--`` label that is not valid punycode/IDNA (``xn--nih.gov``) makes the
URL invalid. Backslashes count as slashes and tabs/newlines are removed, as browsers do, so
``https://example.com\\@evil.com`` is ``example.com``. IP addresses are kept (canonical form)
with no registered domain. The registered domain comes from the public-suffix list bundled
with ``tldextract`` (ICANN section, offline snapshot: nothing is ever fetched). An invalid URL
gives host ``None``, type ``unknown`` and the reason in ``Provenance.url_error``.

**Rules** (``credrank/provenance/source_types.toml``, the project's own), most specific first:

1. ``paths``: host plus a path prefix (``ncbi.nlm.nih.gov/pmc``);
2. ``hosts``: exact host (``pubmed.ncbi.nlm.nih.gov``), a leading ``www.`` ignored;
3. ``first_labels``: first label of a subdomain (``blog.example.com`` → blog);
4. ``domains``: a domain and all hosts under it, the longest match winning (``nih.gov``);
5. ``suffixes``: label suffixes, ``<cc>`` standing for a two-letter country code (``gov.<cc>``).

A single-label host (``https://gov/``, ``localhost``) matches only exact ``hosts`` rules (and
exact user-table keys), never a first-label, domain or suffix rule.

**User tables** (:func:`load_domain_table`): CSV files with a ``domain`` column and a
``source_type`` column and/or a score column (``score``, else ``pc1`` as in the domain-quality
ratings of Lin et al. 2023, or the ``score_column`` named). A domain cell may be ``host`` or
``host/path``. Table entries are matched by host/path, then exact host, then each parent domain
down to the registered domain, and any table match overrides every built-in rule (user
knowledge wins); among several tables, a later one overrides an earlier one for the same key.
A score only fills ``domain_score``; it never changes the type.
"""

from credrank.provenance.hosts import ParsedURL, parse_host, parse_url
from credrank.provenance.rules import RULE_KINDS, RulesError, SourceRules, load_rules
from credrank.provenance.source_types import Provenance, SourceTyper
from credrank.provenance.tables import DomainTable, DomainTableError, load_domain_table

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
