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
system's ``top_k``; labels that name none of the audited queries measure nothing),
``stress`` (robustness: one cell of the contamination stress test of the bench distribution
(``credrank_bench.experiments.stress``, found through the entry point group
``credrank.audit.robustness``) on the configured data, by default ``misled-contaminated`` of
its ``similarity only`` row: :mod:`credrank.audit.robustness`). A measure whose data is missing
(for example ``../shared/data`` absent) is recorded as **not measured** with the reason — never
as 0 — and a gate on it then fails as "not measured".

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
``measurements.json`` (every value with its details). The exit status is 1 when a hard gate
fails.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from credrank.audit.robustness import ROBUSTNESS_SCHEMA
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
        spec_from=spec_from)


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

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)


def _entry(m: Measurement, command: str, data: str, settings: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "dimension": m.dimension, "stages": list(m.stages), "metric": m.metric,
        "unit": m.unit, "judge": m.judge, "denominator": m.denominator, "value": m.value,
        "scale": list(m.scale), "higher_is_better": m.higher_is_better,
        "command": command, "data": data, "settings": settings}
    if m.interval is not None:
        entry["interval"] = list(m.interval)
    return entry


def measure_dimensions(config: AuditConfig, results: Mapping[str, Any], pools: Mapping[str, Any],
                       texts: Mapping[str, str], hashes: Mapping[str, str],
                       robustness: Callable[..., Measurement] | None = None,
                       on_progress: OnProgress | None = None
                       ) -> tuple[dict[str, Measurement | None], dict[str, str]]:
    """Run each configured measure on the audited system's ``results`` (``{qid:
    Candidates}``) and ``pools`` (the expanded candidate pools). Returns the measurements and,
    per dimension not measured, the reason.

    ``robustness(spec, on_progress=…)`` runs the stress test; ``on_progress(done, total,
    label)`` (:mod:`credrank.core.progress`) counts the dimensions (label ``dimensions``) and
    receives the stress test's own steps (labels ``stress test: …``)."""
    from credrank.demo_corpus import read_adversarial
    from credrank.documents import read_qrels

    out: dict[str, Measurement | None] = {}
    reasons: dict[str, str] = {}
    for dim in counted(DIMENSIONS, on_progress, "dimensions"):
        spec = config.dimensions.get(dim)
        if spec is None:
            reasons[dim] = "not configured in the audit config"
            continue
        measure = spec["measure"]
        if measure == NOT_MEASURED:
            reasons[dim] = spec["reason"]
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
                out[dim] = robustness({**spec, "base": str(config.base)},
                                      on_progress=_prefixed(on_progress, "stress test: "))
        except FileNotFoundError as exc:
            reasons[dim] = f"data not found: {exc.filename or exc}"
        except AuditMeasureError as exc:
            reasons[dim] = str(exc)
    return out, reasons


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


#: the files :func:`write_outputs` writes into ``--out``
OUTPUT_NAMES = ("profile.toml", "profile.json", "gates.json", "measurements.json",
                "radar.png", "radar.svg", "report.md", "report.html")


def inputs_among_outputs(config: AuditConfig, out: Path) -> list[tuple[str, Path]]:
    """``(what, path)`` of each input of ``config`` that an output in ``out`` would replace (a
    config kept as ``OUT/profile.toml`` was overwritten by the filled profile, and the next
    run failed on it)."""
    outputs = {(out / name).resolve() for name in OUTPUT_NAMES}
    inputs = [("config", Path(config.source)), ("queries", config.queries),
              ("qrels", config.qrels), ("harm labels", config.harmful)]
    return [(what, path) for what, path in inputs
            if path is not None and path.resolve() in outputs]


