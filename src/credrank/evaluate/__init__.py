"""Evaluation: metrics and the measure registry (``metrics``), paired statistics
(``stats``), side-by-side experiments (``experiment``), result tables as data (``tables``),
the bench result (``result``), its one Markdown renderer (``render``), report folders
(``report``) and the product benches (``bench``).

Import the submodule you need (``from credrank.evaluate import metrics``); this package
imports nothing itself so that ``import credrank.evaluate`` stays cheap.
"""
