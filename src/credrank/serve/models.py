"""Request and response bodies of the HTTP service (pydantic), as served in ``/openapi.json``.

Responses are the documents of ``docs/json.md``: ``/search`` answers the ``credrank search
--json`` document (``credrank_search``), ``/rerank`` the same with ``credrank_rerank`` and each
hit's ``client_score`` and ``metadata``. The response models describe those documents; the
endpoints return them as built by :class:`~credrank.searcher.Searcher` (no re-validation).
Every error is ``{"error": KIND, "detail": MESSAGE}`` (plus ``errors`` for 422).

Request bodies are validated strictly (pydantic strict mode): an integer field takes a JSON
integer only (``true``, ``"1"`` and ``1.0`` are refused), a number field a JSON number
(integers included), a boolean field ``true``/``false``, a string field a string; unknown keys
are refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    WithJsonSchema,
    create_model,
    field_validator,
)
from pydantic_core import PydanticCustomError

from credrank.context.build import TOP_K as CONTEXT_TOP_K
from credrank.context.build import check_format, check_granularity, parse_now
from credrank.context.given import CONTEXT_RETRIEVAL, check_context_retrieval
from credrank.context.render import FORMATS, GRANULARITIES
from credrank.core.hittext import DEFAULT_TEXT, TEXT_CHOICES, TEXT_HELP, check_text
from credrank.documents.fields import DATE_ORDERS, date_order_value, timezone_value
from credrank.documents.schema import FLAG_FIELDS, SOURCE_TYPES
from credrank.freshness.config import parse_duration
from credrank.freshness.policy import parse_undated
from credrank.pipeline.catalog import CATALOG
from credrank.pipeline.shortcuts import HTTP_RERANK, HTTP_SEARCH, Door, Shortcut
from credrank.rerank import DEFAULT_RETRIEVAL, RETRIEVAL_SOURCES, check_retrieval
from credrank.rerank.fields import EVIDENCE_FIELDS, field_value
from credrank.serve.config import (
    MAX_CANDIDATES,
    MAX_DOCUMENTS,
    MAX_FEEDBACK_ITEMS,
    MAX_FETCH_K,
    MAX_METADATA_DEPTH,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
)

SourceType = Literal[SOURCE_TYPES]  # type: ignore[valid-type]
ParamValue = StrictBool | StrictInt | StrictFloat | StrictStr

#: the JSON schema of a pipeline spec (:class:`credrank.pipeline.spec.PipelineSpec`), as the
#: OpenAPI document shows it: the top-level keys, and stages as free-form objects naming a
#: stage of the catalog (their parameters are checked by the spec, the one validator)
_STAGE_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"stage": {"type": "string", "enum": list(CATALOG)}},
    "required": ["stage"], "additionalProperties": True,
    "description": "a stage of the catalog and its parameters, e.g. {\"stage\": \"mmr\", "
                   "\"diversity\": 0.5}; files are named by the names the server registered "
                   "(credrank serve --model NAME=PATH; GET /readyz lists them), never by path"}
PIPELINE_SCHEMA: dict[str, Any] = {
    "type": "object", "title": "Pipeline",
    "description": "a pipeline spec, as `credrank search --json` writes it under \"pipeline\" "
                   "(docs/json.md); the response's \"pipeline\" replays the run",
    "properties": {
        "credrank_pipeline": {"type": "integer", "enum": [1]},
        "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K},
        "fetch_k": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_FETCH_K},
                              {"type": "null"}]},
        "retrieval": {"type": "string", "enum": ["dense", "bm25"]},
        "pushdown": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
        "stages": {"type": "array", "items": {"anyOf": [
            {"type": "string", "enum": list(CATALOG), "description": "a stage with its "
                                                                    "defaults"},
            _STAGE_SCHEMA]}},
    },
    "additionalProperties": False,
}
#: a pipeline spec in a request: any JSON object here, checked by the spec's own validator
#: (errors name ``pipeline.stages[i].param``)
PipelineField = Annotated[dict[str, Any], WithJsonSchema(PIPELINE_SCHEMA)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


#: the JSON type of each kind of shortcut value (strict; the spec checks the values)
_SHORTCUT_TYPES: dict[str, Any] = {
    "int": StrictInt | None, "number": StrictFloat | StrictInt | None, "bool": StrictBool,
    "flag3": StrictBool | None, "text": StrictStr | None, "path": StrictStr | None,
    "map": dict[str, ParamValue | list[ParamValue]] | None,
    "items": StrictStr | dict[str, ParamValue | list[ParamValue]] | None,
}


#: the pool fields as this service says them: its bounds (checked by the plan, which names
#: the limit; the shortcut table's help says the library's) in words and in the schema
_POOL_FIELDS = {
    "top_k": (MAX_TOP_K, "results to return (default 10)"),
    "fetch_k": (MAX_FETCH_K, "candidate pool (default 3 × top_k)"),
}


def _shortcut_field(s: Shortcut) -> Any:
    kind = StrictStr if s.value == "text" and s.default is not None else _SHORTCUT_TYPES[s.value]
    note = " (a name the server registered, never a path)" if s.value == "path" else ""
    if s.value == "map":  # the CLI's KEY=VALUE pairs are a JSON object here
        note = ' (here a JSON object of name: value, e.g. {"diversity": 0.5})'
    if s.name in _POOL_FIELDS:
        most, what = _POOL_FIELDS[s.name]
        return (kind, Field(s.default, description=f"{what}, at most {most:,} on this service; "
                            f"with pipeline it replaces the spec's {s.name}",
                            json_schema_extra={"minimum": 1, "maximum": most}))
    return (kind, Field(s.default, description=s.help + note + "; not with pipeline"))


def shortcut_model(name: str, door: Door, base: type[BaseModel]) -> Any:
    """A request model with one field per shortcut of ``door`` (the one table,
    :data:`credrank.pipeline.shortcuts.SHORTCUTS`)."""
    fields = {s.name: _shortcut_field(s) for s in door.shortcuts()
              if s.name not in base.model_fields}
    return create_model(name, __base__=base, **fields)


#: the fields every scoring request has: the shortcuts of a door without retrieval
_ScoringShortcuts = shortcut_model("_ScoringShortcuts", HTTP_RERANK, _Request)


class ScoringRequest(_ScoringShortcuts):  # type: ignore[misc,valid-type]
    """What ``/search`` and ``/rerank`` share: the query, the pipeline (the ``pipeline`` spec,
    or the shortcut fields of :mod:`credrank.pipeline.shortcuts`) and the hits' text."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS,
                       description=f"the query text (1 to {MAX_QUERY_CHARS:,} characters)")
    pipeline: PipelineField | None = Field(
        None, description="the whole pipeline as a spec (the response's \"pipeline\", a "
                          "`credrank search --json` output's \"pipeline\"); given, the "
                          "shortcut fields are not sent (top_k and fetch_k aside: they replace "
                          "the spec's)")
    text: str = Field(DEFAULT_TEXT, description=TEXT_HELP + " (as `credrank search --text`)",
                      json_schema_extra={"enum": list(TEXT_CHOICES)})

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("expected non-empty text, got only whitespace")
        return value

    @field_validator("text")
    @classmethod
    def _text_choice(cls, value: str) -> str:
        try:  # the one validator of the option (credrank.core.hittext)
            return check_text(value)
        except ValueError as exc:
            raise PydanticCustomError("text_choice", "{detail}",
                                      {"detail": str(exc).removeprefix("text: ")}) from None


