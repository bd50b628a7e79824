"""``credrank audit --index DIR --config AUDIT.toml --out DIR``: measure, fill, gate, draw, report.

The audit config (TOML) names the audited system, its queries and labels, how each of the six
dimensions is measured (or why it is not), and the hard gates::

    name = "demo pipeline, current priors"
    description = "…"                        # optional

    [system]                                 # the audited pipeline: shortcuts of its
    priors = "current"                       #   common stages, as `credrank search --priors`
    top_k = 5
    fetch_k = 15                             # optional (default 3 × top_k)
    select = "exposure"                      # optional: a selector (mmr, coverage, exposure,
    select_params = {}                       #   fair) and its parameters, as --select

    # … or the pipeline itself, a spec (credrank.pipeline.spec): a spec file relative to this
    # file (JSON, TOML or YAML; a `credrank search --json` output replays its run) …
    [system]
    pipeline = "deployment.json"

    # … or inline
    [system.pipeline]
    top_k = 5
    fetch_k = 15
    stages = [{stage = "prior", priors = "current"},
              {stage = "freshness", half_life = "365d", now = "2026-01-01"}]

    [queries]                                # paths relative to this file; "demo:NAME" is the
    path = "demo:queries.jsonl"              # packaged demo corpus' file NAME
    qrels = "demo:qrels.tsv"                 # optional (fairness needs it)
    harmful = "demo:adversarial.tsv"         # optional (factuality needs it): doc_id<TAB>query_id

    [dimensions.robustness]
    measure = "stress"                       # see MEASURES; or "not measured" with a reason
    source = "cram"                          # stress-test options (credrank bench stress)
    path = "../shared/data/cram/cram_nq_1000_reconstructed.jsonl"
    limit = 200

    [dimensions.privacy]
    measure = "pii"
    …

    [[gate]]                                 # as in a trust profile (credrank.audit.profile)
    name = "no-pii"
    dimension = "privacy"
    op = "=="
    threshold = 0
    reason = "a disqualifying exposure cannot be averaged away"

``[system]`` is one pipeline spec either way: the shortcut keys are translated by
:func:`credrank.pipeline.shortcuts.spec_from_options` (the shortcuts of every front door,
``top_k = 5`` by default here), and ``pipeline`` cannot be given with them (an error naming
the key), ``top_k`` and ``fetch_k`` aside: they replace the spec's. Any stage of the catalog
can be audited (freshness, credibility, stance, consensus, citation lineage …): the queries
run through
:meth:`credrank.searcher.Searcher.search` with the spec, exactly as ``credrank search
--pipeline`` runs it. A file a stage names (a prior file, a model) is looked for relative to
the audit config first, then as given. The outputs record the spec that ran: ``"pipeline"`` in
``measurements.json``, and ``pipeline=…`` (its JSON) in every profile entry's ``settings``.

Measures (:data:`MEASURES`; definitions in :mod:`credrank.audit.measures`): ``pii`` (privacy),
``exposure`` (fairness), ``explanations`` (transparency), ``traceability``
(accountability), ``harmful`` (factuality, option ``k``: harmful@k, default and at most the
system's ``top_k``), ``stress`` (robustness: one cell of the contamination stress test of the
bench distribution (``credrank_bench.experiments.stress``, found through the entry point
group ``credrank.audit.robustness``) on the configured data, by default
``misled-contaminated`` of the audited pipeline's row: :mod:`credrank.audit.robustness`).
**Robustness runs the audited pipeline's stages on the bench's passages, not on the index**
(the bench's pools and top k; what of the spec it cannot represent, such as URLs the passages
lack, a bm25 retrieval or pushdown), and the outputs say so (the entry's ``measured_on``, the
radar's axis and note, ``details.audited_pipeline: true``); with ``system = …`` it reads one
of the bench's own rows instead, not a property of the audited pipeline
(``details.audited_pipeline: false``). A measure
that cannot be made is recorded as **not measured** with the reason — never as 0 — and a gate
on it then fails as "not measured". A data file the config names must exist (``queries``,
``qrels``, ``harmful``, the robustness ``path``): a misspelt path is an error before anything
is measured (:func:`check_data`).

**Labels that match nothing** (:mod:`credrank.audit.labels`): every row of the harm labels
(factuality) and of the qrels (fairness) is matched against the index (its document id) and
the audited queries. Rows that match nothing are reported — their count and the first rows,
``file:line``, in ``measurements.json`` (``details.labels``), in the ``--json`` document
(``labels``), in the profile entry's ``data`` and on stderr — and when **no** row matches, the
dimension is not measured with a reason naming the file, so a gate on it fails: labels of
another index version (``D020`` for ``d020``) made harmful@k 0 and the harm gate passed.

The file is read by :func:`credrank.core.structured.read_structured` and checked against the
declared :data:`CONFIG_SCHEMA` (types, ranges, unknown keys: every table above is closed; the
gates as in a trust profile), then the semantic checks (a "not measured" dimension has a
reason, a stress measure a ``path``, the ``[system]`` spec); errors are
:class:`~credrank.audit.profile.AuditInputError` naming the file and the key path
(``dimensions.factuality.k``, ``gate[1].op``, ``system.fetch_k``,
``system.pipeline.stages[1].half_life``).

Outputs in ``--out``: ``profile.toml`` and ``profile.json`` (the filled trust profile, which a
person can also edit and re-check with ``credrank audit check``), ``gates.json``,
``radar.png`` / ``radar.svg``, ``report.md`` and ``report.html`` (self-contained), and
``measurements.json`` (every value with its details), written as one set
(:func:`write_outputs`: a failed write leaves the previous run's files). The exit status is 1
when a hard gate fails.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from credrank.audit.labels import LabelCheck, LabelKind, check_labels, label_rows
from credrank.audit.measures import (
    AuditMeasureError,
    Measurement,
    explanation_coverage,
    exposure_balance,
    harmful_share,
    privacy_leaks,
    traceability,
)
from credrank.audit.profile import (
    DIMENSIONS,
    GATE_SCHEMA,
    NOT_MEASURED,
    AuditInputError,
    GateResult,
    TrustProfile,
    check_gates,
    parse_profile,
    write_profile,
)
from credrank.audit.robustness import (
    ROBUSTNESS_SCHEMA,
    audited_measured_on,
    bench_measured_on,
    check_metric,
)
from credrank.core.errors import FileFormatError
from credrank.core.files import atomic_write_text
from credrank.core.progress import OnProgress, counted
from credrank.core.schema import (
    AnyOf,
    Anything,
    Field,
    Flag,
    Integer,
    ListOf,
    MapOf,
    Number,
    Table,
    Text,
)
from credrank.core.structured import read_structured
from credrank.index.store import MAX_K
from credrank.pipeline.document import pinned
from credrank.pipeline.shortcuts import (
    AUDIT,
    check_not_with_pipeline,
    in_words,
    spec_from_options,
    with_top,
)
from credrank.pipeline.spec import PipelineSpec, SpecError, spec_file_beside

#: measure name → the dimension it measures
MEASURES: dict[str, str] = {
    "stress": "robustness",
    "pii": "privacy",
    "exposure": "fairness",
    "explanations": "transparency",
    "harmful": "factuality",
    "traceability": "accountability",
}

#: a stage parameter inside a map shortcut (``select_params``, …): a scalar or a list of
#: scalars (the stage's spec checks names and ranges)
_SCALAR = AnyOf((Flag(), Integer(), Number(), Text(allow_empty=True)))
_PARAM = AnyOf((Flag(), Integer(), Number(), Text(allow_empty=True), ListOf(_SCALAR)))
#: the TOML type of each kind of shortcut value (the spec checks the values)
_VALUE: dict[str, Any] = {
    "int": Integer(), "number": Number(), "bool": Flag(), "flag3": Flag(), "text": Text(),
    "path": Text(what="a file path relative to the config"), "map": MapOf(_PARAM),
    "items": AnyOf((Text(), MapOf(_PARAM))),
}
#: the audit's own default of a shortcut (a short audit by default)
SYSTEM_DEFAULTS = {"top_k": 5}

#: ``[system]``: the audited pipeline — the shortcut keys of the one table
#: (:data:`credrank.pipeline.shortcuts.SHORTCUTS`) or ``pipeline``, a spec table or the path
#: of a spec file
SYSTEM_SCHEMA = Table({
    **{s.name: Field(_VALUE[s.value], required=False) for s in AUDIT.shortcuts()},
    "pipeline": Field(AnyOf((
        Text(what="the path of a pipeline spec file (JSON, TOML or YAML) relative to the "
                  "config"),
        MapOf(Anything()))), required=False),
}, what="a [system] table")

#: ``[queries]``: paths relative to the config file, or ``demo:NAME``
QUERIES_SCHEMA = Table({
    "path": Field(Text()),
    "qrels": Field(Text(), required=False),
    "harmful": Field(Text(), required=False),
}, what="a [queries] table with at least path")


def _dimension_schema(dimension: str, **options: Field) -> Table:
    """``[dimensions.NAME]``: its measure (or "not measured" with a reason) and options."""
    measure = next(m for m, d in MEASURES.items() if d == dimension)
    return Table({"measure": Field(Text(choices=(measure, NOT_MEASURED))),
                  "reason": Field(Text(), required=False), **options},
                 what=f"a [dimensions.{dimension}] table")


#: ``[dimensions]``: one optional table per dimension of the trust profile
DIMENSIONS_SCHEMA = Table({
    "robustness": Field(ROBUSTNESS_SCHEMA, required=False),
    "privacy": Field(_dimension_schema("privacy"), required=False),
    "fairness": Field(_dimension_schema("fairness"), required=False),
    "transparency": Field(_dimension_schema("transparency"), required=False),
    "factuality": Field(_dimension_schema("factuality", k=Field(Integer(1, MAX_K),
                                                                required=False)),
                        required=False),
    "accountability": Field(_dimension_schema("accountability"), required=False),
}, what="a [dimensions] table of the six dimensions")

#: an audit config document (module docstring)
CONFIG_SCHEMA = Table({
    "name": Field(Text(allow_empty=True), default=""),
    "description": Field(Text(allow_empty=True), default=""),
    "system": Field(SYSTEM_SCHEMA, default={}),
    "queries": Field(QUERIES_SCHEMA),
    "dimensions": Field(DIMENSIONS_SCHEMA, default={}),
    "gate": Field(ListOf(GATE_SCHEMA), default=[]),
}, what="an audit config table (name, description, [system], [queries], [dimensions], "
        "[[gate]])")


@dataclass(frozen=True)
class AuditConfig:
    """A parsed audit config (module docstring)."""

    name: str
    description: str
    system: dict[str, Any]
    queries: Path
    qrels: Path | None
    harmful: Path | None
    dimensions: dict[str, dict[str, Any]]
    gates: list[dict[str, Any]]
    source: str = "<config>"
    base: Path = Path(".")
    #: the audited pipeline (:func:`system_spec`; ``None``: the shortcut defaults)
    spec: PipelineSpec | None = None
    #: how errors name the spec: ``system.pipeline`` (inline), ``system.pipeline FILE``, or
    #: ``""`` when it was made from the shortcut keys
    spec_from: str = ""
    #: the data files as the outputs name them (:func:`shown_as_given`): ``queries``,
    #: ``qrels``, ``harmful``, ``robustness``
    shown: dict[str, str] = field(default_factory=dict)

    @property
    def pipeline(self) -> PipelineSpec:
        """The audited pipeline (the shortcut defaults when none was parsed)."""
        return self.spec if self.spec is not None else system_spec({}, self.source,
                                                                   self.base)[0]

    def spec_error(self, exc: SpecError) -> AuditInputError:
        """A stage's build error (found when the spec is built over the index), named as
        the config gave the spec."""
        if self.spec_from:
            return AuditInputError(f"{self.source}: "
                                   f"{_spec_message(self.spec_from, exc.key_path, exc.detail)}")
        return AuditInputError(f"{self.source}: "
                               f"{in_words(exc, self.pipeline, AUDIT)}")


def shown(path: Path | str) -> str:
    """A path as reports show it: relative to the working folder and normalised
    (``docs/audit/../../x`` → ``../x``), so a committed report names no local home folder."""
    return os.path.normpath(os.path.relpath(path))


def shown_as_given(value: str, base: Path) -> str:
    """A config's path as the outputs name it: an absolute path as it is (normalised), a
    relative one or ``demo:NAME`` by :func:`shown` (``/work/shared/x`` stayed readable; it
    read ``../../../work/shared/x``)."""
    if Path(value).is_absolute():
        return os.path.normpath(value)
    return shown(_resolve(value, base))


def _resolve(value: str, base: Path) -> Path:
    if value.startswith("demo:"):
        from credrank.demo_corpus import demo_dir

        return demo_dir() / value.removeprefix("demo:")
    path = Path(value)
    return path if path.is_absolute() else base / path


def _check_semantics(doc: Mapping[str, Any], source: str) -> None:
    """What the schema cannot say: a "not measured" dimension gives a reason and a stress
    measure its data path (``[system]`` is checked by :func:`system_spec`)."""
    for name, spec in doc["dimensions"].items():
        if spec["measure"] == NOT_MEASURED and not spec.get("reason", "").strip():
            raise AuditInputError(f"{source}: dimensions.{name}.reason: expected a non-empty "
                                  "string (measure = \"not measured\" says why), got nothing "
                                  "(the key is missing)")
        if spec["measure"] == "stress" and "path" not in spec:
            raise AuditInputError(f"{source}: dimensions.{name}.path: expected the stress-test "
                                  "data file, got nothing (the key is missing)")
    names: dict[str, int] = {}  # as the filled profile checks them, but before any measuring
    for i, gate in enumerate(doc["gate"]):
        if gate["name"] in names:
            raise AuditInputError(f"{source}: gate[{i}].name: expected a unique gate name "
                                  f"(already gate[{names[gate['name']]}]), got "
                                  f"{gate['name']!r}")
        names[gate["name"]] = i


def system_spec(system: Mapping[str, Any], source: str, base: Path
                ) -> tuple[PipelineSpec, str]:
    """The pipeline of ``[system]`` and how its errors name it (module docstring): ``pipeline``
    (a spec table, or a spec file relative to ``base``) or the shortcut keys, never both.
    Errors are :class:`AuditInputError` naming ``source`` and the key path."""
    shortcuts = {k: v for k, v in system.items() if k != "pipeline"}
    if "pipeline" not in system:
        try:
            return spec_from_options(door=AUDIT, **{**SYSTEM_DEFAULTS, **shortcuts}), ""
        except ValueError as exc:
            raise AuditInputError(f"{source}: {exc}") from None
    try:
        check_not_with_pipeline(shortcuts, AUDIT, "system.pipeline", present=True)
    except ValueError as exc:
        raise AuditInputError(f"{source}: {exc}") from None
    value = system["pipeline"]
    where = "system.pipeline"
    if isinstance(value, str):
        path = _resolve(value, base)
        where = f"system.pipeline {value}"
        try:
            value = read_structured(path, what="pipeline spec")
        except FileFormatError as exc:
            raise AuditInputError(f"{source}: system.pipeline: {exc}") from None
        if isinstance(value, dict) and "pipeline" in value and "stages" not in value:
            value = value["pipeline"]  # a whole credrank search --json output
    try:
        return with_top(PipelineSpec.from_dict(value), shortcuts), where
    except SpecError as exc:
        raise AuditInputError(f"{source}: {_spec_message(where, exc.key_path, exc.detail)}"
                              ) from None


def _spec_message(where: str, key_path: str, detail: str) -> str:
    """``system.pipeline.stages[1].x: …`` (inline) or ``system.pipeline F: stages[1].x: …``."""
    if not key_path:
        return f"{where}: {detail}"
    return f"{where}{'.' if where == 'system.pipeline' else ': '}{key_path}: {detail}"


def parse_config(data: Any, source: str = "<config>", base: Path | None = None) -> AuditConfig:
    """Validate an audit config document: :data:`CONFIG_SCHEMA` (types, ranges, unknown keys;
    the gates as in a trust profile), then the semantic checks; errors name ``source`` and
    the key path."""
    base = base or Path.cwd()
    doc = CONFIG_SCHEMA.check(data, source, error=AuditInputError)
    _check_semantics(doc, source)
    spec, spec_from = system_spec(doc["system"], source, base)
    k = doc["dimensions"].get("factuality", {}).get("k")
    if k is not None and k > spec.top_k:  # harmful@k over hits never returned: diluted
        raise AuditInputError(f"{source}: dimensions.factuality.k: expected at most the "
                              f"system's top_k ({spec.top_k}), got {k} (the share of the top "
                              f"{k} of a run that returns {spec.top_k})")
    queries = doc["queries"]
    for key in ("qrels", "harmful"):  # a file the config names is there: a misspelt
        # qrels path made a dimension "not measured: data not found", exit 0
        if key in queries and not _resolve(queries[key], base).is_file():
            raise AuditInputError(f"{source}: queries.{key}: expected an existing file, got "
                                  f"{queries[key]!r} ({_resolve(queries[key], base)} is "
                                  "not one)")
    robustness = doc["dimensions"].get("robustness", {})
    if "harmful" in queries:  # its header and lines, before any measurement runs
        from credrank.demo_corpus import read_adversarial

        try:
            read_adversarial(_resolve(queries["harmful"], base))
        except ValueError as exc:
            raise AuditInputError(f"{source}: queries.harmful: {exc}") from None
    return AuditConfig(
        name=doc["name"], description=doc["description"], system=dict(doc["system"]),
        queries=_resolve(queries["path"], base),
        qrels=_resolve(queries["qrels"], base) if "qrels" in queries else None,
        harmful=_resolve(queries["harmful"], base) if "harmful" in queries else None,
        dimensions={k: dict(v) for k, v in doc["dimensions"].items()},
        gates=[dict(g) for g in doc["gate"]], source=source, base=base, spec=spec,
        spec_from=spec_from,
        shown={**{"queries" if k == "path" else k: shown_as_given(v, base)
                  for k, v in queries.items()},
               **({"robustness": shown_as_given(robustness["path"], base)}
                  if "path" in robustness else {})})


def load_config(path: Path | str) -> AuditConfig:
    """Read and validate an audit config TOML file (read by
    :func:`credrank.core.structured.read_structured`: UTF-8, bounded size, nesting and
    number length; every error an :class:`AuditInputError` naming the file)."""
    path = Path(path)
    data = read_structured(path, what="audit config", fmt="toml", error=AuditInputError)
    return parse_config(data, str(path), path.parent)


def combine_mode(spec: PipelineSpec) -> str:
    """How ``spec`` combines its factors (its ``combine`` stage's mode)."""
    stage = spec.stage("combine")
    return str(stage.params["mode"]) if stage is not None else "multiply"


@dataclass
class AuditRun:
    """What one audit produced; ``pipeline`` is the spec that ran (``spec.to_dict()``)."""

    profile: TrustProfile
    gates: list[GateResult]
    measurements: dict[str, Measurement | None]
    skipped: dict[str, str] = field(default_factory=dict)
    pipeline: dict[str, Any] | None = None
    #: dimension → how its label file's rows matched the audit (:mod:`credrank.audit.labels`)
    labels: dict[str, LabelCheck] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    @property
    def warnings(self) -> list[str]:
        """What the run could not use and says so: label rows that match nothing."""
        return [w for dim, check in self.labels.items()
                for w in check.warnings(_LABELS_NAMED[dim])]

    def labels_document(self) -> dict[str, Any]:
        """Dimension → :meth:`LabelCheck.to_dict` (the ``labels`` of the ``--json``
        document)."""
        return {dim: check.to_dict() for dim, check in self.labels.items()}


#: what each dimension's label file is called in messages
_LABELS_NAMED = {"factuality": "harm label", "fairness": "qrels"}


def _entry(m: Measurement, command: str, data: str, settings: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "dimension": m.dimension, "stages": list(m.stages), "metric": m.metric,
        "unit": m.unit, "judge": m.judge, "denominator": m.denominator, "value": m.value,
        "scale": list(m.scale), "higher_is_better": m.higher_is_better,
        "command": command, "data": data, "settings": settings,
        "reads_labels": m.reads_labels}
    if m.interval is not None:
        entry["interval"] = list(m.interval)
    if m.details.get("measured_on"):
        entry["measured_on"] = str(m.details["measured_on"])
    return entry


def measure_dimensions(config: AuditConfig, results: Mapping[str, Any], pools: Mapping[str, Any],
                       texts: Mapping[str, str], hashes: Mapping[str, str],
                       robustness: Callable[..., Measurement] | None = None,
                       on_progress: OnProgress | None = None,
                       labels: Mapping[str, LabelCheck] | None = None,
                       embedder: str | None = None
                       ) -> tuple[dict[str, Measurement | None], dict[str, str]]:
    """Run each configured measure on the audited system's ``results`` (``{qid:
    Candidates}``) and ``pools`` (the expanded candidate pools). Returns the measurements and,
    per dimension not measured, the reason.

    ``labels``: per dimension, how its label file matched the index and the queries
    (:func:`label_checks`); a dimension none of whose label rows matches is not measured
    (its labels measure nothing: harmful@k would be 0 whatever the system returns), and
    the check goes into the measurement's ``details.labels``.

    ``robustness(spec, on_progress=…)`` runs the stress test (``embedder``: the audited
    index's, the stress data's unless the config names one); ``on_progress(done, total,
    label)`` (:mod:`credrank.core.progress`) counts the dimensions (label ``dimensions``) and
    receives the stress test's own steps (labels ``stress test: …``)."""
    from credrank.demo_corpus import read_adversarial
    from credrank.documents import read_qrels

    out: dict[str, Measurement | None] = {}
    reasons: dict[str, str] = {}
    labels = labels or {}
    for dim in counted(DIMENSIONS, on_progress, "dimensions"):
        spec = config.dimensions.get(dim)
        if spec is None:
            reasons[dim] = "not configured in the audit config"
            continue
        measure = spec["measure"]
        if measure == NOT_MEASURED:
            reasons[dim] = spec["reason"]
            continue
        check = labels.get(dim)
        if check is not None and check.nothing_matches:
            reasons[dim] = _matches_nothing(check, _LABELS_NAMED[dim])
            continue
        try:
            if measure == "pii":
                out[dim] = privacy_leaks(results, texts)
            elif measure == "explanations":
                out[dim] = explanation_coverage(results, combine_mode(config.pipeline))
            elif measure == "traceability":
                out[dim] = traceability(results, hashes)
            elif measure == "exposure":
                if config.qrels is None:
                    reasons[dim] = "no qrels in [queries]: exposure per merit needs relevance"
                    continue
                got = exposure_balance(results, pools, read_qrels(config.qrels))
                if got is None:
                    reasons[dim] = "fewer than two source groups with relevant documents"
                    continue
                out[dim] = got
            elif measure == "harmful":
                if config.harmful is None:
                    reasons[dim] = "no harm labels in [queries] (harmful = …)"
                    continue
                out[dim] = harmful_share(results, read_adversarial(config.harmful),
                                         int(spec.get("k", config.pipeline.top_k)))
            elif measure == "stress":
                if robustness is None:
                    reasons[dim] = "no stress-test runner given"
                    continue
                given = {"embedder": embedder} if embedder is not None else {}
                try:
                    out[dim] = robustness({**given, **spec, "base": str(config.base)},
                                          pipeline=_with_files(config.pipeline, config.base),
                                          on_progress=_prefixed(on_progress, "stress test: "))
                except AuditInputError as exc:  # the runner's: said with the config's name
                    raise AuditInputError(f"{config.source}: {exc}") from None
        except FileNotFoundError as exc:
            reasons[dim] = f"data not found: {exc.filename or exc}"
        except AuditMeasureError as exc:
            reasons[dim] = str(exc)
        got = out.get(dim)
        if got is not None and check is not None:
            out[dim] = replace(got, details={**got.details, "labels": check.to_dict()})
    if (robust := out.get("robustness")) is not None:
        out["robustness"] = _what_was_stressed(robust, config)
    return out, reasons


def _matches_nothing(check: LabelCheck, what: str) -> str:
    """Why a dimension whose label rows match nothing is not measured."""
    if not check.rows:
        return f"{check.file} holds no {what} row: the labels measure nothing"
    first = (check.unknown_documents or check.unaudited_queries)[0]
    return (f"none of the {check.rows} {what} row(s) of {check.file} names both an audited "
            f"query and a document of the index ({check.file}:{first.line} names "
            f"({first.query_id}, {first.doc_id}); {len(check.unknown_documents)} row(s) name "
            f"a document the index does not hold, {len(check.unaudited_queries)} a query not "
            "audited): the labels measure nothing")


def _what_was_stressed(m: Measurement, config: AuditConfig) -> Measurement:
    """The stress runner's measurement, saying what it measured (``measured_on``,
    ``audited_pipeline``): the audited pipeline's stages on the bench's data, or, with
    ``system = …``, the bench's own row (:mod:`credrank.audit.robustness`)."""
    data = config.shown.get("robustness", "the stress-test data")
    source = str(config.dimensions.get("robustness", {}).get("source", "cram"))
    audited = bool(m.details.get("audited_pipeline"))
    if audited:
        bench = m.details.get("bench_settings") or {}
        spec = config.pipeline
        said = audited_measured_on(spec, source, data, int(bench.get("top_k", spec.top_k)),
                                   int(bench.get("fetch_k", spec.resolved_fetch_k)))
    else:
        said = bench_measured_on(str(m.details.get("system", "")), source, data)
    return replace(m, details={**m.details, "measured_on": said, "audited_pipeline": audited})


def _with_files(spec: PipelineSpec, base: Path) -> PipelineSpec:
    """``spec`` with each file its stages name relative to the audit config made absolute
    (:func:`_spec_files`): the stress bench builds it away from the config's folder."""
    files = _spec_files(spec, base)
    if not files:
        return spec
    data = spec.to_dict()
    for item in data["stages"]:
        for param, value in item.items():
            if param != "stage" and isinstance(value, str) and value in files:
                item[param] = str(files[value])
    return PipelineSpec.from_dict(data)


def fill_profile(config: AuditConfig, measurements: Mapping[str, Measurement | None],
                 reasons: Mapping[str, str], commands: Mapping[str, str],
                 data: Mapping[str, str], settings: Mapping[str, str]) -> TrustProfile:
    """The trust profile of the audit: measured entries (``settings``: what each dimension
    was measured with), the rest ``not measured`` with the reason, and the config's gates
    (validated by :func:`parse_profile`)."""
    entries = []
    for dim in DIMENSIONS:
        m = measurements.get(dim)
        if m is None:
            entries.append({"dimension": dim, "status": NOT_MEASURED,
                             "reason": reasons.get(dim, "not measured")})
        else:
            entries.append(_entry(m, commands.get(dim, ""), data.get(dim, ""),
                                  settings.get(dim, "")))
    doc = {"name": config.name, "description": config.description, "entry": entries,
           "gate": config.gates}
    return parse_profile(doc, config.source)


#: the files :func:`write_outputs` writes into ``--out``, by their key in the ``outputs`` of
#: the ``--json`` document
OUTPUTS = {"profile_toml": "profile.toml", "profile_json": "profile.json",
           "gates": "gates.json", "measurements": "measurements.json",
           "radar_png": "radar.png", "radar_svg": "radar.svg", "report_md": "report.md",
           "report_html": "report.html"}
OUTPUT_NAMES = tuple(OUTPUTS.values())
#: the list of the files an audit wrote into its folder (written with them): the files a
#: later audit, or ``audit radar``, replaces without ``--force``
MANIFEST = "manifest.json"
#: what ``credrank audit radar`` writes
RADAR_NAMES = ("radar.png", "radar.svg")


def written_by_audit(out: Path) -> set[str]:
    """The file names ``out``'s :data:`MANIFEST` lists (empty without one, or when it is not
    an audit's: a damaged or foreign ``manifest.json`` lists nothing)."""
    try:
        data = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(data, dict) or data.get("credrank_audit_files") != 1:
        return set()
    files = data.get("files")
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else set()


def foreign_outputs(out: Path, names: Sequence[str]) -> list[str]:
    """The files of ``names`` (and :data:`MANIFEST`) already in ``out`` that no audit wrote
    (not in its manifest): what an audit would replace of the user's, refused without
    ``--force``."""
    if not out.is_dir():
        return []
    ours = written_by_audit(out)
    manifest_ok = bool(ours) or not (out / MANIFEST).exists()
    return [n for n in (*names, MANIFEST) if (out / n).exists()
            and not (n in ours or (n == MANIFEST and manifest_ok))]


def manifest_text(names: Sequence[str], out: Path | None = None) -> str:
    """The :data:`MANIFEST` listing ``names`` (and those ``out``'s manifest already lists)."""
    listed = sorted(set(names) | (written_by_audit(out) if out is not None else set()))
    return json.dumps({"credrank_audit_files": 1, "files": listed}, indent=2) + "\n"


def inputs_among_outputs(config: AuditConfig, out: Path) -> list[tuple[str, Path]]:
    """``(what, path)`` of each input of ``config`` that an output in ``out`` would replace (a
    config kept as ``OUT/profile.toml`` was overwritten by the filled profile, and the next
    run failed on it)."""
    outputs = {(out / name).resolve() for name in OUTPUT_NAMES}
    inputs = [("config", Path(config.source)), ("queries", config.queries),
              ("qrels", config.qrels), ("harm labels", config.harmful)]
    return [(what, path) for what, path in inputs
            if path is not None and path.resolve() in outputs]


class AuditOutputError(ValueError):
    """An output that could not be written into ``out``: ``name`` (a file of
    :data:`OUTPUT_NAMES`, or what was being made) and the system's ``reason``. The folder
    then holds the previous run's files, untouched (:func:`write_outputs`)."""

    def __init__(self, out: Path, name: str, reason: str) -> None:
        self.out, self.name, self.reason = out, name, reason
        super().__init__(f"out {out}: cannot write {name}: {reason}")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def write_outputs(run: AuditRun, out: Path) -> dict[str, Path]:
    """profile.toml/json, gates.json, measurements.json, radar.png/svg, report.md/html.

    The set is written whole or not at all: every file is written into a staging folder
    inside ``out`` (``.audit-…``), and only once all of them are there are they moved into
    place; a failure (a full disk) leaves ``out`` as it was — the previous run's files, never
    a mix of two runs — and raises :class:`AuditOutputError` naming the file and the reason.
    :data:`MANIFEST` lists them (with what an earlier audit there wrote): what a later audit
    replaces without ``--force`` (:func:`foreign_outputs`, checked by the caller).
    """
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".audit-", dir=out))
    except OSError as exc:
        raise AuditOutputError(out, "the folder", _reason(exc)) from None
    done = False
    try:
        _write_all(run, staging)
        atomic_write_text(staging / MANIFEST, manifest_text(OUTPUT_NAMES, out))
        if folders := [n for n in (*OUTPUT_NAMES, MANIFEST) if (out / n).is_dir()]:
            raise AuditOutputError(out, folders[0], "a folder is in the way")
        for name in (*OUTPUT_NAMES, MANIFEST):
            os.replace(staging / name, out / name)
        done = True
    except OSError as exc:
        name = Path(exc.filename).name if exc.filename else "the outputs"
        raise AuditOutputError(out, name, _reason(exc)) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not done and made and not any(out.iterdir()):
            out.rmdir()
    return {key: out / name for key, name in OUTPUTS.items()}


