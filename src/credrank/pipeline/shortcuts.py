"""The shortcut table: the one declaration of the options that make a pipeline spec.

A shortcut is a common stage or one parameter of one under a short name: ``priors`` →
``prior.priors`` (``none``: no prior stage), ``credibility_model`` → ``credibility.model``,
``planted`` → the ``planted`` stage, ``select_params`` → the selector's parameters, … Each is
declared once, in :data:`SHORTCUTS`; every front door is generated from it:

* the CLI options of ``credrank search``, ``context`` and ``consensus calibrate``
  (``--credibility-model``; :func:`credrank.cli.specs.shortcut_options`),
* the fields of ``POST /search`` and ``/rerank`` (:mod:`credrank.serve.models`),
* the keywords of the framework adapters (:mod:`credrank.adapters._common`),
* the keys of an audit's ``[system]`` table (:mod:`credrank.audit.run`),
* the library's ``Searcher.spec(**options)`` and :func:`spec_from_options`.

Every door says a shortcut in its own words (:class:`Door`: ``--credibility-floor`` to the
CLI, ``credibility_floor`` to an HTTP client and an adapter, ``system.credibility_floor`` to an
audit config), and the rules are the same at every door: what a shortcut ``requires``, what it
``excludes``, and that shortcuts are not given with a whole ``pipeline`` (``top_k`` and
``fetch_k`` aside: they override the spec's). The spec validates every value (one validator:
the stage's own ``SPEC``); a :class:`~credrank.pipeline.spec.SpecError` is said back in the
door's words (:func:`in_words`).

**A new stage with a shortcut is its module, one catalog line and one line here.**
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from credrank.core.validation import is_integer
from credrank.index.store import MAX_K
from credrank.pipeline.catalog import CATALOG
from credrank.pipeline.spec import FORCED_PUSHDOWN, PipelineSpec, SpecError

#: how a shortcut's value becomes spec data: ``top`` a top-level key (``param``), ``param``
#: one parameter of ``stage`` (the stage added when absent), ``on`` a flag that adds ``stage``,
#: ``params`` a mapping of ``stage``'s parameters, ``items`` a ``KEY=VALUE,…`` text (or a
#: mapping) of ``stage``'s parameters, ``select`` the name of the selector stage
KINDS = ("top", "param", "on", "params", "items", "select")
#: the value a door reads: ``int``, ``number``, ``bool``, ``flag3`` (true, false or unset),
#: ``text``, ``path`` (a file: a registered name at the service), ``map``, ``items``
VALUES = ("int", "number", "bool", "flag3", "text", "path", "map", "items")


@dataclass(frozen=True)
class Shortcut:
    """One shortcut (module docstring). ``stage`` ``"select"`` stands for whichever selector
    ``select`` chose; ``off`` is the value that leaves the stage out (``priors = "none"``);
    ``inherit`` sets a parameter from another shortcut's value (``reliability_prior``'s
    ``type_priors`` from ``priors``); ``retrieval``: only where the door retrieves (not
    ``/rerank`` or the adapters, which score candidates retrieved elsewhere); ``flag`` and
    ``alias``: the CLI's spelling when it is not ``--name-with-dashes``."""

    name: str
    kind: str
    stage: str | None
    param: str | None
    value: str
    default: Any
    help: str
    requires: str | None = None
    excludes: tuple[str, ...] = ()
    off: Any = None
    inherit: tuple[tuple[str, str], ...] = ()
    retrieval: bool = False
    flag: str | None = None
    alias: str | None = None

    def __post_init__(self) -> None:  # the table is code: a wrong line fails on import
        if self.kind not in KINDS or self.value not in VALUES:
            raise ValueError(f"shortcut {self.name!r}: kind {self.kind!r} / value "
                             f"{self.value!r} unknown")
        if self.stage is not None and self.stage != "select" and self.stage not in CATALOG:
            raise ValueError(f"shortcut {self.name!r}: no stage {self.stage!r} in the catalog")

    def given(self, value: Any) -> bool:
        """Whether ``value`` says anything: a shortcut at its default, or empty, does not;
        ``None`` for a shortcut whose default is not ``None`` does (and the spec refuses it)."""
        if value is None:
            return self.default is not None
        if isinstance(value, Mapping | list | tuple) and not value:
            return False
        return not (type(value) is type(self.default) and value == self.default)

    @property
    def on_by_default(self) -> bool:
        """Whether its stage is in a pipeline it is not given to (``priors``: ``current``)."""
        return self.kind == "param" and self.default is not None and self.default is not False


