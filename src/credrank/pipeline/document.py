"""The answer documents of a compiled pipeline: ``credrank search --json`` (docs/json.md), the
service's ``/search`` and ``/rerank``, the batch's JSON lines.

:func:`settings_document` says what a compiled spec ranks with (``settings``: ``top_k``,
``fetch_k``, the priors, the mode, each signal's configuration, the engine) and carries the spec
itself under ``pipeline`` (feeding it back reproduces the run). It is read off the built stages
once per compiled pipeline (:attr:`credrank.pipeline.compile.Compiled.settings`), not per query.
:func:`search_document` puts one query's result under it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from credrank.core.candidates import Candidates
from credrank.core.hittext import DEFAULT_TEXT, SNIPPET_CHARS, check_text
from credrank.core.pipeline import Pipeline, Stage
from credrank.pipeline.spec import PipelineSpec


class Compiled(Protocol):
    """What a document reads of a :class:`credrank.pipeline.compile.Compiled` (which builds
    its settings document here: this module does not import it)."""

    @property
    def spec(self) -> PipelineSpec: ...

    @property
    def stages(self) -> tuple[Stage, ...]: ...

    @property
    def pushdown(self) -> Any: ...

    @property
    def engine(self) -> str | None: ...


def _is(stage: object, target: str) -> bool:
    """``isinstance(stage, cls)`` for ``target = "module:Class"`` without importing the
    module: an instance of a class whose module was never imported cannot exist."""
    module, name = target.split(":")
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(stage, getattr(loaded, name))


def settings_document(compiled: Compiled) -> dict[str, Any]:
    """What ``compiled`` ranks with, as JSON (module docstring): the same keys whatever the
    front door, read from the built stages, the engine when it searches an index, and the
    spec under ``pipeline``."""
    spec = compiled.spec
    out: dict[str, Any] = {"top_k": spec.top_k, "fetch_k": spec.resolved_fetch_k,
                           "priors": None, "mode": "multiply", "retrieval": spec.retrieval,
                           "unit": spec.unit,
                           "pushdown": compiled.pushdown.fused}
    for built in flat(compiled.stages):
        stage: Any = built  # each branch below knows the stage's class
        if _is(stage, "credrank.stages.prior:SourcePrior"):
            out["priors"] = stage.priors.as_dict()
        elif _is(stage, "credrank.stages.feedback_prior:FeedbackPrior"):
            out["priors"] = _feedback_priors(stage)
        elif _is(stage, "credrank.stages.reliability_prior:ShrunkReliabilityPrior"):
            params = next(x.params for x in spec.stages if x.name == "reliability_prior")
            out["priors"] = {"name": "reliability", "estimate": params["estimate"],
                             "sources": len(stage.estimates), "m": stage.m,
                             "type_priors": {"name": params["type_priors"],
                                             "values": dict(stage.type_prior)}}
        elif _is(stage, "credrank.combine:Combine"):
            out["mode"] = stage.mode
        elif _is(stage, "credrank.stages.credibility:LearnedCredibilityPrior"):
            out["credibility"] = stage.config()
        elif _is(stage, "credrank.stages.stance:StanceAgreement"):
            params = dict(next(x.params for x in spec.stages if x.name == "stance"))
            out["stance"] = {"model": stage.source.get("path"),
                             "embedder": stage.source.get("embedder"),
                             "trained_on": stage.trained_on,
                             **{k: v for k, v in params.items() if k != "model"}}
        elif _is(stage, "credrank.stages.consensus:AnswerConsensus"):
            out["consensus"] = stage.config()
        elif _is(stage, "credrank.stages.freshness:FreshnessDecay"):
            out["freshness"] = stage.config()
    if compiled.engine is not None:
        out["engine"] = compiled.engine
    out["pipeline"] = spec.to_dict()
    return out


def stable_settings(compiled: Compiled) -> bool:
    """Whether :func:`settings_document` of ``compiled`` is the same for every run: not
    where a feedback prior ranks with its store's latest version (the document says which)."""
    return not any(_is(s, "credrank.stages.feedback_prior:FeedbackPrior")
                   for s in flat(compiled.stages))


def _feedback_priors(stage: Any) -> dict[str, Any]:
    """What a feedback prior stage ranks with: the store's version (the pinned one, else the
    latest at the time of the call) and its type priors (``priors: "feedback"``)."""
    record = stage.store.record(stage.version)
    return {"name": "feedback", "store": str(stage.store.directory),
            "version": int(record["version"]), "values": dict(record["types"])}


def flat(stages: Sequence[Stage]) -> list[Stage]:
    """``stages`` with nested pipelines spread out."""
    out: list[Stage] = []
    for s in stages:
        out.extend(flat(s.stages) if isinstance(s, Pipeline) else [s])
    return out


def text_settings(text: str) -> dict[str, Any]:
    """What a document's ``settings`` say of the hits' text: ``text`` (``full``,
    ``snippet`` or ``none``) and, for snippets, ``snippet_chars``."""
    text = check_text(text)
    return {"text": text, **({"snippet_chars": SNIPPET_CHARS} if text == "snippet" else {})}


