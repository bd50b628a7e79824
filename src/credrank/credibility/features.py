"""Page-credibility features: ``[cues | url | embedding]`` for ``(text, url)`` pairs.

Three groups, all fixed a priori (never tuned on data):

* ``cues`` (:data:`CUE_NAMES`) — page-quality cues from the text: ``log(1 + words)``, the
  share of digits among characters, of upper-case letters among letters and of non-ASCII
  characters, ``log(1 + mean sentence length)``, and, for each cue group of
  :data:`CUE_GROUPS` (commerce, phone numbers, testimonials, hype, science, authority,
  disclaimers, ads, user content), the rate ``log(1 + 1000 · count / words)`` of
  non-overlapping case-insensitive matches;
* ``url`` (:data:`URL_NAMES`) — the top-level domain one-hot over :data:`TLDS` (else
  ``other``), the path depth, ``log(1 + len(url))``, a hyphen or a digit in the host, the
  number of sub-domain labels, a query string or a script extension
  (``.php .asp .aspx .cfm .cgi .jsp``), and a ``no_url`` flag (a missing URL zeroes the other
  URL features);
* ``embedding`` — by the featuriser's ``embedding_source`` (:data:`EMBEDDING_SOURCES`):
  ``head``, the embedder's vector of the page's first ``head_words`` words (default 200; the
  model files written before the source existed); or ``document``, the vector the index
  stores for the page — the embedder's vector of ``title\ntext`` cut at its own maximum length
  (:func:`credrank.index.ingest.embedding_text`; MiniLM: 256 word pieces) — passed in as
  ``vectors`` (read from the index, no embedder call), else computed from ``title\ntext`` the
  way indexing computes it (candidates from elsewhere). With MiniLM the two differ only by the
  title: 200 words are more than 256 word pieces, so both read the first 256 of the text.

:func:`cue_patterns_hash` fingerprints the cue lists, so a saved model refuses features that
changed under it.

**Cost.** A row is computed once per distinct ``(text, url)`` and kept (in memory; with
``cache_dir`` also on disk, :class:`FeatureCache`, so a refit or a second command on the same
pages embeds nothing): the cues are ``O(L)`` regex scans of a page of ``L`` characters, the
``head`` embedding one embedder call per chunk of :data:`EMBED_CHUNK` pages (pages sorted by
length, so a chunk pads little), which dominates a cold fit (MiniLM on 2 CPU cores: roughly
10–20 pages a second for 100–200-word pages). With ``document`` the kept row is ``[cues |
url]`` and the stored vector is appended on each call (``O(d)``): a fit or an index-time
scoring run over an index embeds nothing at all.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from credrank.core.embedder import Embedder
from credrank.core.logistic import text_key
from credrank.core.validation import check_int

#: cue groups of the ``cues`` feature block (fixed a priori, never tuned on data)
CUE_GROUPS: dict[str, tuple[str, ...]] = {
    "commerce": (r"\bbuy\b", r"order now", r"\bprices?\b", r"\$\s?\d", r"add to cart",
                 r"shopping cart", r"\bcart\b", r"free shipping", r"\bdiscount", r"\bcoupon",
                 r"money[- ]back", r"\bguaranteed?\b", r"\bproducts?\b", r"\bsale\b"),
    "phone": (r"\(?\b\d{3}\)?[-. ]\d{3}[-. ]\d{4}\b", r"\b1-800\b", r"toll[- ]free",
              r"call (?:us|now|today)"),
    "testimonial": (r"testimonial", r"\bi tried\b", r"my story", r"changed my life",
                    r"success stor"),
    "hype": (r"miracle", r"\bcures?\b", r"amazing", r"\bsecrets?\b", r"natural remed",
             r"\bdetox", r"100\s?%", r"breakthrough", r"!"),
    "science": (r"\bet al\b", r"\bdoi\b", r"\bjournal", r"\bstud(?:y|ies)\b", r"clinical trial",
                r"randomi[sz]ed", r"pubmed|medline", r"meta-analys", r"systematic review",
                r"\breferences?\b", r"bibliography", r"\bcitations?\b", r"\bevidence\b"),
    "authority": (r"\.gov\b", r"\.edu\b", r"\bm\.?d\.?\b", r"\bph\.?d\.?\b", r"reviewed by",
                  r"medical review", r"\buniversity\b", r"\bhospital\b", r"\binstitute\b",
                  r"\bnational\b", r"\bassociation\b", r"\bsociety\b", r"\bcenters? for\b"),
    "disclaimer": (r"disclaimer", r"not intended to", r"consult (?:your|a) (?:doctor|physician)",
                   r"medical advice", r"privacy policy", r"copyright|\u00a9",
                   r"all rights reserved"),
    "ads": (r"advertis", r"\bsponsor", r"\bads?\b", r"affiliate"),
    "user_content": (r"\bforums?\b", r"posted by", r"\breply\b", r"\bcomments?\b", r"\blog ?in\b",
                     r"\bregister\b", r"\bmembers?\b", r"\bblog\b"),
}
_CUE_RES = {g: re.compile("|".join(f"(?:{p})" for p in ps), re.IGNORECASE)
            for g, ps in CUE_GROUPS.items()}
#: top-level domains with their own one-hot column (others go to ``other``)
TLDS: tuple[str, ...] = ("com", "org", "net", "gov", "edu", "uk", "ca", "au")
_SCRIPT_EXT = (".php", ".asp", ".aspx", ".cfm", ".cgi", ".jsp")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
GROUPS: tuple[str, ...] = ("cues", "url", "embedding")
#: where the ``embedding`` group comes from (module docstring); ``head`` is the old default
EMBEDDING_SOURCES: tuple[str, ...] = ("head", "document")
#: pages per embedder call when featurising (a progress step)
EMBED_CHUNK = 256
#: seconds between two writes of the disk cache while featurising (and once at the end)
SAVE_EVERY = 30.0

CUE_NAMES: tuple[str, ...] = ("log_words", "digit_share", "upper_share", "non_ascii_share",
                              "log_mean_sentence_words",
                              *(f"rate_{g}" for g in CUE_GROUPS))
URL_NAMES: tuple[str, ...] = (*(f"tld_{t}" for t in TLDS), "tld_other", "path_depth",
                              "log_url_length", "host_hyphen", "host_digit", "subdomains",
                              "dynamic", "no_url")


def cue_features(text: str) -> np.ndarray:
    """The ``cues`` block of one page (:data:`CUE_NAMES`, in order)."""
    if not isinstance(text, str):
        raise ValueError(f"text: expected a string, got {type(text).__name__}")
    words = len(text.split())
    chars = max(len(text), 1)
    letters = sum(1 for c in text if c.isalpha())
    upper = sum(1 for c in text if c.isupper())
    digits = sum(1 for c in text if c.isdigit())
    non_ascii = sum(1 for c in text if ord(c) > 127)
    sentences = [s for s in _SENT_SPLIT.split(text) if s.strip()]
    mean_sentence = words / max(len(sentences), 1)
    out = [math.log1p(words), digits / chars, upper / max(letters, 1), non_ascii / chars,
           math.log1p(mean_sentence)]
    for regex in _CUE_RES.values():
        out.append(math.log1p(1000.0 * len(regex.findall(text)) / max(words, 1)))
    return np.asarray(out, dtype=np.float64)


def url_features(url: str | None) -> np.ndarray:
    """The ``url`` block of one page (:data:`URL_NAMES`, in order); ``None`` or an empty URL
    gives zeros with ``no_url = 1``."""
    out = np.zeros(len(URL_NAMES))
    if url is None or not str(url).strip():
        out[-1] = 1.0
        return out
    url = str(url).strip()
    parts = urlsplit(url if "//" in url else "//" + url)
    host = (parts.hostname or "").lower()
    labels = [x for x in host.split(".") if x]
    tld = labels[-1] if labels else ""
    out[TLDS.index(tld) if tld in TLDS else len(TLDS)] = 1.0
    base = len(TLDS) + 1
    path = parts.path or ""
    out[base] = float(len([p for p in path.split("/") if p]))
    out[base + 1] = math.log1p(len(url))
    out[base + 2] = float("-" in host)
    out[base + 3] = float(any(c.isdigit() for c in host))
    core = labels[1:] if labels[:1] == ["www"] else labels
    out[base + 4] = float(max(len(core) - 2, 0))
    out[base + 5] = float(bool(parts.query) or path.lower().endswith(_SCRIPT_EXT))
    return out


def cue_patterns_hash() -> str:
    """sha256 of the cue lists, the TLD list and the feature names (a model file records it)."""
    data = {"cues": CUE_GROUPS, "tlds": TLDS, "script": _SCRIPT_EXT,
            "names": [*CUE_NAMES, *URL_NAMES]}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()


def head(text: str, words: int) -> str:
    """The first ``words`` white-space separated words of ``text``, joined by single spaces."""
    return " ".join(text.split()[:words])


class FeatureCache:
    """Feature rows on disk: ``DIR/credibility-<fingerprint>.npz`` holding ``keys`` (a hash of
    each ``(text, url)``) and ``rows``. The fingerprint hashes everything a row depends on —
    the cue patterns (:func:`cue_patterns_hash`), the embedder's name and dimension and
    ``head_words`` — so a changed featuriser never reads stale rows. Written atomically (a
    temporary file, then a rename) at the end of each featurising call that computed new rows
    and every :data:`SAVE_EVERY` seconds during a long one (an interrupted fit keeps most of
    its work); a file that cannot be read is ignored (and replaced on the next write)."""

    def __init__(self, directory: str | Path, fingerprint: str, width: int):
        self.directory = Path(directory)
        self.path = self.directory / f"credibility-{fingerprint[:24]}.npz"
        self.width = width

    def load(self) -> dict[str, np.ndarray]:
        """The cached rows by key (empty when there is no usable file)."""
        if not self.path.is_file():
            return {}
        try:
            with np.load(self.path, allow_pickle=False) as data:
                keys, rows = data["keys"], data["rows"]
        except (OSError, ValueError, KeyError):
            return {}
        if rows.ndim != 2 or rows.shape != (len(keys), self.width) or \
                not np.all(np.isfinite(rows)):
            return {}
        return {str(k): r for k, r in zip(keys, rows, strict=True)}

    def save(self, rows: dict[str, np.ndarray]) -> None:
        """Write every row (atomically)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.tmp.npz")
        keys = list(rows)
        np.savez(tmp, keys=np.array(keys, dtype=str),
                 rows=np.vstack([rows[k] for k in keys]) if keys else
                 np.zeros((0, self.width)))
        os.replace(tmp, self.path)


