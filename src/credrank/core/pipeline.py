"""Composition of stages (DESIGN.md §3, in the manner of PyTerrier's ``>>``).

Every stage maps a :class:`~credrank.core.candidates.Candidates` batch to a new one:

* a *retriever* fills an empty batch (only ``query`` set) with ``fetch_k`` candidates;
* a *signal* adds one named factor (prior, smoothing, freshness, agreement, …);
* a *combiner* computes ``score`` from the retrieval score and the factors;
* a *selector* orders and cuts (top-k, MMR, coverage optimum, exposure sampler, FA*IR).

``retriever >> SourcePrior(...) >> Combine() >> TopK(10)`` builds a :class:`Pipeline`;
``pipeline.search("query")`` runs it. Later stages are added without touching earlier ones.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.embedder import Embedder
from credrank.core.params import construct, declared, given
from credrank.core.schema import Table
from credrank.core.validation import check_str

#: what a stage may read besides the batch's scores and metadata: each candidate's ``text``
#: or ``vectors`` (the retriever must return them), or the ``index`` itself (a stage that
#: reads the store runs under the searcher's store lock, as retrieval does)
READS = ("text", "vectors", "index")


class IndexNeeded(ValueError):
    """A stage that reads an index (its store or its embedder) was built without one: the
    message says what it reads. Checking a spec's files before the index is opened
    (:func:`credrank.pipeline.compile.check_stages`) passes over such a stage; anywhere
    else it is an error of the spec."""


@dataclass(frozen=True)
class FormulaTerm:
    """A factor the engine can score inside its formula (the fusion of a stage into the
    retrieval, in the manner of PyTerrier's ``compile()``): ``kind`` is the term the backends
    render — ``prior`` (a weight per source type, ``stage.priors``), ``freshness`` (half-life
    decay on the evidence date, ``stage``), ``credibility`` (the learned page credibility
    stored at index time, ``floor + (1 − floor) · $payload.credibility``: ``stage.formula``),
    ``multiply`` (the combination ``max(s, 0) × Π factors``) or ``cut`` (the top-k cut) — and
    ``stage`` the stage it stands for."""

    kind: str
    stage: Stage


@dataclass
class BuildContext:
    """What building a stage from its spec may need: the pipeline's ``top_k`` (selectors),
    the index's ``embedder`` and ``store`` (``None`` for candidates retrieved elsewhere), and
    the files the caller may name.

    ``resources``: names → paths a caller may use instead of a path (``credrank serve --model
    NAME=PATH``); ``allow_paths``: whether other values are read as paths (the CLI and the
    library: yes; the service: no — a client names what the server registered, never a path
    on the server). ``spec_path`` prefixes errors (``stages[2]``).
    """

    top_k: int = 10
    embedder: Embedder | None = None
    store: Any = None
    resources: Mapping[str, Path] = field(default_factory=dict)
    allow_paths: bool = True
    #: reads a prior table by preset name or file (set by the pipeline builder, which may
    #: import the prior stage's module where a stage module may not)
    prior_loader: Callable[[str | Path], Any] | None = None

    def type_priors(self, value: str, at: str) -> Mapping[str, float]:
        """The per-type weights of the preset or prior file ``value``."""
        if self.prior_loader is None:
            raise ValueError(f"{at}: no prior loader in this build context")
        presets = ("compressed", "current", "aggressive")
        try:
            table = self.prior_loader(value if value in presets else
                                      self.prior_file(value, at))
        except (ValueError, OSError) as exc:  # said at the parameter that named the file
            if str(exc).startswith(f"{at}:"):  # (a file's own error named only the file,
                raise                          # and another parameter naming it was blamed)
            raise ValueError(f"{at}: {exc}") from None
        return dict(table.values)

    def prior_file(self, value: str, at: str) -> Path:
        """The prior file ``value`` names (:meth:`path`); a folder is refused here, saying
        so (``"priors": "feedback"`` was refused as a file with "no suffix"), and a feedback
        store's folder is said to be the ``feedback_prior`` stage's to read."""
        path = self.path(value, at, "prior file")
        if path.is_dir():
            store = (path / "priors.json").is_file()
            hint = "; a feedback store is read by the feedback_prior stage" if store else ""
            raise ValueError(f"{at}: expected a preset or a prior file, got the folder "
                             f"{value!r}{hint}")
        return path

    def path(self, value: str, at: str, what: str) -> Path:
        """The file ``value`` names (a registered name first), or ``ValueError`` at ``at``."""
        if value in self.resources:
            return Path(self.resources[value])
        if not self.allow_paths:
            names = ", ".join(sorted(self.resources)) or "none"
            # a name is echoed; anything else is not, so that a guessed path is answered like
            # every other one (echoed, a registered path would come back as its name)
            got = (repr(value) if _NAME.fullmatch(value)
                   else "a file path or other text, which a service never reads")
            raise ValueError(f"{at}: expected the name of a {what} this service registered "
                             f"(credrank serve --model NAME=PATH; registered: {names}), got "
                             f"{got}")
        return Path(value)


#: what a registered name may look like when echoed in an error (``--model NAME=PATH``)
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class Stage(ABC):
    """One step of a pipeline: a pure function of a candidate batch.

    Besides :meth:`transform`, a stage says what it needs and what it is: :attr:`reads` (the
    candidate data the retriever must return for it), :meth:`formula_term` (whether the engine
    can score it, and if not why), and — for the stages of the catalog
    (:mod:`credrank.pipeline.catalog`) — :attr:`SPEC` (its parameters, declared once on its
    constructor with :func:`~credrank.core.params.parameters`, as a pipeline spec writes them)
    and :meth:`from_spec`.
    """

    #: short name used in reports and in ``score_breakdown`` keys
    name: str = "stage"
    #: what the stage reads of each candidate besides scores and metadata (:data:`READS`)
    reads: frozenset[str] = frozenset()
    #: what one of its verdicts is about when a batch holds several passages of one document
    #: (``unit: passage`` on an index with split documents): ``False`` — each row on its own
    #: (a per-row factor, a selector choosing passages); ``True`` — the stage counts
    #: documents (votes, groups, neighbours: five passages of one page are not five voices),
    #: so it runs on each document once, at its best passage, and what it adds is that
    #: document's for all its passages (:func:`by_document`). A batch of one row per document
    #: (the default unit) is the same either way.
    counts_documents: ClassVar[bool] = False
    #: the stage sets ``score`` from the factors before it (``Combine``, the engine's formula
    #: search): a selector after it ranks by them
    combines: ClassVar[bool] = False
    #: the stage ranks by ``score`` and keeps a selection (``TopK``, the selectors)
    selects: ClassVar[bool] = False
    #: the parameters a pipeline spec gives this stage: the table of its constructor's
    #: declared parameters (:func:`~credrank.core.params.parameters`), set for each class
    SPEC: ClassVar[Table | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__ and "SPEC" not in cls.__dict__:
            found = declared(cls)  # a constructor of its own: its declared parameters
            cls.SPEC = None if found is None else found.table

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> Stage:
        """The stage of spec ``params``, which the spec already checked against :attr:`SPEC`:
        built without checking them again (:func:`~credrank.core.params.construct`). A stage
        whose spec values name something ``ctx`` resolves (a file, the index's store)
        overrides this, passing the resolved objects to :func:`construct`."""
        return construct(cls, params)

    def params(self) -> dict[str, Any]:
        """The declared parameters this stage was built with, cleaned (``"30d"`` → 30.0)."""
        return given(self)

    def formula_term(self) -> FormulaTerm | str:
        """The term the engine scores for this stage, or why it cannot (the default: the
        stage runs in Python)."""
        return f"needs the Python path (the {self.name!r} stage, {type(self).__name__})"

    @abstractmethod
    def transform(self, batch: Candidates) -> Candidates:
        """Return a new batch; never mutate ``batch``."""

    def __call__(self, batch: Candidates) -> Candidates:
        if self.counts_documents:
            return by_document(self.transform, batch)
        return self.transform(batch)

    def config(self) -> dict[str, Any]:
        """JSON-serialisable parameters (shown in reports and ``--json`` output): the declared
        parameters under the input's names and in its units (:meth:`params`); a stage adds
        what it derived (a resolved table) under keys of its own."""
        return {k: plain(v) for k, v in self.params().items()}

    def describe(self) -> dict[str, Any]:
        return {"stage": type(self).__name__, "name": self.name, **self.config()}

    def __rshift__(self, other: Stage) -> Pipeline:
        return Pipeline([self]) >> other

    def search(self, query: str) -> Candidates:
        """Run this stage (or pipeline) on ``query`` from an empty batch; a blank ``query``
        is a ``ValueError`` (as :meth:`credrank.searcher.Searcher.run` refuses it: the
        library's reranking, the adapters and the experiments start here)."""
        check_str("query", query, what="non-empty text")
        return self(Candidates.empty(query))


def by_document(transform: Callable[[Candidates], Candidates], batch: Candidates
                ) -> Candidates:
    """``transform`` run on each document of ``batch`` once (its first row: in rank order,
    its best passage), what it adds given back to every passage of the document: its factors,
    meta columns and facts (``info``) by document, the rows of the documents it dropped
    dropped, the batch's order kept. A batch whose documents are one row each is passed to
    ``transform`` as it is."""
    ids = batch.doc_ids.astype(str)
    _, first = np.unique(ids, return_index=True)
    if len(first) == len(ids):
        return transform(batch)
    reps = np.sort(first)
    docs = batch.take(reps)
    out = transform(docs)
    row_of = {d: j for j, d in enumerate(out.doc_ids.astype(str))}
    keep = np.array([i for i, d in enumerate(ids) if d in row_of], dtype=np.int64)
    rows = np.array([row_of[d] for d in ids[keep]], dtype=np.int64)
    kept = batch.take(keep)
    # a factor it removed is removed; one it added or changed is the document's
    factors = {k: v for k, v in kept.factors.items() if k in out.factors}
    factors.update({k: v[rows] for k, v in out.factors.items()
                    if k not in docs.factors or not np.array_equal(v, docs.factors[k])})
    meta = dict(kept.meta)
    meta.update({k: v[rows] for k, v in out.meta.items() if k not in kept.meta})
    return replace(kept, factors=factors, meta=meta, info={**kept.info, **out.info})


def plain(value: Any) -> Any:
    """``value`` as JSON data: tuples as lists, a date as ISO 8601 text, a path as text, an
    object with ``as_dict()`` as that, a function as its name; others unchanged."""
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):
        return isoformat()
    as_dict = getattr(value, "as_dict", None)
    if callable(as_dict):
        return as_dict()
    if callable(value):
        return str(getattr(value, "__name__", type(value).__name__))
    return value


class Pipeline(Stage):
    """Stages applied in order; itself a stage, so pipelines nest."""

    name = "pipeline"

    @property
    def reads(self) -> frozenset[str]:  # type: ignore[override]
        """What any of its stages reads."""
        return frozenset().union(*(s.reads for s in self.stages))

    def __init__(self, stages: Iterable[Stage]):
        self.stages: list[Stage] = []
        for stage in stages:
            if not isinstance(stage, Stage):
                raise TypeError(f"pipeline step {stage!r} is not a credrank Stage")
            self.stages.extend(stage.stages if isinstance(stage, Pipeline) else [stage])

    def __rshift__(self, other: Stage) -> Pipeline:
        return Pipeline([*self.stages, other])

    def transform(self, batch: Candidates) -> Candidates:
        """Each stage in turn. A selector after factors no stage combined into the score,
        and none combines later (``DenseRetriever >> SourcePrior >> TopK``: the prior listed
        in every breakdown and ranking nothing), is a :class:`StageError` naming them: put
        ``Combine()`` before it (a spec's pipeline has it). A stage that sets the score itself
        (``combines``, or any that gives the batch a new score) counts as combining them; a
        cut by similarity before a later ``Combine`` (``>> TopK(20) >> Combine() >> TopK(3)``)
        is taken as meant."""
        pending: list[str] = []
        # a selector that a combiner follows may cut by similarity on purpose (a pool cut
        # before the reranking): only one after which the factors stay uncombined is refused
        last_combiner = max((i for i, s in enumerate(self.stages) if s.combines), default=-1)
        for i, stage in enumerate(self.stages):
            if stage.selects and pending and i > last_combiner:
                raise StageError(f"{type(stage).__name__}: the factor(s) {', '.join(pending)} "
                                 "were never combined into the score it ranks by: put "
                                 "Combine() before it")
            before = batch
            batch = stage(batch)
            if stage.combines or batch.score is not before.score:
                pending = []
            else:
                pending += [n for n in batch.factors if n not in before.factors]
        return batch

    def describe(self) -> dict[str, Any]:
        return {"stage": "Pipeline", "stages": [s.describe() for s in self.stages]}

    def __repr__(self) -> str:
        return " >> ".join(type(s).__name__ for s in self.stages)


class FunctionStage(Stage):
    """Wrap a plain ``Candidates -> Candidates`` function as a stage."""

    def __init__(self, fn: Callable[[Candidates], Candidates], name: str | None = None):
        self.fn = fn
        self.name = name or str(getattr(fn, "__name__", "function"))

    def transform(self, batch: Candidates) -> Candidates:
        return self.fn(batch)
