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
The structure is declared once, :data:`PROFILE_SCHEMA` / :data:`POOL_SCHEMA`: unknown keys,
wrong types (a count must be an integer, a flag a boolean — ``1`` is not ``true``), negative
numbers (counts below 2**63), a missing pool name and an empty profile are refused; then a
repeated pool name and ``selected_heads`` beyond ``heads`` (or without it). The file is read by
:func:`credrank.core.structured.read_structured`. Errors are :class:`ProfileError` naming the
file and the key path (``pool[1].sources``), with what was expected and what was found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from credrank.core.schema import (
    AnyOf,
    Field,
    Flag,
    Integer,
    ListOf,
    Number,
    Table,
    Text,
    got,
)
from credrank.core.structured import read_structured

__all__ = [
    "BUNDLED_PROFILES",
    "COUNT_KEYS",
    "FLAG_KEYS",
    "POOL_SCHEMA",
    "PROFILE_SCHEMA",
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


#: ``selected_heads``: one head count or ``[low, high]`` (``0 ≤ low ≤ high`` checked after)
_SELECTED = AnyOf((Integer(0), ListOf(Integer(0), min_len=1, max_len=2)))

#: one ``[[pool]]`` (module docstring): every key optional but ``name``; no unknown key
POOL_SCHEMA = Table({
    "name": Field(Text()),
    "description": Field(Text(allow_empty=True), required=False),
    **{key: Field(Flag(), required=False) for key in FLAG_KEYS},
    **{key: Field(Integer(0), required=False) for key in COUNT_KEYS},
    "heads": Field(Integer(1), required=False),
    "selected_heads": Field(_SELECTED, required=False),
    "seconds_per_pass": Field(Number(0, open_low=True), required=False),
}, what="a [[pool]] table")

#: a profile document
PROFILE_SCHEMA = Table({
    "name": Field(Text(allow_empty=True), default=""),
    "description": Field(Text(allow_empty=True), default=""),
    "pool": Field(ListOf(POOL_SCHEMA, min_len=1)),
}, what="a profile table (name, description, [[pool]])")


def _pool(raw: dict[str, Any], index: int, source: str) -> Pool:
    """A pool from its schema-checked table, with the checks that relate keys."""
    at = f"{source}: pool[{index}]"
    values = {k: v for k, v in raw.items() if k != "selected_heads"}
    values["name"] = raw["name"].strip()
    if "selected_heads" in raw:
        chosen = raw["selected_heads"]
        low, high = (chosen, chosen) if isinstance(chosen, int) else (chosen[0], chosen[-1])
        if high < low:
            raise ProfileError(f"{at}.selected_heads: expected [low, high] with low ≤ high, "
                               f"got {got(chosen)}")
        heads = raw.get("heads")
        if heads is None:
            raise ProfileError(f"{at}.selected_heads: expected a 'heads' key beside it "
                               "(selected_heads needs 'heads', the total), got none")
        if high > heads:
            raise ProfileError(f"{at}.selected_heads: expected at most heads = {heads}, got "
                               f"{high}")
        values["selected_heads"] = (low, high)
    return Pool(**values, stated=frozenset(raw))


def parse_profile(data: Any, source: str = "<profile>") -> Profile:
    """Validate a parsed TOML document as a profile: :data:`PROFILE_SCHEMA` (types, ranges,
    unknown keys), then the checks that relate keys and unique pool names; ``source`` names
    it in errors."""
    doc = PROFILE_SCHEMA.check(data, source, error=ProfileError)
    pools = [_pool(raw, i, source) for i, raw in enumerate(doc["pool"])]
    seen: dict[str, int] = {}
    for i, pool in enumerate(pools):
        if pool.name in seen:
            raise ProfileError(f"{source}: pool[{i}].name: expected a unique pool name "
                               f"(repeated: already pool[{seen[pool.name]}]), got {pool.name!r}")
        seen[pool.name] = i
    return Profile(source=source, name=doc["name"], description=doc["description"],
                   pools=tuple(pools))


def bundled_profile_path(name: str) -> Path:
    """The path of a shipped example profile (``marketplace``: chapter 35.6's three pools)."""
    if name not in BUNDLED_PROFILES:
        raise ProfileError(f"bundled profile {name!r}: expected one of "
                           f"{', '.join(BUNDLED_PROFILES)}")
    return Path(str(resources.files("credrank.advise").joinpath("profiles", f"{name}.toml")))


def load_profile(path: Path | str) -> Profile:
    """Read and validate a TOML profile file (read by
    :func:`credrank.core.structured.read_structured`: UTF-8 with a UTF-8 byte-order mark
    accepted, bounded size, nesting and number length; every error a :class:`ProfileError`
    naming the file)."""
    data = read_structured(path, what="profile", fmt="toml", error=ProfileError)
    return parse_profile(data, str(path))
