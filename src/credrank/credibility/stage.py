"""The pipeline stage of the learned page-credibility prior.

:class:`LearnedCredibilityPrior` adds the factor ``λ = floor + (1 − floor) · p`` with
``p = P(credible)`` of each candidate (from its ``text`` and ``url`` meta columns), so
``λ ∈ [floor, 1]``: a page the model is sure is not credible is demoted by at most ``floor``
(default 0.3), never removed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from credrank.core.candidates import Candidates, StageError
from credrank.core.pipeline import BuildContext, Stage
from credrank.core.schema import Field, Nullable, Number, Table, Text
from credrank.core.validation import check_probability
from credrank.credibility.model import CredibilityModel


class CredibilityFn(Protocol):
    """Any ``(texts, urls) -> P(credible)`` callable, one probability per page."""

    def __call__(self, texts: Sequence[str], urls: Sequence[str | None]) -> np.ndarray: ...


class LearnedCredibilityPrior(Stage):
    """Adds the factor ``name`` (default ``prior``) ``λ = floor + (1 − floor) · p``, with
    ``p = P(credible)`` of each candidate from its meta columns ``text`` and ``url``.

    Args:
        model_or_callable: a fitted :class:`CredibilityModel`, or any callable
            ``(texts, urls) -> p`` returning one probability in ``[0, 1]`` per page.
        name: the factor name; ``prior`` lets :class:`AnswerAgreement` use ``λ`` as the
            credibility of its vote weight ``w = λ · sim``.
        floor: the smallest factor, in ``[0, 1]`` (``λ ∈ [floor, 1]``).

    A candidate without text raises :class:`~credrank.core.candidates.StageError` (the model needs
    it); a missing URL is allowed (its URL features are zero, ``no_url = 1``). ``p`` goes to
    the meta column ``p_credible`` and a summary to ``info["credibility_prior"]``.
    """

    reads = frozenset({"text"})
    SPEC = Table({
        "model": Field(Text(what="a model file of `credrank credibility fit`")),
        "floor": Field(Nullable(Number(0.0, 1.0)), default=None),
    })

    def formula_term(self) -> str:
        return "needs the Python path (it reads each candidate's text)"

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> LearnedCredibilityPrior:
        """The factor ``credibility`` of the model file ``model`` (a registered name or a
        path), with ``floor`` (``null``: the model file's). A model fitted on another
        embedder than the index's is refused (``ctx.store``)."""
        from credrank.credibility.modelfile import load_model  # the model file's reader

        saved = load_model(ctx.path(params["model"], "model", "credibility model"))
        if ctx.store is not None:
            saved.check_store(ctx.store)
        floor = saved.floor if params["floor"] is None else params["floor"]
        return cls(saved, name="credibility", floor=floor)

    def __init__(self, model_or_callable: CredibilityModel | CredibilityFn | Callable[..., Any],
                 name: str = "prior", floor: float = 0.3):
        if not callable(model_or_callable):
            raise ValueError("model_or_callable: expected a CredibilityModel or a callable "
                             f"(texts, urls) -> p; got {type(model_or_callable).__name__}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        self.model = model_or_callable
        self.name = name
        self.floor = check_probability("floor", floor)

    def transform(self, batch: Candidates) -> Candidates:
        if len(batch) == 0:
            out = batch.with_factor(self.name, np.zeros(0), low=0.0, high=1.0)
            return out.with_info(credibility_prior={"floor": self.floor, "n": 0})
        texts = batch.column("text")
        missing = [str(d) for d, t in zip(batch.doc_ids, texts, strict=True)
                   if not isinstance(t, str)]
        if missing:
            raise StageError(f"LearnedCredibilityPrior needs document text; {len(missing)} "
                             f"candidates have none (e.g. {missing[0]!r}): fill the meta "
                             "column 'text' (retrieve with with_text=True)")
        urls = [None if u is None else str(u) for u in batch.column("url")]
        p = np.asarray(self.model([str(t) for t in texts], urls),
                       dtype=np.float64).reshape(-1)
        if len(p) != len(batch):
            raise StageError(f"credibility model returned {len(p)} probabilities; expected "
                             f"{len(batch)} (one per candidate)")
        if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
            raise StageError("credibility model: expected finite probabilities in [0, 1]; got "
                             f"range [{np.nanmin(p):.6g}, {np.nanmax(p):.6g}]")
        lam = np.clip(self.floor + (1.0 - self.floor) * p, self.floor, 1.0)
        out = batch.with_factor(self.name, lam, low=0.0, high=1.0).with_meta(
            "p_credible", list(p))
        return out.with_info(credibility_prior={"floor": self.floor, "n": len(p),
                                                "mean_p": float(p.mean())})

    def config(self) -> dict[str, Any]:
        """The floor and, for a fitted model, its configuration (a model file: its summary)."""
        cfg: dict[str, Any] = {"floor": self.floor}
        summary = getattr(self.model, "summary", None)
        if callable(summary):
            cfg.update(summary())
        elif isinstance(self.model, CredibilityModel):
            cfg["model"] = self.model.config.to_dict()
            cfg["excluded_topics"] = list(self.model.excluded)
        return cfg
