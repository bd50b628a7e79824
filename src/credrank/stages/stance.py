"""``StanceAgreement``: the catalog stage ``stance``, answer agreement of claim-style queries
read with a fitted stance model (chapter 35.3), and :func:`stance_stage`, which builds it from
a stance model file.

The formula is :class:`~credrank.signals.agreement.AnswerAgreement`'s; the training pairs, the
model file and the fit are :mod:`credrank.signals.stance`. A model reads pages with the
embedder it was fitted with: :func:`stance_stage` refuses another one, naming both."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.embedder import Embedder
from credrank.core.params import body, construct, parameters
from credrank.core.pipeline import BuildContext, IndexNeeded, Stage
from credrank.core.schema import AnyOf, Flag, Instance, Integer, Nullable, Number, Text
from credrank.index.embed import get_embedder
from credrank.learn.modelfile import fitted_here_note
from credrank.signals.agreement import AnswerAgreement
from credrank.signals.stance import StanceModelFile, load_model
from credrank.signals.stance_model import StanceModel

#: the keyword settings :func:`stance_stage` passes on to :class:`StanceAgreement`
STAGE_SETTINGS = ("weight_factor", "floor", "sharpness", "mode", "exclude_self", "voters",
                  "name")


class StanceAgreement(AnswerAgreement):
    """:class:`~credrank.signals.agreement.AnswerAgreement` fed by a fitted stance model: the
    factor ``agreement`` (the formula of :mod:`credrank.signals.stance`, chapter 35.3) in
    ``[floor, 1]``.

    Needs the candidates' text in the meta column ``text`` (retrieve with text); a non-empty
    batch without it raises :class:`~credrank.core.candidates.StageError` naming the
    candidates. ``p_yes`` (the stance probabilities) is kept as a meta column for audit.
    """

    reads = frozenset({"text"})

    def formula_term(self) -> str:
        return "needs the Python path (it reads each candidate's text)"

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> Stage:
        """The factor ``agreement`` of the stance model file ``model`` (a registered name or
        a path), bound to the index's embedder (``ctx.embedder``: the model must have been
        fitted with it)."""
        if ctx.embedder is None:
            load_model(ctx.path(params["model"], "model", "stance model"))  # a readable file
            raise IndexNeeded("model: the stance stage needs the embedder of the index")
        model, source = _bound(ctx.path(params["model"], "model", "stance model"),
                               ctx.embedder.name, ctx.embedder,
                               getattr(ctx.store, "path", None))
        return construct(cls, params, model=model, source=source)

    @parameters(model=AnyOf((Text(what="a model file of 'credrank stance fit'"),
                             Instance(StanceModel, what="a fitted StanceModel"))),
                weight_factor=Nullable(Text()), floor=Number(0.0, 1.0), sharpness=Number(0.0),
                mode=Text(choices=("expected", "absolute")), exclude_self=Flag(),
                voters=Nullable(Integer(1)))
    def __init__(self, model: StanceModel | str, weight_factor: str | None = "prior", *,
                 floor: float = 0.1, sharpness: float = 1.0, mode: str = "expected",
                 exclude_self: bool = False, voters: int | None = None,
                 name: str = "agreement", source: Mapping[str, Any] | None = None):
        if isinstance(model, str):  # a model file, read with the embedder it was fitted with
            loaded = load_model(model)
            model, source = _bound(loaded, loaded.embedder_name, None)
        if model.model is None:
            raise ValueError("model: expected a fitted StanceModel (fit() or load_model())")
        self.model = model
        self.source = dict(source or {})
        #: what data the model file saw (``source["trained_on"]``), and whether it is the
        #: index searched; said in every ``info.agreement`` when it is
        self.trained_on: dict[str, Any] | None = self.source.get("trained_on")
        self.note = None if self.trained_on is None else fitted_here_note("stance",
                                                                          self.trained_on)
        # the values were checked above: the base class's body, not its checking constructor
        body(AnswerAgreement)(self, self._stance, weight_factor, floor=floor,
                              sharpness=sharpness, mode=mode, exclude_self=exclude_self,
                              voters=voters, name=name)

    def _stance(self, query: str, batch: Candidates) -> np.ndarray:
        texts = batch.column("text")
        missing = [str(d) for d, t in zip(batch.doc_ids, texts, strict=True)
                   if t is None or (isinstance(t, float) and math.isnan(t))]
        if missing:
            raise StageError(f"stance agreement needs the candidates' text (meta column "
                             f"'text'); {len(missing)} of {len(batch)} candidates have none "
                             f"(e.g. {missing[0]!r}): retrieve with text")
        try:
            return self.model.predict(query, [str(t) for t in texts])
        except ValueError as exc:
            raise StageError(f"stance model: {exc}") from exc

    def transform(self, batch: Candidates) -> Candidates:
        out = super().transform(batch)
        if self.note is None:
            return out
        return out.with_info(agreement={**out.info.get("agreement", {}), "note": self.note})

    def config(self) -> dict[str, Any]:
        model = self.params().get("model")
        return {**({"model": model} if isinstance(model, str) else {}), **super().config(),
                "stance_model": {**self.source, **self.model.config.to_dict()}}


def stance_stage(model_path: str | Path | StanceModelFile, embedder_name: str, *,
                 embedder: Embedder | None = None, **settings: Any) -> Stage:
    """Load the model file at ``model_path`` (or take an already loaded one), check that it
    was fitted with ``embedder_name`` (the index's embedder; ``StanceModelError`` naming both
    otherwise) and return :class:`StanceAgreement` with ``settings`` (``weight_factor``,
    ``floor``, ``sharpness``, ``mode``, ``exclude_self``, ``voters``, ``name``). ``embedder``
    (the one already loaded for the index) saves loading it a second time."""
    unknown = sorted(set(settings) - set(STAGE_SETTINGS))
    if unknown:
        raise ValueError(f"stance_stage: unknown setting(s) {', '.join(unknown)}; expected "
                         f"some of {', '.join(STAGE_SETTINGS)}")
    model, source = _bound(model_path, embedder_name, embedder)
    return StanceAgreement(model, source=source, **settings)


def _bound(model_path: str | Path | StanceModelFile, embedder_name: str,
           embedder: Embedder | None, searched: str | Path | None = None
           ) -> tuple[StanceModel, dict[str, Any]]:
    """The model of the file at ``model_path`` bound to the embedder ``embedder_name`` (which
    it must have been fitted with), and where it came from: the file, the embedder and
    ``trained_on`` (with the training hash; whether it was fitted on the index
    ``searched``)."""
    loaded = model_path if isinstance(model_path, StanceModelFile) else load_model(model_path)
    loaded.check_embedder(embedder_name)
    model = loaded.model(embedder if embedder is not None else get_embedder(embedder_name))
    source = {"path": loaded.path, "embedder": loaded.embedder_name,
              "trained_on": loaded.training_data(searched)}
    return model, source
