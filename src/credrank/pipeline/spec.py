"""``PipelineSpec``: a search pipeline as plain data, and the one validator of it.

A spec is what ``credrank search --json`` echoes under ``"pipeline"`` and what every front door
speaks (a ``--pipeline`` file, the ``pipeline`` field of ``POST /search`` and ``/rerank``,
the adapters' ``pipeline=``, the audit's ``[system]``, a bench's systems)::

    {"credrank_pipeline": 1, "top_k": 10, "fetch_k": 30, "retrieval": "dense",
     "unit": "document", "pushdown": null,
     "stages": [{"stage": "prior", "priors": "current"},
                {"stage": "freshness", "half_life": 365.0, "undated": "penalty:0.5"},
                {"stage": "combine", "mode": "multiply"},
                {"stage": "mmr", "diversity": 0.5}]}

:meth:`PipelineSpec.from_dict` checks everything before any stage is built and raises
:class:`SpecError` naming the spec path (``stages[3].threshold: expected a finite number in
[0, 1], got 1.5``): an unknown stage, an unknown, missing or out-of-range parameter (the
stage class's own ``SPEC``), a stage given twice, two priors or selectors, an order that cannot
work (ranks of :mod:`credrank.pipeline.catalog`), ``fetch_k < top_k``. Defaults are filled
in: :meth:`PipelineSpec.to_dict` writes every parameter of every stage, the ``combine`` and
the selector included, so the document replays the run exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from credrank.core.params import declared
from credrank.core.schema import AnyOf, Anything, Field, Flag, Integer, Nullable, Table, Text
from credrank.index.retrieve import default_fetch_k
from credrank.index.store import MAX_K, UNITS
from credrank.pipeline.catalog import CATALOG, KINDS, entry

SPEC_KEY = "credrank_pipeline"
FORMAT = 1
RETRIEVALS = ("dense", "bm25")


#: the stage parameters that name a file (a ``store``: a folder); a spec, or a config that
#: gives them, reads a relative one from its own folder (:func:`spec_file_beside`)
SPEC_FILE_PARAMS = frozenset({"priors", "model", "store", "estimate", "config"})


def spec_file_beside(param: str, value: Any, folder: Path) -> str | None:
    """The path in ``folder`` that a spec parameter's relative ``value`` names, when ``param``
    names a file (:data:`SPEC_FILE_PARAMS`) and it is there (a folder only for ``store``);
    ``None`` otherwise (a preset, ``priors = "current"`` beside a folder ``current/``, a
    parameter that names no file)."""
    if (param not in SPEC_FILE_PARAMS or not isinstance(value, str) or not value
            or Path(value).is_absolute()):
        return None
    candidate = folder / Path(value).expanduser()
    if candidate.is_file() or (param == "store" and candidate.is_dir()):
        return str(candidate.resolve())
    return None


#: how a spec error says that the spec's ``pushdown: true`` cannot be honoured (a door that
#: set it with its own option says it in its words: :func:`~credrank.pipeline.shortcuts.in_words`)
FORCED_PUSHDOWN = "pushdown: true cannot be honoured"


class SpecError(ValueError):
    """A spec that cannot run: ``key_path`` is where (``stages[3].threshold``), ``detail``
    what was expected and what came; ``str()`` is both, prefixed by the spec's name."""

    def __init__(self, message: str, key_path: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.key_path, self.detail = key_path, detail or message


_TOP = Table({
    SPEC_KEY: Field(Integer(FORMAT, FORMAT), default=FORMAT),
    "top_k": Field(Integer(1, MAX_K), default=10),
    "fetch_k": Field(Nullable(Integer(1, MAX_K)), default=None),
    "retrieval": Field(Text(choices=RETRIEVALS), default="dense"),
    "unit": Field(Text(choices=UNITS), default="document"),
    "pushdown": Field(Nullable(Flag()), default=None),
    "stages": Field(AnyOf((Anything(),)), default=[]),
}, what="a pipeline spec (an object with top_k, fetch_k, retrieval, unit, pushdown, stages)")


@dataclass(frozen=True)
class StageSpec:
    """One stage of a spec: its catalog ``name`` and its checked ``params`` (every parameter,
    defaults filled in)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    #: its index in the spec as written (``None``: a stage the spec implies, the ``combine``
    #: or ``topk`` :meth:`PipelineSpec.completed` adds); what errors name it by
    given: int | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.name, **self.params}


@dataclass(frozen=True)
class PipelineSpec:
    """A validated pipeline (module docstring). Build one with :meth:`from_dict` (or
    :meth:`of`); the constructor does not validate."""

    top_k: int = 10
    fetch_k: int | None = None
    retrieval: str = "dense"
    pushdown: bool | None = None
    stages: tuple[StageSpec, ...] = ()
    #: what a search returns: ``document`` (each once, at its best passage) or ``passage``
    #: (:data:`~credrank.index.store.UNITS`; an index without split documents: the same)
    unit: str = "document"

    # -- reading -------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any, where: str = "") -> PipelineSpec:
        """The spec of ``data`` (a dict as :meth:`to_dict` writes it), checked; ``where``
        prefixes messages (a file name)."""
        def fail(path: str, detail: str) -> SpecError:
            message = ": ".join(p for p in (where, path) if p) + f": {detail}"
            return SpecError(message, path, detail)

        try:
            top = _TOP.check(data, "", error=SpecError)
        except SpecError as exc:
            raise fail(getattr(exc, "key_path", ""), getattr(exc, "detail", str(exc))) from None
        raw = top["stages"]
        if not isinstance(raw, list):
            raise fail("stages", f"expected a list of stages, got {type(raw).__name__}")
        stages = [_stage(i, item, fail) for i, item in enumerate(raw)]
        spec = cls(top_k=top["top_k"], fetch_k=top["fetch_k"], retrieval=top["retrieval"],
                   pushdown=top["pushdown"], stages=tuple(stages), unit=top["unit"])
        if spec.fetch_k is not None and spec.fetch_k < spec.top_k:
            raise fail("fetch_k", f"expected an integer >= top_k ({spec.top_k}), got "
                                  f"{spec.fetch_k}")
        _check_order(spec.stages, fail)
        return spec.completed()._validated()

    @classmethod
    def of(cls, *stages: Mapping[str, Any] | str, **top: Any) -> PipelineSpec:
        """``PipelineSpec.of("prior", {"stage": "mmr", "diversity": 0.5}, top_k=5)``."""
        items = [{"stage": s} if isinstance(s, str) else dict(s) for s in stages]
        return cls.from_dict({**top, "stages": items})

    # -- writing -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON data, resolved (``fetch_k``, every stage's parameters)."""
        return {**self._stated(), "fetch_k": self.resolved_fetch_k}

    def _stated(self) -> dict[str, Any]:
        """:meth:`to_dict` with ``fetch_k`` as stated: ``None`` for the default pool, which
        a new ``top_k`` then resizes (what :meth:`replace_top` and :meth:`with_params` build
        from)."""
        return {SPEC_KEY: FORMAT, "top_k": self.top_k, "fetch_k": self.fetch_k,
                "retrieval": self.retrieval, "unit": self.unit, "pushdown": self.pushdown,
                "stages": [s.to_dict() for s in self.stages]}

    # -- validation ----------------------------------------------------------------------
    @cached_property
    def checked(self) -> PipelineSpec:
        """This spec validated: itself when :meth:`from_dict` (or a method built on it) made
        it, else :meth:`from_dict` of its data, once. A spec made by the constructor is not
        validated, and ran as it was: an unknown stage was a ``KeyError``, ``retrieval=
        "sparse"`` ran dense retrieval (:func:`~credrank.rerank.as_spec` takes this)."""
        return PipelineSpec.from_dict(self._stated())

    def _validated(self) -> PipelineSpec:
        self.__dict__["checked"] = self  # the cached_property's value: validated as it is
        return self

    # -- derived -------------------------------------------------------------------------
    @cached_property
    def key(self) -> str:
        """The spec as canonical JSON text: equal for specs that run the same pipeline (what
        compiled pipelines are memoised by, :meth:`credrank.searcher.Searcher.compile`)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), default=str)

    @property
    def resolved_fetch_k(self) -> int:
        """``fetch_k``, default ``3 × top_k`` (seed 004's expanded pool), capped at MAX_K."""
        return (self.fetch_k if self.fetch_k is not None
                else default_fetch_k(self.top_k))

    def stage(self, name: str) -> StageSpec | None:
        """The stage called ``name``, or ``None``."""
        return next((s for s in self.stages if s.name == name), None)

    def written(self, i: int) -> str:
        """Stage ``i`` as an error names it: ``stages[j]``, its index in the spec as written
        (a spec of ``mmr`` alone holds ``combine`` before it: its ``stages[1]`` is the
        writer's ``stages[0]``), or the stage the spec implies."""
        given = self.stages[i].given
        return f"stages[{given}]" if given is not None else f"the {self.stages[i].name} stage"

    def param_stage(self, message: str) -> tuple[int, str] | None:
        """``(stage index, parameter)`` of a run-time error that opens with a stage's
        parameter (``intent_column: …``), ``None`` unless exactly one stage has it."""
        head = message.split(":", 1)[0]
        having = [i for i, s in enumerate(self.stages) if head in s.params]
        return (having[0], head) if len(having) == 1 else None

    def param_path(self, message: str) -> str | None:
        """Where a run-time error that opens with a stage's parameter (``intent_column: …``)
        is in the spec as written (``stages[0].intent_column``): ``None`` unless exactly one
        written stage has that parameter (:meth:`param_stage`)."""
        found = self.param_stage(message)
        if found is None or self.stages[found[0]].given is None:
            return None
        return f"{self.written(found[0])}.{found[1]}"

    def index_of(self, name: str) -> int:
        """The position of stage ``name`` (``-1`` when absent)."""
        return next((i for i, s in enumerate(self.stages) if s.name == name), -1)

    def completed(self) -> PipelineSpec:
        """With the implicit stages written out: ``combine`` (``multiply``) before the
        selector, ``topk`` last, when absent."""
        stages = list(self.stages)
        kinds = [entry(s.name).kind for s in stages]
        if "select" not in kinds:
            stages.append(StageSpec("topk", {}))
        if "combine" not in kinds:
            at = next(i for i, s in enumerate(stages) if entry(s.name).kind == "select")
            stages.insert(at, StageSpec("combine", _params("combine", {}, "")))
        return replace(self, stages=tuple(stages))

    def with_params(self, name: str, params: Mapping[str, Any]) -> PipelineSpec:
        """This spec with ``params`` set on stage ``name`` (added at its rank when absent,
        replacing the prior, combine or selector already there when it is one), validated
        again: what ``credrank search -S name.param=value`` does."""
        data = self._stated()
        for item in data["stages"]:
            if item["stage"] == name:
                item.update(params)
                break
        else:
            kind = CATALOG[name].kind if name in CATALOG else None
            if kind in ("prior", "combine", "select"):  # one of these: the new one replaces
                data["stages"] = [s for s in data["stages"] if CATALOG[s["stage"]].kind != kind]
            data["stages"].append({"stage": name, **params})
            data["stages"].sort(key=lambda s: CATALOG[s["stage"]].rank
                                if s["stage"] in CATALOG else 0)
        return PipelineSpec.from_dict(data)

    def replace_top(self, **top: Any) -> PipelineSpec:
        """This spec with other top-level values (``top_k``, ``fetch_k``, …), validated. A
        ``fetch_k`` left at its default stays the default: ``3 × top_k`` of the new
        ``top_k``. The stages keep the indexes they were written at (:meth:`written`); the
        stages themselves are no top-level value (:meth:`with_params` sets theirs)."""
        if "stages" in top:  # it failed inside ("zip() argument 2 is longer than …")
            detail = ("expected a stage's parameters one by one (STAGE.PARAM), or a whole "
                      "spec, not the stages as one top-level value")
            raise SpecError(f"stages: {detail}", "stages", detail)
        new = PipelineSpec.from_dict({**self._stated(), **top})
        return replace(new, stages=tuple(replace(n, given=o.given) for n, o in
                                         zip(new.stages, self.stages, strict=True)))._validated()


def _params(name: str, raw: Mapping[str, Any], at: str) -> dict[str, Any]:
    """The stage's parameters checked by its constructor's declaration (each field, then what
    the fields say together: :class:`credrank.core.params.Parameters`)."""
    cls = entry(name).cls
    found = declared(cls)
    if found is not None:
        return found.check(dict(raw), "", error=SpecError, at=at)
    if cls.SPEC is None:  # pragma: no cover - every catalog class declares one
        raise SpecError(f"{at}: stage {name!r} declares no parameters", at)
    return dict(cls.SPEC.check(dict(raw), "", error=SpecError, at=at))


def _stage(i: int, item: Any, fail: Any) -> StageSpec:
    at = f"stages[{i}]"
    if isinstance(item, str):
        item = {"stage": item}
    if not isinstance(item, Mapping):
        raise fail(at, f"expected an object {{\"stage\": NAME, …parameters}} or a stage name, "
                       f"got {type(item).__name__}")
    name = item.get("stage")
    if not isinstance(name, str) or name not in CATALOG:
        shown = repr(name) if isinstance(name, str) else type(name).__name__
        raise fail(f"{at}.stage", f"expected one of {', '.join(CATALOG)}, got {shown}")
    try:
        params = _params(name, {k: v for k, v in item.items() if k != "stage"}, at)
    except SpecError as exc:
        raise fail(getattr(exc, "key_path", at), getattr(exc, "detail", str(exc))) from None
    return StageSpec(name, params, i)


def _check_order(stages: Sequence[StageSpec], fail: Any) -> None:
    """Each stage once; at most one prior, one combine, one selector; ranks non-decreasing."""
    seen: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    for i, s in enumerate(stages):
        e = entry(s.name)
        if s.name in seen:
            raise fail(f"stages[{i}].stage", f"expected each stage once, got {s.name!r} again "
                                             f"(stages[{seen[s.name]}])")
        seen[s.name] = i
        if e.kind != "signal" and e.kind in by_kind:
            raise fail(f"stages[{i}].stage", f"expected one {e.kind} stage, got {s.name!r} "
                                             f"after {stages[by_kind[e.kind]].name!r} "
                                             f"(stages[{by_kind[e.kind]}])")
        by_kind.setdefault(e.kind, i)
        if i and entry(stages[i - 1].name).rank > e.rank:
            order = ", ".join(f"{k}: " + "/".join(n for n, x in CATALOG.items() if x.kind == k)
                              for k in KINDS)
            raise fail(f"stages[{i}].stage",
                       f"expected {s.name!r} before {stages[i - 1].name!r} (stages[{i - 1}]); "
                       f"a pipeline runs {order}, and signals in catalog order")


__all__ = ["FORCED_PUSHDOWN", "FORMAT", "RETRIEVALS", "SPEC_KEY", "PipelineSpec", "SpecError",
           "StageSpec"]
