"""Framework-neutral glue of the adapters: one declaration of their options, one scorer.

Every adapter (Haystack, LlamaIndex, LangChain) takes the options declared once here,
:data:`OPTIONS` (Haystack as keyword arguments, LlamaIndex and LangChain as pydantic fields made
from the same declaration by :func:`pydantic_fields`), hands them to :class:`CredrankScorer`,
turns its framework's documents into :class:`Passage` objects, calls :meth:`CredrankScorer.rank`
and builds new framework documents from the :class:`Ranked` answers.

The pipeline. What an adapter runs is a :class:`~credrank.pipeline.spec.PipelineSpec`, the one
a ``credrank search --pipeline`` file or the ``"pipeline"`` of a ``--json`` output holds:

* ``pipeline=`` — a ``PipelineSpec``, a spec dict, or the path of a JSON/TOML/YAML spec file
  (a whole ``credrank search --json`` output works too: its ``"pipeline"`` is read). Every
  stage of the catalog is reachable (credibility, freshness, stance, consensus, the
  selectors …); a stage that needs an index (``freshness`` with ``lineage: cites``) is an error
  naming it. ``top_k`` given as well overrides the spec's (as ``credrank search --pipeline F
  --top-k N``); any other shortcut given with it is an error naming the shortcut, even at its
  default (``priors="current"``, as ``--priors current`` beside ``--pipeline``);
* or the shortcuts (``priors``, ``mode``, ``top_k``, ``select``, ``select_params``,
  ``credibility_model``, ``freshness``, ``planted``, …: the one table of every front door,
  :data:`credrank.pipeline.shortcuts.SHORTCUTS`, less what only a door that retrieves has),
  translated by :func:`credrank.pipeline.shortcuts.spec_from_options` with errors in the
  adapters' own words (``priors: 'x' is neither a preset …``, ``select_params.nope: …``).

The stages are built once per ``top_k`` (model files read once) and run after
:class:`~credrank.rerank.GivenCandidates` exactly as :func:`credrank.rerank.rerank` runs a spec,
so a pool reranked here ranks as ``Searcher.rerank(query, records, spec)`` ranks it. The
serialised configuration (:meth:`CredrankScorer.init_parameters`) is the adapter options plus
``pipeline`` = ``spec.to_dict()``: loading it replays the same pipeline.

Metadata (``fields``). What the stages read of a document — its URL, title, ``source_id``,
declared ``source_type``, the five dates (``observed_at``, ``verified_at``, ``published_at``,
``modified_at``, ``retrieved_at``) and ``cites`` — is read from the framework document's
metadata by :class:`~credrank.rerank.GivenCandidates`, as for every door
(:mod:`credrank.rerank.fields`): by default each under its own name (the URL under ``url``, else
``source``, else ``link``); ``fields={"published_at": "date", "title": None}`` names another key
(``None``: not read). Values are checked as ``credrank index`` checks a record's (a date that
cannot be read is an error naming ``documents[i].published_at`` and the key). A key named in
``fields`` that no document of a call carries is an error naming ``fields.<field>`` and the key
(a misspelt key would make every document undated, silently); a document without it among
others that have it is undated (``age: unknown``, as in an index).

Provenance. The source type comes from the passage's URL only, typed by the same
:class:`~credrank.provenance.SourceTyper` indexing uses, over the domain ``tables``. A passage
without a URL (or whose ``source`` is a file path) is typed ``unknown`` and gets the
``unknown`` prior — demoted, not dropped; where a URL names no host (a path, ``ftp://``) the
breakdown's ``url_error`` says so. A ``source_type`` in the metadata is a claim: as
``credrank index`` treats a record's, it is never the type; one that differs from the URL's is
a ``provenance_conflict`` (in the breakdown's ``conflict``).

``score_threshold``: after ranking, documents whose final score is below it are dropped (as
Haystack's rankers do); ``None`` (default) keeps the ``top_k``.

Retrieval (``retrieval``, the option of :mod:`credrank.rerank`, one validator). The default
``auto`` reuses what the framework already has, per call: (a) the documents' stored embeddings
when every document has one of the embedder's dimension and they are of the embedder's model —
checked once per adapter instance and dimension: credrank embeds the first document that
carries one and compares, cosine ≥ :data:`~credrank.rerank.SAME_MODEL_COSINE` (0.99) meaning the
same model; the query is embedded by credrank unless the framework hands over its query
embedding of that model (LlamaIndex's ``QueryBundle.embedding``, Haystack's
``query_embedding`` input); (b) else the retriever's scores when every document has one ≥ 0
(LlamaIndex ``NodeWithScore.score``, Haystack ``Document.score``, LangChain
``metadata[score_key]``), as ``given``; (c) else credrank embeds the documents (``title\ntext``,
as indexing does), with a one-time :class:`~credrank.rerank.EmbeddingFallbackWarning` per
instance and cause saying what it cost. Documents where only some carry a score fall to (c)
(:mod:`credrank.rerank` says why). Each document's breakdown says what was used
(``retrieval``: ``embeddings``, ``given`` or ``cosine``). ``cosine`` always embeds (a stored
embedding used only with ``use_given_embeddings=True``, unchecked, as before); ``given`` always
takes the scores (required on every document).

Loading. The model is loaded only when something is embedded (:class:`LazyEmbedder`: the
dimension is known without it): a call on the retriever's scores needs no model, nor the
``embed`` extra.

``use_given_embeddings`` stays for ``cosine`` and ``given`` (under ``auto`` the check decides):
a stored embedding is used instead of the text only when its dimension is the embedder's (the
dimension check catches a different size, not a different model of the same size — set the flag
only when the documents were embedded by the same model); one of another dimension is ignored,
with a warning, and the text embedded.

Ids. Passages are reranked under their positions (``"0"``, ``"1"``, …), so framework ids
need not be unique (two retrievers may return the same document); an error names the document
in the caller's words (:class:`~credrank.rerank.Names`: ``documents[i]`` for Haystack and
LangChain, ``nodes[i]`` for LlamaIndex, and where its score was read: ``documents[i].score``,
``nodes[i].score``, ``documents[i].metadata['score'] (score_key)``), ``i`` being the position
in the input list.

Context (chapter 35.4). :meth:`CredrankScorer.context` (each adapter's ``context``) builds the
credibility-annotated context of the framework's documents — what ``credrank context`` and
``POST /context`` print for a search, here over the documents the framework retrieved — by the
one path of a context over candidates retrieved elsewhere,
:func:`credrank.searcher.given_context` (as :func:`credrank.searcher.rerank_context`): the
documents ranked as :meth:`CredrankScorer.rank` ranks them, the top ``top_k`` tiered with
``tier = min(S_tier, max(1, R − ⌊(T−t)/τ⌋))``. Relevance tiers bin cosine similarities, so
the retriever's scores are never read (``info.retrieval.scores_unread`` counts the documents
that carried one): ``retrieval="auto"`` uses the documents' embeddings when they pass the
same-model check, else embeds the passages (the one-time warning says what it cost);
``cosine`` as above; a scorer configured with ``given`` is refused. The options are the
library's (``now``, ``half_life``, ``undated``, ``granularity``, ``source_tier``, ``text``:
:func:`credrank.context.build.search_context`, its validators and words); ``format`` and
``cite`` are the rendering's (``doc.render(format, cite)``, ``doc.to_json(format, cite)``).
``score_threshold`` is a ranking's: a context keeps its ``top_k`` passages as ``credrank
context`` does. The passages' ``doc_id`` are the positions in the input list (``"0"``,
``"1"``, …, as in ranking: ``documents[int(passage.doc_id)]`` is the framework's document);
their URL, title and dates are those read from its metadata.

Spec keys that cannot apply. The spec's ``retrieval`` (``bm25``), ``unit`` (``passage``) and
``pushdown`` (``true``) are about a door that retrieves; here the documents come retrieved, so
a spec with another value than the default is refused naming the key
(:func:`~credrank.rerank.check_rerank_spec`), where it ran as a dense one without a word. The
adapter's own ``retrieval`` (auto, cosine, given) says where the retrieval score comes from.
"""

