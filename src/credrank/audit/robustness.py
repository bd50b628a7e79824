"""The audit's robustness entry: one cell of the contamination stress test (chapter 35.2).

``[dimensions.robustness]`` with ``measure = "stress"`` runs the contamination stress bench
(``credrank bench stress-<source>``, ``credrank_bench.experiments.stress.bench_stress``) with one
position and one count and reads one system's one measure from its table.

**What it measures.** The stress bench's own system (``system``, a row of its table) on the
bench's own data (the ``path`` file: its passages, not the audited index's), *not* the
audited pipeline of ``[system]``: the same value whatever ``[system]`` and ``--index`` are. The
audit says so wherever the value appears: the profile entry's ``measured_on``, the radar's
axis label and a note under it, and ``details.audited_pipeline: false`` in
``measurements.json``. Read it as "how the bench's similarity-only ranking fares under
contamination on that data", a reference point, not a property of the audited deployment.

**Cost.** The bench embeds every passage and question of the data file (CrAM NQ: 5,000
passages and 1,000 questions) and fits and runs every system of its table, whatever
``limit``: ``limit`` bounds the questions evaluated, not the embedding. On 2 CPU cores with
MiniLM an audit with robustness took about 9 minutes with ``limit = 20`` (2–3 s without it);
``embedder = "hashing"`` is fast but is not the MiniLM the row stands for. The bench is the
bench distribution's (credrank-bench): ``credrank audit`` finds its runner through the entry
point ``stress`` of the group ``credrank.audit.robustness``; without it, robustness is not
measured and the report says how to install it. Keys (defaults):

* ``source`` (``"cram"``): ``cram``, ``newspolluted`` or ``poisonedrag``; ``path`` (required)
  the data file, relative to the audit config; ``corpus`` the clean CrAM corpus
  (``poisonedrag`` only);
* ``position`` (``"first"``; ``"natural"`` for poisonedrag; one of ``first``, ``middle``,
  ``last``, ``natural``) and ``count`` (``1``; at most :data:`MAX_COUNT`): where and how many
  contaminants are injected into each question's clean pool;
* ``system`` (``"similarity only"``): the stress bench's row that is read. It is the
  bench's system, not the audited pipeline (above); stress-test passages carry no URL, so a
  priors-only pipeline would rank them as similarity only does, but any other stage
  (freshness, credibility, stance, a selector) is not represented;
* ``metric`` (``"misled-contaminated"``): the share of questions whose answer (offline
  extractive reader) contains the contaminant's wrong answer after injection; any measure of
  the stress table works (``adversarial-hit@5``, ``flip-correct-to-incorrect`` …); its
  direction comes from the bench;
* ``limit`` (all): evaluate the first ``limit`` questions; ``embedder`` (``"minilm"``).

The keys and their types are declared once, :data:`ROBUSTNESS_OPTIONS` (the audit config's
schema uses them, so a wrong key or type is refused when the config is read), and ``path``
must name an existing file before anything is measured
(:func:`credrank.audit.run.check_data`: a misspelt path is an error, as a misspelt qrels
path; without the data, write ``measure = "not measured"`` with a reason).
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
