"""The options of ``credrank search`` (and the service's and the adapters' fields of the same
names) as a :class:`~credrank.pipeline.spec.PipelineSpec` — shortcuts for the common stages.

Each option is one stage or one parameter of one: ``--priors`` → ``prior`` (``none``: no
prior stage), ``--domain-scores`` → ``prior.use_domain_scores``, ``--priors-store`` →
``feedback_prior``, ``--source-reliability`` → ``reliability_prior``,
``--credibility-model``/``--credibility-floor`` → ``credibility``, ``--freshness`` →
``freshness``, ``--stance-model``/``--stance-param`` → ``stance``, ``--consensus``/
``--consensus-param`` → ``consensus``, ``--planted`` → ``planted``, ``--machine-text`` →
``machine_text``, ``--mode`` →
``combine.mode``, ``--select``/
``--select-param`` → the selector. The spec validates every value; :func:`spec_from_options`
only says errors back in the options' words (:data:`OPTION_OF`), so a front door that speaks
JSON fields instead passes its own ``names``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from credrank.pipeline.spec import PipelineSpec, SpecError

#: the ``credrank search`` option behind a spec path, by ``(stage, parameter)``; ``None``: the
#: stage itself, or any parameter without an entry of its own (``{param}`` is replaced by the
#: parameter's name); ``select`` stands for every selector, ``top`` for the top-level keys
OPTION_OF: dict[tuple[str, str | None], str] = {
    ("prior", None): "--priors", ("prior", "use_domain_scores"): "--domain-scores",
    ("feedback_prior", None): "--priors-store",
    ("reliability_prior", None): "--source-reliability",
    ("credibility", None): "--credibility-model", ("credibility", "floor"): "--credibility-floor",
    ("freshness", None): "--freshness {param}",
    ("stance", None): "--stance-param {param}", ("stance", "model"): "--stance-model",
    ("consensus", None): "--consensus-param {param}",
    ("combine", None): "--mode",
    ("select", None): "--select-param {param}", ("select", "stage"): "--select",
    ("consensus", "stage"): "--consensus", ("planted", None): "--planted",
    ("machine_text", None): "--machine-text",
    ("top", "top_k"): "--top-k", ("top", "fetch_k"): "--fetch-k",
    ("top", "retrieval"): "--lexical", ("top", "pushdown"): "--pushdown",
}
SELECTORS = ("topk", "mmr", "coverage", "exposure", "fair")


def spec_from_options(*, top_k: int = 10, fetch_k: int | None = None, priors: str = "current",
                      mode: str = "multiply", lexical: bool = False,
                      pushdown: bool | None = None, domain_scores: bool = False,
                      priors_store: Path | str | None = None,
                      source_reliability: Path | str | None = None,
                      select: str | None = None, select_params: Mapping[str, Any] | None = None,
                      credibility_model: Path | str | None = None,
                      credibility_floor: float | None = None,
                      stance_model: Path | str | None = None,
                      stance_params: Mapping[str, Any] | None = None, consensus: bool = False,
                      consensus_params: Mapping[str, Any] | None = None,
                      freshness: str | None = None, planted: bool = False,
                      machine_text: bool = False,
                      names: Mapping[tuple[str, str | None], str] | None = None
                      ) -> PipelineSpec:
    """The spec of the options (module docstring). ``ValueError`` in the options' words
    (``names``, default :data:`OPTION_OF`): a parameter without its option
    (``--credibility-floor`` without ``--credibility-model``), options that exclude each other
    (``--priors-store`` with ``--source-reliability``), ``--pushdown`` with a stage the
    engine cannot score, and every invalid value."""
    words = {**OPTION_OF, **(names or {})}

    def say(stage: str, param: str | None = None) -> str:
        return _word(stage, param, words)

    if credibility_floor is not None and credibility_model is None:
        raise ValueError(f"{say('credibility', 'floor')}: only with "
                         f"{say('credibility', 'model')}")
    if stance_params and stance_model is None:
        raise ValueError(f"{say('stance')}: only with {say('stance', 'model')}")
    if consensus_params and not consensus:
        raise ValueError(f"{say('consensus')}: only with {_stage_word('consensus', words)}")
    if select_params and not select:
        raise ValueError(f"{say('select')}: only with {_stage_word('select', words)}")
    if priors_store is not None and source_reliability is not None:
        raise ValueError(f"{say('reliability_prior')} replaces {say('feedback_prior')}; give "
                         "one of them")
    stages: list[dict[str, Any]] = []
    if priors_store is not None:
        stages.append({"stage": "feedback_prior", "store": str(priors_store)})
    elif source_reliability is not None:
        stages.append({"stage": "reliability_prior", "estimate": str(source_reliability),
                       "type_priors": "current" if priors == "none" else priors})
    elif priors != "none":
        stages.append({"stage": "prior", "priors": priors,
                       **({"use_domain_scores": True} if domain_scores else {})})
    if credibility_model is not None:
        stages.append({"stage": "credibility", "model": str(credibility_model),
                       **({} if credibility_floor is None else {"floor": credibility_floor})})
    if planted:
        stages.append({"stage": "planted"})
    if machine_text:
        stages.append({"stage": "machine_text"})
    if freshness is not None:
        from credrank.freshness.options import freshness_items  # the option's syntax

        stages.append({"stage": "freshness", **freshness_items(freshness, say("freshness"))})
    if stance_model is not None:
        stages.append({"stage": "stance", "model": str(stance_model),
                       **dict(stance_params or {})})
    if consensus:
        stages.append({"stage": "consensus", **dict(consensus_params or {})})
    stages.append({"stage": "combine", "mode": mode})
    if select:
        if select not in SELECTORS or select == "topk":
            raise ValueError(f"{_stage_word('select', words)}: expected one of "
                             f"{', '.join(SELECTORS[1:])}, got {select!r}")
        stages.append({"stage": select, **dict(select_params or {})})
    data = {"top_k": top_k, "fetch_k": fetch_k, "retrieval": "bm25" if lexical else "dense",
            "pushdown": pushdown, "stages": stages}
    try:
        spec = PipelineSpec.from_dict(data)
    except SpecError as exc:
        raise ValueError(in_words(exc, data, words)) from None
    if pushdown:
        from credrank.pipeline.compile import PushdownError, build_stages, context, decide_pushdown

        try:
            decide_pushdown(build_stages(spec, context()), retrieval=spec.retrieval,
                            requested=True, where=[_stage_word(s.name, words)
                                                   for s in spec.stages])
        except PushdownError as exc:
            raise ValueError(f"{exc.where} {exc.reason}; drop --pushdown") from None
        except SpecError:
            pass  # a stage that needs the index to be built: decided when it is
    return spec


def _word(stage: str, param: str | None, words: Mapping[tuple[str, str | None], str]) -> str:
    """The option (or field) behind ``stage.param`` (``param=None``: the stage)."""
    key = "select" if stage in SELECTORS else stage
    if param is None:
        word = words.get((key, None)) or stage
        return word.replace(" {param}", "").replace(".{param}", "").replace("{param}", stage)
    word = words.get((key, param)) or words.get((key, None)) or stage
    return word.format(param=param)


def _stage_word(stage: str, words: Mapping[tuple[str, str | None], str]) -> str:
    """The option that turns ``stage`` on (``--consensus``, ``--stance-model``, …)."""
    key = "select" if stage in SELECTORS else stage
    if (key, "stage") in words:
        return words[(key, "stage")]
    on = {"consensus": "--consensus", "stance": words.get(("stance", "model"), "stance"),
          "credibility": words.get(("credibility", None), "credibility")}
    return on.get(stage) or _word(stage, None, words)


def in_words(exc: SpecError, data: Mapping[str, Any],
             words: Mapping[tuple[str, str | None], str] = OPTION_OF) -> str:
    """``exc`` (a path into the spec ``data``) said with the option (or field) behind it."""
    path, detail = exc.key_path, exc.detail
    head, _, rest = path.partition(".")
    if not head.startswith("stages["):
        return f"{words.get(('top', head), head)}: {detail}"
    i = int(head[len("stages["):-1])
    stage = data["stages"][i]["stage"] if i < len(data["stages"]) else "?"
    param = rest.split(".")[0].split("[")[0] or None
    word = _stage_word(stage, words) if param == "stage" else _word(stage, param, words)
    return f"{word}: {detail}"


__all__ = ["OPTION_OF", "in_words", "spec_from_options"]