from __future__ import annotations

import inspect
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from credrank.context.build import ContextDocument
from credrank.context.given import check_context_retrieval
from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.errors import FileFormatError
from credrank.core.pipeline import Pipeline, Stage
from credrank.core.structured import read_structured
from credrank.core.validation import check_bool, check_choice, check_real
from credrank.freshness.policy import UnknownAge
from credrank.index.embed import EMBEDDERS, MiniLMEmbedder, get_embedder
from credrank.pipeline.compile import (
    Compiled,
    build_stages,
    check_stages,
    compile_rerank,
    context,
    reads,
)
from credrank.pipeline.shortcuts import (
    ADAPTER,
    Shortcut,
    check_not_with_pipeline,
    in_words,
    spec_from_options,
    with_top,
)
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.provenance import SourceTyper
from credrank.rerank import (
    CANDIDATES,
    DEFAULT_RETRIEVAL,
    AutoRetrieval,
    GivenCandidates,
    Names,
    check_rerank_spec,
    check_retrieval,
)
from credrank.rerank.fields import DEFAULT_KEYS, EVIDENCE_FIELDS, MetadataFields, check_fields
from credrank.searcher import MAX_COMPILED, given_context, run_stages

#: the metadata key every adapter writes the breakdown under
BREAKDOWN_KEY = "credrank"


