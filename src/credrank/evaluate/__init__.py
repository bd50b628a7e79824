"""Evaluation: metrics (``metrics``), paired statistics (``stats``) and readers for the real
data sets (``datasets``).

Import the submodule you need (``from credrank.evaluate import metrics``); this package
imports nothing itself so that ``import credrank.evaluate`` stays cheap.
"""