def _write_all(run: AuditRun, folder: Path) -> None:
    """Every output of :data:`OUTPUT_NAMES` into ``folder``."""
    from credrank.audit.profile import gate_document, profile_to_json
    from credrank.audit.radar import draw_radar
    from credrank.audit.report import write_report

    write_profile(run.profile, folder / "profile.toml")
    atomic_write_text(folder / "profile.json", profile_to_json(run.profile))
    atomic_write_text(folder / "gates.json",
                      json.dumps(gate_document(run.gates), indent=2) + "\n")
    doc: dict[str, Any] = {}
    for dim in DIMENSIONS:
        m = run.measurements.get(dim)
        doc[dim] = None if m is None else {
            "value": m.value, "interval": m.interval, "unit": m.unit, "scale": m.scale,
            "higher_is_better": m.higher_is_better, "reads_labels": m.reads_labels,
            "details": m.details}
    doc["not_measured"] = run.skipped
    doc["pipeline"] = run.pipeline
    atomic_write_text(folder / "measurements.json",
                      json.dumps(doc, indent=2, default=_plain) + "\n")
    figure = draw_radar(run.profile, folder)
    write_report(run.profile, folder, run.gates, images=[figure.png])


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | set):
        return sorted(value) if isinstance(value, set) else list(value)
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")




