"""A deployment profile for ``credrank advise``: what each content pool has (chapter 35.6).

The chapter evaluates feasibility *per content pool and domain*, so a profile is a list of
pools, each stating its resources. A TOML file::

    name = "marketplace"                      # optional
    description = "…"                         # optional

    [[pool]]
    name = "seller-listings"                  # required, unique
    description = "…"                         # optional
    provenance = true                         # URLs/hosts map to distinguishable source types
    dates = true                              # evidence dates (observed/verified/published)
    stable_source_ids = true                  # meaningful, stable source identities
    sources = 1000                            # S, source identities
    calibration_questions = 200               # Q, covered calibration questions
    labelled_pages = 0                        # pages labelled credible / not credible
    credible_annotations = false              # usable credibility annotations to train on
    inference_annotations = false             # credibility inputs for each passage at inference
    training_resources = false                # fine-tuning data, compute and access
    document_scorer = false                   # a validated upstream document scorer
    misinformation_examples = 0               # labelled examples with a known wrong answer
    validation_examples = 0                   # a separate validation set (head budget)
    attention_access = false                  # white-box access to the attention implementation
    heads = 1024                              # optional: attention heads (layers × per layer)
    selected_heads = [100, 300]               # optional: head-budget range to report
    seconds_per_pass = 0.05                   # optional: single-example pass time, seconds

Declared defaults: a capability not stated is **absent** (``false`` / ``0``), and the pool
remembers which keys it stated, so the advice can say "not stated" rather than "stated absent".
Unknown keys, wrong types (a count must be an integer, a flag a boolean — ``1`` is not
``true``), negative numbers, a missing or repeated pool name and an empty profile are errors
(:class:`ProfileError`) naming the file, the pool and the key, with what was expected and what
was found.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "BUNDLED_PROFILES",
    "COUNT_KEYS",
    "FLAG_KEYS",
    "Pool",
    "Profile",
    "ProfileError",
    "bundled_profile_path",
    "load_profile",
    "parse_profile",
]


class ProfileError(ValueError):
    """A profile file that cannot be read or does not validate; the message names the file,
    the pool and the key."""


#: boolean capabilities: key → what it means (the advice prints these texts)
FLAG_KEYS: dict[str, str] = {
    "provenance": "URLs/hosts that map to distinguishable source types",
    "dates": "evidence dates (observed, verified or published)",
    "stable_source_ids": "meaningful, stable source identities",
    "credible_annotations": "usable credibility annotations to train on",
    "inference_annotations": "credibility annotations for each passage at inference",
    "training_resources": "fine-tuning resources (data, compute, model access)",
    "document_scorer": "a validated upstream document-credibility scorer",
    "attention_access": "white-box access to the generator's attention implementation",
}

#: nonnegative integer counts: key → what it counts
COUNT_KEYS: dict[str, str] = {
    "sources": "source identities S",
    "calibration_questions": "covered calibration questions Q",
    "labelled_pages": "pages labelled credible / not credible",
    "misinformation_examples": "labelled misinformation calibration examples (known wrong "
                               "answers)",
    "validation_examples": "separate validation examples (head budget)",
}

#: optional numbers that only feed the cost arithmetic
_OPTIONAL_KEYS = ("heads", "selected_heads", "seconds_per_pass")
_TEXT_KEYS = ("name", "description")
_POOL_KEYS = (*_TEXT_KEYS, *FLAG_KEYS, *COUNT_KEYS, *_OPTIONAL_KEYS)
_TOP_KEYS = ("name", "description", "pool")

#: profiles shipped with credrank (``credrank/advise/profiles/NAME.toml``)
BUNDLED_PROFILES = ("marketplace",)


@dataclass(frozen=True)
class Pool:
    """One content pool's resources. ``stated`` holds the keys the profile wrote (the others
    took the declared default: absent)."""

    name: str
    description: str = ""
    provenance: bool = False
    dates: bool = False
    stable_source_ids: bool = False
    credible_annotations: bool = False
    inference_annotations: bool = False
    training_resources: bool = False
    document_scorer: bool = False
    attention_access: bool = False
    sources: int = 0
    calibration_questions: int = 0
    labelled_pages: int = 0
    misinformation_examples: int = 0
    validation_examples: int = 0
    heads: int | None = None
    selected_heads: tuple[int, int] | None = None
    seconds_per_pass: float | None = None
    stated: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Profile:
    """A validated profile: its source (file name), optional name/description, the pools in
    file order."""

    source: str
    name: str
    description: str
    pools: tuple[Pool, ...]


def _type_name(value: Any) -> str:
    return type(value).__name__


def _got(value: Any) -> str:
    return f"{_type_name(value)} {value!r}"


def _parse_pool(raw: Any, index: int, source: str) -> Pool:
    where = f"{source}: pool #{index + 1}"
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: expected a table ([[pool]]), got {_got(raw)}")
    name = raw.get("name")
    if name is None:
        raise ProfileError(f"{where}: key 'name': missing (every pool needs a name)")
    if not isinstance(name, str) or not name.strip():
        raise ProfileError(f"{where}: key 'name': expected a nonempty string, got {_got(name)}")
    name = name.strip()
    where = f"{source}: pool {name!r}"
    values: dict[str, Any] = {"name": name}
    for key, value in raw.items():
        if key not in _POOL_KEYS:
            raise ProfileError(f"{where}: unknown key {key!r}; expected one of "
                               f"{', '.join(_POOL_KEYS)}")
        at = f"{where}: key {key!r}"
        if key == "description":
            if not isinstance(value, str):
                raise ProfileError(f"{at}: expected a string, got {_got(value)}")
            values[key] = value
        elif key in FLAG_KEYS:
            if not isinstance(value, bool):
                raise ProfileError(f"{at}: expected a boolean (true/false), got {_got(value)}")
            values[key] = value
        elif key in COUNT_KEYS or key == "heads":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ProfileError(f"{at}: expected an integer ≥ 0, got {_got(value)}")
            if value < 0:
                raise ProfileError(f"{at}: expected an integer ≥ 0, got {value}")
            if key == "heads" and value == 0:
                raise ProfileError(f"{at}: expected an integer ≥ 1, got 0")
            values[key] = value
        elif key == "seconds_per_pass":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ProfileError(f"{at}: expected a number of seconds > 0, got {_got(value)}")
            if not math.isfinite(value) or value <= 0:
                raise ProfileError(f"{at}: expected a number of seconds > 0, got {value}")
            values[key] = float(value)
        elif key == "selected_heads":
            values[key] = _parse_selected(value, at)
    heads, selected = values.get("heads"), values.get("selected_heads")
    if selected is not None:
        if heads is None:
            raise ProfileError(f"{where}: key 'selected_heads': needs 'heads' (the total)")
        if selected[1] > heads:
            raise ProfileError(f"{where}: key 'selected_heads': expected at most heads = "
                               f"{heads}, got {selected[1]}")
    return Pool(**values, stated=frozenset(raw))


def _parse_selected(value: Any, at: str) -> tuple[int, int]:
    """``n`` or ``[low, high]`` with ``0 ≤ low ≤ high``."""
    items = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if (not isinstance(items, list) or len(items) not in (1, 2)
            or any(isinstance(v, bool) or not isinstance(v, int) for v in items)):
        raise ProfileError(f"{at}: expected an integer or [low, high] integers, got "
                           f"{_got(value)}")
    low, high = items[0], items[-1]
    if low < 0 or high < low:
        raise ProfileError(f"{at}: expected 0 ≤ low ≤ high, got {value!r}")
    return low, high


def parse_profile(data: Any, source: str = "<profile>") -> Profile:
    """Validate a parsed TOML document (a dict) as a profile; ``source`` names it in errors."""
    if not isinstance(data, dict):
        raise ProfileError(f"{source}: expected a table, got {_got(data)}")
    for key, value in data.items():
        if key not in _TOP_KEYS:
            raise ProfileError(f"{source}: unknown top-level key {key!r}; expected one of "
                               f"{', '.join(_TOP_KEYS)} (pool keys go under [[pool]])")
        if key in ("name", "description") and not isinstance(value, str):
            raise ProfileError(f"{source}: key {key!r}: expected a string, got {_got(value)}")
    raw_pools = data.get("pool")
    if raw_pools is None:
        raise ProfileError(f"{source}: key 'pool': missing; expected at least one [[pool]]")
    if not isinstance(raw_pools, list) or not raw_pools:
        raise ProfileError(f"{source}: key 'pool': expected a nonempty array of tables "
                           f"([[pool]]), got {_got(raw_pools)}")
    pools = [_parse_pool(raw, i, source) for i, raw in enumerate(raw_pools)]
    seen: set[str] = set()
    for pool in pools:
        if pool.name in seen:
            raise ProfileError(f"{source}: pool {pool.name!r}: key 'name': repeated; pool names "
                               "must be unique")
        seen.add(pool.name)
    return Profile(source=source, name=str(data.get("name", "")),
                   description=str(data.get("description", "")), pools=tuple(pools))


def bundled_profile_path(name: str) -> Path:
    """The path of a shipped example profile (``marketplace``: chapter 35.6's three pools)."""
    if name not in BUNDLED_PROFILES:
        raise ProfileError(f"bundled profile {name!r}: expected one of "
                           f"{', '.join(BUNDLED_PROFILES)}")
    return Path(str(resources.files("credrank.advise").joinpath("profiles", f"{name}.toml")))


def load_profile(path: Path | str) -> Profile:
    """Read and validate a TOML profile file."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{source}: cannot read profile: {exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{source}: invalid TOML: {exc}") from exc
    return parse_profile(data, source)
