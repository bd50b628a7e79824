"""Label-free defences over the retrieved pool: planted passages (:mod:`.planted`).

A layer above :mod:`credrank.consensus` (the near-duplicate test is shared) and below the
pipeline that builds them from the catalog."""
