"""Answer agreement from a fitted stance model: its training pairs, its model file and its fit.

For claim-style queries ("does X help Y?") the agreement of chapter 35.3 needs each
candidate's *answer*. The stage :class:`~credrank.stages.stance.StanceAgreement` reads it from
the page text with a stance model (:mod:`credrank.signals.stance_model`: ``p_d = P(page d says
the treatment helps)``) and hands it to :class:`~credrank.signals.agreement.AnswerAgreement`,
which adds the factor ``agreement``:

``w_d = λ_d · max(sim_d, 0)``, ``z = Σ_d w_d p_d / Σ_d w_d``, ``ẑ = σ(κ · logit z)``,
``a_d = p_d ẑ + (1 − p_d)(1 − ẑ)``, ``f_d = floor + (1 − floor) · a_d ∈ [floor, 1]``

(chapter 35.3; the policies — zero total weight, ``exclude_self``, ``voters`` — are those of
:func:`~credrank.signals.agreement.agreement_factor`). Agreement measures conformity, not truth:
a consensus of pages repeating a wrong claim is rewarded (see the agreement module).

**Training pairs** (:func:`read_pairs`): a CSV with ``topic`` (or ``topic_id``), ``query`` (or
``description``), ``doc_id``, ``stance`` (``0`` = the page says the treatment does not help,
``1`` = it helps), optional ``text`` and ``url``. Pages without text in the file are read from
an index (by ``doc_id``) when one is given. Every row is used or rejected with a reason, and
the reasons are counted (:attr:`Pairs.rejected`): a blank row (every value empty); an empty
topic, query or doc_id; a stance that is empty, not a number, or a number other than 0 or 1;
no text (neither in the file nor in the index). **Duplicates** — several rows of one ``(topic,
doc_id)`` — follow the one policy of every learned stage (:func:`credrank.learn.cv.majority`,
as the credibility labels): they give one pair of their majority stance (the first row's
query, text and url), the further rows counted as ``duplicate (topic, doc_id)`` and those whose
stance lost in :attr:`Pairs.outvoted`; a tie gives no pair, every row counted as
``duplicate (topic, doc_id), stances tied``.
The file itself is read as strictly as every CSV credrank reads (:func:`read_pairs`): a broken
file is an error naming the line, never a silent loss of rows.

**Model file** (:func:`model_document`, :func:`load_model`): JSON with
``"credrank_stance_model": 2`` (format 1, without the ``provenance`` table, is still read),
written and read by the shared :class:`~credrank.learn.modelfile.ModelFileFormat`; docs/json.md
lists the fields. :func:`fit_pairs` runs the nested grouped cross-validation
(:func:`~credrank.signals.stance_model.grouped_cross_validation`, that is
:func:`credrank.learn.cv.nested_cross_validation`) and refits on every pair. A model reads
pages with the embedder it was fitted with: :func:`~credrank.stages.stance.stance_stage`
refuses another one, naming both.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credrank.core.embedder import Embedder
from credrank.core.errors import FileFormatError
from credrank.core.logistic import text_key
from credrank.core.schema import (
    Anything,
    Field,
    Flag,
    Integer,
    ListOf,
    Number,
    Table,
    Text,
)
from credrank.core.structured import MAX_CSV_CHARS, read_csv
from credrank.index.embed import get_embedder
from credrank.index.store import VectorStore
from credrank.learn.cv import N_BOOT, Progress, majority
from credrank.learn.modelfile import (
    EMBEDDER,
    SHA256,
    ModelFileFormat,
    check_sha256,
    logistic_document,
    logistic_model,
    logistic_schema,
    trained_on,
    with_provenance,
)
from credrank.signals.stance_model import (
    StanceConfig,
    StanceExample,
    StanceFeaturizer,
    StanceModel,
    grouped_cross_validation,
    lexicon_hash,
)

KEY = "credrank_stance_model"
#: the CSV columns of training pairs: (name, alternative name or None, required)
PAIR_COLUMNS: tuple[tuple[str, str | None, bool], ...] = (
    ("topic", "topic_id", True), ("query", "description", True), ("doc_id", None, True),
    ("stance", None, True), ("text", None, False), ("url", None, False))
#: the featuriser of ``credrank stance fit``: snippet ⊙ query block (chosen by the CV),
#: anchor contrast and lexical cues; the raw snippet embedding is off (too many columns for
#: a few hundred pairs)
DEFAULT_FEATURES: dict[str, Any] = {"k_sentences": 3, "max_words": 60, "use_embedding": False,
                                    "use_interaction": True, "use_anchors": True,
                                    "use_cues": True}
#: rejection reasons, in the order they are checked
#: the reason of the rows of a pair whose stances tie (:func:`read_pairs`)
TIED = "duplicate (topic, doc_id), stances tied"
REASONS = ("blank row", "topic empty", "query empty", "doc_id empty", "stance empty",
           "stance not a number", "stance not 0 or 1", "duplicate (topic, doc_id)", TIED,
           "no text (none in the file, no index given)", "doc_id not in the index",
           "no text (empty in the file and in the index)")


class StanceModelError(FileFormatError):
    """A model file or training-pairs file that cannot be used (the message names the file,
    the field or line, what was expected and what came)."""


# ---------------------------------------------------------------- training pairs


@dataclass
class Pairs:
    """Labelled pairs read from a CSV, and what happened to every row."""

    path: str
    examples: list[StanceExample]
    urls: list[str | None]
    rows: int
    columns: dict[str, str | None]
    rejected: dict[str, int] = field(default_factory=dict)
    rejected_lines: dict[str, list[int]] = field(default_factory=dict)
    rejected_stances: dict[str, int] = field(default_factory=dict)
    text_from_index: int = 0
    #: the index the missing page texts were read from (``None``: none was given)
    index: str | None = None
    #: rows whose stance lost the majority of their pair's rows (conflicting duplicates)
    outvoted: int = 0
    outvoted_examples: list[str] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        """Rows read, used and rejected by reason (with up to 5 line numbers each), and the
        index the missing texts came from: a model says which data it saw."""
        return {"file": self.path, "index": self.index, "rows": self.rows,
                "used": len(self.examples),
                "rejected": sum(self.rejected.values()),
                "rejected_by_reason": dict(self.rejected),
                "rejected_lines": {k: v[:5] for k, v in self.rejected_lines.items()},
                "rejected_stance_values": dict(self.rejected_stances),
                "columns": dict(self.columns), "text_from_index": self.text_from_index,
                "outvoted": self.outvoted, "outvoted_examples": list(self.outvoted_examples)}


def _pick_columns(path: str, header: Sequence[str], has_store: bool,
                  query_column: str | None = None) -> dict[str, str | None]:
    names = [h.strip() for h in header]
    if query_column is not None and query_column not in names:
        raise StanceModelError(f"{path}: missing column {query_column!r} (the query column "
                               f"asked for); got {', '.join(names) or 'none'}")
    out: dict[str, str | None] = {}
    for name, alt, required in PAIR_COLUMNS:
        chosen = name if name in names else alt if alt is not None and alt in names else None
        if name == "query" and query_column is not None:
            chosen = query_column
        if chosen is None and required:
            want = f"{name!r}" + (f" (or {alt!r})" if alt else "")
            raise StanceModelError(f"{path}: missing column {want}; expected columns topic (or "
                                   "topic_id), query (or description), doc_id, stance, and "
                                   f"optionally text, url; got {', '.join(names) or 'none'}")
        out[name] = chosen
    if out["text"] is None and not has_store:
        raise StanceModelError(f"{path}: no 'text' column and no index to read the pages "
                               "from; add a text column or pass an index (--index)")
    return out


def _parse_stance(raw: str) -> tuple[int | None, str | None]:
    """``(stance, None)`` or ``(None, rejection reason)``."""
    value = raw.strip()
    if not value:
        return None, "stance empty"
    try:
        number = float(value)
    except ValueError:
        return None, "stance not a number"
    if number in (0.0, 1.0):
        return int(number), None
    return None, "stance not 0 or 1"


#: the pairs-file columns whose quoted values may span lines: a page keeps its line breaks
MULTILINE_COLUMNS: tuple[str, ...] = ("text",)
#: the longest value of a pairs file (characters), enforced by the strict CSV reader
MAX_FIELD_CHARS = MAX_CSV_CHARS


def _pair_records(path: str | Path) -> tuple[list[str], list[tuple[int, dict[str, str | None]]]]:
    """The header and the ``(line, {column: value})`` data rows of a pairs file, read by
    :func:`credrank.core.structured.read_csv` (UTF-8, a byte-order mark dropped, strict CSV,
    a CSV error or a value over 131,072 characters names its line); only the values of
    :data:`MULTILINE_COLUMNS` may span lines (the pages of the TREC Health Misinformation
    pairs do), so an unterminated quote in any other column is an error naming the line where
    it began instead of swallowing the rows after it."""
    rows = read_csv(path, what="pairs file", error=StanceModelError,
                    multiline=MULTILINE_COLUMNS, max_chars=MAX_FIELD_CHARS)
    records = list(rows)
    assert rows.header is not None  # an empty file is an error of read_csv
    return rows.header, records


def _store_name(store: Any) -> str:
    """Where a store is: its folder made absolute, else its engine's name of it."""
    path = getattr(store, "path", None)
    return str(Path(path).resolve()) if path else str(getattr(store, "name", "") or "?")


