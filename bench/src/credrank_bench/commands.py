"""The commands this distribution adds to ``credrank``, named by the entry points of the group
``credrank.commands`` (``bench/pyproject.toml``). ``credrank --help`` imports this module to
list them, so it imports nothing but :class:`credrank.cli.Command`; a command's own module is
imported when it runs or shows its help."""

from __future__ import annotations

from credrank.cli import Command

#: ``credrank bench`` (:func:`credrank_bench.cli.bench`)
BENCH = Command(
    "credrank_bench.cli", "bench",
    "Baseline vs credibility-aware systems on one data set, with intervals and tests.")

__all__ = ["BENCH"]