def _prefixed(on_progress: OnProgress | None, prefix: str) -> OnProgress | None:
    if on_progress is None:
        return None
    report = on_progress
    return lambda done, total, label: report(done, total, prefix + label)


def audit_index(index_dir: Path | str, config: AuditConfig, *,
                robustness: Callable[..., Measurement] | None = None,
                on_progress: OnProgress | None = None) -> AuditRun:
    """Open the index read-only, run the config's queries through the audited pipeline
    (:meth:`credrank.searcher.Searcher.search` with the spec, one compiled pipeline for every
    query) and the similarity-only expanded pool of ``fetch_k`` per query, measure every
    configured dimension, fill the profile and check its gates.

    ``on_progress(done, total, label)`` (:mod:`credrank.core.progress`; never printed here):
    the queries of the audited system (label ``audited system (queries)``), those of the
    similarity pools (``similarity pools (queries)``), then the steps of
    :func:`measure_dimensions`. The robustness data must exist (:func:`check_data`); the
    label files' rows are matched against the index (:func:`label_checks`, the run's
    ``labels`` and ``warnings``)."""
    from credrank.documents import read_queries
    from credrank.index.opener import open_store
    from credrank.searcher import Searcher

    spec = audited_spec(config.pipeline)
    fetch_k = spec.resolved_fetch_k
    mode = combine_mode(spec)
    pool_spec = PipelineSpec.from_dict({  # the same units as the audited ranking's
        "top_k": fetch_k, "fetch_k": fetch_k, "retrieval": spec.retrieval, "unit": spec.unit,
        "stages": [{"stage": "combine", "mode": mode}]})
    check_data(config)
    queries = read_queries(config.queries)
    if not queries:
        raise AuditInputError(f"{config.queries}: no query to audit")
    with open_store(index_dir) as store:
        searcher = Searcher(store, resources=_spec_files(spec, config.base))
        try:  # one version of a feedback store for every query, recorded
            spec, _ = searcher.pin_feedback(spec)
        except SpecError as exc:
            raise config.spec_error(exc) from None
        asked = [(q.id, q.text) for q in queries]
        results: dict[str, Any] = {}
        try:
            for qid, result in searcher.search_many(
                    counted(asked, on_progress, "audited system (queries)"), spec):
                results[qid] = result
        except SpecError as exc:  # a stage built over the index: a model file, a store
            raise config.spec_error(exc) from None
        pools = dict(searcher.search_many(
            counted(asked, on_progress, "similarity pools (queries)"), pool_spec))
        returned = sorted({str(d) for b in results.values() for d in b.doc_ids})
        # what a hit returns to a reader: its title, text and URL (a title was not scanned)
        texts = {str(p["doc_id"]): "\n".join(str(p[f]) for f in ("title", "text", "url")
                                             if p.get(f))
                 for p in store.read_payloads(returned,
                                              fields=("doc_id", "title", "text", "url"))}
        hashes = store.existing_hashes(returned)
        checks = label_checks(config, store.existing_hashes, list(results))
    measurements, reasons = measure_dimensions(config, results, pools, texts, hashes,
                                               robustness=robustness,
                                               on_progress=on_progress, labels=checks,
                                               embedder=store.manifest.embedder)
    described = (f"top_k={spec.top_k}, fetch_k={fetch_k}, "
                 f"stages={' → '.join(s.name for s in spec.stages)}, "
                 f"embedder={store.manifest.embedder}, index={index_dir}; the pipeline "
                 "spec: measurements.json's pipeline")  # data there, not JSON in a text
    command = f"credrank audit --index {index_dir} --config {config.source}"
    commands = {dim: command for dim in DIMENSIONS}
    named = config.shown.get("queries", shown(config.queries))
    data = {dim: f"{len(queries)} queries of {named}" for dim in DIMENSIONS}
    if config.harmful is not None:
        data["factuality"] += f"; harm labels {config.shown.get('harmful', config.harmful)}"
    if config.qrels is not None:
        data["fairness"] += f"; qrels {config.shown.get('qrels', config.qrels)}"
    for dim, check in checks.items():
        data[dim] += _unmatched_note(check)
    robust = measurements.get("robustness")
    settings = {dim: described for dim in DIMENSIONS}
    if robust is not None:
        data["robustness"] = config.shown.get("robustness", "")
        # the command that reproduces the value: the bench's for one of its own rows; the
        # audit's for the audited pipeline's row, which the bench's command cannot add (it
        # gives the table that row joins: details.command of measurements.json)
        if not robust.details.get("audited_pipeline"):
            commands["robustness"] = str(robust.details.get("command", command))
        # the stress bench's settings and row (it searches its own corpus, not the index)
        bench = robust.details.get("bench_settings") or {}
        said = ", ".join(f"{k}={v}" for k, v in bench.items()
                         if isinstance(v, str | int | float) and not isinstance(v, bool))
        row = robust.details.get("system")
        settings["robustness"] = ((f"the audited pipeline as the stress bench's row {row!r}"
                                   if robust.details.get("audited_pipeline") else
                                   f"the stress bench's row {row!r}")
                                  + (f": {said}" if said else ""))
        if robust.details.get("audited_pipeline"):
            settings["robustness"] += ("; the pipeline spec: measurements.json's pipeline; "
                                       "the table it joins: "
                                       f"{robust.details.get('command', 'not recorded')}")
    profile = fill_profile(config, measurements, reasons, commands, data, settings)
    return AuditRun(profile, check_gates(profile), measurements, dict(reasons),
                    pipeline=spec.to_dict(), labels=checks)


