"""``credrank audit …``: the trust profile of chapter 35.1 — validate it and check its hard
gates, draw its radar.

* ``credrank audit --index DIR --config AUDIT.toml --out DIR [--json]`` runs the audit
  (:mod:`credrank.audit.run`): measures every configured dimension on the index, fills the
  trust profile, checks its hard gates, draws the radar and writes the report (Markdown and a
  self-contained HTML page), the whole set or nothing (a failed write leaves ``--out`` as it
  was). Label rows that match no indexed document or no audited query are reported on
  stderr (and in ``--json``'s ``labels``). Exit 0 when every gate passes, 1 when one fails, 2
  on bad input.
* ``credrank audit check PROFILE [--json]`` validates the profile
  (:mod:`credrank.audit.profile`) and checks every gate on the raw values. Exit 0 when all
  gates pass, 1 when one fails (a gate on a dimension not measured fails), 2 on bad input.
* ``credrank audit radar PROFILE [--compare OTHER] --out DIR [--json]`` writes
  ``DIR/radar.png`` and ``DIR/radar.svg`` and prints each area (or "not defined" when an axis
  is a gap) with the caveats.

``PROFILE`` is a ``.toml`` or ``.json`` file, or a shipped example: ``model_a``, ``model_b``
(chapter 35.1's toy models). ``--json`` prints data only.
"""

from __future__ import annotations

import json as jsonlib
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.audit.profile import (
    EXAMPLE_PROFILES,
    AuditInputError,
    GateResult,
    TrustProfile,
    audit_passed,
    check_gates,
    example_profile_path,
    gate_document,
    labels_document,
    load_profile,
    profile_document,
)
from credrank.audit.radar import RadarFigure, draw_radar, radar_document
from credrank.cli.common import Bars, QuietOption, fail, show_progress
from credrank.core.extras import MissingExtraError, require_extra
from credrank.core.files import atomic_write_text

#: ``--force`` of the audit run and ``audit radar``
ForceOption = Annotated[bool, typer.Option(
    "--force", help="replace files in --out that no audit wrote (not in its manifest.json)")]

#: the entry-point group of the audit's stress-test runner (``[dimensions.robustness]`` with
#: ``measure = "stress"``): the bench distribution's ``stress``
ROBUSTNESS_GROUP = "credrank.audit.robustness"

app = typer.Typer(add_completion=False, invoke_without_command=True,
                  help="Trust audit: profile, hard gates, radar, report.")

#: what `credrank audit --help` says under the options (its first line is the command's
#: line in `credrank --help`)
_RUN_HELP = ("credrank audit --index DIR --config AUDIT.toml --out DIR runs the audit: it "
             "measures the dimensions the config names on the index, checks the hard gates "
             "and writes the profile, radar and report into --out. A robustness measured by "
             "the stress test takes minutes (it embeds the whole stress data) and runs the "
             "audited pipeline's stages on the stress bench's passages, not on the index. "
             "Exit 0 when every "
             "gate passes, 1 when a hard gate fails (a gate on a dimension not measured "
             "fails), 2 on bad input.")

_PROFILE_HELP = ("a trust profile (.toml or .json; see credrank.audit.profile), or a shipped "
                 f"example: {', '.join(EXAMPLE_PROFILES)}")


def _load(profile: Path, option: str | None = None) -> TrustProfile:
    """Load a profile or a shipped example; bad input: ``error: …`` on stderr, exit 2
    (``option``: the flag that named it, said before the message)."""
    path = profile
    if str(profile) in EXAMPLE_PROFILES and not profile.exists():
        path = example_profile_path(str(profile))
    head = f"{option} " if option else ""
    try:
        return load_profile(path)
    except AuditInputError as exc:
        if not path.exists():  # `audit check model_c`: say what else it can be
            fail(f"{head}{exc} (expected a .toml or .json profile, or a shipped example: "
                 f"{', '.join(EXAMPLE_PROFILES)})")
        fail(f"{head}{exc}")


def _dump(doc: dict[str, Any]) -> None:
    typer.echo(jsonlib.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False))


def render_check(profile: TrustProfile, results: list[GateResult],
                 command: str = "credrank audit check") -> str:
    """The human gate report of ``command`` (``audit check``, or the audit run itself):
    verdict, one line per gate, then the missing dimensions."""
    lines = [f"{command}: {profile.title} ({profile.source})"]
    if not results:
        lines.append("no hard gates declared: the profile validates; nothing to pass or fail")
    else:
        verdict = "PASS" if audit_passed(results) else "FAIL"
        lines.append(f"audit: {verdict} ({sum(r.passed for r in results)} of {len(results)} "
                     "gates passed; gates are checked on raw values, apart from any area)")
        for r in results:
            lines.append(f"  {r.label:<20} {r.gate.name}: {r.detail} — {r.gate.reason}")
    for e in profile.entries:
        if not e.measured:
            lines.append(f"  {e.dimension}: not measured — {e.reason}")
    return "\n".join(lines)