@dataclass(frozen=True)
class Option:
    """One adapter option: its ``name``, ``default``, the type a pydantic field declares
    (``annotation``), a line of ``help``, and whether it is a ``shortcut`` of the pipeline
    (translated into the spec) or an adapter option (how documents become candidates)."""

    name: str
    default: Any
    annotation: Any
    help: str
    shortcut: bool = False


#: the Python type of each kind of shortcut value (:mod:`credrank.pipeline.shortcuts`)
_TYPES: dict[str, Any] = {"int": int | None, "number": float | None, "bool": bool,
                          "flag3": bool | None, "text": str | None, "path": str | Path | None,
                          "map": dict[str, Any] | None, "items": str | dict[str, Any] | None}


def _shortcut(s: Shortcut) -> Option:
    """The adapter option of shortcut ``s``."""
    kind = str if s.value == "text" and s.default is not None else _TYPES[s.value]
    return Option(s.name, s.default, kind, s.help[0].upper() + s.help[1:] + ".", shortcut=True)


#: every option of every adapter, declared once (module docstring): the adapters' own, then
#: the pipeline shortcuts of :data:`credrank.pipeline.shortcuts.SHORTCUTS` (those of a door
#: that scores candidates retrieved elsewhere); ``pipeline`` is :data:`PIPELINE`
OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("embedder", "minilm", str,
           "'minilm' (the model `credrank index` uses by default) or 'hashing' (no model; "
           "tests)."),
    Option("tables", (), list[str], "Domain-table CSV paths for the source typer."),
    Option("fields", None, dict[str, str | None] | None,
           "The metadata key of each field the stages read, e.g. {'published_at': 'date'}; "
           "None for a field: not read. Default: each field under its own name ("
           + ", ".join(EVIDENCE_FIELDS) + "; the URL under "
           + ", else ".join(DEFAULT_KEYS["url"]) + "). A key named here must be on at "
           "least one document of each call."),
    Option("score_threshold", None, float | None,
           "Drop the documents whose final score is below it (after top_k); None: keep "
           "every one of the top_k."),
    Option("retrieval", DEFAULT_RETRIEVAL, str,
           "'auto' (the documents' embeddings if checked to be the embedder's model, else "
           "the retriever's scores, else credrank embeds the documents, with a one-time "
           "warning), 'cosine' (credrank's embedder, as credrank search) or 'given' (the "
           "retriever's score, required on every document)."),
    Option("use_given_embeddings", False, bool,
           "With retrieval 'cosine' or 'given': use the document's stored embedding when its "
           "dimension is the embedder's (only if the documents were embedded by the same "
           "model); under 'auto' the same-model check decides."),
    *(_shortcut(s) for s in ADAPTER.shortcuts()),
)}
#: the ``pipeline`` option: what the adapter runs (module docstring)
PIPELINE = Option("pipeline", None, Any,
                  "The pipeline: a PipelineSpec, a spec dict or the path of a JSON/TOML/YAML "
                  "spec file; the shortcuts are then not given (top_k aside).")


def options_doc() -> str:
    """The options as ``:param name: help`` lines (the Haystack component's docstring)."""
    return "\n".join(f"    :param {o.name}: {o.help}" for o in (PIPELINE, *OPTIONS.values()))


def signature() -> inspect.Signature:
    """``(self, pipeline=None, *, embedder='minilm', …)``: the keyword signature of an
    adapter's ``__init__`` (what ``inspect.signature`` and editors show)."""
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("pipeline", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=None)]
    params += [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY,
                                 default=list(o.default) if isinstance(o.default, tuple)
                                 else o.default, annotation=o.annotation)
               for o in OPTIONS.values()]
    return inspect.Signature(params)


def pydantic_fields(field: Callable[..., Any]) -> dict[str, tuple[Any, Any]]:
    """``name -> (annotation, field(...))`` for ``pydantic.create_model``: the options and
    ``pipeline`` as the fields of a LlamaIndex or LangChain component (``field`` is that
    framework's ``Field``). Each is typed ``Any``: :class:`CredrankScorer` validates the
    values, with the library's validators and words (``top_k: expected an integer in [1,
    10000000], got 2.5``), as every other door does; pydantic's own types coerced some
    (``"no"`` and ``0`` as false, ``top_k=True`` as 1) and said the rest in its words."""
    out: dict[str, tuple[Any, Any]] = {}
    for o in (PIPELINE, *OPTIONS.values()):
        default = ({"default_factory": list} if isinstance(o.default, tuple)
                   else {"default": o.default})
        out[o.name] = (Any, field(description=o.help, **default))
    return out


