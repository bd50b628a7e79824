"""URL parsing: host normalisation (IDNA, percent-decoding, browser-style slashes) and the
registered domain from the offline public-suffix list (see :mod:`credrank.provenance`).

Only ``http``/``https`` URLs name a host; every other scheme is an error (host ``None``). A
scheme-less host string (``cdc.gov/x``, ``//cdc.gov``, ``localhost:8080``) is treated as
``http://``. An ASCII ``xn--`` label must be valid punycode/IDNA, else the URL is invalid.

The host helpers the rules (:mod:`.rules`), the user tables (:mod:`.tables`) and the typer
(:mod:`.source_types`) share are here too: :func:`normalize_host`, :func:`registered_domain`,
:func:`bare_host`, :func:`parent_domains`, :func:`is_ip` and :func:`path_match`."""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote, urlsplit

import idna

if TYPE_CHECKING:
    import tldextract

#: one host label as rules and tables may write it (lowercase ASCII, at most 63 characters)
LABEL_RE = re.compile(r"[a-z0-9_-]{1,63}")
_SCHEME_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9+.\-]*:")
_DROP_RE = re.compile(r"[\t\n\r]")
_IDEOGRAPHIC_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
_MAX_HOST_LEN = 253
_C0_AND_SPACE = "".join(chr(i) for i in range(0x21))
_ACE_PREFIX = "xn--"
#: the only schemes whose URLs name a web host that rules may type
WEB_SCHEMES: frozenset[str] = frozenset({"http", "https"})


class HostError(ValueError):
    """A host name that is not valid (empty label, bad IDNA, too long …); the message says why."""


# --------------------------------------------------------------------------- host parsing


@lru_cache(maxsize=1)
def _extractor() -> tldextract.TLDExtract:
    # the snapshot bundled with tldextract; no URL list, no disk cache: never fetches
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def _ascii_label(label: str) -> str:
    if label.isascii():
        label = label.lower()
        if label.startswith(_ACE_PREFIX):
            _check_a_label(label)
        return label
    try:
        return idna.encode(label, uts46=True).decode("ascii").lower()
    except (UnicodeError, ValueError) as exc:
        raise HostError(f"label {label!r} is not a valid internationalised name ({exc})") from exc


def _check_a_label(label: str) -> None:
    """Raise HostError unless ``label`` (lowercase ``xn--…``) is a valid IDNA A-label: it must
    decode to a valid U-label that encodes back to the same ASCII form."""
    try:
        valid = idna.encode(idna.decode(label)).decode("ascii").lower() == label
    except (UnicodeError, ValueError) as exc:
        raise HostError(f"label {label!r} is not a valid IDNA (punycode) label ({exc})") from exc
    if not valid:
        raise HostError(f"label {label!r} is not a valid IDNA (punycode) label (it does not "
                         "round-trip)")


def normalize_host(raw: str) -> tuple[str, bool]:
    """Canonical ASCII host and whether it is an IP address; raises HostError."""
    text = unquote(raw).strip().translate(_IDEOGRAPHIC_DOTS)
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if text.endswith("."):
        text = text[:-1]
    if not text:
        raise HostError("empty host")
    try:
        return str(ipaddress.ip_address(text)).lower(), True
    except ValueError:
        pass
    labels = [_ascii_label(label) for label in text.split(".")]
    for label in labels:
        if not label:
            raise HostError(f"host {raw!r} has an empty label")
        if not LABEL_RE.fullmatch(label):
            raise HostError(f"host {raw!r} has an invalid label {label!r}")
    if labels[-1].isdigit():
        raise HostError(f"host {raw!r} looks like an IPv4 address but is not a valid one")
    host = ".".join(labels)
    if len(host) > _MAX_HOST_LEN:
        raise HostError(f"host is {len(host)} characters long, more than {_MAX_HOST_LEN}")
    return host, False


