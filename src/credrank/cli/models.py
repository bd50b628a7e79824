"""``credrank models``: the local model artifacts (the ONNX export of MiniLM for fast queries)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from credrank.cli.common import console, fail

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Local model artifacts: the ONNX MiniLM of the torch-free query path.")


@app.command("export-onnx")
def export_onnx(
    directory: Annotated[Path | None, typer.Option(
        "--dir", help="artifact folder (default: $CREDRANK_ONNX_DIR, else "
                      "<environment>/share/credrank/onnx/all-minilm-l6-v2)")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="export again even if a usable artifact is there")] = False,
) -> None:
    """Export the packaged all-MiniLM-L6-v2 to ONNX (offline; once; `make install` runs it).

    Needs the embed extra (torch, sentence-transformers) and onnxruntime; the export is
    checked against sentence-transformers (cosine distance at most 1e-5) before it is
    installed. Afterwards `search`, `serve` and the adapters embed queries with onnxruntime,
    without importing torch (CREDRANK_EMBED_BACKEND=torch forces the torch path). Exit 2
    when it cannot start (a missing package, --dir a file or another folder of yours), 1 when
    writing fails (a full disk: nothing is installed, a folder already there is kept)."""
    from credrank.index.onnx_export import ArtifactWriteError
    from credrank.index.onnx_export import export_onnx as run_export

    try:
        target = run_export(directory, force=force,
                            log=lambda msg: console.print(msg, highlight=False, soft_wrap=True))
    except RuntimeError as exc:
        # writing failed (the staging folder could not be made or filled): a runtime failure
        written = isinstance(exc, ArtifactWriteError) or isinstance(exc.__cause__, OSError)
        fail(str(exc), code=1 if written else 2)
    console.print(str(target), highlight=False, soft_wrap=True)


@app.command("info")
def info(
    as_json: Annotated[bool, typer.Option("--json", help="JSON output")] = False,
) -> None:
    """Where the ONNX artifact is, whether it can serve, and which backend MiniLM uses
    (exit 1 when the artifact cannot serve). The model file is checked against the size and
    SHA-256 meta.json records, or loaded where it records none."""
    from credrank.index.onnx_embed import (
        ARTIFACT_ENV,
        BACKEND_ENV,
        artifact_dir,
        artifact_problem,
        embed_backend,
        read_meta,
    )

    folder = artifact_dir()
    problem = artifact_problem(folder, verify=True)
    try:
        backend = embed_backend()
    except ValueError as exc:
        fail(str(exc))
    uses = ("torch" if backend == "torch" or (backend == "auto" and problem is not None)
            else "onnx")
    doc = {"credrank_models_info": 1, "artifact": str(folder), "ready": problem is None,
           "problem": problem,
           "backend_setting": backend, "minilm_backend": uses if problem is None or
           backend != "onnx" else "error",
           "meta": read_meta(folder) if problem is None else None}
    if as_json:
        print(json.dumps(doc, indent=2))
    else:
        console.print(f"ONNX artifact: {folder} (${ARTIFACT_ENV} overrides)", highlight=False,
                      soft_wrap=True)
        console.print(f"status: {'ready' if problem is None else problem}", highlight=False,
                      soft_wrap=True)
        console.print(f"{BACKEND_ENV}={backend}: MiniLM embeds with {doc['minilm_backend']}",
                      highlight=False, soft_wrap=True)
    if problem is not None:
        raise typer.Exit(1)