class ScorerFields:
    """Mixed into a pydantic adapter model whose fields are :data:`OPTIONS` and ``pipeline``
    and which runs them as ``self._scorer`` (a :class:`CredrankScorer`): an option assigned
    after construction (``p.top_k = 1``), or changed by ``model_copy(update=…)``, is
    validated and rebuilds the scorer, so that what runs and what is saved follow it (the
    attribute changed, and the old configuration ran and was saved). A value the scorer
    refuses raises, and the attribute keeps its value. The model also forbids unknown
    fields (``model_config = ConfigDict(extra="forbid")``: a misspelt option was ignored).
    A field reads what was given (``top_k`` ``None``: not given); what runs is ``.spec``
    (``.spec.top_k``). The options given (``model_fields_set``) are what the scorer gets, as
    the Haystack component's keywords."""

    _scorer: CredrankScorer

    def _refuse_unknown(self, names: Iterable[str], word: str) -> None:
        """A ``TypeError`` naming those of ``names`` that are no field (``word``: how the
        caller calls them), in the words of :class:`CredrankScorer` (and the Haystack
        component)."""
        fields = type(self).model_fields  # type: ignore[attr-defined]
        unknown = sorted(set(names) - set(fields))
        if unknown:
            raise TypeError(f"unexpected {word} {', '.join(map(repr, unknown))}; expected "
                            f"one of {', '.join(fields)}")

    def __init__(self, /, **data: Any) -> None:
        self._refuse_unknown(data, "option(s)")
        super().__init__(**data)

    def _scorer_with(self, **changes: Any) -> CredrankScorer:
        """The scorer of the options given (at construction, assigned since, or in
        ``changes``): only those, as the Haystack component's keywords, so that a shortcut
        given beside ``pipeline`` is refused even at its default (:meth:`CredrankScorer._spec`)."""
        given = set(self.model_fields_set) | set(changes)  # type: ignore[attr-defined]
        values = {n: changes[n] if n in changes else getattr(self, n)
                  for n in OPTIONS if n in given}
        pipeline = changes["pipeline"] if "pipeline" in changes else self.pipeline  # type: ignore[attr-defined]
        return CredrankScorer(pipeline, **values)

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):  # as the constructor says it
            self._refuse_unknown([name], "option")
        if name == "pipeline" or name in OPTIONS:
            scorer = self._scorer_with(**{name: value})  # raises before anything changes
            super().__setattr__(name, value)
            super().__setattr__("_scorer", scorer)
        else:
            super().__setattr__(name, value)

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> Any:
        self._refuse_unknown(update or (), "field(s)")
        copy = super().model_copy(update=update, deep=deep)  # type: ignore[misc]
        if update:
            copy._scorer = copy._scorer_with()
        return copy


def read_pipeline(value: Any, where: str = "pipeline") -> PipelineSpec:
    """The spec of ``pipeline=``: a :class:`PipelineSpec`, a spec dict (or a whole
    ``credrank search --json`` output), or the path of a JSON/TOML/YAML spec file. Errors
    name ``where`` (``pipeline: stages[1].half_life: …``, ``pipeline spec.toml: …``)."""
    if isinstance(value, PipelineSpec):
        return value
    if isinstance(value, str | Path):
        try:
            data = read_structured(value, what="pipeline spec")
        except FileFormatError as exc:
            raise SpecError(f"{where}: {exc}", "", str(exc)) from None
        where = f"{where} {value}"
    elif isinstance(value, Mapping):
        data = dict(value)
    else:
        raise TypeError(f"{where}: expected a PipelineSpec, a spec dict or the path of a "
                        f"JSON/TOML/YAML spec file, got {type(value).__name__}")
    if isinstance(data, dict) and "pipeline" in data and "stages" not in data:
        data = data["pipeline"]  # a whole --json output: its "pipeline" object
    return PipelineSpec.from_dict(data, where=where)


@dataclass(frozen=True)
class Passage:
    """One framework document as credrank sees it: its text, metadata (read for the fields
    the stages read: module docstring), the framework's retrieval ``score`` and stored
    ``embedding`` (either may be ``None``), and ``embedded_text``: the text the framework's
    embedding model saw when it is not ``text`` (LlamaIndex embeds metadata with the text),
    tried by the same-model check."""

    text: str | None
    metadata: Mapping[str, Any]
    score: float | None = None
    embedding: Sequence[float] | None = None
    embedded_text: str | None = None


@dataclass(frozen=True)
class Ranked:
    """One kept passage: its ``index`` in the input, the final ``score`` and the
    ``breakdown`` the adapters store under ``credrank`` in the document's metadata."""

    index: int
    score: float
    breakdown: dict[str, Any]