#: ``POST /search``: the shortcuts of ``credrank search`` (retrieval's included), or the whole
#: ``pipeline``
SearchRequest = shortcut_model("SearchRequest", HTTP_SEARCH, ScoringRequest)
SearchRequest.__doc__ = ("``POST /search``: the options of ``credrank search``, or the whole "
                         "``pipeline``.")


class _ContextFields(ScoringRequest):
    """The fields of ``credrank context``'s own flags (their names with underscores), each
    checked by the validator the command uses (:mod:`credrank.context.build`)."""

    top_k: StrictInt | None = Field(
        None, description=f"passages in the context (default {CONTEXT_TOP_K} without "
                          f"pipeline), at most {MAX_TOP_K:,} on this service; with pipeline it "
                          "replaces the spec's top_k",
        json_schema_extra={"minimum": 1, "maximum": MAX_TOP_K})
    text: str = Field("full", description=TEXT_HELP + " (as `credrank context --text`; here "
                                                      "full by default: the generator reads "
                                                      "whole passages)",
                      json_schema_extra={"enum": list(TEXT_CHOICES)})
    format: StrictStr = Field("cag", description="cag (CAG labels) | json (for tool-calling "
                                                 "generators) | plain (no tiers: the matched "
                                                 "control)",
                              json_schema_extra={"enum": list(FORMATS)})
    granularity: StrictStr = Field("document", description="document | sentence (sentence "
                                   "tiers from each sentence's own similarity, capped by the "
                                   "document's source tier)",
                                   json_schema_extra={"enum": list(GRANULARITIES)})
    half_life: StrictStr | StrictInt | StrictFloat | None = Field(
        None, description="τ: one tier lost per elapsed τ — 365d, 52w, 1y, 12h or a number of "
                          "days (default: no time downgrade)")
    now: StrictStr | None = Field(None, description="evaluation time T, ISO 8601 (default: "
                                                    "the now of the pipeline's freshness "
                                                    "stage, else the current time); also the "
                                                    "now of that stage")
    undated: StrictStr = Field("neutral", description="unknown age: neutral | neutral:W | "
                                                      "penalty:W | exclude (only with "
                                                      "half_life)")
    source_tier: StrictStr = Field("auto", description="auto (factor credibility if ranked "
                                   "with it; else the prior factor the ranking applied, unless "
                                   "it is the current type preset; else the source type) | "
                                   "type | a factor name in [0, 1], e.g. prior")
    cite: StrictBool = Field(True, description="each passage of the cag and plain prompts "
                                               "opens with its source type, host, URL, date "
                                               "and passage number where known")

    @field_validator("format", "granularity", "half_life", "now", "undated", "source_tier")
    @classmethod
    def _context_option(cls, value: Any, info: ValidationInfo) -> Any:
        """The one validator of each option (the command's), its message without its
        head: pydantic's location names the field."""
        name = str(info.field_name)
        try:
            if name == "format":
                check_format(value)
            elif name == "granularity":
                check_granularity(value)
            elif name == "half_life" and value is not None:
                return parse_duration(value, name)
            elif name == "now" and value is not None:
                parse_now(value, name)
            elif name == "undated":
                parse_undated(value)
            elif name == "source_tier" and not value.strip():
                raise ValueError(f"expected auto, type or a factor name, got {value!r}")
        except ValueError as exc:
            raise PydanticCustomError("context_option", "{detail}", {
                "detail": str(exc).split(": ", 1)[-1] if str(exc).startswith(
                    (f"{name}:", "format:", "undated:")) else str(exc)}) from None
        return value