#: the seed an audit gives an exposure lottery that has neither ``seed`` nor ``draw``
AUDIT_SEED = 0


def audited_spec(spec: PipelineSpec, now: datetime | None = None) -> PipelineSpec:
    """The spec an audit runs and records (``measurements.json``'s ``pipeline``), pinned as
    ``credrank search --json`` pins its answer's (:func:`~credrank.pipeline.document.
    replayable`) so that the audit is reproducible and a rerun measures the same pipeline:
    each freshness stage that would read the clock gets one evaluation time for every query
    (``now``, default the current time); an exposure lottery with neither ``seed`` nor
    ``draw`` gets :data:`AUDIT_SEED` (its lists are one draw of the lottery per query, the
    stream in the queries' order: the audit's gate then says the same on every run). The
    feedback store's version is pinned once the index is open
    (:meth:`~credrank.searcher.Searcher.pin_feedback`)."""
    data = pinned(spec.to_dict(), "freshness", "now", (now or datetime.now(UTC)).isoformat())
    exposure = spec.stage("exposure")
    if exposure is not None and exposure.params.get("seed") is None \
            and exposure.params.get("draw") is None:
        data = pinned(data, "exposure", "seed", AUDIT_SEED)
    return PipelineSpec.from_dict(data)


#: the label file each dimension reads: (its measure, the config attribute, the kind)
_LABEL_FILES: dict[str, tuple[str, str, LabelKind]] = {
    "factuality": ("harmful", "harmful", "harm"),
    "fairness": ("exposure", "qrels", "qrels"),
}


