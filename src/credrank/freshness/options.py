"""The ``--freshness`` option of ``credrank search``:
``half_life=365d[,now=2026-01-01][,undated=neutral|neutral:W|penalty:W|exclude][,config=FILE]
[,lineage=off|cites]``.

* ``half_life`` — the half-life ``τ`` of ``w(T, t) = 2^(−(T−t)/τ)`` (chapter 35.7): ``365d``,
  ``52w``, ``1y`` (365.25 d), ``12h`` or a number of days; 0 or negative is refused;
* ``now`` — the evaluation time ``T`` (ISO 8601; default: the current UTC time per query);
* ``undated`` — the unknown-age policy (default ``neutral``: median of the dated candidates);
* ``config`` — a freshness config file (τ per source type, host, claim class; no-decay
  opt-outs; :mod:`credrank.freshness.config`). With ``config``, ``half_life`` may be left out
  (the file's default) or given (it replaces the file's default ``half_life``);
* ``lineage`` — ``cites``: a document without its own ``observed_at``/``verified_at`` that
  repeats older evidence along ``cites`` links takes its origin's evidence date
  (:class:`~credrank.stages.freshness.InheritedDates`, needs the index; Python path).

Errors (``ValueError``) name the key and the value; those of the config file
(:class:`~credrank.freshness.config.FreshnessConfigError`, read by the hardened reader of
:mod:`credrank.core.structured`: YAML aliases refused) name the file and the key path.
"""

from __future__ import annotations

KEYS = ("half_life", "now", "undated", "config", "lineage")
#: ``lineage=``: ``cites`` makes wrappers inherit their origin's evidence date
LINEAGE = ("off", "cites")


def freshness_items(text: str, option: str = "--freshness") -> dict[str, str]:
    """The ``KEY=VALUE`` items of a ``--freshness`` string (syntax only: keys known, each once,
    ``half_life`` or ``config`` given); the values are checked by the stage's spec."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{option}: expected half_life=DURATION[,now=DATE][,undated=POLICY]"
                         f"[,config=FILE], got {text!r}")
    items: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"{option}: expected KEY=VALUE, got {part.strip()!r} (keys: "
                             f"{', '.join(KEYS)})")
        if key not in KEYS:
            raise ValueError(f"{option}: unknown key {key!r} (={value.strip()!r}); expected "
                             f"some of {', '.join(KEYS)}")
        if key in items:
            raise ValueError(f"{option}: key {key!r} given twice")
        items[key] = value.strip()
    if "half_life" not in items and "config" not in items:
        raise ValueError(f"{option}: give half_life=DURATION (e.g. half_life=365d) or "
                         "config=FILE")
    return items