@app.command()
def check(
    profile: Annotated[Path, typer.Argument(help=_PROFILE_HELP)],
    json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Validate a trust profile and check its hard gates (exit 1 when a gate fails)."""
    loaded = _load(profile)
    results = check_gates(loaded)
    passed = audit_passed(results)
    if json:
        _dump({"credrank_audit_check": 1, "passed": passed, **labels_document(loaded),
               "gates": gate_document(results), "profile": profile_document(loaded)})
    else:
        typer.echo(render_check(loaded, results))
    if not passed:
        raise typer.Exit(1)


def render_radar(figure: RadarFigure) -> str:
    """The human radar summary: files, areas ("not defined" for a gap) and caveats."""
    lines = [f"wrote {figure.png}", f"wrote {figure.svg}"]
    for s in figure.series:
        if s.area is None:
            lines.append(f"{s.label}: area not defined (gap: {', '.join(s.missing)} not "
                         "measured)")
        else:
            lines.append(f"{s.label}: area {s.area:.9f}, normalised {s.normalised_area:.9f} "
                         f"(Σ r_i·r_(i+1) = {s.adjacent_product_sum:.9f})")
    rel = radar_document(figure)["relative_area_difference"]
    if len(figure.series) == 2:
        shown = "not defined" if rel is None else f"{100 * rel:.6f}%"
        lines.append(f"relative area difference {figure.series[0].label} vs "
                     f"{figure.series[1].label}: {shown}")
    lines.append("caveats:")
    lines += [f"  - {c}" for c in figure.caveats]
    return "\n".join(lines)


@app.command()
def radar(
    profile: Annotated[Path, typer.Argument(help=_PROFILE_HELP)],
    out: Annotated[Path, typer.Option("--out", help="folder for radar.png and radar.svg")],
    compare: Annotated[Path | None, typer.Option(
        "--compare", help="a second profile drawn dashed for comparison")] = None,
    json: Annotated[bool, typer.Option("--json", help="print the radar data as JSON")] = False,
    force: ForceOption = False,
) -> None:
    """Draw the radar of a trust profile (PNG and SVG) and print its area or "not defined"."""
    from credrank.audit.run import MANIFEST, RADAR_NAMES, manifest_text

    loaded = _load(profile)
    other = _load(compare, "--compare") if compare is not None else None
    if out.exists() and not out.is_dir():  # as the audit run says it
        fail(f"--out {out}: expected a folder (for radar.png and radar.svg), got a file")
    _refuse_foreign(out, RADAR_NAMES, force)
    try:
        figure = draw_radar(loaded, out, compare=other)
        atomic_write_text(out / MANIFEST, manifest_text(RADAR_NAMES, out))
    except OSError as exc:
        fail(f"--out {out}: cannot write the radar: {exc.strerror or exc}")
    except MissingExtraError as exc:
        fail(str(exc))
    if json:
        _dump({"credrank_audit_radar": 1, **radar_document(figure)})
    else:
        typer.echo(render_radar(figure))


@app.callback(epilog=_RUN_HELP)
def audit(
    ctx: typer.Context,
    index: Annotated[Path | None, typer.Option(help="the credrank index to audit")] = None,
    config: Annotated[Path | None, typer.Option(
        help="the audit config (TOML; see credrank.audit.run)")] = None,
    out: Annotated[Path | None, typer.Option(
        help="folder for the profile, radar, report and measurements")] = None,
    json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
    quiet: QuietOption = False,
    force: ForceOption = False,
) -> None:
    """Run a trust audit (--index, --config, --out), or one of the commands below.

    Progress (queries, dimensions, the stress test's steps) is shown on stderr when it is a
    terminal (never with --quiet or when stderr is a file or a pipe)."""
    given = [name for name, v in (("--index", index), ("--config", config), ("--out", out))
             if v is not None]
    if ctx.invoked_subcommand is not None:
        # before the command they do nothing (`audit --json check P` printed text): said so
        given += [n for n, v in (("--json", json), ("--quiet", quiet), ("--force", force))
                  if v]
        if given:
            fail(f"{', '.join(given)}: options of the audit run itself; give them without "
                 f"the {ctx.invoked_subcommand!r} command (after it, where it takes them)")
        return
    if not given:
        if json or quiet:  # `audit --json` alone printed the help and exited 0
            fail(f"{'--json' if json else '--quiet'}: an option of the audit run; give "
                 "--index, --config and --out with it")
        typer.echo(ctx.get_help())
        raise typer.Exit(0)
    if missing := [n for n in ("--index", "--config", "--out") if n not in given]:
        fail(f"{', '.join(missing)}: required to run an audit (--index DIR --config "
             "AUDIT.toml --out DIR)")
    assert index is not None and config is not None and out is not None
    _run(index, config, out, json, quiet, force)


def _refuse_foreign(out: Path, names: tuple[str, ...], force: bool) -> None:
    """Exit 2 naming the first file of ``names`` in ``out`` that no audit wrote (its
    manifest.json does not list it: the user's), unless ``force``."""
    from credrank.audit.run import MANIFEST, foreign_outputs

    if not force and (foreign := foreign_outputs(out, names)):
        fail(f"--out {out}: holds {foreign[0]}, which no audit wrote (its {MANIFEST} does not "
             "list it); pass --force to replace it, or choose another folder")


def _run(index: Path, config: Path, out: Path, as_json: bool, quiet: bool,
         force: bool) -> None:
    from credrank.audit.run import (
        OUTPUT_NAMES,
        AuditOutputError,
        audit_index,
        inputs_among_outputs,
        load_config,
        write_outputs,
    )
    from credrank.index.store import StoreError

    try:
        require_extra("matplotlib", "plots", "the audit's radar figure")  # before the run
        cfg = load_config(config)
    except (AuditInputError, MissingExtraError) as exc:
        fail(str(exc))
    # what would fail only after every measurement: said before any
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: expected a folder (for the profile, radar and report), got a file")
    above = next((p for p in out.absolute().parents if p.exists()), None)
    if not out.exists() and above is not None and not above.is_dir():
        fail(f"--out {out}: expected a folder that can be made, but {above} is a file")
    for what, path in inputs_among_outputs(cfg, out):
        fail(f"--out {out}: the audit writes {path.name} there, which would replace its "
             f"{what} {path}; choose another folder")
    _refuse_foreign(out, OUTPUT_NAMES, force)
    if not Path(cfg.queries).exists():
        fail(f"{config}: queries: expected an existing queries file (or a folder holding "
             f"queries.jsonl), got {cfg.queries}: no such file")
    made = _make_out(out)  # --out /proc/nope: said now, not after every measurement
    try:
        with Bars(show_progress(quiet)) as bars:
            run = audit_index(index, cfg, robustness=stress_runner(),
                              on_progress=bars.steps())
        for line in run.warnings:
            typer.echo(f"warning: {line}", err=True)
        paths = write_outputs(run, out)
    except AuditOutputError as exc:
        _unmake(out, made)
        fail(f"--out {out}: cannot write {exc.name}: {exc.reason}")
    except (AuditInputError, StoreError, ValueError, OSError) as exc:
        _unmake(out, made)
        fail(str(exc))
    if as_json:
        _dump({"credrank_audit": 1, "passed": run.passed, **labels_document(run.profile),
               "gates": gate_document(run.gates), "profile": profile_document(run.profile),
               "labels": run.labels_document(), "pipeline": run.pipeline,
               "outputs": {k: str(v) for k, v in paths.items()}})
    else:
        typer.echo(render_check(run.profile, run.gates, "credrank audit"))
        typer.echo(f"report: {paths['report_md']} and {paths['report_html']}")
    if not run.passed:
        raise typer.Exit(1)


def _make_out(out: Path) -> bool:
    """Make the ``--out`` folder before the run (``True`` when it was made); an error naming
    the flag when it cannot be made."""
    if out.is_dir():
        return False
    try:
        out.mkdir(parents=True)
    except OSError as exc:
        fail(f"--out {out}: cannot make the folder: {exc.strerror or exc}")
    return True


def _unmake(out: Path, made: bool) -> None:
    """Remove the ``--out`` folder this run made when the run failed and left it empty."""
    if made and out.is_dir() and not any(out.iterdir()):
        out.rmdir()


def stress_runner() -> Any:
    """The stress test of ``[dimensions.robustness]`` (``measure = "stress"``): the runner of
    the entry point ``stress`` in :data:`ROBUSTNESS_GROUP` (the bench distribution's
    ``credrank_bench.experiments.robustness.stress_robustness``; the product never imports
    the benches). Without it, a runner whose error the audit records as the reason robustness
    is not measured."""
    from credrank.audit.measures import AuditMeasureError
    from credrank.cli import entry_points, load_entry_point

    found = entry_points(ROBUSTNESS_GROUP).get("stress")
    if found is not None:
        return load_entry_point(found)

    def not_installed(spec: Any, *, pipeline: Any = None, on_progress: Any = None) -> Any:
        raise AuditMeasureError(
            "robustness: the stress test runs the stress bench of the bench distribution "
            "(credrank-bench), which is not installed: run `pip install -e ./bench` in a "
            "credrank checkout (`make install` does)")

    return not_installed