def answered(settings: Mapping[str, Any], info: Mapping[str, Any], text: str
             ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(settings, pipeline)`` of an answer: ``settings`` (:func:`settings_document`, left
    unchanged) with the hits' ``text`` and what the run read (:func:`settings_as_run`), and
    the spec under its ``"pipeline"`` key made :func:`replayable` (``None`` when absent) —
    what ``credrank search --json`` and ``credrank context --json`` both write."""
    out = {**settings, **text_settings(text)}
    pipeline = out.pop("pipeline", None)
    return (settings_as_run(out, info),
            None if pipeline is None else replayable(pipeline, info))


#: the format version of the ``credrank search --json`` and ``credrank_rerank`` documents
#: (docs/json.md): 2 since a date after the evaluation time is an unknown age
#: (``info.freshness``'s ``clamped`` became ``after_now``)
SEARCH_FORMAT = 2


def search_document(query: str, settings: dict[str, Any], result: Candidates, *,
                    text: str = DEFAULT_TEXT, **extra: Any) -> dict[str, Any]:
    """The ``credrank search --json`` document (docs/json.md) for one query under
    ``settings`` (:func:`settings_document`; left unchanged); ``extra`` keys (a batch's
    ``query_id``) are added at the top level. Each hit carries ``text`` as ``text`` says
    (:meth:`Candidates.hits`; ``settings.text`` records it)."""
    settings, pipeline = answered(settings, result.info, text)
    doc = {"credrank_search": SEARCH_FORMAT, **extra, "query": query, "settings": settings,
           "hits": result.hits(text), "info": result.info}
    if pipeline is not None:  # the spec it ran: feeding it back reproduces the run
        doc["pipeline"] = pipeline
    return doc


def _resolved_now(info: Mapping[str, Any]) -> str | None:
    """The evaluation time the freshness stage of an answer used (ISO 8601), if it ran."""
    fresh = info.get("freshness")
    now = fresh.get("now") if isinstance(fresh, dict) else None
    return now if isinstance(now, str) else None


def settings_as_run(settings: dict[str, Any], info: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with the clock's reading of this answer (``info``) as the freshness
    stage's ``now`` where it read the clock, not the cached settings' ``null``; a copy where
    anything is written."""
    resolved = _resolved_now(info)
    fresh = settings.get("freshness")
    if resolved is not None and isinstance(fresh, dict) and fresh.get("now") is None:
        return {**settings, "freshness": {**fresh, "now": resolved}}
    return settings


def replayable(pipeline: dict[str, Any], info: Mapping[str, Any]) -> dict[str, Any]:
    """The echoed spec ``pipeline`` with what this answer read at run time written in, from
    the answer's ``info``: the clock of a freshness stage (:func:`with_now`), the store
    version a feedback prior ranked with (its latest: ``version: null``), the exposure
    lottery's ``draw`` (:func:`pinned`): replaying it ranks as this answer did, also after
    later feedback. A copy where anything is written."""
    resolved = _resolved_now(info)
    if resolved is not None:
        pipeline = with_now(pipeline, resolved)
    used = info.get("feedback_prior")
    if isinstance(used, dict):
        pipeline = pinned(pipeline, "feedback_prior", "version", int(used["version"]))
    select = info.get("select")
    if isinstance(select, dict) and isinstance(select.get("draw"), int):
        pipeline = pinned(pipeline, "exposure", "draw", select["draw"])
    return pipeline


def pinned(pipeline: dict[str, Any], stage: str, param: str, value: Any) -> dict[str, Any]:
    """The echoed spec with ``param`` of each ``stage`` set to ``value`` where it is
    ``null`` (what the run resolved it to); a copy."""
    out = dict(pipeline)
    out["stages"] = [({**s, param: value} if isinstance(s, dict) and s.get("stage") == stage
                      and s.get(param) is None else s) for s in pipeline.get("stages", [])]
    return out


def with_now(pipeline: dict[str, Any], now: str) -> dict[str, Any]:
    """The echoed spec ``pipeline`` (:meth:`PipelineSpec.to_dict`) with ``now`` written into
    each freshness stage that read the clock (``now: null``), so that replaying the echo
    ranks as this answer did; a copy (the compiled pipeline's settings stay unchanged). With
    more than one such stage the answer's one reading cannot be told apart: unchanged."""
    stages = pipeline.get("stages", [])
    clock = [i for i, s in enumerate(stages)
             if isinstance(s, dict) and s.get("stage") == "freshness" and s.get("now") is None]
    if len(clock) != 1:
        return pipeline
    out = dict(pipeline)
    out["stages"] = [({**s, "now": now} if i == clock[0] else s) for i, s in enumerate(stages)]
    return out


__all__ = ["flat", "search_document", "settings_document", "stable_settings", "text_settings"]