SELECTORS = ("mmr", "coverage", "exposure", "fair")

#: every shortcut, in the order of ``credrank search --help`` (module docstring)
SHORTCUTS: dict[str, Shortcut] = {s.name: s for s in (
    Shortcut("top_k", "top", None, "top_k", "int", None,
             f"results to return (default 10; at most {MAX_K:,}); with a pipeline it replaces "
             "the spec's top_k"),
    Shortcut("fetch_k", "top", None, "fetch_k", "int", None,
             f"candidate pool (default 3 × top_k; at most {MAX_K:,}); with a pipeline it "
             "replaces the spec's fetch_k", retrieval=True),
    Shortcut("lexical", "top", None, "retrieval", "bool", False,
             "BM25 instead of dense retrieval", retrieval=True),
    Shortcut("unit", "top", None, "unit", "text", "document",
             "what a hit is in an index with long texts split into passages: document (each "
             "document once, scored by its best passage, shown as its text) or passage (every "
             "passage that ranks)", retrieval=True),
    Shortcut("pushdown", "top", None, "pushdown", "flag3", None,
             "score inside the engine (formula query); default: whenever the pipeline allows",
             retrieval=True),
    Shortcut("priors", "param", "prior", "priors", "text", "current",
             "the source prior: compressed | current | aggressive | none (similarity only) | "
             "a TOML/YAML prior file", off="none"),
    Shortcut("domain_scores", "param", "prior", "use_domain_scores", "bool", False,
             "use domain,score table scores as priors where matched",
             requires="priors", excludes=("priors_store", "source_reliability")),
    Shortcut("priors_store", "param", "feedback_prior", "store", "path", None,
             "the current version of a feedback store (credrank priors) as the prior",
             excludes=("source_reliability", "priors")),
    Shortcut("source_reliability", "param", "reliability_prior", "estimate", "path", None,
             "the --json output of `credrank reliability estimate`: per-source reliability "
             "as the prior, shrunk toward the type prior of priors (m = 5)",
             inherit=(("type_priors", "priors"),)),
    Shortcut("smoothing", "on", "smoothing", None, "bool", False,
             "one-hop neighbour smoothing of the prior: λ' = (1 − β)·λ + β·mean λ "
             "of the m most similar candidates; parameters through the pipeline "
             "(smoothing.m = 5, smoothing.beta = 0.3)", requires="priors"),
    Shortcut("mode", "param", "combine", "mode", "text", "multiply",
             "how similarity and the factors combine: multiply | linear | rrf"),
    Shortcut("select", "select", "select", None, "text", None,
             "selection after scoring: mmr | coverage | exposure | fair (default top-k)"),
    Shortcut("select_params", "params", "select", None, "map", None,
             "the selector's parameters KEY=VALUE, values read as -S reads them (numbers, "
             "true/false, JSON lists: discounts=[1,0.6,0.5]); required (no default): mmr "
             "diversity; coverage lambda_ilad, lambda_coverage; exposure group_column; fair "
             "protected_column, p, alpha. E.g. mmr diversity=0.5 [min_ratio=0.5: only "
             "candidates with half the best retrieval score]; exposure "
             "group_column=source_type [rule=parity|proportional seed=0]",
             requires="select", flag="--select-param", alias="-P"),
    Shortcut("credibility_model", "param", "credibility", "model", "path", None,
             "a model file of `credrank credibility fit`: adds the factor credibility = "
             "floor + (1 − floor) · P(credible) from each candidate's text and URL"),
    Shortcut("credibility_floor", "param", "credibility", "floor", "number", None,
             "the floor of the credibility factor (default: the model file's, 0.3)",
             requires="credibility_model"),
    Shortcut("planted", "on", "planted", None, "bool", False,
             "label-free planted-evidence defence over the fetched pool (passages written for "
             "the query: abnormal query similarity, paraphrase clusters): the factor planted; "
             "modes and parameters through the pipeline (planted.mode = outlier | grada | "
             "ragdefender | trustrag)"),
    Shortcut("machine_text", "on", "machine_text", None, "bool", False,
             "demote machine-written passages: the Fast-DetectGPT statistic stored at index "
             "time (credrank score machine-text) as the floored factor machine_text; "
             "parameters through the pipeline (machine_text.floor = 0.5)"),
    Shortcut("freshness", "items", "freshness", None, "items", None,
             "half-life decay w = 2^(−(T−t)/τ) on each candidate's evidence date "
             "(observed > verified > published; never modified/retrieved): "
             "half_life=365d[,now=2026-01-01][,undated=neutral|neutral:W|penalty:W|exclude]"
             "[,config=FILE][,lineage=off|cites]; durations Nd, Nw, Ny (365.25 d), Nh; a "
             "date after now is an unknown age, as undated"),
    Shortcut("stance_model", "param", "stance", "model", "path", None,
             "a model file of `credrank stance fit`: adds the factor agreement (claim-style "
             "queries: does X help Y?) from each candidate's stance and the weighted "
             "consensus"),
    Shortcut("stance_params", "params", "stance", None, "map", None,
             "stance agreement parameters KEY=VALUE: floor=0.1 sharpness=1 "
             "mode=expected|absolute exclude_self=false voters=N weight_factor=prior",
             requires="stance_model", flag="--stance-param"),
    Shortcut("consensus", "on", "consensus", None, "bool", False,
             "label-free answer consensus (question-style queries): each candidate's answer "
             "read offline, copies counted once, weighted vote; the factor consensus and "
             "agreed | contested | no answers"),
    Shortcut("consensus_params", "params", "consensus", None, "map", None,
             "consensus parameters KEY=VALUE: threshold=0.5 floor=0.1 unanswered=1 "
             "on_contested=neutral|apply jaccard=0.5 shingle=3",
             requires="consensus", flag="--consensus-param"),
)}
#: shortcuts that may come with a whole pipeline (they replace its values)
WITH_PIPELINE = ("top_k", "fetch_k")


