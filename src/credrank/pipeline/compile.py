"""From stages to a runnable pipeline: the one builder, and the one place pushdown is decided.

:func:`build_stages` turns a :class:`~credrank.pipeline.spec.PipelineSpec` into stage objects
(each stage class's ``from_spec``, in the spec's order). :func:`compile_search` puts a
retriever in front of them; :func:`decide_pushdown` decides — here and nowhere else — whether
the engine scores them (in the manner of PyTerrier's ``compile()`` and its fusion protocols):
each stage answers :meth:`~credrank.core.pipeline.Stage.formula_term` itself, a term the
engine renders (``prior``, ``freshness``, ``multiply``, the ``cut`` of top-k) or the reason it
cannot. The retriever returns what the stages :attr:`~credrank.core.pipeline.Stage.reads`
(text, vectors), nothing more.

The rule, in full: the engine scores a pipeline when retrieval is dense, the store has the
formula capability, there is a ``prior`` term, every stage before the selector gives a term
(at most one prior, one freshness and one learned ``credibility`` — the last only where the
index holds that model's index-time scores, :mod:`credrank.credibility.indexed`), and the
combination is ``multiply``. With the
``topk`` selector the engine also makes the cut and returns only the payload a hit needs; any
other selector chooses from the whole ``fetch_k`` pool after it. ``pushdown=None`` (auto)
scores in the engine whenever the rule allows; ``True`` insists (a :class:`PushdownError`
names the first stage that cannot be fused and why); ``False`` never does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from credrank.core.embedder import Embedder
from credrank.core.pipeline import (
    BuildContext,
    FormulaTerm,
    FunctionStage,
    IndexNeeded,
    Pipeline,
    Stage,
)
from credrank.index.retrieve import BM25Retriever, DenseRetriever
from credrank.index.store import FormulaScoring, VectorStore, formula_unavailable
from credrank.pipeline.catalog import entry
from credrank.pipeline.document import settings_document, stable_settings
from credrank.pipeline.pushdown import PushdownSearch
from credrank.pipeline.spec import FORCED_PUSHDOWN, PipelineSpec, SpecError


class PushdownError(ValueError):
    """``pushdown`` was required but a stage (``where``) cannot be scored in the engine."""

    def __init__(self, message: str, where: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.where, self.reason = where, reason


def build_stages(spec: PipelineSpec, ctx: BuildContext, *,
                 skip_index_stages: bool = False) -> list[Stage]:
    """The stages of ``spec`` (its combine and selector included), in order. An error while
    building one (a model file that does not fit the index, a missing store) is a
    :class:`~credrank.pipeline.spec.SpecError` naming ``stages[i]``; with
    ``skip_index_stages`` a stage that needs an index ``ctx`` lacks
    (:class:`~credrank.core.pipeline.IndexNeeded`) is left out instead."""
    from credrank.signals.prior import load_priors  # the prior tables a stage may name

    if ctx.prior_loader is None:
        ctx.prior_loader = load_priors
    ctx.top_k = spec.top_k
    out = []
    for i, s in enumerate(spec.stages):
        at = spec.written(i)
        try:
            out.append(entry(s.name).cls.from_spec(dict(s.params), ctx))
        except SpecError:
            raise
        except IndexNeeded as exc:
            if not skip_index_stages:
                raise build_error(at, s.params, exc) from None
        except (ValueError, TypeError, OSError) as exc:
            raise build_error(at, s.params, exc) from None
    return out


def build_error(at: str, params: Mapping[str, Any], exc: BaseException) -> SpecError:
    """A stage's build error as a :class:`SpecError` at ``at`` — at ``at.param`` when the
    message starts with one of the stage's parameters (``priors: …``) or names the file one
    of them named."""
    text = str(exc)
    key = text.split(":", 1)[0] if ":" in text else ""
    if key and key in params:
        path, detail = f"{at}.{key}", text[len(key) + 1:].strip()
    else:  # a file's error names the file (``FILE: …`` or ``'FILE'``): the parameter that
        # named it; a value merely occurring in the text is no match (the stance stage's
        # ``mode: "expected"`` in "…: expected a stance model file …")
        named = [k for k, v in params.items() if isinstance(v, str) and len(v) > 2
                 and (text.startswith(f"{v}:") or f" {v}:" in text or repr(v) in text)]
        path, detail = (f"{at}.{named[0]}" if named else at), text
    return SpecError(f"{path}: {detail}", path, detail)


def check_stages(spec: PipelineSpec) -> None:
    """Build the stages of ``spec`` that need no index: the files they name are read and
    checked (a :class:`~credrank.pipeline.spec.SpecError` naming ``stages[i]``) before an
    index is opened, and a ``pushdown: true`` they cannot honour is refused at the stage;
    stages that read the index are checked when it is."""
    stages = build_stages(spec, context(), skip_index_stages=True)
    if spec.pushdown and len(stages) == len(spec.stages):
        decide(spec, stages, None)


def decide(spec: PipelineSpec, stages: Sequence[Stage], store: object | None) -> Pushdown:
    """:func:`decide_pushdown` for the stages of ``spec`` (``store=None``: any store with the
    formula capability); a ``pushdown: true`` the stages cannot honour is a :class:`SpecError`
    at the stage."""
    try:
        return decide_pushdown(stages, retrieval=spec.retrieval, store=store,
                               requested=spec.pushdown,
                               where=[spec.written(i) for i in range(len(stages))])
    except PushdownError as exc:
        at = exc.where if exc.where.startswith("stages[") else "pushdown"
        reason = exc.reason if at == exc.where else f"{exc.where} {exc.reason}".strip()
        raise SpecError(f"{at}: {reason}; {FORCED_PUSHDOWN}", at,
                        f"{reason}; {FORCED_PUSHDOWN}") from None


@dataclass(frozen=True)
class Pushdown:
    """The decision of :func:`decide_pushdown`: ``fused`` (the engine scores the stages),
    else ``reason`` (``where``: the stage that cannot be fused). With ``fused``: the
    ``prior``, ``freshness`` and ``credibility`` stages rendered into the formula, and
    whether the engine also makes the top-k ``cut``."""

    fused: bool
    reason: str | None = None
    where: str = ""
    prior: Stage | None = None
    freshness: Stage | None = None
    cut: bool = False
    credibility: Stage | None = None


def decide_pushdown(stages: Sequence[Stage], *, retrieval: str = "dense",
                    store: object | None = None, requested: bool | None = None,
                    where: Sequence[str] | None = None) -> Pushdown:
    """Whether the engine scores ``stages`` (module docstring). ``where[i]`` names stage ``i``
    in errors (``stages[2]``, or a flag); with ``requested=True`` a stage that cannot be fused
    raises :class:`PushdownError`. ``store=None`` decides for any store with the formula
    capability."""
    names = list(where) if where is not None else [f"stages[{i}]" for i in range(len(stages))]
    found = _fusable(stages, retrieval, names)
    if isinstance(found, Pushdown) and store is not None:
        why = formula_unavailable(store)
        if why is not None:
            found = (why, f"the {_engine(store)} store")
    if isinstance(found, tuple):
        reason, at = found
        if requested:
            raise PushdownError(f"pushdown: {at} {reason}; drop pushdown", at, reason)
        return Pushdown(False, reason, at)
    if requested is False:
        return Pushdown(False, "pushdown turned off")
    return found


def _fusable(stages: Sequence[Stage], retrieval: str, names: Sequence[str]
             ) -> Pushdown | tuple[str, str]:
    if retrieval != "dense":
        return (f"{retrieval} retrieval needs the Python path (the engine formula rescores "
                "dense neighbours)", "retrieval")
    prior = freshness = credibility = None
    cut = False
    combined = False
    for stage, at in zip(stages, names, strict=True):
        term = stage.formula_term()
        if combined:  # after the combination: only the selector follows
            cut = isinstance(term, FormulaTerm) and term.kind == "cut"
            continue
        if not isinstance(term, FormulaTerm):
            return term, at
        if term.kind == "multiply":
            combined = True
        elif term.kind == "prior" and prior is None:
            prior = term.stage
        elif term.kind == "freshness" and freshness is None:
            freshness = term.stage
        elif term.kind == "credibility" and credibility is None:
            credibility = term.stage
        else:
            return f"needs the Python path (a second {term.kind!r} term)", at
    if prior is None:
        return "needs the Python path without a source prior (similarity only)", "stages"
    return Pushdown(True, prior=prior, freshness=freshness, cut=cut, credibility=credibility)


def _engine(store: object) -> str:
    manifest = getattr(store, "manifest", None)
    return str(getattr(manifest, "engine", type(store).__name__))


def reads(stages: Sequence[Stage]) -> frozenset[str]:
    """What any of ``stages`` reads of each candidate (``text``, ``vectors``)."""
    return frozenset().union(*(s.reads for s in stages))


def compile_search(stages: Sequence[Stage], index: VectorStore, embedder: Embedder, *,
                   fetch_k: int, top_k: int, retrieval: str = "dense",
                   pushdown: bool | None = None, where: Sequence[str] | None = None,
                   with_vectors: bool = False, with_text: bool = False,
                   decision: Pushdown | None = None, unit: str = "document") -> Pipeline:
    """``retriever >> stages`` over ``index``, or the engine's formula search when
    :func:`decide_pushdown` fuses them (``decision``: already decided). ``with_vectors`` /
    ``with_text`` ask for more than the stages read (a caller that shows them); ``unit``: the
    retriever returns documents (at their best passage) or passages
    (:func:`~credrank.index.store.fetch_documents`)."""
    read = reads(stages)
    vectors, text = with_vectors or "vectors" in read, with_text or "text" in read
    if decision is None:
        decision = decide_pushdown(stages, retrieval=retrieval, store=index,
                                   requested=pushdown, where=where)
    if decision.fused:
        # the terms' stages, of the classes that answer those terms (decide_pushdown)
        prior: Any = decision.prior
        fused = PushdownSearch(cast(FormulaScoring, index), embedder, prior.priors, fetch_k,
                               top_k if decision.cut else fetch_k, with_vectors=vectors,
                               with_text=text, freshness=cast(Any, decision.freshness),
                               hit_fields_only=decision.cut,
                               credibility=cast(Any, decision.credibility))
        return Pipeline([fused] if decision.cut else [fused, stages[-1]])
    retriever: Stage = (BM25Retriever(index, fetch_k, with_vectors=vectors, with_text=text,
                                      unit=unit)
                        if retrieval == "bm25" else
                        DenseRetriever(index, embedder, fetch_k, with_vectors=vectors,
                                       with_text=text, unit=unit))
    return Pipeline([retriever, *stages])


def context(*, embedder: Embedder | None = None, store: object | None = None,
            resources: Mapping[str, str | Path] | None = None,
            allow_paths: bool = True) -> BuildContext:
    """A :class:`~credrank.core.pipeline.BuildContext` for :func:`build_stages`."""
    return BuildContext(embedder=embedder, store=store, allow_paths=allow_paths,
                        resources={k: Path(v) for k, v in (resources or {}).items()})


@dataclass(frozen=True)
class Compiled:
    """A spec made runnable: its ``pipeline``, the built ``stages`` after retrieval, the
    ``pushdown`` decision and the ``engine`` that answers (``None`` for candidates retrieved
    elsewhere). Each stage is built once here; :attr:`settings` is read off them once."""

    spec: PipelineSpec
    pipeline: Pipeline
    stages: tuple[Stage, ...]
    pushdown: Pushdown
    engine: str | None = None

    #: the settings document once built (when no stage reads changing state)
    _settings: dict[str, Any] = field(default_factory=dict, init=False, repr=False,
                                      compare=False)

    @property
    def settings(self) -> dict[str, Any]:
        """The settings document (:func:`credrank.pipeline.document.settings_document`),
        built on first use and shared by every answer of this pipeline — read it, never change
        it — except where a stage ranks with state that changes between runs (a feedback
        store's latest version): then it is built for each answer."""
        kept = self._settings.get("document")
        if kept is not None:
            return kept
        document = settings_document(self)
        if stable_settings(self):
            self._settings["document"] = document
        return document


def compile_spec(spec: PipelineSpec, index: VectorStore, embedder: Embedder, *,
                 resources: Mapping[str, str | Path] | None = None,
                 allow_paths: bool = True, **kwargs: Any) -> Compiled:
    """:func:`build_stages` then :func:`compile_search` for a search of ``index``, pushdown
    decided once. A ``pushdown: true`` the stages cannot honour is a :class:`SpecError` at
    the stage."""
    ctx = context(embedder=embedder, store=index, resources=resources, allow_paths=allow_paths)
    stages = build_stages(spec, ctx)
    decision = decide(spec, stages, index)
    pipeline = compile_search(stages, index, embedder, fetch_k=spec.resolved_fetch_k,
                              top_k=spec.top_k, retrieval=spec.retrieval, decision=decision,
                              unit=spec.unit, **kwargs)
    return Compiled(spec, pipeline, tuple(stages), decision, _engine(index))


#: the stand-in for the stage that turns given candidates into a batch, where a rerank spec is
#: compiled once for many calls (each call builds its own :class:`credrank.rerank.GivenCandidates`
#: and runs it before the compiled stages)
GIVEN_STAND_IN = FunctionStage(lambda batch: batch, name="given")


def compile_rerank(spec: PipelineSpec, embedder: Embedder, *, given: Stage = GIVEN_STAND_IN,
                   resources: Mapping[str, str | Path] | None = None,
                   allow_paths: bool = True) -> Compiled:
    """``given >> stages`` for candidates retrieved elsewhere (``given`` turns them into a
    batch; default :data:`GIVEN_STAND_IN`, when only the stages and settings are used); never
    pushed down (there is no engine)."""
    ctx = context(embedder=embedder, resources=resources, allow_paths=allow_paths)
    stages = build_stages(spec, ctx)
    return Compiled(spec, Pipeline([given, *stages]), tuple(stages),
                    Pushdown(False, "candidates retrieved elsewhere are scored in Python"))


__all__ = ["GIVEN_STAND_IN", "Compiled", "Pushdown", "PushdownError", "build_error",
           "build_stages", "check_stages", "compile_rerank", "compile_search", "compile_spec",
           "context", "decide", "decide_pushdown", "reads"]
