"""credrank-bench: the research wing of credrank, its own distribution (``bench/``).

* :mod:`credrank_bench.datasets` — one reader per evaluation set in ``../shared/data`` and a
  registry;
* :mod:`credrank_bench.experiments` — the dataset benches behind ``credrank bench`` and the
  research runs (TREC stance and credibility, oracle feedback, CoAID priors, Golden-Gaze,
  RA-RAG simulation), and the audit's stress-test runner;
* :mod:`credrank_bench.cli` — ``credrank bench``, added to the product's command line through
  the entry point ``bench`` of the group ``credrank.commands``
  (:data:`credrank_bench.commands.BENCH`);
* ``bench/scripts/`` (not installed) — the benchmark scripts.

It depends on ``credrank``; ``credrank`` never imports it (an import-linter contract checks
it). Importing this package imports nothing else: ``credrank --help`` loads
:mod:`credrank_bench.commands` to list the command.
"""