@dataclass(frozen=True)
class Door:
    """How a front door says a shortcut: ``cli`` (``--credibility-floor``,
    ``--select-param diversity``), else ``prefix`` + the name (``credibility_floor``,
    ``select_params.diversity``; the audit's ``system.``). ``retrieves``: whether the door
    retrieves (its shortcuts include ``fetch_k``, ``lexical``, ``pushdown``)."""

    name: str
    cli: bool = False
    prefix: str = ""
    retrieves: bool = True

    def say(self, name: str) -> str:
        """The door's word for shortcut ``name``."""
        if self.cli:
            s = SHORTCUTS[name]
            return s.flag or "--" + name.replace("_", "-")
        return self.prefix + name

    def say_bool(self) -> str:
        """The door's words for a flag's two values: Python's for the library and the
        adapters (keyword arguments), JSON's (and a flag file's) elsewhere."""
        return "True or False" if self.name in ("library", "adapter") else "true or false"

    def say_param(self, name: str, param: str) -> str:
        """The door's word for the parameter ``param`` inside shortcut ``name``'s value."""
        return f"{self.say(name)} {param}" if self.cli else f"{self.say(name)}.{param}"

    def shortcuts(self) -> list[Shortcut]:
        """The shortcuts of this door, in table order."""
        return [s for s in SHORTCUTS.values() if self.retrieves or not s.retrieval]


