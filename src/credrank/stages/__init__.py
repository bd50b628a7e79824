"""The factor stages of the catalog: one module per stage that adds a prior or a signal.

Each module holds a :class:`~credrank.core.pipeline.Stage` subclass — its parameters
(``SPEC``), how it is built from them (``from_spec``), what it reads of each candidate and its
formula term when the engine can score it — and the small helpers only that stage uses. The
kernels it calls stay in their packages (pure functions, tables, stores, models:
:mod:`credrank.signals`, :mod:`credrank.reliability`, :mod:`credrank.credibility`,
:mod:`credrank.freshness`, :mod:`credrank.consensus`, :mod:`credrank.defences`,
:mod:`credrank.machine_text`); the selectors are :mod:`credrank.select`, the score
:mod:`credrank.combine`.

* :mod:`~credrank.stages.prior` — ``SourcePrior`` (``prior``);
* :mod:`~credrank.stages.feedback_prior` — ``FeedbackPrior`` (``feedback_prior``);
* :mod:`~credrank.stages.reliability_prior` — ``ShrunkReliabilityPrior``
  (``reliability_prior``) and ``ReliabilityPrior``;
* :mod:`~credrank.stages.smoothing` — ``NeighbourSmoothing`` (``smoothing``);
* :mod:`~credrank.stages.credibility` — ``LearnedCredibilityPrior`` (``credibility``);
* :mod:`~credrank.stages.planted` — ``PlantedEvidence`` (``planted``);
* :mod:`~credrank.stages.machine_text` — ``MachineTextFactor`` (``machine_text``);
* :mod:`~credrank.stages.freshness` — ``FreshnessDecay`` (``freshness``) and
  ``InheritedDates``;
* :mod:`~credrank.stages.stance` — ``StanceAgreement`` (``stance``) and ``stance_stage``;
* :mod:`~credrank.stages.consensus` — ``AnswerConsensus`` (``consensus``).

Nothing is imported here: the catalog (:mod:`credrank.pipeline.catalog`) imports a stage's
module when a pipeline names it, so a search imports only the stages it runs. A layer below
:mod:`credrank.pipeline` and above the kernel packages (``.importlinter``).
"""