def read_pairs(path: str | Path, store: VectorStore | None = None, *,
               query_column: str | None = None) -> Pairs:
    """The labelled pairs of the CSV at ``path`` (module docstring). Text missing from the
    file is read from ``store`` by ``doc_id`` (a text cell that is present wins). The query
    is read from ``query_column`` when given, else from ``query``, else ``description``.

    Declared policy: the file is read strictly (:func:`_pair_records`: a broken quote, a value
    over 131,072 characters — a longer page: leave its ``text`` empty and pass an index — or
    any other CSV error is a :class:`StanceModelError` naming the line); a missing column and
    a row with more or fewer values than the header are errors too; every other row is used
    or rejected with its reason (:attr:`Pairs.rejected`), a row of empty values as a blank
    row.
    """
    name = str(path)
    header, records = _pair_records(path)
    cols = _pick_columns(name, header, store is not None, query_column)
    where = {c: header.index(c) for c in cols.values() if c is not None}
    raw_rows: list[tuple[int, dict[str, str] | None]] = []
    for line, record in records:
        values = [v for v in record.values() if v is not None]
        if not any(cell.strip() for cell in values):
            raw_rows.append((line, None))  # rejected below as a blank row
            continue
        if len(values) != len(header):
            raise StanceModelError(f"{name}:{line}: expected {len(header)} fields (the "
                                   f"header's), got {len(values)}")
        raw_rows.append((line, {k: values[where[c]] for k, c in cols.items()
                                if c is not None}))
    pairs = Pairs(name, [], [], len(raw_rows), cols,
                  index=None if store is None else _store_name(store))

    def reject(reason: str, line: int) -> None:
        pairs.rejected[reason] = pairs.rejected.get(reason, 0) + 1
        pairs.rejected_lines.setdefault(reason, []).append(line)

    by_pair: dict[tuple[str, str], list[tuple[int, str, str, str, int, str, str | None]]] = {}
    for line, row in raw_rows:
        if row is None:
            reject("blank row", line)
            continue
        topic, query, doc_id = (row[k].strip() for k in ("topic", "query", "doc_id"))
        stance, why = _parse_stance(row["stance"])
        if not topic:
            reject("topic empty", line)
        elif not query:
            reject("query empty", line)
        elif not doc_id:
            reject("doc_id empty", line)
        elif why is not None or stance is None:
            reject(why or "stance empty", line)
            if why != "stance empty":
                value = row["stance"].strip()
                pairs.rejected_stances[value] = pairs.rejected_stances.get(value, 0) + 1
        else:
            url = row.get("url", "").strip() or None
            by_pair.setdefault((topic, doc_id), []).append(
                (line, topic, query, doc_id, stance, row.get("text", ""), url))
    pending = []
    for (topic, doc_id), found in by_pair.items():
        label = majority(r[4] for r in found)  # the duplicate policy of every learned stage
        if label is None:
            for r in found:
                reject(TIED, r[0])
            continue
        for r in found[1:]:
            reject("duplicate (topic, doc_id)", r[0])
        lost = [r[0] for r in found if r[4] != label]
        if lost:
            pairs.outvoted += len(lost)
            if len(pairs.outvoted_examples) < 5:
                pairs.outvoted_examples.append(
                    f"lines {[r[0] for r in found]}: {doc_id} in {topic}: {len(lost)} of "
                    f"{len(found)} rows outvoted")
        pending.append((*found[0][:4], label, *found[0][5:]))
    need = sorted({p[3] for p in pending if not p[5].strip()})
    stored: dict[str, dict[str, Any]] = {}
    if need and store is not None:
        for payload in store.read_payloads(need, ("doc_id", "text", "url")):
            stored[str(payload.get("doc_id"))] = payload
    for line, topic, query, doc_id, stance, text, url in pending:
        if not text.strip():
            if store is None:
                reject("no text (none in the file, no index given)", line)
                continue
            hit = stored.get(doc_id)
            if hit is None:
                reject("doc_id not in the index", line)
                continue
            text = str(hit.get("text") or "")
            if not text.strip():
                reject("no text (empty in the file and in the index)", line)
                continue
            url = url or hit.get("url")
            pairs.text_from_index += 1
        pairs.examples.append(StanceExample(topic, query, text, stance, doc_id))
        pairs.urls.append(url)
    pairs.rejected = {r: pairs.rejected[r] for r in REASONS if r in pairs.rejected}
    return pairs


