"""Readers for the real evaluation sets in ``../shared/data`` (see its ``SOURCES.md``).

Each reader takes a path (so other splits of the same format can be read) and returns an
:class:`EvalSet`. Rules every reader follows:

* no record is dropped silently: skipped records and documents are counted by reason in
  ``EvalSet.notes``; a file that cannot be parsed at all raises :class:`DatasetError`;
* document ids are unique across the set (pooled sets prefix them with the qid:
  ``"<qid>/d<position>"``; the id the file used is kept in ``doc_labels``);
* labels (credibility, fake/real, stance, answers) go to ``doc_labels`` / ``query_labels``,
  never into the :class:`~credrank.documents.schema.Document`; no reader sets ``source_type``
  (provenance derives it from the URL later), and only ``trec2019-hm`` and ``coaid`` carry
  URLs at all;
* an unknown date stays ``None`` (never "now").
"""

from credrank_bench.datasets.base import (
    DEFAULT_PATHS,
    LEAKED_LABEL,
    DatasetError,
    EvalSet,
    contains_answer,
    parse_day,
    strip_leaked_label,
)
from credrank_bench.datasets.coaid import read_coaid
from credrank_bench.datasets.cram_nq import read_cram_nq
from credrank_bench.datasets.demo import read_demo
from credrank_bench.datasets.evotemp import read_evotemp
from credrank_bench.datasets.newspolluted import read_newspolluted
from credrank_bench.datasets.poisonedrag import poisoned_corpus, read_poisonedrag
from credrank_bench.datasets.ramdocs import read_ramdocs
from credrank_bench.datasets.realtimeqa import read_realtimeqa
from credrank_bench.datasets.registry import DATASETS, load_dataset
from credrank_bench.datasets.trec2019_hm import read_trec2019_hm

__all__ = [
    "DATASETS",
    "DEFAULT_PATHS",
    "LEAKED_LABEL",
    "DatasetError",
    "EvalSet",
    "contains_answer",
    "load_dataset",
    "parse_day",
    "poisoned_corpus",
    "read_coaid",
    "read_cram_nq",
    "read_demo",
    "read_evotemp",
    "read_newspolluted",
    "read_poisonedrag",
    "read_ramdocs",
    "read_realtimeqa",
    "read_trec2019_hm",
    "strip_leaked_label",
]
