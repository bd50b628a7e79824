"""The index-directory manifest (``DIR/manifest.json``): what an index was built with (engine,
embedder, dimension, format), read, written atomically and checked against what a caller asks
for."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from credrank.core.schema import Field, Flag, Integer, Nullable, Table, Text
from credrank.core.structured import read_structured
from credrank.index.errors import StoreError
from credrank.index.passages import Chunking

__all__ = [
    "ENGINES",
    "FORMAT_VERSION",
    "MANIFEST",
    "MANIFEST_SCHEMA",
    "POINT_IDS",
    "Manifest",
    "check_index_dir",
    "check_manifest",
    "no_index_error",
    "read_manifest",
    "reindex_hint",
    "write_manifest",
]

#: the newest index format this credrank reads and writes: 2 added ``point_ids`` (``u64``:
#: Qdrant Edge points keyed by a 63-bit hash of the document id instead of its uuid5); 3 added
#: passages (``chunk_tokens``, ``chunk_overlap``, ``split``: long documents stored as several
#: points, :mod:`credrank.index.passages`)
FORMAT_VERSION = 3
#: how a store derives a point id from a document id: ``uuid5`` (format 1, and every Qdrant
#: server collection) or ``u64`` (:func:`credrank.index.payload.point_id_u64`)
POINT_IDS = ("uuid5", "u64")
MANIFEST = "manifest.json"
#: persistent engines an index directory can name in its manifest (``memory`` is not one)
ENGINES = ("edge", "qdrant")


@dataclass(frozen=True)
class Manifest:
    """What ``DIR/manifest.json`` records about an index (never a credential).

    ``engine``: ``edge`` (data in ``DIR/shard``) or ``qdrant`` (data in a Qdrant collection:
    ``collection`` on a server at ``qdrant_location`` when ``qdrant_mode`` is ``url``, or in the
    client's local mode at the folder ``qdrant_location`` when it is ``path``). Manifests written
    before the engine was recorded mean ``edge``. ``memory`` marks the non-persistent store.
    ``point_ids``: how point ids derive from document ids (:data:`POINT_IDS`); Qdrant Edge
    indexes created by this version use ``u64``, older ones (and Qdrant collections) ``uuid5``.
    ``chunk_tokens`` / ``chunk_overlap``: how long texts are split into passages
    (:class:`~credrank.index.passages.Chunking`; ``0``: not split); ``None`` for an index made
    before passages (format < 3), whose long texts were embedded from their beginning only
    (:meth:`chunking`, :meth:`before_passages`). ``split``: some document is stored as more
    than one passage (a search then collapses passages to documents).
    """

    embedder: str
    dim: int
    bm25: bool = True
    format: int = FORMAT_VERSION
    engine: str = "edge"
    collection: str | None = None
    qdrant_mode: str | None = None
    qdrant_location: str | None = None
    point_ids: str = "uuid5"
    chunk_tokens: int | None = None
    chunk_overlap: int = 0
    split: bool = False

    @property
    def chunking(self) -> Chunking:
        """How this index splits long texts (none for an index made before passages)."""
        return Chunking(self.chunk_tokens or 0, self.chunk_overlap if self.chunk_tokens else 0)

    @property
    def before_passages(self) -> bool:
        """Made before long texts were split into passages (format < 3): such an index opens
        and searches as before; its long texts were embedded from their beginning only."""
        return self.chunk_tokens is None and self.engine != "memory"

    def to_json(self) -> str:
        data = {k: v for k, v in asdict(self).items() if v is not None}
        return json.dumps(data, indent=2)

    @classmethod
    def from_dict(cls, data: Any, where: str = "manifest") -> Manifest:
        """A manifest from its JSON object (:data:`MANIFEST_SCHEMA`); ``StoreError`` naming
        ``where`` and the field."""
        data = MANIFEST_SCHEMA.check(data, where, error=StoreError)
        manifest = cls(**data)
        if manifest.format > FORMAT_VERSION:
            raise StoreError(f"{where}: index format {manifest.format} is newer than this "
                             f"credrank reads ({FORMAT_VERSION})")
        if manifest.engine == "qdrant" and (not manifest.collection
                                            or manifest.qdrant_mode not in ("url", "path")):
            raise StoreError(f"{where}: a qdrant index needs 'collection' and 'qdrant_mode' "
                             f"(url or path), got {manifest.collection!r} and "
                             f"{manifest.qdrant_mode!r}")
        return manifest


#: what a manifest may hold; an unknown field (written by a newer credrank?) is refused
MANIFEST_SCHEMA = Table({
    "embedder": Field(Text()),
    "dim": Field(Integer(1, 1_000_000)),
    "bm25": Field(Flag(), default=True),
    "format": Field(Integer(0), default=FORMAT_VERSION),
    "engine": Field(Text(choices=(*ENGINES, "memory")), default="edge"),
    "collection": Field(Nullable(Text()), default=None),
    "qdrant_mode": Field(Nullable(Text()), default=None),
    "qdrant_location": Field(Nullable(Text()), default=None),
    "point_ids": Field(Text(choices=POINT_IDS), default="uuid5"),
    "chunk_tokens": Field(Nullable(Integer(0, 1_000_000)), default=None),
    "chunk_overlap": Field(Integer(0, 1_000_000), default=0),
    "split": Field(Flag(), default=False),
}, what="a JSON object")


def read_manifest(index_dir: str | Path) -> Manifest | None:
    """The manifest of ``index_dir``, or ``None`` when the directory holds none; a manifest
    that is not UTF-8 JSON within the bounds of :mod:`credrank.core.structured` is a
    ``StoreError`` naming the file."""
    path = Path(index_dir) / MANIFEST
    if not path.is_file():
        return None
    data = read_structured(path, what="index manifest", fmt="json", error=StoreError)
    return Manifest.from_dict(data, str(path))


def write_manifest(index_dir: str | Path, manifest: Manifest) -> None:
    """Write ``DIR/manifest.json`` atomically (a crash leaves the old one or none)."""
    path = Path(index_dir) / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(manifest.to_json(), encoding="utf-8")
    os.replace(tmp, path)


def check_manifest(index_dir: str | Path, manifest: Manifest, engine: str, *,
                   embedder: str | None = None, dim: int | None = None,
                   chunking: Chunking | None = None) -> None:
    """Raise ``StoreError`` when an existing index is of another engine, embedder, dimension
    or (``chunking`` given) passage sizes: an index splits every text one way."""
    if manifest.engine != engine:
        raise StoreError(f"{index_dir}: index was built with engine {manifest.engine!r}, not "
                         f"{engine!r}; open it with --engine {manifest.engine}")
    if embedder and embedder != manifest.embedder:
        raise StoreError(f"{index_dir}: index was built with embedder "
                         f"{manifest.embedder!r}, not {embedder!r}")
    if dim and dim != manifest.dim:
        raise StoreError(f"{index_dir}: index dimension is {manifest.dim}, not {dim}")
    if chunking is not None and chunking != manifest.chunking:
        if manifest.before_passages:
            raise StoreError(f"{index_dir}: index was made before long texts were split into "
                             f"passages (format {manifest.format}): it keeps every text whole; "
                             "index into a new directory to split them")
        raise StoreError(f"{index_dir}: index was built with {_words(manifest.chunking)}, "
                         f"not {_words(chunking)}; an index splits every text one way: index "
                         "into a new directory to change it")


def _words(chunking: Chunking) -> str:
    """A chunking in words no door spells differently (the CLI's ``--chunk-tokens``, the
    library's ``chunk_tokens``): what the passages are."""
    if not chunking.on:
        return "long texts not split (passage size 0)"
    return (f"passages of at most {chunking.tokens} tokens overlapping by "
            f"{chunking.overlap}")


def reindex_hint(index_dir: str | Path, manifest: Manifest) -> str | None:
    """What to tell the user of an index made before passages (``None`` for any other): its
    long texts were embedded from their beginning only; re-indexing into a new directory
    splits them."""
    if not manifest.before_passages:
        return None
    return (f"{index_dir}: this index was made by an earlier credrank (format "
            f"{manifest.format}), before long texts were split into passages: a text longer "
            "than the embedder's window was embedded from its beginning only. It opens and "
            "searches as before; to search whole texts, index the corpus again into a new "
            "directory (`credrank index CORPUS --index NEWDIR`)")


def no_index_error(index_dir: str | Path) -> StoreError:
    """The error for a directory that holds no index (and creation was not asked for)."""
    return StoreError(f"{index_dir}: no credrank index here (expected "
                      f"{Path(index_dir) / MANIFEST}); build one with "
                      "`credrank index CORPUS --index DIR`")


def check_index_dir(index_dir: str | Path) -> None:
    """``StoreError`` when ``index_dir`` exists but is not a directory (a regular file)."""
    path = Path(index_dir)
    if path.exists() and not path.is_dir():
        raise StoreError(f"{index_dir}: expected an index directory, got a file")
