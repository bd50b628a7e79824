"""``SourcePrior``: the catalog stage ``prior``, the factor ``prior`` = λ(s_d) of each
candidate's source type (seed 004).

The tables it reads (the presets, prior files, :class:`~credrank.signals.prior.PriorTable`)
are :mod:`credrank.signals.prior`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.params import construct, parameters
from credrank.core.pipeline import BuildContext, FormulaTerm, Stage
from credrank.core.schema import AnyOf, Flag, Instance, Number, Text
from credrank.core.validation import check_str, is_number
from credrank.signals.prior import PRESET_DISPERSION, PriorTable, load_priors


class SourcePrior(Stage):
    """Adds the factor ``prior`` = λ(s_d) from each candidate's ``source_type`` (seed 004).

    With ``use_domain_scores=True`` a document whose host matched a ``domain,score`` user table
    at index time (meta column ``domain_score``) gets that score, clipped to [floor, 1], instead
    of its type prior.
    """

    @parameters(priors=AnyOf((Text(what="a preset (compressed, current, aggressive) or a prior "
                                        "file"),
                              Instance((PriorTable, Path), what="a PriorTable"))),
                use_domain_scores=Flag(), floor=Number(0.0, 1.0))
    def __init__(self, priors: PriorTable | str | Path = "current", *,
                 use_domain_scores: bool = False, floor: float = 0.01, name: str = "prior"):
        self.priors = priors if isinstance(priors, PriorTable) else load_priors(priors)
        self.use_domain_scores, self.floor = use_domain_scores, floor
        self.name = check_str("name", name)

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> SourcePrior:
        """``priors`` is a preset name, else a prior file (a registered name or a path)."""
        priors = params["priors"]
        if priors not in PRESET_DISPERSION:
            priors = ctx.prior_file(priors, "priors")
        return construct(cls, params, priors=priors)

    def formula_term(self) -> FormulaTerm | str:
        """The engine scores the type prior (``λ_t × [source_type = t]``), not the per-host
        domain scores."""
        if self.use_domain_scores:
            return "with use_domain_scores needs the Python path (per-host domain scores)"
        return FormulaTerm("prior", self)

    def transform(self, batch: Candidates) -> Candidates:
        values = self.priors.lookup(batch.column("source_type"))
        if self.use_domain_scores:
            scores = batch.column("domain_score")
            has = np.array([is_number(s) for s in scores], dtype=bool)
            if has.any():
                values[has] = np.clip(np.array([float(s) for s in scores[has]]), self.floor, 1.0)
        return batch.with_factor(self.name, values, low=0.0, high=1.0)

    def config(self) -> dict[str, Any]:
        """The parameters as given (a table given in code: its name) and the resolved
        ``table``."""
        given = super().config()
        if not isinstance(self.params().get("priors"), str):
            given["priors"] = self.priors.name
        return {**given, "table": self.priors.as_dict()}
