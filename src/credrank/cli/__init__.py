"""The ``credrank`` command line (typer + rich): one module per command group, each thin.
JSON outputs are documented in docs/json.md."""

from __future__ import annotations

import typer

from credrank.cli.advise import advise
from credrank.cli.bench import bench
from credrank.cli.consensus import app as consensus_app
from credrank.cli.context import context
from credrank.cli.cram import app as cram_app
from credrank.cli.credibility import app as credibility_app
from credrank.cli.demo import demo
from credrank.cli.index import index
from credrank.cli.priors import app as priors_app
from credrank.cli.provenance import app as provenance_app
from credrank.cli.reliability import app as reliability_app
from credrank.cli.search import search
from credrank.cli.serve import serve
from credrank.cli.stance import app as stance_app

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Source credibility in the retrieval step of RAG.")
app.command()(index)
app.command()(search)
app.command()(demo)
app.command()(bench)
app.command()(serve)
app.command()(context)
app.command()(advise)
app.add_typer(reliability_app, name="reliability",
              help="Source reliability from cross-source agreement (RA-RAG).")
app.add_typer(credibility_app, name="credibility",
              help="A learned page-credibility prior: fit it on labelled pages.")
app.add_typer(stance_app, name="stance",
              help="The stance model of claim-style queries: fit it on labelled pairs.")
app.add_typer(consensus_app, name="consensus",
              help="Label-free answer consensus: calibrate its contested threshold.")
app.add_typer(provenance_app, name="provenance",
              help="Citation chains: which documents repeat older evidence (laundering).")
app.add_typer(cram_app, name="cram",
              help="Credibility-aware attention (CrAM) for a local model: calibrate heads, answer.")
app.add_typer(priors_app, name="priors",
              help="Versioned, reversible prior updates from relevance feedback.")


def main() -> None:
    app()


__all__ = ["app", "main"]
