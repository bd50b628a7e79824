"""Credibility-annotated context for the generator (chapter 35.4)."""