#: ``POST /context``: the options of ``credrank context`` (its ranking's and its own), or the
#: whole ``pipeline`` and its own
ContextRequest = shortcut_model("ContextRequest", HTTP_SEARCH, _ContextFields)
ContextRequest.__doc__ = ("``POST /context``: the options of ``credrank context``, or the "
                          "whole ``pipeline`` and the context's own.")


#: what the date fields of a candidate take (checked by :func:`credrank.rerank.fields.field_value`,
#: as ``credrank index`` reads a record's dates)
_DATE_HELP = ("ISO 8601 (2023-05-01, 2023-05-01T12:00:00Z) or a written date read without "
              "guessing (April 17, 2020), as `credrank index` reads a record's; a time without "
              "a zone is UTC")


def _evidence_fields() -> dict[str, Any]:
    """The candidate fields stages read besides url and title (declared once,
    :data:`credrank.rerank.fields.EVIDENCE_FIELDS`)."""
    help_ = {
        "source_id": "the source (publisher, account) for the reliability and feedback priors",
        "source_type": "a declared type: a claim, never the type (the URL's is); one that "
                       "differs is listed in info.provenance.conflicts, as `credrank index` "
                       "reports it",
        "observed_at": "when the measurement was made; dates freshness first. " + _DATE_HELP,
        "verified_at": "when it was last checked against its source; dates freshness after "
                       "observed_at. " + _DATE_HELP,
        "published_at": "when it was published; dates freshness after observed_at and "
                        "verified_at. " + _DATE_HELP,
        "modified_at": "when it was edited (never dates freshness). " + _DATE_HELP,
        "retrieved_at": "when it was fetched (never dates freshness). " + _DATE_HELP,
        "cites": "the ids of the documents it cites",
        "claim_class": "its claim class (statistic, historical, …): a freshness config's "
                       "[claim_class] half-life or no_decay.claim_class opt-out applies",
        "persistent": "true for a time-persistent claim: never decayed by a freshness config "
                      "(its no_decay.field, by default persistent); true or false",
    }
    out: dict[str, Any] = {}
    for name in EVIDENCE_FIELDS:
        if name in ("url", "title"):
            continue
        kind: Any = (list[StrictStr] | None if name == "cites" else
                     StrictBool | StrictStr | None if name in FLAG_FIELDS else StrictStr | None)
        out[name] = (kind, Field(None, description=help_[name],
                                 json_schema_extra={"enum": [*SOURCE_TYPES, None]}
                                 if name == "source_type" else None))
    return out