class ContextOptions(TypedDict, total=False):
    """The options of a context (:meth:`CredrankScorer.context`; chapter 35.4), as each
    adapter's ``context`` takes them (``**options``): the names and validators of
    :func:`credrank.context.build.search_context`, ``credrank context`` and ``POST
    /context``. ``now``: the evaluation time ``T`` (ISO 8601; default the freshness stage's,
    else the current time; also that stage's ``now``); ``half_life``: ``τ``, one tier lost
    per elapsed ``τ`` (days, or ``365d``, ``52w``, ``1y``, ``12h``; default no time
    downgrade); ``undated``: the unknown-age policy (``neutral``, ``neutral:W``,
    ``penalty:W``, ``exclude``; other than ``neutral`` only with ``half_life``);
    ``granularity``: ``document`` or ``sentence``; ``source_tier``: ``auto``, ``type`` or a
    factor name in [0, 1]; ``text``: ``full``, ``snippet`` or ``none`` (then only
    ``render("json")``)."""

    now: str | None
    half_life: float | str | None
    undated: UnknownAge | str
    granularity: str
    source_tier: str
    text: str


def embedder_dim(name: str) -> int:
    """The dimension of embedder ``name`` without loading a model: MiniLM's is a constant of
    its class (384, both backends); the hashing embedder has no model to load."""
    return MiniLMEmbedder.dim if name == "minilm" else get_embedder(name).dim


class LazyEmbedder:
    """The embedder ``name``, loaded by ``load`` when first asked to embed: its ``name`` and
    ``dim`` are known without the model (:func:`embedder_dim`), so a call on the retriever's
    scores, which embeds nothing, needs neither the model nor its extra (``credrank[embed]``,
    ``credrank[onnx]``). ``inner`` is the loaded embedder: what the chunker and
    :func:`~credrank.index.ingest.window_of` read of a wrapper."""

    def __init__(self, name: str, load: Callable[[], Embedder]) -> None:
        self.name, self.dim = name, embedder_dim(name)
        self._load = load

    @property
    def inner(self) -> Embedder:
        """The loaded embedder (loaded now if not before)."""
        return self._load()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed(texts)


