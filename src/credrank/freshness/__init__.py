"""Provenance-aware freshness (chapter 35.7): which date a document's evidence carries, the
half-life weight ``w(T, t) = 2^(−(T−t)/τ)``, the unknown-age policy, and citation chains that
carry an origin's observation date to the documents that repeat it."""