LIBRARY = Door("library")
CLI = Door("cli", cli=True)
HTTP_SEARCH = Door("http")
HTTP_RERANK = Door("http", retrieves=False)
ADAPTER = Door("adapter", retrieves=False)
AUDIT = Door("audit", prefix="system.")


def given_shortcuts(values: Mapping[str, Any], door: Door = LIBRARY,
                    *, with_pipeline: bool = False) -> list[str]:
    """The shortcuts of ``values`` that say something (:meth:`Shortcut.given`), in table order;
    ``with_pipeline``: leaving out those that may come with a pipeline."""
    return [s.name for s in door.shortcuts() if s.name in values and s.given(values[s.name])
            and not (with_pipeline and s.name in WITH_PIPELINE)]


def check_not_with_pipeline(values: Mapping[str, Any], door: Door, pipeline_word: str, *,
                            present: bool = False) -> None:
    """``ValueError`` when ``values`` give shortcuts besides a whole pipeline (the door's
    words). ``present``: every key of ``values`` counts, even at its default (a JSON field
    or a TOML key that was written), else only those that say something."""
    mixed = ([s.name for s in door.shortcuts() if s.name in values
              and s.name not in WITH_PIPELINE] if present
             else given_shortcuts(values, door, with_pipeline=True))
    if mixed:
        words = ", ".join(door.say(n) for n in mixed)
        raise ValueError(f"{words}: not with {pipeline_word} (the pipeline comes from it: set "
                         f"its values there, or drop {pipeline_word})")


def with_top(spec: PipelineSpec, values: Mapping[str, Any]) -> PipelineSpec:
    """``spec`` with the ``top_k`` / ``fetch_k`` that ``values`` give (a ``top_k`` alone keeps
    a stated ``fetch_k`` it still fits, else the default pool)."""
    top = {n: values[n] for n in WITH_PIPELINE if values.get(n) is not None}
    if not top:
        return spec
    if ("fetch_k" not in top and spec.fetch_k is not None and is_integer(top["top_k"])
            and spec.fetch_k < top["top_k"]):
        top["fetch_k"] = None  # else the spec checks top_k (a text "5" is refused there)
    return spec.replace_top(**top)