def training_hash(examples: Sequence[StanceExample]) -> str:
    """SHA-256 of the pairs used, order-free: sorted ``(topic, query, doc_id, stance, hash of
    the text)``."""
    rows = sorted((e.qid, e.query, e.doc_id, int(e.stance), text_key(e.text)) for e in examples)
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- model file


def model_document(model: StanceModel, *, embedder_name: str, embedder_dim: int,
                   training_sha256: str, n_pairs: int, n_topics: int,
                   metrics: Mapping[str, Any], provenance: Mapping[str, Any],
                   rows: Mapping[str, Any] | None = None, topics: Sequence[str] = ()
                   ) -> dict[str, Any]:
    """The JSON document of a fitted ``model`` (docs/json.md), in the current format;
    ``rows`` (the pairs file and the index, absolute paths as the credibility model's, and the
    row counts) and ``topics`` (written sorted) say what data the model saw."""
    if model.model is None:
        raise ValueError("model: not fitted; call fit() first")
    feat = model.featurizer
    return MODEL_FILE.document({
        "features": {**{k: v for k, v in feat.config().items() if k != "embedder"},
                     "blocks": [[n, w] for n, w in feat.blocks()],
                     "n_columns": len(model.columns()),
                     "lexicon_sha256": lexicon_hash()},
        "settings": model.config.to_dict(),
        "logistic": logistic_document(model.model),
        "embedder": {"name": embedder_name, "dim": int(embedder_dim)},
        "training": {"sha256": training_sha256, "n_pairs": int(n_pairs),
                     "n_topics": int(n_topics), "topics": sorted({str(t) for t in topics}),
                     "rows": dict(rows or {})},
        "metrics": dict(metrics),
    }, provenance)


