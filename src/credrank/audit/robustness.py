"""The audit's robustness entry: one cell of the contamination stress test (chapter 35.2).

``[dimensions.robustness]`` with ``measure = "stress"`` runs the contamination stress bench
(``credrank bench stress-<source>``, ``credrank_bench.experiments.stress.bench_stress``) with one
position and one count, with the audited pipeline of ``[system]`` added to its table as the
row :data:`AUDITED_ROW`, and reads that row's one measure.

**What it measures.** The audited pipeline's stages after retrieval (prior, signals, combine,
selector: ``System.of_spec``, as the bench builds its own spec rows) reranking the bench's
pools: per question its ``fetch_k`` nearest clean passages of the bench's data (the ``path``
file, *not* the audited index) with the contaminants injected, cut at the bench's ``top_k``
and read by the offline extractive reader. What of the pipeline the bench cannot represent,
:func:`audited_measured_on` says in the profile entry's ``measured_on`` (also the radar's
note and ``details.measured_on``; ``details.audited_pipeline: true``): the pipeline's own
``top_k`` / ``fetch_k`` (the bench's pools and cut are used), a ``retrieval`` other than
dense and ``pushdown`` (the pools are fetched already), and the metadata the stress passages
lack (no URL, date or source: a source-type prior sees every passage as source type
``unknown``, one λ for all, as for the bench's own prior rows; freshness sees every passage
undated). A pipeline whose stage cannot be built without the index (a store it reads) is not
measured, with the reason.

``system = "<row>"`` reads one of the bench's own rows instead (``"similarity only"``, a
consensus row, the learned credibility …): then the value is *not* a property of the audited
pipeline, the same whatever ``[system]`` and ``--index`` are, and :func:`bench_measured_on`
says so (``details.audited_pipeline: false``).

**Cost.** The bench embeds every passage and question of the data file (CrAM NQ: 5,000
passages and 1,000 questions), whatever ``limit`` (it bounds the questions evaluated). The
audit asks for one row: the runner builds and runs that row and the baseline (``similarity
only``, which every Δ is paired with) only, so the learned credibility model is fitted only
when ``system`` names one of its rows. The stress data is embedded by the audited
index's embedder unless ``embedder`` names another (the pipeline audited is the one that
runs over that model; a hashing index's audit ran the MiniLM stress test, minutes, by
default). The bench is the bench distribution's (credrank-bench):
``credrank audit`` finds its runner through the entry point ``stress`` of the group
``credrank.audit.robustness``, called as ``runner(options, pipeline=spec, on_progress=…)``;
without it, robustness is not measured and the report says how to install it. Keys
(defaults):

* ``source`` (``"cram"``): ``cram``, ``newspolluted`` or ``poisonedrag``; ``path`` (required)
  the data file, relative to the audit config; ``corpus`` the clean CrAM corpus
  (``poisonedrag`` only);
* ``position`` (``"first"``; ``"natural"`` for poisonedrag; one of ``first``, ``middle``,
  ``last``, ``natural``) and ``count`` (``1``; at most :data:`MAX_COUNT`): where and how many
  contaminants are injected into each question's clean pool;
* ``system`` (absent: the audited pipeline's row): one of the stress bench's own rows to read
  instead (above);
* ``metric`` (``"misled-contaminated"``): the share of questions whose answer (offline
  extractive reader) contains the contaminant's wrong answer after injection; any measure of
  the stress table works (``adversarial-hit@5``, ``flip-correct-to-incorrect`` …); its
  direction comes from the bench;
* ``limit`` (all): evaluate the first ``limit`` questions; ``embedder`` (the audited index's).

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
from credrank.pipeline.spec import PipelineSpec

#: the stress bench's sources and positions (``credrank_bench.experiments.stress.SOURCES`` /
#: ``POSITIONS``, not imported here: the product never imports the benches; a test keeps them
#: equal)
SOURCES = ("cram", "newspolluted", "poisonedrag")
POSITIONS = ("first", "middle", "last", "natural")
#: the stress table's measures (``credrank_bench.experiments.stress``'s families; a test keeps
#: them equal): a ``metric`` outside them is refused when the config is read, not after the run
METRICS = ("adversarial-hit@k", "correct-clean", "correct-contaminated",
           "flip-correct-to-incorrect", "flip-incorrect-to-correct", "misled-contaminated")


def check_metric(metric: str) -> str:
    """``metric`` if it names a measure of the stress table (:data:`METRICS`; ``@k`` any
    integer depth), else ``ValueError`` listing them."""
    import re

    family = re.sub(r"@\d+$", "@k", metric)
    if family not in METRICS or (family.endswith("@k") and metric == family):
        raise ValueError(f"expected a measure of the stress table ({', '.join(METRICS)}; "
                         f"@k with a number, e.g. adversarial-hit@5), got {metric!r}")
    return metric


#: the stress table's row of the audited pipeline (the row read unless ``system`` names another)
AUDITED_ROW = "audited pipeline"
#: the stages every spec holds (written out when absent): no caveat names them
_IMPLIED = ("combine", "topk")
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


def audited_measured_on(spec: PipelineSpec, source: str, data: str, top_k: int,
                        fetch_k: int) -> str:
    """What the audited pipeline's stress row measured (module docstring): its stages over
    the stress bench's pools of ``fetch_k`` passages of its ``source`` data (``data``, as the
    report names the file), cut at the bench's ``top_k``, and each part of ``spec`` the bench
    cannot represent."""
    stages = [s.name for s in spec.stages if s.name not in _IMPLIED]
    said = [f"the audited pipeline's stages ({' → '.join(s.name for s in spec.stages)}) as "
            f"the stress bench's row {AUDITED_ROW!r}, reranking its {source} data ({data}), "
            f"not the index: per question the {fetch_k} nearest clean passages plus the "
            f"contaminant(s), top {top_k} read by the offline extractive reader"]
    if (spec.top_k, spec.resolved_fetch_k) != (top_k, fetch_k):
        said.append(f"the pipeline's top_k={spec.top_k} and fetch_k={spec.resolved_fetch_k} "
                    "are not used (the bench's pool and cut are)")
    if spec.retrieval != "dense":
        said.append(f"its retrieval {spec.retrieval!r} is not represented (the bench's pools "
                    "are dense: exact cosine)")
    if spec.pushdown:
        said.append("its pushdown is not represented (the pools are fetched already)")
    if stages:
        said.append("the stress passages carry text only (no URL, date or source): a stage "
                    "that reads those sees them missing (a source-type prior: every passage "
                    "source type 'unknown', one λ for all; freshness: every passage undated)")
    return "; ".join(said)


def bench_measured_on(system: str, source: str, data: str) -> str:
    """What a row of the stress bench's own (``system = …``) measured: not the audited
    pipeline (module docstring)."""
    return (f"the stress bench's own system {system!r} on its {source} data ({data}), NOT the "
            "audited pipeline: other passages than the index's, ranked by the bench's row, "
            "not by [system]")