def spec_from_options(*, door: Door = LIBRARY, **values: Any) -> PipelineSpec:
    """The spec of the shortcut ``values`` (module docstring; a shortcut absent or at its
    default says nothing). ``ValueError`` in ``door``'s words: an unknown name, a shortcut
    without the one it ``requires`` (``--credibility-floor`` without
    ``--credibility-model``), two that exclude each other, and every invalid value (the
    spec's)."""
    known = {s.name for s in door.shortcuts()}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown option; expected some of "
                         f"{', '.join(sorted(known))}")
    for name, value in values.items():  # "no" or 0 turned BM25 or a stage on (truthy), and
        if SHORTCUTS[name].value == "bool" and not isinstance(value, bool):  # None turned it on
            raise ValueError(f"{door.say(name)}: expected {door.say_bool()}, got {value!r}")
    if not door.retrieves and values.get("machine_text") is True:  # it failed every call
        raise ValueError(f"{door.say('machine_text')}: candidates retrieved elsewhere carry no "
                         "machine-text score stored at index time; send the stage in a "
                         "pipeline with its missing scores said: {\"stage\": \"machine_text\", "
                         "\"missing\": \"score\"} (a language model reads each candidate now: "
                         "slow) or \"neutral\" (factor 1)")
    given = set(given_shortcuts(values, door))
    for name in sorted(given, key=list(SHORTCUTS).index):
        s = SHORTCUTS[name]
        if s.requires is not None and not _on(s.requires, values):
            off = SHORTCUTS[s.requires].off
            raise ValueError(f"{door.say(name)}: only with {door.say(s.requires)}"
                             + ("" if off is None else f" other than {off!r}"))
        for other in s.excludes:
            if other in given:
                raise ValueError(f"{door.say(name)}: not with {door.say(other)} (give one of "
                                 "them)")
    top: dict[str, Any] = {}
    stages: dict[str, dict[str, Any]] = {}
    selector = values.get("select")
    for s in door.shortcuts():
        present = s.name in given
        value = values[s.name] if present else s.default
        if s.kind == "top":
            if present:
                top[s.param or s.name] = (("bm25" if value else "dense") if s.name == "lexical"
                                          else value)
            continue
        if not present and not s.on_by_default:
            continue  # not given, and no stage by default
        if s.off is not None and value == s.off:
            continue
        if s.kind == "select":
            if value not in SELECTORS:
                raise ValueError(f"{door.say(s.name)}: expected one of "
                                 f"{', '.join(SELECTORS)}, got {value!r}")
            stages.setdefault(value, {})
            continue
        stage = selector if s.stage == "select" else s.stage
        assert stage is not None  # every kind but top names one
        params = stages.setdefault(stage, {})
        if s.kind == "param":
            params[s.param or s.name] = str(value) if s.value == "path" else value
        elif s.kind == "params":
            params.update(_mapping(value, door.say(s.name)))
        elif s.kind == "items":
            params.update(_items(value, door.say(s.name)))
        for param, source in s.inherit:
            if _on(source, values):
                params[param] = values.get(source, SHORTCUTS[source].default)
            elif source in given:  # given at its off value: nothing to set the parameter to
                raise ValueError(f"{door.say(source)}: expected a preset or a prior file with "
                                 f"{door.say(s.name)} (it sets its {param}), got "
                                 f"{values[source]!r}")
    # one stage per kind: a prior shortcut given replaces the default prior
    priors = [n for n in stages if CATALOG[n].kind == "prior"]
    if len(priors) > 1:
        for name in priors:
            if name == "prior":
                del stages[name]
    items = sorted(({"stage": n, **p} for n, p in stages.items()),
                   key=lambda item: CATALOG[item["stage"]].rank)
    data = {**top, "stages": items}
    try:
        return PipelineSpec.from_dict(data)
    except SpecError as exc:
        raise ValueError(in_words(exc, data, door)) from None


def _on(name: str, values: Mapping[str, Any]) -> bool:
    """Whether shortcut ``name`` puts its stage in (given, or on by default and not off)."""
    s = SHORTCUTS[name]
    value = values.get(name, s.default)
    return value is not None and value is not False and value != s.off and (
        not isinstance(value, Mapping | list | tuple) or bool(value))


def _mapping(value: Any, word: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{word}: expected an object of parameters, got "
                         f"{type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _items(value: Any, word: str) -> dict[str, Any]:
    """A mapping of the stage's parameters, or the same as ``KEY=VALUE,…`` text
    (``half_life=365d,undated=penalty:0.5``): the syntax only — each key once; the keys and
    values are the stage's to check (its ``SPEC``), as any spec's are."""
    if isinstance(value, Mapping):
        return _mapping(value, word)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{word}: expected KEY=VALUE[,KEY=VALUE…], got {value!r}")
    items: dict[str, Any] = {}
    for part in value.split(","):
        key, sep, item = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"{word}: expected KEY=VALUE, got {part.strip()!r}")
        if key in items:
            raise ValueError(f"{word}: key {key!r} given twice")
        items[key] = item.strip()
    return items


def word_of(stage: str, param: str | None, door: Door) -> str:
    """The door's word for the spec path ``stage.param`` (``param=None`` or ``"stage"``: the
    shortcut that puts the stage in); the stage's own name where no shortcut says it."""
    key = "select" if stage in SELECTORS else stage
    mine = [s for s in door.shortcuts() if s.stage == key]
    if param not in (None, "stage"):
        for s in mine:
            if s.kind == "param" and s.param == param:
                return door.say(s.name)
            for inherited, source in s.inherit:  # set from another shortcut's value
                if inherited == param:          # (reliability_prior.type_priors: --priors)
                    return door.say(source)
        for s in mine:
            if s.kind in ("params", "items"):
                return door.say_param(s.name, param)
    for kind in ("on", "select", "items", "param"):
        for s in mine:
            if s.kind == kind:
                return door.say(s.name) if param in (None, "stage") else \
                    f"{door.say(s.name)} ({stage}.{param})"
    return stage if param in (None, "stage") else f"{stage}.{param}"


