"""Embedders and the engine store (Qdrant Edge, embedded and persistent)."""