def write_outputs(run: AuditRun, out: Path) -> dict[str, Path]:
    """profile.toml/json, gates.json, measurements.json, radar.png/svg, report.md/html."""
    from credrank.audit.profile import gate_document, profile_to_json
    from credrank.audit.radar import draw_radar
    from credrank.audit.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    paths = {"profile_toml": write_profile(run.profile, out / "profile.toml")}
    atomic_write_text(out / "profile.json", profile_to_json(run.profile))
    paths["profile_json"] = out / "profile.json"
    atomic_write_text(out / "gates.json", json.dumps(gate_document(run.gates), indent=2) + "\n")
    paths["gates"] = out / "gates.json"
    doc: dict[str, Any] = {}
    for dim in DIMENSIONS:
        m = run.measurements.get(dim)
        doc[dim] = None if m is None else {
            "value": m.value, "interval": m.interval, "unit": m.unit, "scale": m.scale,
            "higher_is_better": m.higher_is_better, "reads_labels": m.reads_labels,
            "details": m.details}
    doc["not_measured"] = run.skipped
    doc["pipeline"] = run.pipeline
    atomic_write_text(out / "measurements.json",
                      json.dumps(doc, indent=2, default=_plain) + "\n")
    paths["measurements"] = out / "measurements.json"
    figure = draw_radar(run.profile, out)
    paths["radar_png"], paths["radar_svg"] = figure.png, figure.svg
    md, html = write_report(run.profile, out, run.gates, images=[figure.png])
    paths["report_md"], paths["report_html"] = md, html
    return paths


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
    :func:`measure_dimensions`."""
    from credrank.documents import read_queries
    from credrank.index.opener import open_store
    from credrank.searcher import Searcher

    spec = config.pipeline
    fetch_k = spec.resolved_fetch_k
    mode = combine_mode(spec)
    pool_spec = PipelineSpec.from_dict({
        "top_k": fetch_k, "fetch_k": fetch_k, "retrieval": spec.retrieval,
        "stages": [{"stage": "combine", "mode": mode}]})
    queries = read_queries(config.queries)
    if not queries:
        raise AuditInputError(f"{config.queries}: no query to audit")
    with open_store(index_dir) as store:
        searcher = Searcher(store, resources=_spec_files(spec, config.base))
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
    measurements, reasons = measure_dimensions(config, results, pools, texts, hashes,
                                               robustness=robustness,
                                               on_progress=on_progress)
    described = (f"top_k={spec.top_k}, fetch_k={fetch_k}, "
                 f"stages={' → '.join(s.name for s in spec.stages)}, "
                 f"embedder={store.manifest.embedder}, index={index_dir}; the pipeline "
                 "spec: measurements.json's pipeline")  # data there, not JSON in a text
    command = f"credrank audit --index {index_dir} --config {config.source}"
    commands = {dim: command for dim in DIMENSIONS}
    data = {dim: f"{len(queries)} queries of {shown(config.queries)}" for dim in DIMENSIONS}
    if config.harmful is not None:
        data["factuality"] += f"; harm labels {shown(config.harmful)}"
    if config.qrels is not None:
        data["fairness"] += f"; qrels {shown(config.qrels)}"
    rob = config.dimensions.get("robustness", {})
    robust = measurements.get("robustness")
    settings = {dim: described for dim in DIMENSIONS}
    if robust is not None:
        data["robustness"] = shown(config.base / str(rob.get("path", "")))
        commands["robustness"] = str(robust.details.get("command", command))
        # the stress bench's own settings and row, not the audited pipeline's (it searches
        # its own corpus, not the index)
        bench = robust.details.get("bench_settings") or {}
        said = ", ".join(f"{k}={v}" for k, v in bench.items()
                         if isinstance(v, str | int | float) and not isinstance(v, bool))
        settings["robustness"] = (f"the stress bench's row {robust.details.get('system')!r}"
                                  + (f": {said}" if said else ""))
    profile = fill_profile(config, measurements, reasons, commands, data, settings)
    return AuditRun(profile, check_gates(profile), measurements, dict(reasons),
                    pipeline=spec.to_dict())


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