def registered_domain(host: str) -> str | None:
    """The label under the public suffix with that suffix (``bbc.co.uk``), from the offline
    list; ``None`` for a host without a public suffix."""
    result = _extractor()(host)
    if result.domain and result.suffix:
        return f"{result.domain}.{result.suffix}"
    return None


def is_public_suffix(host: str) -> bool:
    """Whether ``host`` is a public suffix of the offline list (``gov.uk``, ``com``): a name
    under it (``site.gov.uk``) is a registered domain of its own."""
    return registered_domain(host) is None and registered_domain(f"site.{host}") == \
        f"site.{host}"


@lru_cache(maxsize=1 << 16)
def _resolve_host(raw: str) -> tuple[str | None, str | None, str | None]:
    """(host, registered_domain, error) for a raw host string, cached."""
    try:
        host, ip = normalize_host(raw)
    except HostError as exc:
        return None, None, str(exc)
    return host, (None if ip else registered_domain(host)), None


class ParsedURL(NamedTuple):
    """A URL reduced to what provenance needs; ``error`` says why ``host`` is ``None``."""

    host: str | None
    registered_domain: str | None
    path: str
    error: str | None


def _invalid(reason: str) -> ParsedURL:
    return ParsedURL(None, None, "", reason)


def _not_web(scheme: str) -> str:
    return f"the scheme '{scheme}:' is not http(s); only http and https URLs name a web host"


def parse_url(url: str) -> ParsedURL:
    """Parse ``url`` into host, registered domain and path, offline.

    Only ``http`` and ``https`` URLs name a host: any other scheme (``javascript:``,
    ``file://``, ``data:``, ``ftp://`` ...) gives host ``None`` and an ``error`` saying the
    scheme is not http(s). A string without a scheme (``cdc.gov/x``, ``//cdc.gov``,
    ``localhost:8080``) is read as ``http://``. An ``xn--`` label that is not valid
    punycode/IDNA is an error too. Never raises for a bad URL string (the reason goes to
    ``error``); raises ``TypeError`` when ``url`` is not a string.
    """
    if not isinstance(url, str):
        raise TypeError(f"url: expected a string, got {type(url).__name__}")
    text = _DROP_RE.sub("", url).strip(_C0_AND_SPACE)
    if not text:
        return _invalid("empty URL")
    text = text.replace("\\", "/")
    scheme = _SCHEME_RE.match(text)
    if scheme and text[scheme.end():].startswith("//"):
        name = scheme.group(0)[:-1].lower()
        if name not in WEB_SCHEMES:
            return _invalid(_not_web(name))
    elif text.startswith("//"):
        text = "http:" + text
    elif scheme and not text[scheme.end():scheme.end() + 1].isdigit():
        name = scheme.group(0)[:-1].lower()
        if name not in WEB_SCHEMES:
            return _invalid(_not_web(name))
        return _invalid(f"no '//' after the scheme '{name}:', so the URL names no host")
    else:  # a scheme-less host string ('cdc.gov/x', 'localhost:8080') is taken as http://
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
    wrapped = None if host is None else _amp_wrapped(host, registered, parts.path)
    if wrapped is not None:  # the publisher's page, served from an AMP cache
        return parse_url(wrapped)
    return ParsedURL(host, registered, parts.path, None)


def _amp_wrapped(host: str, registered: str | None, path: str) -> str | None:
    """The publisher's URL of a page an AMP cache serves, or ``None``: Google's
    ``www.google.com/amp/s/PUBLISHER/PATH`` and the AMP Project's
    ``….cdn.ampproject.org/c/s/PUBLISHER/PATH`` name the page they serve in their path (its
    provenance is the publisher's: it was typed by the cache's host, unknown)."""
    if registered is not None and registered.split(".")[0] == "google" \
            and path.startswith("/amp/s/"):
        rest = path[len("/amp/s/"):]
    elif host.endswith(".cdn.ampproject.org") and path[:5] in ("/c/s/", "/v/s/"):
        rest = path[5:]
    else:
        return None
    return "https://" + rest if rest and not rest.startswith("/") else None