class _CandidateBase(_Request):
    """A passage the client retrieved elsewhere."""

    id: StrictStr = Field(min_length=1, description="unique among the candidates")
    text: StrictStr | None = Field(None, description="needed where the passage is embedded: "
                                                     "not with a vector, nor when every "
                                                     "candidate has a score (retrieval 'auto' "
                                                     "or 'given')")
    url: StrictStr | None = Field(None, description="provenance: typed by the server's rules")
    title: StrictStr | None = None


class Candidate(create_model(  # type: ignore[misc]  # fields as a dict of (type, Field)
        "_CandidateFields", __base__=_CandidateBase, **_evidence_fields())):
    """A passage the client retrieved elsewhere: its text, provenance, dates and score."""

    score: float | None = Field(None, description="the client's retrieval score, a similarity "
                                                  "(required for every candidate with "
                                                  "retrieval 'given'; with 'auto', used when "
                                                  "every candidate has one, >= 0)")
    vector: list[float] | StrictStr | None = Field(
        None, description="the passage embedding (the index embedder's dimension), as numbers "
                          "or as base64 of little-endian float32; given, it is used instead of "
                          "embedding the text")
    metadata: dict[str, Any] | None = Field(
        None, description="returned untouched on the hit; never read as evidence")

    @field_validator("metadata")
    @classmethod
    def _plain_json(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_json_value(value)
        return value

    @field_validator(*[n for n in EVIDENCE_FIELDS if n not in ("url", "title")])
    @classmethod
    def _evidence(cls, value: Any, info: ValidationInfo) -> Any:
        """The one check of these fields (:func:`credrank.rerank.fields.field_value`): the
        value as the candidate will carry it (dates as ISO 8601 in UTC)."""
        out, reason = field_value(str(info.field_name), value)
        if reason is not None:
            raise PydanticCustomError("candidate_field", "{detail}", {"detail": reason})
        return out


def check_json_value(value: Any, max_depth: int = MAX_METADATA_DEPTH) -> None:
    """``ValueError`` when a JSON value nests deeper than ``max_depth`` or holds a non-finite
    number (it could not be sent back as JSON). Iterative: no recursion limit."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= max_depth:
                raise ValueError(f"expected nesting at most {max_depth} levels deep, "
                                 "got deeper")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError("expected finite numbers, got NaN or infinity")


def _retrieval(check: Callable[[Any], str], value: Any) -> str:
    """``check(value)`` (a door's one check of ``retrieval``), its error said without its head:
    pydantic's location names the field."""
    try:
        return check(value)
    except ValueError as exc:
        raise PydanticCustomError("retrieval_choice", "{detail}",
                                  {"detail": str(exc).removeprefix("retrieval: ")}) from None


class RerankRequest(ScoringRequest):
    """``POST /rerank``: candidates retrieved elsewhere, scored as ``/search`` scores its pool."""

    candidates: list[Candidate] = Field(
        max_length=MAX_CANDIDATES, description=f"at most {MAX_CANDIDATES:,}")
    retrieval: StrictStr = Field(
        DEFAULT_RETRIEVAL, json_schema_extra={"enum": list(RETRIEVAL_SOURCES)},
        description="the retrieval score: 'auto' (the default) — the candidates' vectors when "
                    "every candidate has one and they are of the index's embedding model "
                    "(checked once by embedding one passage), else their 'score' when every "
                    "candidate has one >= 0, else the cosine of passages embedded here "
                    "(info.retrieval says which: embeddings | given | cosine, and how many "
                    "were embedded); 'cosine' — the cosine, given vectors used as they are; "
                    "'given' — the candidates' own 'score'")

    @field_validator("retrieval")
    @classmethod
    def _retrieval_choice(cls, value: str) -> str:
        """The one validator of the option (credrank.rerank)."""
        return _retrieval(check_retrieval, value)
    query_vector: list[float] | StrictStr | None = Field(
        None, description="the query embedding by the index's embedder (numbers or base64 "
                          "float32), when the client has it: with vectors on every candidate, "
                          "nothing is embedded")


class RerankContextRequest(_ContextFields, RerankRequest):
    """``POST /rerank/context``: the candidates and the ranking of ``/rerank`` (its fields and
    validators) with the context's own fields of ``/context`` (:class:`_ContextFields`: the
    same validators, ``top_k`` 5 without pipeline). The relevance tiers bin cosines, so the
    retrieval score comes from vectors and the candidates' scores are never read
    (:mod:`credrank.context.given`)."""

    retrieval: StrictStr = Field(
        DEFAULT_RETRIEVAL, json_schema_extra={"enum": list(CONTEXT_RETRIEVAL)},
        description="the retrieval score, a cosine (relevance tiers bin cosines; a "
                    "candidate's 'score' is never read): 'auto' (the default) — the "
                    "candidates' vectors when they are of the index's embedding model "
                    "(checked once by embedding one passage), else the passages embedded here "
                    "(info.retrieval says which and how many were embedded; "
                    "info.retrieval.scores_unread counts the candidates sent with a score); "
                    "'cosine' — given vectors used as they are, the others' passages "
                    "embedded. 'given' is refused: a retriever's own scores have no stated "
                    "cut points")

    @field_validator("retrieval")
    @classmethod
    def _retrieval_choice(cls, value: str) -> str:
        """The context's check (:func:`~credrank.context.given.check_context_retrieval`)."""
        return _retrieval(check_context_retrieval, value)


class IndexRequest(_Request):
    """``POST /index``: document records, validated as ``credrank index`` validates a JSONL
    file (record ``i`` is line ``i``)."""

    documents: list[Any] = Field(
        max_length=MAX_DOCUMENTS,
        description="records {id, text, title?, url?, source_id?, source_type?, observed_at?, "
                    "verified_at?, published_at?, modified_at?, retrieved_at?, cites?, …}; a "
                    "record that is not valid is rejected with its reason, the others indexed",
        json_schema_extra={"items": {"type": "object"}})
    strict: StrictBool = Field(
        False, description="strict reading (`credrank index --strict`): a record with any "
                           "unreadable field is rejected; default: an unreadable optional "
                           "field is dropped (listed in 'dropped') and the record indexed")
    assume_timezone: StrictStr | None = Field(
        None, description="the zone of dates with a time but no zone (`credrank index "
                          "--assume-timezone`): an IANA name or an offset such as +02:00; "
                          "default UTC (strict: such dates are rejected unless given)")

    date_order: StrictStr | None = Field(
        None, json_schema_extra={"enum": [*DATE_ORDERS, None]},
        description="the order of all-numeric day/month dates (`credrank index "
                    "--date-order`): 'mdy' (2/11/20 is 11 February) or 'dmy' (2 November); "
                    "every such date is read that way, one that cannot be (13/2/20 under "
                    "mdy) is dropped and listed in 'dropped'; default null: a date that reads "
                    "two ways is dropped. Not with strict")

    @field_validator("assume_timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is not None:
            timezone_value(value)
        return value

    @field_validator("date_order")
    @classmethod
    def _date_order(cls, value: str | None, info: ValidationInfo) -> str | None:
        try:  # the one validator of the option (credrank.documents.fields)
            date_order_value(value)
        except ValueError as exc:
            raise PydanticCustomError("date_order_choice", "{detail}",
                                      {"detail": str(exc).removeprefix("date_order: ")}
                                      ) from None
        if value is not None and info.data.get("strict"):
            raise PydanticCustomError(
                "date_order_strict", "{detail}",
                {"detail": f"expected no declared order with strict reading (it takes ISO "
                           f"8601 dates only), got {value!r}"})
        return value


class FeedbackItem(_Request):
    source_type: SourceType
    source_id: StrictStr | None = Field(None, min_length=1)
    relevant: StrictBool

    @field_validator("source_id")
    @classmethod
    def _a_source(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():  # said at items[i].source_id, not at the
            # library's feedback[i] after the request was taken
            raise PydanticCustomError("blank", "expected a source id or null, got {given}",
                                      {"given": repr(value)})
        return value


class FeedbackRequest(_Request):
    """``POST /feedback``: one round of relevance feedback (``credrank priors update``)."""

    items: list[FeedbackItem] = Field(max_length=MAX_FEEDBACK_ITEMS)
    step: float = Field(0.1, gt=0, le=0.5, description="step size η in (0, 0.5]")
    author: str = Field("api", min_length=1, max_length=200)
    reason: str = Field("", max_length=2_000)


class RollbackRequest(_Request):
    """``POST /priors/rollback``: restore a version (recorded as a new version)."""

    version: int = Field(ge=0)
    author: str = Field("api", min_length=1, max_length=200)
    reason: str = Field("", max_length=2_000)


# -- responses (documentation of docs/json.md; extra keys are allowed: keys are only added) -------

class _Document(BaseModel):
    model_config = ConfigDict(extra="allow")


class PriorsUsed(_Document):
    name: str
    values: dict[str, float]


class Settings(_Document):
    top_k: int
    fetch_k: int
    priors: PriorsUsed | None
    mode: str
    retrieval: str
    unit: str | None = Field(None, description="document | passage: what a hit is")
    pushdown: bool
    engine: str | None = None
    embedder: str | None = Field(None, description="the embedding model the ranking used")
    query_vector: str | None = Field(
        None, description="candidates retrieved elsewhere: given (the client's query vector "
                          "was used) | embedded")
    text: str = Field(description="what each hit carries of its text: full | snippet | none")
    snippet_chars: int | None = Field(
        None, description="with text 'snippet': the longest snippet, in characters")


class Hit(_Document):
    rank: int
    doc_id: str
    score: float
    source_id: str | None
    source_type: str | None
    host: str | None
    url: str | None
    url_error: str | None = Field(
        None, description="why the given url names no host (the document is typed unknown); "
                          "absent otherwise")
    title: str | None
    text: str | None = Field(
        None, description="the document's text (request 'text': full) or a snippet of it "
                          "around the query words (snippet, the default); absent with none")
    dates: dict[str, str | None]
    score_breakdown: dict[str, float] = Field(
        description="retrieval_score, one entry per factor (prior, …) and final")


class PipelineStage(_Document):
    stage: str


class PipelineUsed(_Document):
    """The spec the run used; sent back as a request's ``pipeline`` it replays the run."""

    credrank_pipeline: int
    top_k: int
    fetch_k: int
    retrieval: str
    pushdown: bool | None
    stages: list[PipelineStage]


class SearchResponse(_Document):
    credrank_search: int
    query: str
    settings: Settings
    hits: list[Hit]
    info: dict[str, Any]
    pipeline: PipelineUsed
    elapsed_ms: float = Field(description="time spent in the pipeline, in milliseconds")


class ContextResponse(_Document):
    """The ``credrank context --json`` document (docs/json.md), with ``elapsed_ms``."""

    credrank_context: int
    query: str
    granularity: str
    now: str
    policy: dict[str, Any]
    settings: Settings
    passages: list[dict[str, Any]]
    excluded: list[dict[str, Any]]
    info: dict[str, Any]
    format: str
    cite: bool
    prompt: str | list[dict[str, Any]] = Field(
        description="what the generator gets: the prompt (cag, plain) or the passages (json)")
    pipeline: PipelineUsed
    elapsed_ms: float = Field(description="time spent ranking and tiering, in milliseconds")


class RerankHit(Hit):
    client_score: float | None
    metadata: dict[str, Any] | None


class RerankResponse(_Document):
    credrank_rerank: int
    query: str
    settings: dict[str, Any]
    hits: list[RerankHit]
    info: dict[str, Any]
    pipeline: PipelineUsed
    elapsed_ms: float


class IndexReject(_Document):
    record: int = Field(description="1-based position in 'documents'")
    field: str | None
    reason: str
    message: str


class IndexDropped(_Document):
    record: int = Field(description="1-based position in 'documents'")
    id: str = Field(description="the id of the document, which was indexed without the field")
    field: str
    reason: str
    message: str


class IndexReading(_Document):
    strict: bool
    assume_timezone: str | None = Field(
        description="the zone dates without one were read in; null: strict reading rejected "
                    "them")
    zones_assumed: int = Field(description="dates without a time zone read in it")
    date_order: str | None = Field(
        description="the declared order of all-numeric day/month dates (mdy, dmy); null: "
                    "none, those that read two ways were dropped")
    dates_ordered: int = Field(description="all-numeric day/month dates read in date_order")


class IndexTruncated(_Document):
    window_tokens: int | None = Field(
        description="the most tokens of a text the index's embedder reads; null: no window "
                    "(hashing)")
    count: int = Field(description="documents written whose text is longer than the window")
    doc_ids: list[str] = Field(description="their ids, every one: embedded from their "
                                           "beginning only, the rest of their text not searched")


class IndexResponse(_Document):
    credrank_index: int
    indexed: int
    unchanged: int
    rejected: int
    rejects: list[IndexReject]
    fields_dropped: int = Field(description="optional fields left out of indexed documents")
    dropped: list[IndexDropped]
    reading: IndexReading
    conflicts: list[dict[str, str]]
    url_errors: list[dict[str, str]] = Field(
        description="documents indexed whose URL names no host (typed unknown), with why")
    unused_fields: list[dict[str, str]] = Field(
        default_factory=list, description="field mappings no record used (none over HTTP)")
    truncated: IndexTruncated
    documents: int = Field(description="documents the index holds afterwards")


class PriorsResponse(_Document):
    version: int
    current: int
    base: str
    epsilon: float
    max_change: float
    types: dict[str, float]
    sources: dict[str, float] = Field(description="per-source priors; GET /priors: one page, "
                                                  "sorted by source (offset, limit)")
    source_types: dict[str, str] = Field(
        description="the provenance type each source of sources was recorded with: its prior "
                    "applies only to documents of that type")
    sources_total: int | None = Field(None, description="GET /priors: sources in the version")
    offset: int | None = Field(None, description="GET /priors: the first source of the page")
    limit: int | None = Field(None, description="GET /priors: the most sources a page holds")


class Health(_Document):
    status: str


class ErrorBody(_Document):
    error: str = Field(description="kind: invalid_request, unauthorized, forbidden, not_found, "
                                   "too_large, timeout, …")
    detail: str = Field(description="what went wrong, naming the field or the limit")
    errors: list[dict[str, Any]] | None = None
