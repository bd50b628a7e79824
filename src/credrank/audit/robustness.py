"""The audit's robustness entry: one cell of the contamination stress test (chapter 35.2).

``[dimensions.robustness]`` with ``measure = "stress"`` runs the contamination stress bench
(``credrank bench stress-<source>``, ``credrank_bench.experiments.stress.bench_stress``) with one
position and one count and reads one system's one measure from its table. The bench is the
bench distribution's (credrank-bench): ``credrank audit`` finds its runner through the entry
point ``stress`` of the group ``credrank.audit.robustness``; without it, robustness is not
measured and the report says how to install it. Keys (defaults):

* ``source`` (``"cram"``): ``cram``, ``newspolluted`` or ``poisonedrag``; ``path`` (required)
  the data file, relative to the audit config; ``corpus`` the clean CrAM corpus
  (``poisonedrag`` only);
* ``position`` (``"first"``; ``"natural"`` for poisonedrag; one of ``first``, ``middle``,
  ``last``, ``natural``) and ``count`` (``1``; at most :data:`MAX_COUNT`): where and how many
  contaminants are injected into each question's clean pool;
* ``system`` (``"similarity only"``): the stress bench's row that stands for the audited
  pipeline. Stress-test passages carry no URL, so source-type priors are neutral on them and
  the demo pipeline behaves as similarity only there — the entry's metric text says which row
  was read;
* ``metric`` (``"misled-contaminated"``): the share of questions whose answer (offline
  extractive reader) contains the contaminant's wrong answer after injection; any measure of
  the stress table works (``adversarial-hit@5``, ``flip-correct-to-incorrect`` …); its
  direction comes from the bench;
* ``limit`` (all): evaluate the first ``limit`` questions; ``embedder`` (``"minilm"``).

The keys and their types are declared once, :data:`ROBUSTNESS_OPTIONS` (the audit config's
schema uses them, so a wrong key or type is refused when the config is read). Missing data
raises ``FileNotFoundError``; the audit then records robustness as not measured with that
reason.
"""

from __future__ import annotations

from credrank.audit.profile import NOT_MEASURED
from credrank.core.schema import Field, Integer, Table, Text
from credrank.index.embed import EMBEDDERS

#: the stress bench's sources and positions (``credrank_bench.experiments.stress.SOURCES`` /
#: ``POSITIONS``, not imported here: the product never imports the benches; a test keeps them
#: equal)
SOURCES = ("cram", "newspolluted", "poisonedrag")
POSITIONS = ("first", "middle", "last", "natural")
#: the most contaminants injected per question an audit asks for
MAX_COUNT = 100

#: the options of ``[dimensions.robustness]`` with ``measure = "stress"`` (module docstring)
ROBUSTNESS_OPTIONS: dict[str, Field] = {
    "source": Field(Text(choices=SOURCES), required=False),
    "path": Field(Text(), required=False),
    "corpus": Field(Text(), required=False),
    "position": Field(Text(choices=POSITIONS), required=False),
    "count": Field(Integer(1, MAX_COUNT), required=False),
    "system": Field(Text(), required=False),
    "metric": Field(Text(), required=False),
    "limit": Field(Integer(1), required=False),
    "embedder": Field(Text(choices=EMBEDDERS), required=False),
}
#: the whole ``[dimensions.robustness]`` table
ROBUSTNESS_SCHEMA = Table({
    "measure": Field(Text(choices=("stress", NOT_MEASURED))),
    "reason": Field(Text(), required=False),
    **ROBUSTNESS_OPTIONS,
}, what="a [dimensions.robustness] table")