def label_checks(config: AuditConfig, existing: Callable[[Sequence[str]], Mapping[str, str]],
                 audited: Sequence[str]) -> dict[str, LabelCheck]:
    """Per dimension that reads a label file (factuality: harm labels, fairness: qrels),
    how its rows match the index and the ``audited`` query ids
    (:func:`credrank.audit.labels.check_labels`); ``existing(doc_ids)`` returns the ids the
    index holds (a store's ``existing_hashes``)."""
    out: dict[str, LabelCheck] = {}
    for dim, (measure, key, kind) in _LABEL_FILES.items():
        path = getattr(config, key)
        if path is None or config.dimensions.get(dim, {}).get("measure") != measure:
            continue
        name = config.shown.get(key, str(path))
        rows = label_rows(path, kind, name)
        indexed = set(existing(sorted({r.doc_id for r in rows})))
        out[dim] = check_labels(name, rows, indexed, set(audited))
    return out


def _unmatched_note(check: LabelCheck) -> str:
    """The profile's ``data`` note on label rows that match nothing (``""``: all match)."""
    parts = []
    if check.unknown_documents:
        first = check.unknown_documents[0]
        parts.append(f"{len(check.unknown_documents)} row(s) name a document the index does "
                     f"not hold, first line {first.line} ({first.query_id}, {first.doc_id})")
    if check.unaudited_queries:
        parts.append(f"{len(check.unaudited_queries)} row(s) a query not audited")
    if not parts:
        return ""
    return (f" ({'; '.join(parts)}: of {check.rows} rows, {check.matched} count; "
            "measurements.json's details.labels)")


