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

from credrank.datasets.base import (
    DEFAULT_PATHS,
    LEAKED_LABEL,
    DatasetError,
    EvalSet,
    contains_answer,
    parse_day,
    squad_normalize,
    strip_leaked_label,
)
from credrank.datasets.coaid import read_coaid
from credrank.datasets.cram_nq import read_cram_nq
from credrank.datasets.demo import demo_dir, read_adversarial, read_demo
from credrank.datasets.evotemp import read_evotemp
from credrank.datasets.newspolluted import read_newspolluted
from credrank.datasets.poisonedrag import poisoned_corpus, read_poisonedrag
from credrank.datasets.ramdocs import read_ramdocs
from credrank.datasets.realtimeqa import read_realtimeqa
from credrank.datasets.registry import DATASETS, load_dataset
from credrank.datasets.trec2019_hm import read_trec2019_hm

__all__ = [
    "DATASETS",
    "DEFAULT_PATHS",
    "LEAKED_LABEL",
    "DatasetError",
    "EvalSet",
    "contains_answer",
    "demo_dir",
    "load_dataset",
    "parse_day",
    "poisoned_corpus",
    "read_adversarial",
    "read_coaid",
    "read_cram_nq",
    "read_demo",
    "read_evotemp",
    "read_newspolluted",
    "read_poisonedrag",
    "read_ramdocs",
    "read_realtimeqa",
    "read_trec2019_hm",
    "squad_normalize",
    "strip_leaked_label",
]
