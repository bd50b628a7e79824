"""RA-RAG: source reliability from cross-source agreement, κ-RRSS voting (chapter 35.3).

Modules: :mod:`.answers` (ANSWERS/TRUTH files), :mod:`.equivalence` (the ``~`` rule),
:mod:`.estimate` (IWMV estimator), :mod:`.vote` (weighted vote), :mod:`.rrss` (κ-RRSS and
its budget arithmetic; library-only, docs/library.md), :mod:`.dependence` (copies and
Sybils), :mod:`.parallel` (the dependence test on Dask workers), :mod:`.prior` (estimates as
a shrunk per-source prior). The command is :mod:`credrank.cli.reliability`; the simulation and
GoldenGaze experiments are in ``credrank_bench.experiments``.
"""

from credrank.reliability.answers import AnswersFileError, AnswerTable, load_answers, load_truth
from credrank.reliability.dependence import DependenceReport, collapse, detect_dependence
from credrank.reliability.equivalence import (
    AnswerEquivalence,
    equivalence_normalize,
    is_abstention,
)
from credrank.reliability.estimate import (
    UNKNOWN,
    ReliabilityEstimator,
    agreement_rates,
    consensus_diagnostics,
    encode_answers,
)
from credrank.reliability.prior import reliability_table, shrink_reliability
from credrank.reliability.rrss import (
    KappaRRSS,
    RRSSResult,
    kappa_rrss,
    lexical_support,
    offline_answer_count,
    rrss_budget,
    token_reduction,
)
from credrank.reliability.vote import paper_weights, vote_matrix, weighted_vote

__all__ = [
    "UNKNOWN",
    "AnswerEquivalence",
    "AnswerTable",
    "AnswersFileError",
    "DependenceReport",
    "KappaRRSS",
    "RRSSResult",
    "ReliabilityEstimator",
    "agreement_rates",
    "collapse",
    "consensus_diagnostics",
    "detect_dependence",
    "encode_answers",
    "equivalence_normalize",
    "is_abstention",
    "kappa_rrss",
    "lexical_support",
    "load_answers",
    "load_truth",
    "offline_answer_count",
    "paper_weights",
    "reliability_table",
    "rrss_budget",
    "shrink_reliability",
    "token_reduction",
    "vote_matrix",
    "weighted_vote",
]
