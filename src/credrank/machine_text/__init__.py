"""Machine-written text: Fast-DetectGPT's analytic criterion with SmolLM2-135M (issue 25).

* :mod:`~credrank.machine_text.statistic` — the criterion ``d`` (formula, source), a numpy
  reference and the batched torch form;
* :mod:`~credrank.machine_text.scorer` — :class:`FastDetectScorer`, ``d`` of passages on CPU
  with the ``lm`` extra (token budget, length-sorted batches);
* :mod:`~credrank.machine_text.factor` — the fixed, label-free transform of ``d`` into a
  floored factor;

The catalog stage ``machine_text`` (:mod:`credrank.stages.machine_text`) reads ``d`` from the
payload where ``credrank score machine-text`` (or ``credrank index … --score machine-text``)
stored it (:mod:`credrank.index.scoring`).

Nothing here imports torch or transformers until a passage is scored.
"""

from credrank.machine_text.factor import machine_likeness, machine_text_factor
from credrank.machine_text.scorer import FastDetectScorer
from credrank.machine_text.statistic import criterion_from_terms, criterion_numpy

__all__ = ["FastDetectScorer", "criterion_from_terms", "criterion_numpy", "machine_likeness",
           "machine_text_factor"]