def save_model(path: str | Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` to ``path`` atomically (the old file or the new one, never half);
    missing parent folders are created."""
    MODEL_FILE.save(path, document)


@dataclass(frozen=True)
class StanceModelFile:
    """A validated model file: its document and what it names."""

    path: str
    document: dict[str, Any]

    @property
    def embedder_name(self) -> str:
        return str(self.document["embedder"]["name"])

    @property
    def embedder_dim(self) -> int:
        return int(self.document["embedder"]["dim"])

    def check_embedder(self, name: str, dim: int | None = None) -> None:
        """``StanceModelError`` naming both embedders when ``name`` (the index's or the
        caller's) is not the one the model was fitted with, or the dimension differs."""
        if name != self.embedder_name:
            raise StanceModelError(
                f"{self.path}: the stance model was fitted with embedder "
                f"{self.embedder_name!r}, but the index/embedder in use is {name!r}; refit the "
                f"model with `credrank stance fit --embedder {name}` (or use an index built "
                f"with {self.embedder_name!r})")
        if dim is not None and dim != self.embedder_dim:
            raise StanceModelError(f"{self.path}: embedder {name!r} has dimension {dim}; the "
                                   f"stance model expects {self.embedder_dim}")

    def training_data(self, searched: str | Path | None) -> dict[str, Any]:
        """What data the model saw (:func:`credrank.learn.modelfile.trained_on`: the pairs
        file and the index by name, topics and pairs, the training sha256) and whether its
        index is ``searched``."""
        t = self.document["training"]
        rows = t.get("rows") or {}
        return trained_on(files=[rows["file"]] if rows.get("file") else [],
                          index=rows.get("index"), sha256=t["sha256"], searched=searched,
                          counts={"n_topics": t["n_topics"], "n_pairs": t["n_pairs"]})

    def model(self, embedder: Embedder | None = None) -> StanceModel:
        """The :class:`StanceModel` (``embedder`` defaults to ``get_embedder(name)``; it is
        checked against the file's name and dimension)."""
        emb = embedder if embedder is not None else get_embedder(self.embedder_name)
        self.check_embedder(str(getattr(emb, "name", type(emb).__name__)),
                            int(getattr(emb, "dim", -1)))
        doc = self.document
        f = doc["features"]
        featurizer = StanceFeaturizer(emb, k_sentences=f["k_sentences"],
                                      max_words=f["max_words"],
                                      use_embedding=f["use_embedding"],
                                      use_interaction=f["use_interaction"],
                                      use_anchors=f["use_anchors"], use_cues=f["use_cues"],
                                      cache=False)
        if [[n, w] for n, w in featurizer.blocks()] != f["blocks"]:
            raise StanceModelError(f"{self.path}: field 'features.blocks': expected "
                                   f"{featurizer.blocks()} for these settings and embedder, "
                                   f"got {f['blocks']}")
        settings = doc["settings"]
        model = StanceModel(featurizer, l2=settings["l2"], interaction=settings["interaction"])
        n_cols = len(model.columns())
        if n_cols != f["n_columns"]:
            raise StanceModelError(f"{self.path}: field 'features.n_columns': the features "
                                   f"give {n_cols} columns, the file says {f['n_columns']}")
        model.model = logistic_model(doc["logistic"], n_cols, self.path, StanceModelError)
        return model


_FLAG = Field(Flag())

#: format 1 of the stance model file: every key, its type and range; unknown keys are refused
#: everywhere but in the free-form ``training.rows`` and ``metrics`` tables. What depends on
#: another field (the vector lengths, the blocks, the lexicon) is checked after it, in
#: :func:`validate_document`.
MODEL_SCHEMA_V1 = Table({
    KEY: Field(Integer()),
    "created_by": Field(Text(allow_empty=True), required=False),
    "features": Field(Table({
        "k_sentences": Field(Integer(1)),
        "max_words": Field(Integer(1)),
        "use_embedding": _FLAG,
        "use_interaction": _FLAG,
        "use_anchors": _FLAG,
        "use_cues": _FLAG,
        "blocks": Field(ListOf(ListOf(Anything(), length=2))),
        "n_columns": Field(Integer(1)),
        "lexicon_sha256": Field(SHA256),
    })),
    "settings": Field(Table({"l2": Field(Number(0, open_low=True)), "interaction": _FLAG})),
    "logistic": Field(logistic_schema(Number(0, open_low=True))),
    "embedder": Field(EMBEDDER),
    "training": Field(Table({
        "sha256": Field(SHA256),
        "n_pairs": Field(Integer(0)),
        "n_topics": Field(Integer(0)),
        "topics": Field(ListOf(Text(allow_empty=True)), required=False),
        "rows": Field(Table(extra=True), required=False),
    })),
    "metrics": Field(Table(extra=True)),
}, what="a stance model (a JSON object)")
#: the stance model file's structure (docs/json.md), format 2: format 1 and ``provenance``
MODEL_SCHEMA = with_provenance(MODEL_SCHEMA_V1)
#: the stance model file: formats 1 and 2 are read, 2 is written
MODEL_FILE = ModelFileFormat(KEY, "stance model file", "credrank stance fit", StanceModelError,
                             {1: MODEL_SCHEMA_V1, 2: MODEL_SCHEMA}, make_parents=True)
FORMAT = MODEL_FILE.current


def validate_document(doc: Any, path: str = "model") -> StanceModelFile:
    """Check every field a model needs: the format marker, the format's schema
    (:data:`MODEL_SCHEMA` for format 2), then the fields that depend on each other
    (``StanceModelError`` naming ``path`` and the key path, what was expected and what
    came)."""
    _, clean = MODEL_FILE.check(doc, path)
    features = clean["features"]
    for i, block in enumerate(features["blocks"]):
        Text(what="a block name").check(block[0], path, error=StanceModelError,
                                        at=f"features.blocks[{i}][0]")
        Integer(0).check(block[1], path, error=StanceModelError, at=f"features.blocks[{i}][1]")
    check_sha256(features["lexicon_sha256"], path, "features.lexicon_sha256", StanceModelError)
    if features["lexicon_sha256"] != lexicon_hash():
        lexicon = features["lexicon_sha256"]
        raise StanceModelError(f"{path}: features.lexicon_sha256: the model was written with "
                               "another lexicon (cue phrases, anchors, stop words) than this "
                               f"credrank's ({lexicon[:12]}… vs {lexicon_hash()[:12]}…); "
                               "refit it")
    check_sha256(clean["training"]["sha256"], path, "training.sha256", StanceModelError)
    logistic_model(clean["logistic"], features["n_columns"], path, StanceModelError,
                   ", features.n_columns")
    return StanceModelFile(path, clean)


def load_model(path: str | Path) -> StanceModelFile:
    """Read the model file at ``path`` (format 1 or 2) with the hardened JSON reader
    (:func:`~credrank.core.structured.read_structured`: UTF-8, bounded size and nesting, no
    NaN/Infinity, no duplicate keys) and validate it (:func:`validate_document`); every
    problem is a :class:`StanceModelError` naming the file."""
    _, doc = MODEL_FILE.read(path)
    return validate_document(doc, str(path))


# ---------------------------------------------------------------- fitting


@dataclass
class FitResult:
    """What :func:`fit_pairs` produced: the model file's document and the report."""

    document: dict[str, Any]
    report: dict[str, Any]
    model: StanceModel


def _seen_rows(pairs: Pairs) -> dict[str, Any]:
    """The model file's ``training.rows``: the pairs ``file`` (absolute, as the credibility
    model's labels: it names the file wherever the model is read), the ``index`` (already
    absolute) and the row counts."""
    report = pairs.report()
    keep = ("index", "rows", "used", "rejected", "rejected_by_reason", "text_from_index",
            "outvoted")
    return {"file": str(Path(pairs.path).expanduser().resolve()),
            **{k: report[k] for k in keep}}


def fit_pairs(pairs: Pairs, embedder: Embedder, *, seed: int = 0, n_boot: int = N_BOOT,
              features: Mapping[str, Any] | None = None,
              configs: Sequence[StanceConfig] | None = None, n_jobs: int = 1,
              on_progress: Progress | None = None) -> FitResult:
    """Nested grouped CV on ``pairs`` and the final model refitted on every pair
    (:func:`~credrank.signals.stance_model.grouped_cross_validation`). ``n_jobs``: processes
    for the CV fits (the same numbers for any value); ``on_progress(done, total)`` after
    every fit."""
    settings = {**DEFAULT_FEATURES, **(features or {})}
    if not pairs.examples:
        reasons = ", ".join(f"{k} {v}" for k, v in pairs.rejected.items()) or "no rows"
        raise StanceModelError(f"{pairs.path}: no usable pairs out of {pairs.rows} rows "
                               f"(rejected: {reasons})")
    stances = Counter(e.stance for e in pairs.examples)
    if len(stances) < 2:
        only = next(iter(stances))
        raise StanceModelError(f"{pairs.path}: all {len(pairs.examples)} usable pairs have "
                               f"stance {only}; a stance model needs both stances (0 = does "
                               "not help, 1 = helps)")
    featurizer = StanceFeaturizer(embedder, **settings)
    try:
        cv = grouped_cross_validation(pairs.examples, featurizer, configs, seed=seed,
                                      n_boot=n_boot, n_jobs=n_jobs, on_progress=on_progress)
    except ValueError as exc:
        raise StanceModelError(f"{pairs.path}: {exc}") from exc
    metrics = cv.metrics()
    name = str(getattr(embedder, "name", type(embedder).__name__))
    dim = int(getattr(embedder, "dim", 0))
    sha = training_hash(pairs.examples)
    doc = model_document(cv.model, embedder_name=name, embedder_dim=dim, training_sha256=sha,
                         n_pairs=len(pairs.examples), n_topics=cv.n_topics, metrics=metrics,
                         provenance=cv.provenance(), rows=_seen_rows(pairs),
                         topics=[e.qid for e in pairs.examples])
    report = {**metrics, "pairs": pairs.report(), "embedder": {"name": name, "dim": dim},
              "features": doc["features"], "training_sha256": sha,
              "stance_counts": {str(k): v for k, v in sorted(stances.items())}}
    return FitResult(doc, report, cv.model)