def check_data(config: AuditConfig) -> None:
    """The data files a measurement will read are there, before any is made: the robustness
    ``path`` (a misspelt one gave "not measured — data not found" and exit 0 after the run,
    when a misspelt qrels path is refused). :class:`AuditInputError` naming the config and
    the key."""
    robustness = config.dimensions.get("robustness", {})
    if robustness.get("measure") != "stress":
        return
    at = f"{config.source}: dimensions.robustness"
    path = _resolve(str(robustness["path"]), config.base)
    if not path.is_file():
        raise AuditInputError(f"{at}.path: expected an "
                              f"existing stress-test data file, got {robustness['path']!r} "
                              f"({path} is not one; without the data, write measure = "
                              "\"not measured\" with a reason)")
    if "corpus" in robustness:  # the clean corpus of poisonedrag's pools, read by no other
        source = robustness.get("source", "cram")
        if source != "poisonedrag":
            raise AuditInputError(f"{at}.corpus: only with source = \"poisonedrag\" (its "
                                  f"clean passages), got it with source = {source!r}")
        corpus = _resolve(str(robustness["corpus"]), config.base)
        if not corpus.is_file():
            raise AuditInputError(f"{at}.corpus: expected an existing corpus file, got "
                                  f"{robustness['corpus']!r} ({corpus} is not one)")
    if "metric" in robustness:  # before the stress run, which it would follow (minutes)
        try:
            check_metric(str(robustness["metric"]))
        except ValueError as exc:
            raise AuditInputError(f"{at}.metric: {exc}") from None


def _spec_files(spec: PipelineSpec, base: Path) -> dict[str, Path]:
    """The files the spec's stages name, relative to the audit config (``base``): each file
    parameter's relative path that is there (:func:`~credrank.pipeline.spec.spec_file_beside`,
    the rule a spec file follows; every other existing path was taken too, so ``priors =
    "current"`` beside a folder ``current/`` was that folder); the rest is read as given."""
    out: dict[str, Path] = {}
    for stage in spec.stages:
        for param, value in stage.params.items():
            found = spec_file_beside(param, value, base)
            if found is not None:
                out[value] = Path(found)
    return out