def parse_host(url: str) -> tuple[str | None, str | None]:
    """``(host, registered_domain)`` of ``url``; ``(None, None)`` for an invalid URL.

    The host keeps its subdomains (``www.cdc.gov``); the registered domain is the label
    under the public suffix (``cdc.gov``, ``bbc.co.uk``), ``None`` for IP addresses and
    hosts without a public suffix.
    """
    parsed = parse_url(url)
    return parsed.host, parsed.registered_domain


#: the first labels that name another front end of the same site, not another site:
#: ``www``, ``www2``…, the mobile ``m`` and ``mobile``, and ``amp`` (Google's AMP pages)
FRONT_ENDS = re.compile(r"(?:www\d*|m|mobile|amp)\.")
#: the front end that is never a registrant's own name under a public suffix (:func:`bare_host`)
WWW = re.compile(r"www\d*\.")


def bare_host(host: str, registered: str | None) -> str:
    """The site of ``host``: the host without a leading front-end label (:data:`FRONT_ENDS`:
    ``www.``, ``www2.``, ``m.``, ``mobile.``, ``amp.``) when that label is a subdomain:
    ``m.abcnews.go.com`` is ``abcnews.go.com``'s site and gets its rules (only ``www.`` was
    taken off, and the mobile and numbered hosts lost the more specific rules).

    Also ``www.`` (``www2.``…) when what is left is a public suffix of two labels or more and
    so ``registered`` is ``host`` itself: ``www.nhs.uk`` and ``nhs.uk`` are one site (nhs.uk
    is a public suffix, so the list makes ``www.nhs.uk`` a registered domain of its own, and
    the two were two hosts, typed apart). Only ``www``: under a public suffix ``m.``,
    ``mobile.`` or ``amp.`` is the name a registrant chose (``mobile.co.uk`` is a shop, not
    ``co.uk``'s mobile front end), so ``m.nhs.uk`` stays a site of its own. A front-end label
    on a top-level domain stays (``www.com`` is a site, ``com`` none), as on a host without a
    registered domain (an IP address, ``www.localhost``)."""
    front = FRONT_ENDS.match(host)
    if registered is None or front is None:
        return host
    rest = host[front.end():]
    if len(host) > len(registered):
        return rest
    if host == registered and "." in rest and WWW.match(host):
        return rest
    return host


def parent_domains(bare: str, registered: str | None) -> list[str]:
    """``bare`` and each parent domain down to the registered domain (empty if none);
    ``[bare]`` for the site of a public suffix (:func:`bare_host`: ``nhs.uk`` of
    ``www.nhs.uk``, above its registered domain)."""
    if registered is None:
        return []
    if bare != registered and not bare.endswith("." + registered):
        return [bare]
    labels = bare.split(".")
    stop = registered.count(".") + 1
    return [".".join(labels[i:]) for i in range(len(labels) - stop + 1)]


def is_ip(host: str) -> bool:
    """Whether ``host`` is an IP address (v4 or v6)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


#: RFC 3986's unreserved characters: percent-encoded, they mean the same path
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def normal_path(path: str) -> str:
    """``path`` as the server resolves it, lower-cased, for the path rules: percent-encoded
    unreserved characters decoded (``/%70mc`` is ``/pmc``), empty and ``.`` segments dropped
    (``//pmc``, ``/./pmc``), ``..`` removing the segment before it (RFC 3986 §5.2.4:
    ``/x/../pmc`` is ``/pmc``); a trailing slash dropped. Before, ``/doctor/../forums`` was
    matched as a ``/doctor`` page."""
    decoded = _PERCENT.sub(lambda m: chr(int(m[1], 16)) if chr(int(m[1], 16)) in _UNRESERVED
                           else m[0], path)
    segments: list[str] = []
    for segment in decoded.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if segments:
                segments.pop()
            continue
        segments.append(segment)
    return ("/" + "/".join(segments)).lower()


def path_match(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or lies under it (``/pmc`` matches ``/pmc/x``, not
    ``/pmcx``)."""
    return path == prefix or path.startswith(prefix + "/")
