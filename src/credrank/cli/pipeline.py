"""``credrank pipeline``: the stage catalog, and checking a pipeline spec before running it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.common import console, fail, table_console

app = typer.Typer(help="Pipeline specs: the stage catalog, and checking a spec file.",
                  no_args_is_help=True, add_completion=False)


def catalog_document() -> dict[str, Any]:
    """Every stage of the catalog with its kind, rank, summary and parameters (name,
    what is expected, default or required) — data all the way down."""
    from credrank.pipeline.catalog import CATALOG

    stages = []
    for name, e in CATALOG.items():
        spec = e.cls.SPEC
        params = [{"name": p, "expected": f.spec.describe(), "required": f.required,
                   **({"default": f.default} if f.has_default else {})}
                  for p, f in (spec.fields.items() if spec is not None else [])]
        stages.append({"stage": name, "kind": e.kind, "rank": e.rank, "summary": e.summary,
                       "reads": sorted(e.cls.reads) if isinstance(e.cls.reads, frozenset)
                       else "depends on its parameters", "params": params})
    return {"credrank_pipeline_catalog": 1, "stages": stages}


@app.command("stages")
def stages(as_json: Annotated[bool, typer.Option("--json", help="the catalog as JSON")] = False
           ) -> None:
    """List the stages a spec can name, with their parameters."""
    doc = catalog_document()
    if as_json:
        print(json.dumps(doc, indent=2))
        return
    from rich.table import Table

    table = Table(title="pipeline stages (kinds run prior → signal → combine → select)")
    for col in ("stage", "kind", "parameters", "what it does"):
        table.add_column(col, overflow="fold")  # a long word folds, never cut to "…"
    for s in doc["stages"]:
        params = ", ".join(p["name"] + ("" if p["required"] else f"={p.get('default')}")
                           for p in s["params"]) or "–"
        table.add_row(s["stage"], s["kind"], params, s["summary"])
    table_console().print(table)  # a pipe or a file: as wide as the cells


@app.command("check")
def check(spec_file: Annotated[Path, typer.Argument(help="a spec file (JSON, TOML, YAML) or "
                                                        "a --json output with a pipeline")],
          as_json: Annotated[bool, typer.Option(
              "--json", help="print the spec with every default filled in")] = False) -> None:
    """Validate a spec as a search checks it before opening an index: its stages are built
    (the files they name are read), and a ``pushdown: true`` they cannot honour is refused;
    the stages that read an index are checked when there is one. Print it with its defaults
    written out."""
    from credrank.cli.specs import read_spec_file
    from credrank.pipeline.compile import check_stages
    from credrank.pipeline.spec import PipelineSpec, SpecError

    try:
        spec = PipelineSpec.from_dict(read_spec_file(spec_file),  # its errors name the file
                                      where=str(spec_file))
    except ValueError as exc:
        fail(str(exc))
    try:
        check_stages(spec)
    except SpecError as exc:  # a stage's build error: a path in the spec, said with the file
        fail(f"{spec_file}: {exc}")
    if as_json:
        print(json.dumps(spec.to_dict(), indent=2))
        return
    console.print(f"{spec_file}: a valid pipeline: top_k {spec.top_k}, fetch_k "
                  f"{spec.resolved_fetch_k}, {spec.retrieval} retrieval, stages "
                  + " >> ".join(s.name for s in spec.stages), soft_wrap=True)
