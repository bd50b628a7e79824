"""Signal stages: each adds one named factor to a candidate batch."""