class CredibilityFeaturizer:
    """Feature rows ``[cues | url | embedding]`` for ``(text, url)`` pairs (module docstring).

    ``embedder`` is any :class:`~credrank.core.embedder.Embedder` (MiniLM in experiments, the
    hashing embedder in tests) or ``None``, in which case the ``embedding`` group is absent.
    ``embedding_source``: ``head`` or ``document`` (:data:`EMBEDDING_SOURCES`, module
    docstring). Rows are cached in memory by ``(hash of text, url)``, so a page shared by many
    folds is featurised (and embedded) once; with ``cache_dir`` also on disk
    (:class:`FeatureCache`), so a later fit on the same pages embeds none of them. With
    ``document`` the cached row is ``[cues | url]``; the embedding comes with each call
    (``vectors``) or is computed from ``title\ntext`` and kept in memory by its hash.
    """

    def __init__(self, embedder: Embedder | None, *, head_words: int = 200,
                 cache_dir: str | Path | None = None, embedding_source: str = "head"):
        check_int("head_words", head_words, 1)
        if embedding_source not in EMBEDDING_SOURCES:
            raise ValueError(f"embedding_source: expected one of {', '.join(EMBEDDING_SOURCES)}"
                             f", got {embedding_source!r}")
        self.embedder = embedder
        self.head_words = head_words
        self.embedding_source = embedding_source
        self.dim = dim = int(getattr(embedder, "dim", 0)) if embedder is not None else 0
        n_cue, n_url = len(CUE_NAMES), len(URL_NAMES)
        self.slices: dict[str, slice] = {"cues": slice(0, n_cue),
                                         "url": slice(n_cue, n_cue + n_url)}
        if embedder is not None:
            self.slices["embedding"] = slice(n_cue + n_url, n_cue + n_url + dim)
        self.width = n_cue + n_url + dim
        #: the width of a kept row: all of it (``head``), or ``[cues | url]`` (``document``)
        self._kept = self.width if embedding_source == "head" else n_cue + n_url
        self._rows: dict[tuple[str, str | None], np.ndarray] = {}
        self._embedded: dict[str, np.ndarray] = {}  # document: vectors of title\ntext
        self.cache: FeatureCache | None = None
        self._disk: dict[str, np.ndarray] = {}
        if cache_dir is not None:
            self.cache = FeatureCache(cache_dir, self.fingerprint(), self._kept)
            self._disk = self.cache.load()

    def fingerprint(self) -> str:
        """sha256 of what a kept row depends on: cue patterns, embedder name and dimension,
        head words (and the embedding source when it is not ``head``)."""
        data: dict[str, Any] = {
            "cues": cue_patterns_hash(), "head_words": self.head_words,
            "embedder": getattr(self.embedder, "name", None) if self.embedder else None,
            "dim": int(getattr(self.embedder, "dim", 0)) if self.embedder else 0}
        if self.embedding_source != "head":  # the head featuriser keeps its old caches
            data["embedding_source"] = self.embedding_source
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()

    @staticmethod
    def _disk_key(key: tuple[str, str | None]) -> str:
        return f"{key[0]}\t{'' if key[1] is None else key[1]}\t{int(key[1] is None)}"

    @property
    def groups(self) -> tuple[str, ...]:
        """The feature groups this featuriser can produce."""
        return tuple(self.slices)

    def config(self) -> dict[str, Any]:
        """The featuriser's settings as JSON."""
        return {"embedder": getattr(self.embedder, "name", None), "head_words": self.head_words,
                "embedding_source": self.embedding_source,
                "groups": list(self.groups), "cues": list(CUE_NAMES), "url": list(URL_NAMES)}

    def columns(self, groups: Iterable[str]) -> np.ndarray:
        """Column indices of ``groups`` (in :data:`GROUPS` order)."""
        groups = set(groups)
        unknown = groups - set(GROUPS)
        if unknown or not groups:
            raise ValueError(f"groups: expected a non-empty subset of {', '.join(GROUPS)}; "
                             f"got {sorted(groups)}")
        missing = groups - set(self.slices)
        if missing:
            raise ValueError(f"groups: {sorted(missing)} need an embedder; this featuriser "
                             "has none")
        return np.concatenate([np.arange(self.width)[self.slices[g]]
                               for g in GROUPS if g in groups])

    def features(self, texts: Sequence[str], urls: Sequence[str | None], *,
                 titles: Sequence[str | None] | None = None,
                 vectors: Sequence[Any] | np.ndarray | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """All feature columns, one row per page, shape ``(len(texts), width)``.

        Pages not featurised yet (not in memory, not in the disk cache) are computed in
        chunks of :data:`EMBED_CHUNK`, longest first; ``on_progress(done, total)`` after each
        chunk (``total``: the pages to compute). ``O(Σ L)`` for the cues plus the embedder's
        cost of the new pages.

        ``document`` source only: ``vectors[i]`` is page ``i``'s stored vector (``None``, or
        no ``vectors``: computed from ``titles[i]`` and the text, as indexing does); ``head``
        ignores both."""
        n = len(texts)
        if len(urls) != n:
            raise ValueError(f"urls: expected {n} values (one per text); got {len(urls)}")
        for name, given in (("titles", titles), ("vectors", vectors)):
            if given is not None and len(given) != n:
                raise ValueError(f"{name}: expected {n} values (one per text); got "
                                 f"{len(given)}")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ValueError(f"texts[{i}]: expected a string (the page text), got "
                                 f"{type(t).__name__}")
        kept = self._kept_rows(texts, urls, on_progress)
        if self.embedding_source == "head" or self.embedder is None:
            return kept
        return np.hstack([kept, self._document_vectors(texts, titles, vectors)])

    def _kept_rows(self, texts: Sequence[str], urls: Sequence[str | None],
                   on_progress: Callable[[int, int], None] | None) -> np.ndarray:
        """The kept rows (:attr:`_kept` columns) of the pages, computed where not known."""
        keys = [(text_key(t), None if u is None else str(u)) for t, u in zip(texts, urls,
                                                                           strict=True)]
        todo = []
        for k in dict.fromkeys(k for k in keys if k not in self._rows):
            row = self._disk.get(self._disk_key(k))
            if row is not None:
                self._rows[k] = row
            else:
                todo.append(k)
        if todo:
            first = {k: (t, u) for k, t, u in zip(keys, texts, urls, strict=True)}
            todo.sort(key=lambda k: -len(first[k][0]))  # similar lengths share a chunk
            saved = time.monotonic()
            head_embedding = self.embedder is not None and self.embedding_source == "head"
            for start in range(0, len(todo), EMBED_CHUNK):
                chunk = todo[start:start + EMBED_CHUNK]
                pages = [first[k] for k in chunk]
                hand = [np.concatenate([cue_features(t), url_features(u)]) for t, u in pages]
                if head_embedding:
                    assert self.embedder is not None
                    emb = np.asarray(self.embedder.embed([head(t, self.head_words)
                                                          for t, _ in pages]),
                                     dtype=np.float64)
                    hand = [np.concatenate([h, e]) for h, e in zip(hand, emb, strict=True)]
                for k, row in zip(chunk, hand, strict=True):
                    self._rows[k] = row
                    if self.cache is not None:
                        self._disk[self._disk_key(k)] = row
                last = start + EMBED_CHUNK >= len(todo)
                if self.cache is not None and (last or time.monotonic() - saved >= SAVE_EVERY):
                    self.cache.save(self._disk)
                    saved = time.monotonic()
                if on_progress is not None:
                    on_progress(min(start + EMBED_CHUNK, len(todo)), len(todo))
        if not keys:
            return np.zeros((0, self._kept))
        return np.vstack([self._rows[k] for k in keys])

    def _document_vectors(self, texts: Sequence[str], titles: Sequence[str | None] | None,
                          vectors: Sequence[Any] | np.ndarray | None) -> np.ndarray:
        """The ``document`` embedding block: the given vectors (L2-normalised), else the
        embedder's vector of ``title\ntext`` (computed once per distinct string)."""
        from credrank.index.ingest import embedding_text  # what indexing embeds

        out = np.zeros((len(texts), self.dim))
        todo: dict[str, str] = {}
        wanted: list[tuple[int, str]] = []
        for i, text in enumerate(texts):
            vec = None if vectors is None else vectors[i]
            if vec is not None:
                row = np.asarray(vec, dtype=np.float64).reshape(-1)
                if row.shape != (self.dim,) or not np.all(np.isfinite(row)):
                    raise ValueError(f"vectors[{i}]: expected {self.dim} finite numbers (the "
                                     f"index's {getattr(self.embedder, 'name', '?')!r} "
                                     f"vector), got shape {row.shape}")
                norm = float(np.linalg.norm(row))
                out[i] = row / norm if norm > 0 else row
                continue
            title = None if titles is None else titles[i]
            string = embedding_text(title if isinstance(title, str) else None, text)
            key = text_key(string)
            wanted.append((i, key))
            if key not in self._embedded:
                todo[key] = string
        if todo:
            assert self.embedder is not None
            keys = sorted(todo, key=lambda k: -len(todo[k]))
            for start in range(0, len(keys), EMBED_CHUNK):
                chunk = keys[start:start + EMBED_CHUNK]
                emb = np.asarray(self.embedder.embed([todo[k] for k in chunk]),
                                 dtype=np.float64)
                for k, row in zip(chunk, emb, strict=True):
                    self._embedded[k] = row
        for i, key in wanted:
            out[i] = self._embedded[key]
        return out