def written_places(values: Mapping[str, Any], written: Iterable[str], door: Door
                   ) -> dict[str, str]:
    """Where in a spec the ``written`` shortcut options of ``values`` put what they say, by
    the spec key a ``-S`` would name: a top-level key (``top_k``), ``STAGE.PARAM``
    (``prior.priors``, ``freshness.half_life``, a selector's ``mmr.diversity``) or ``STAGE.*``
    for a stage an option keeps out (``--no-smoothing``, ``--priors none``, the selectors
    ``--select`` did not choose); each with the option's name. Values have been checked by
    :func:`spec_from_options` before."""
    places: dict[str, str] = {}
    chosen = values.get("select")
    for s in door.shortcuts():
        if s.name not in written:
            continue
        value = values.get(s.name, s.default)
        if s.kind == "top" and s.param is not None:
            places[s.param] = s.name
        elif s.kind == "param" and s.stage is not None:
            places[f"{s.stage}.{s.param or s.name}"] = s.name
            if s.name == "priors" and value == "none":
                places[f"{s.stage}.*"] = s.name
            elif s.stage != "prior" and CATALOG[s.stage].kind == "prior":
                places["prior.*"] = s.name  # its prior takes the place of the type prior
        elif s.kind == "on" and value is False:
            places[f"{s.stage}.*"] = s.name
        elif s.kind == "select":
            places.update({f"{other}.*": s.name for other in SELECTORS if other != value})
        elif s.kind in ("params", "items") and value:
            stage = chosen if s.stage == "select" else s.stage
            if stage is None:
                continue
            given = (_mapping(value, door.say(s.name)) if s.kind == "params"
                     else _items(value, door.say(s.name)))
            places.update({f"{stage}.{p}": s.name for p in given})
    for s in door.shortcuts():  # a parameter one option sets from another's value
        for param, source in s.inherit:
            if source in written and s.stage is not None:
                places.setdefault(f"{s.stage}.{param}", source)
    return places


def in_words(exc: SpecError, data: Mapping[str, Any] | PipelineSpec, door: Door) -> str:
    """``exc`` (a path into the spec ``data``: its plain data, or the spec, whose stages an
    error names by their written index, :meth:`PipelineSpec.written`) said with the door's
    word behind it (a ``pushdown: true`` that cannot be honoured as the door's option that
    set it: ``--pushdown``, ``pushdown=True``)."""
    path, detail = exc.key_path, exc.detail
    if FORCED_PUSHDOWN in detail:
        forced = ("--pushdown" if door.cli else "pushdown=True"
                  if door.name in ("library", "adapter") else f"{door.say('pushdown')}: true")
        detail = detail.replace(FORCED_PUSHDOWN, f"{forced} cannot be honoured")
    head, _, rest = path.partition(".")
    if not head.startswith("stages["):
        tops = {s.param: s.name for s in door.shortcuts() if s.kind == "top"}
        return f"{door.say(tops[head]) if head in tops else head}: {detail}"
    i = int(head[len("stages["):-1])
    if isinstance(data, PipelineSpec):
        stage = next((s.name for s in data.stages if s.given == i), "?")
    else:
        stages = data.get("stages") or []
        item = stages[i] if i < len(stages) else {}
        stage = item.get("stage", "?") if isinstance(item, Mapping) else "?"
    param = rest.split(".")[0].split("[")[0] or None
    return f"{word_of(str(stage), param, door)}: {detail}"


__all__ = ["ADAPTER", "AUDIT", "CLI", "HTTP_RERANK", "HTTP_SEARCH", "LIBRARY", "SELECTORS",
           "SHORTCUTS", "WITH_PIPELINE", "Door", "Shortcut", "check_not_with_pipeline",
           "given_shortcuts", "in_words", "spec_from_options", "with_top", "word_of",
           "written_places"]
