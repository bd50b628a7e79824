"""A stage's parameters, declared once: on its constructor (DESIGN.md §4, in the manner of
scikit-learn's ``_parameter_constraints`` and Haystack's ``component_to_dict``).

::

    class FreshnessDecay(Stage):
        @parameters(half_life=Nullable(Duration()), lineage=Text(choices=("off", "cites")))
        def __init__(self, half_life=None, *, lineage="off", name="freshness"): ...

:func:`parameters` reads the constructor's signature: each declared name becomes a field of
one :class:`~credrank.core.schema.Table` (:attr:`Parameters.table`, the stage's ``SPEC``) with
its constraint and **the default of the signature** (none: required). A declared name the
signature lacks is a ``TypeError`` when the class is defined. Names not declared (``name``,
a selector's ``top_k``, an index store) are the constructor's only: no spec gives them.
``together`` (``fn(params) -> None``, raising ``ValueError("z_full: expected …")``) checks
what one field cannot (``z_full > z``).

**Checked once.** A direct call (``FreshnessDecay("30d")``) checks the declared arguments
through that table — the messages a spec gives, ``half_life: expected …`` — and runs the body
with the cleaned values (``"30d"`` → ``30.0``). A stage built from a spec, whose parameters
:meth:`credrank.pipeline.spec.PipelineSpec.from_dict` already checked, is built by
:func:`construct`, which runs the body (``__init__.__wrapped__``) without checking again.
Either way the instance keeps the declared values it was built with (:func:`given`): what
:meth:`credrank.core.pipeline.Stage.config` echoes, under the input's names and in its units.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from credrank.core.schema import Field, Spec, Table, join

Init = TypeVar("Init", bound=Callable[..., None])
T = TypeVar("T")

#: the instance attribute holding the declared parameters a stage was built with
GIVEN = "_params"
#: the attribute of a decorated ``__init__`` holding its :class:`Parameters`
DECLARED = "__parameters__"


@dataclass(frozen=True)
class Parameters:
    """The declared parameters of one constructor: :attr:`table` (constraints and the
    signature's defaults) and the optional cross-field check :attr:`together`."""

    table: Table
    together: Callable[[dict[str, Any]], None] | None
    signature: inspect.Signature

    @property
    def names(self) -> tuple[str, ...]:
        """The declared names, in the signature's order."""
        return tuple(self.table.fields)

    def check(self, values: Mapping[str, Any], where: str = "", *,
              error: type[Exception] = ValueError, at: str = "") -> dict[str, Any]:
        """``values`` cleaned, defaults filled in, or ``error`` naming the parameter
        (``{at}.floor: expected …, got …``); the one check of a stage's parameters."""
        clean: dict[str, Any] = self.table.check(dict(values), where, error=error, at=at)
        if self.together is not None:
            try:
                self.together(clean)
            except ValueError as exc:
                text = str(exc)
                key, _, detail = text.partition(": ")
                path = join(at, key) if key in clean and detail else at
                detail = detail if key in clean and detail else text
                prefix = ": ".join(p for p in (where, path) if p)
                out = error(f"{prefix}: {detail}" if prefix else detail)
                try:
                    out.key_path, out.detail = path, detail  # type: ignore[attr-defined]
                except AttributeError:  # an exception type without a __dict__
                    pass
                raise out from None
        return clean


def parameters(*, together: Callable[[dict[str, Any]], None] | None = None,
               **constraints: Spec) -> Callable[[Init], Init]:
    """Declare the constructor's parameters ``constraints`` (module docstring)."""
    def decorate(init: Init) -> Init:
        signature = inspect.signature(init)
        fields: dict[str, Field] = {}
        for name, param in signature.parameters.items():
            if name not in constraints:
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"{init.__qualname__}: parameter {name!r} cannot be declared "
                                "(*args / **kwargs)")
            spec = constraints[name]
            if param.default is param.empty:
                fields[name] = Field(spec)
            else:  # the signature's default, in the form the check gives (a tuple: a list)
                fields[name] = Field(spec, default=spec.check(
                    param.default, f"{init.__qualname__}: default of", error=TypeError))
        unknown = sorted(set(constraints) - set(fields))
        if unknown:
            raise TypeError(f"{init.__qualname__}: declared parameter(s) {', '.join(unknown)} "
                            "not in the signature")
        declared = Parameters(Table(fields, what="the parameters of a stage"), together,
                              signature)

        @functools.wraps(init)
        def checked(self: Any, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(self, *args, **kwargs)
            given = {k: bound.arguments[k] for k in declared.names if k in bound.arguments}
            clean = declared.check(given)
            bound.arguments.update(clean)
            setattr(self, GIVEN, clean)
            init(*bound.args, **bound.kwargs)

        setattr(checked, DECLARED, declared)
        return checked  # type: ignore[return-value]
    return decorate


def declared(cls: type) -> Parameters | None:
    """The :class:`Parameters` of ``cls``'s constructor (``None``: it declares none)."""
    return getattr(cls.__init__, DECLARED, None)  # type: ignore[misc]


def construct(cls: type[T], params: Mapping[str, Any], /, **resolved: Any) -> T:
    """An instance of ``cls`` from ``params`` **already checked** against its declared
    parameters (a spec's), without checking them again: the constructor's body
    (``__init__.__wrapped__``) runs with ``params`` and ``resolved`` — what a spec value stands
    for (a file read, ``ctx``'s store) and constructor-only arguments (``name``) — while the
    instance keeps ``params`` as given (its echo)."""
    found = declared(cls)
    if found is None:
        raise TypeError(f"{cls.__qualname__} declares no parameters (@parameters)")
    obj = cls.__new__(cls)
    setattr(obj, GIVEN, {k: params[k] for k in found.names if k in params})
    body(cls)(obj, **{**params, **resolved})
    return obj


def body(cls: type) -> Callable[..., None]:
    """The body of ``cls``'s decorated constructor, which checks nothing: for a constructor
    that hands values it already checked to its base class's (``AnswerAgreement``)."""
    init: Any = cls.__init__  # type: ignore[misc]
    if getattr(init, DECLARED, None) is None:
        raise TypeError(f"{cls.__qualname__} declares no parameters (@parameters)")
    out: Callable[..., None] = init.__wrapped__
    return out


def given(obj: object) -> dict[str, Any]:
    """The declared parameters ``obj`` was built with (empty for an object without)."""
    return dict(getattr(obj, GIVEN, {}))


__all__ = ["Parameters", "body", "construct", "declared", "given", "parameters"]