class CredrankScorer:
    """What an adapter does, configured once: :data:`OPTIONS` as keywords and ``pipeline``
    (module docstring), validated at construction (the spec and its stages: a bad prior
    file, a missing model file or an index-only stage fails here, not on the first query).

    ``spec`` is the pipeline it runs (``top_k`` included); :meth:`init_parameters` the
    serialised configuration. Unknown keywords are a ``TypeError`` listing the known ones.
    """

    def __init__(self, pipeline: Any = None, **options: Any) -> None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"unexpected option(s) {', '.join(map(repr, unknown))}; expected "
                            f"pipeline or one of {', '.join(OPTIONS)}")
        values: dict[str, Any] = {
            n: (list(o.default) if isinstance(o.default, tuple) else o.default)
            for n, o in OPTIONS.items()}
        values.update(options)
        for s in ADAPTER.shortcuts():  # a flag in a keyword argument's words (True, False)
            if s.value == "bool":
                values[s.name] = check_bool(s.name, values[s.name])
        self.embedder: str = check_choice("embedder", values["embedder"], EMBEDDERS)
        self.retrieval: str = check_retrieval(values["retrieval"])
        self.use_given_embeddings = check_bool("use_given_embeddings",
                                               values["use_given_embeddings"])
        self.fields: dict[str, str | None] | None = (
            None if values["fields"] is None else check_fields(values["fields"]))
        self.metadata_fields = MetadataFields(self.fields or {})
        threshold = values["score_threshold"]
        self.score_threshold: float | None = (
            None if threshold is None else check_real("score_threshold", threshold))
        # checked by the typer, as Searcher.open's: a single path is refused there (list()
        # would read a string's characters)
        tables = values["tables"]
        given: Any = tables if isinstance(tables, str | Path) else list(tables or [])
        self.typer = SourceTyper(given)
        self.tables = [str(t) for t in (tables or [])]
        #: how errors of a built stage name the pipeline (``None``: built from shortcuts)
        self._where = (None if pipeline is None else
                       f"pipeline {pipeline}" if isinstance(pipeline, str | Path) else "pipeline")
        self.spec = check_rerank_spec(self._spec(pipeline, values, set(options)),
                                      self._where or "pipeline")
        self._stages: dict[int, list[Stage]] = {}
        #: the loaded embedder (:meth:`warm_up`); :attr:`lazy` loads it when first asked
        self._embedder: Embedder | None = None
        self.lazy = LazyEmbedder(self.embedder, self.warm_up)
        #: ``retrieval="auto"``'s state for this instance: the same-model verdict per
        #: dimension, the fallbacks already warned about
        self.auto = AutoRetrieval()
        #: the compiled specs of :meth:`context` (per ``spec.key``, the least recently used
        #: dropped past :data:`~credrank.searcher.MAX_COMPILED`)
        self._compiled: OrderedDict[str, Compiled] = OrderedDict()
        self._compiled_lock = threading.Lock()
        self._validate()

    # -- the pipeline -----------------------------------------------------------------------
    @staticmethod
    def _spec(pipeline: Any, values: Mapping[str, Any], given: set[str]) -> PipelineSpec:
        """The spec of ``pipeline`` (with ``top_k``), else of the shortcuts. ``given``: the
        keywords the caller gave; beside a pipeline each shortcut given is refused, even at
        its default (``priors="current"``: as ``--priors current`` beside ``--pipeline`` and
        a ``"priors"`` field beside ``"pipeline"``), ``top_k`` aside."""
        if pipeline is not None:
            check_not_with_pipeline({n: values[n] for n in given}, ADAPTER, "pipeline=",
                                    present=True)
            spec = read_pipeline(pipeline)
            try:
                return with_top(spec, values)
            except SpecError as exc:
                raise ValueError(f"top_k: {exc.detail}") from None
        return spec_from_options(door=ADAPTER,
                                 **{s.name: values[s.name] for s in ADAPTER.shortcuts()})

    def _error(self, exc: SpecError) -> ValueError:
        """A stage's build error, named as the user configured it: ``pipeline: stages[i]…``
        or the shortcut (``priors: …``)."""
        if self._where is not None:
            return SpecError(f"{self._where}: {exc.key_path}: {exc.detail}", exc.key_path,
                             exc.detail)
        return ValueError(in_words(exc, self.spec, ADAPTER))

    def _validate(self) -> None:
        """Build the stages of the configured ``top_k`` now (a stance stage, which needs the
        embedder, only reads its model file: it is built on the first query)."""
        if self.spec.stage("stance") is None:
            self.stages()
            return
        try:
            check_stages(self.spec)
        except SpecError as exc:
            raise self._error(exc) from None

    @property
    def top_k(self) -> int:
        """The number of passages returned (the spec's ``top_k``)."""
        return self.spec.top_k

    def spec_for(self, top_k: int | None = None) -> PipelineSpec:
        """The spec with ``top_k`` (default: its own)."""
        if top_k is None or (type(top_k) is int and top_k == self.spec.top_k):
            return self.spec  # else checked by the spec, as the constructor's top_k
        try:
            return with_top(self.spec, {"top_k": top_k})
        except SpecError as exc:
            raise ValueError(f"top_k: {exc.detail}") from None

    def stages(self, top_k: int | None = None) -> list[Stage]:
        """The built stages for ``top_k`` (default: the configured one), built once each."""
        spec = self.spec_for(top_k)
        if spec.top_k not in self._stages:
            needs_embedder = spec.stage("stance") is not None
            ctx = context(embedder=self.warm_up() if needs_embedder else None)
            try:
                self._stages[spec.top_k] = build_stages(spec, ctx)
            except SpecError as exc:
                raise self._error(exc) from None
        return self._stages[spec.top_k]

    def compiled(self, spec: PipelineSpec) -> Compiled:
        """``spec``'s stages for the given candidates
        (:func:`~credrank.pipeline.compile.compile_rerank`), built once per ``spec.key`` (a
        context compiles its spec, the longer rankings ``undated exclude`` refills from and
        the whole pool's for the ``neutral`` median); a build error in the words of
        :meth:`stages`."""
        with self._compiled_lock:
            found = self._compiled.get(spec.key)
            if found is not None:
                self._compiled.move_to_end(spec.key)
                return found
        embedder = self.warm_up() if spec.stage("stance") is not None else self.lazy
        try:
            built = compile_rerank(spec, embedder)
        except SpecError as exc:
            raise self._error(exc) from None
        with self._compiled_lock:
            built = self._compiled.setdefault(spec.key, built)
            while len(self._compiled) > MAX_COMPILED:
                self._compiled.popitem(last=False)
        return built

    def warm_up(self) -> Embedder:
        """Load the embedder (cached per process); else loaded by the first :meth:`rank` that
        embeds something (a call on the retriever's scores loads no model: :attr:`lazy`)."""
        if self._embedder is None:
            self._embedder = get_embedder(self.embedder)
        return self._embedder

    def embeds(self) -> bool:
        """Whether a call may well embed: ``retrieval="cosine"``, a stance stage or a stage
        that reads the vectors (what a framework's automatic warm-up loads the model for;
        under ``auto`` and ``given``, a call on scores loads none)."""
        return (self.spec.stage("stance") is not None or self.retrieval == "cosine"
                or "vectors" in reads(self.stages()))

    # -- ranking ------------------------------------------------------------------------------
    def records(self, passages: Sequence[Passage], retrieval: str | None = None,
                names: Names = CANDIDATES, *, scores: bool | None = None
                ) -> list[dict[str, Any]]:
        """The candidate records of :mod:`credrank.rerank` for ``passages`` (ids = positions):
        the text, the metadata (its fields are read by
        :class:`~credrank.rerank.GivenCandidates` with :attr:`metadata_fields`), the score
        with ``given`` and ``auto`` (``scores``: with every retrieval, or none; a context
        passes every score, to count those it does not read), the embedding (of the
        embedder's dimension) with ``auto`` or ``use_given_embeddings`` (its dimension known
        without loading the model)."""
        retrieval = retrieval or self.retrieval
        dim = self.lazy.dim
        auto = retrieval == "auto"
        scores = retrieval != "cosine" if scores is None else scores
        vectors = auto or self.use_given_embeddings
        records: list[dict[str, Any]] = []
        mismatched: list[int] = []
        for i, p in enumerate(passages):
            record: dict[str, Any] = {"id": str(i), "text": p.text, "metadata": p.metadata}
            if scores and p.score is not None:  # any real, numpy's too (check_candidates)
                record["score"] = p.score
            if vectors and p.embedding is not None:
                if len(p.embedding) == dim:
                    record["vector"] = p.embedding
                elif self.use_given_embeddings:
                    mismatched.append(i)
            records.append(record)
        if mismatched:
            warnings.warn(
                f"use_given_embeddings: {len(mismatched)} document(s) carry embeddings of "
                f"another dimension than the {self.embedder!r} embedder's ({dim}), e.g. "
                f"{names.items}[{mismatched[0]}]; their text is embedded instead",
                UserWarning, stacklevel=3)
        return records

    def rank(self, query: str, passages: Sequence[Passage], top_k: int | None = None,
             query_vector: Sequence[float] | None = None, *,
             retrieval: str | None = None, names: Names = CANDIDATES) -> list[Ranked]:
        """Rerank ``passages`` for ``query``; the kept ones, best first (those of at least
        ``score_threshold``, when set). Raises ``ValueError``
        (:class:`credrank.rerank.CandidateError`) naming the bad passage (``names``).
        ``query_vector``: the framework's embedding of the query, used under ``auto`` when the
        documents' embeddings passed the same-model check (and it has their dimension).
        ``retrieval``: this call's, instead of the configured one (an adapter that knows its
        scores are similarities — a store's cosine — passes ``given``). ``names``: the
        framework's words for the passages and their scores in errors (:class:`Names`:
        ``documents[i]``, ``nodes[i].score``; default ``candidates[i]``).

        ``GivenCandidates(passages) >> the spec's stages``, as :func:`credrank.rerank.rerank`
        runs a spec (the stages built once, not per query)."""
        if not isinstance(query, str):
            raise TypeError(f"query: expected a string, got {type(query).__name__}")
        stages = self.stages(top_k)
        if not passages:
            return []
        retrieval = self.retrieval if retrieval is None else check_retrieval(retrieval)
        embedder = self.lazy  # loaded only if something is embedded
        auto = retrieval == "auto"
        if not auto or query_vector is None or len(query_vector) != embedder.dim:
            query_vector = None
        given = GivenCandidates(
            self.records(passages, retrieval, names), embedder, self.typer,
            retrieval=retrieval, with_vectors="vectors" in reads(stages),
            query_vector=query_vector, auto=self.auto, declared=not auto,
            embedded_texts=[p.embedded_text for p in passages] if auto else None,
            fields=self.metadata_fields, names=names)
        ranked = self.ranked(Pipeline([given, *stages]).search(query))
        if self.score_threshold is None:
            return ranked
        return [r for r in ranked if r.score >= self.score_threshold]

    def context(self, query: str, passages: Sequence[Passage], top_k: int | None = None,
                query_vector: Sequence[float] | None = None, *, names: Names = CANDIDATES,
                now: str | None = None, half_life: float | str | None = None,
                undated: UnknownAge | str = "neutral", granularity: str = "document",
                source_tier: str = "auto", text: str = "full") -> ContextDocument:
        """The credibility-annotated context (chapter 35.4) of ``passages`` for ``query``
        (module docstring): ranked as :meth:`rank` ranks them (``top_k``: the passages kept,
        default the spec's), then tiered as ``credrank context`` tiers a search, by
        :func:`credrank.searcher.given_context` (the options: :class:`ContextOptions`).
        ``.render(format, cite)`` is the prompt, ``.to_json(format, cite)`` the ``POST
        /context`` document, ``.notes()`` what the prompt alone does not say.

        Each passage's ``doc_id`` is its position in ``passages`` (``"0"``, ``"1"``, …), as
        in :meth:`rank`: ``passages[int(p.doc_id)]`` (and the framework's document at that
        position) is the one it came from. The retriever's scores are not read (relevance
        tiers bin cosines: ``info["retrieval"]["scores_unread"]`` counts the passages that
        carried one); the passages are embedded unless they carry embeddings of the
        embedder's model (``retrieval="auto"``'s check), the model loaded only then.
        ``query_vector``: the framework's query embedding, used as in :meth:`rank`.

        Raises ``ValueError``: a scorer configured with ``retrieval="given"`` (naming
        ``retrieval``), a bad option naming its keyword (``half_life: …``, ``undated …: only
        with half_life``), a bad passage in ``names``' words."""
        if not isinstance(query, str):
            raise TypeError(f"query: expected a string, got {type(query).__name__}")
        retrieval = check_context_retrieval(self.retrieval)
        spec = self.spec_for(top_k)
        compiled = self.compiled(spec)
        auto = retrieval == "auto"
        embedder = self.lazy  # loaded only if something is embedded
        if not auto or query_vector is None or len(query_vector) != embedder.dim:
            query_vector = None
        given = GivenCandidates(
            self.records(passages, retrieval, names, scores=True), embedder, self.typer,
            retrieval=retrieval, with_vectors="vectors" in reads(compiled.stages),
            query_vector=query_vector, auto=self.auto, declared=False,
            embedded_texts=[p.embedded_text for p in passages] if auto else None,
            fields=self.metadata_fields, names=names, read_scores=False)
        try:
            return given_context(given, self.compiled, query, spec, retrieval=retrieval,
                                 run=run_stages,
                                 query_vector=query_vector, now=now, half_life=half_life,
                                 undated=undated, granularity=granularity,
                                 source_tier=source_tier, text=text)
        except SpecError as exc:  # a freshness stage's own now beside the context's
            raise self._error(exc) from None

    def ranked(self, result: Candidates) -> list[Ranked]:
        """:class:`Ranked` rows of a rerank result (breakdown as the ``credrank search
        --json`` hits: ``score_breakdown`` with the retrieval score, each factor, final;
        ``retrieval``: what the retrieval score was, one of
        :data:`~credrank.rerank.RESOLVED_SOURCES`; ``dates``: the five dates read, ISO 8601 or
        ``None``; ``conflict``: only where a declared ``source_type`` differs from the URL's;
        ``url_error``: only where a URL names no host (a file path, ``ftp://``), why it is
        typed ``unknown``; ``after_now``: only where the freshness date is after the evaluation
        time, an unknown age that the undated policy weighed; ``select``: with a selector, its
        report for the call, the same object on every document — ``info.select`` of
        ``credrank search --json``: FA*IR's ``satisfied`` and ``shortfall_at``, the exposure
        list's ``draw`` that replays it, MMR's and coverage's terms)."""
        out = []
        select = result.info.get("select")
        rules = result.column("provenance_rule")
        conflicts = result.column("provenance_conflict")
        url_errors = result.column("url_error")
        after_now = result.column("freshness_after_now")
        resolved = result.info["retrieval"]["resolved"]
        for i, hit in enumerate(result.hits("none")):  # the framework has the text
            breakdown = {
                "rank": hit["rank"], "score": hit["score"],
                "source_type": hit["source_type"], "host": hit["host"],
                "rule": _plain(rules[i]), "url": hit["url"],
                "retrieval": resolved, "embedder": self.embedder,
                "dates": hit["dates"],
                "score_breakdown": hit["score_breakdown"],
            }
            if conflicts[i]:
                breakdown["conflict"] = conflicts[i]
            if url_errors[i]:
                breakdown["url_error"] = url_errors[i]
            if after_now[i]:
                breakdown["after_now"] = True
            if select is not None:
                breakdown["select"] = select
            out.append(Ranked(index=int(hit["doc_id"]), score=hit["score"],
                              breakdown=breakdown))
        return out

    def __deepcopy__(self, memo: dict[int, Any]) -> CredrankScorer:
        """A scorer of the same configuration (:meth:`init_parameters`), its own embedder
        cache and locks: ``copy.deepcopy`` and a framework's ``model_copy(deep=True)`` failed
        on a lock ("cannot pickle '_thread.lock'")."""
        return CredrankScorer(**self.init_parameters())

    def init_parameters(self) -> dict[str, Any]:
        """The configuration as plain JSON/YAML values (for the frameworks' serialisers): the
        adapter options and ``pipeline`` = ``spec.to_dict()`` (the shortcuts are in it)."""
        out: dict[str, Any] = {"pipeline": self.spec.to_dict()}
        for name, o in OPTIONS.items():
            if not o.shortcut:
                value = getattr(self, name)
                out[name] = list(value) if isinstance(value, list | tuple) else value
        return out


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
