"""``credrank advise``: which credibility methods a deployment's resources support (35.6).

``credrank advise PROFILE.toml [--json]`` reads a profile (:mod:`credrank.advise.pools`),
checks every method of the declared table (:data:`credrank.advise.methods.METHODS`) per pool
and prints, per pool, the feasible candidates with what to validate and their cost arithmetic,
the infeasible methods with the prerequisites they miss — or the branch "prerequisites missing:
obtain evidence, restrict scope or defer". Never a ranking: the table's fixed order.
``PROFILE`` may be ``marketplace``, the shipped example of chapter 35.6. Exit 2 on a bad
profile. ``credrank advise --index DIR`` derives a one-pool profile from what the index holds
instead (:mod:`credrank.advise.from_index`) and says which keys it derived, from which
measurement, and which it cannot derive; a profile file and ``--index`` exclude each other.
"""

from __future__ import annotations

import json as jsonlib
from pathlib import Path
from typing import Annotated

import typer

from credrank.advise.from_index import (
    INDEX_FIELDS,
    MIN_SHARE,
    NOT_DERIVED,
    Derivation,
    IndexFacts,
    profile_from_rows,
)
from credrank.advise.methods import (
    NOT_A_RANKING,
    Cost,
    PoolAdvice,
    advice_document,
    advise_profile,
    decimal_text,
)
from credrank.advise.pools import (
    BUNDLED_PROFILES,
    Profile,
    ProfileError,
    bundled_profile_path,
    load_profile,
)
from credrank.cli.common import fail, index_rows
from credrank.cli.config import from_file


def _value(cost: Cost) -> str:
    """A cost's value as the report prints it: a count with thousands separators, a float
    with 6 decimals, or significant digits where those would show 0 (``2.1e-08 s``)."""
    if cost.value is None:
        return "—"
    if isinstance(cost.value, int):
        return f"{cost.value:,} {cost.unit}".rstrip()
    if cost.unit == "fraction of heads":
        return f"{decimal_text(100 * cost.value)}% of heads"
    return f"{decimal_text(cost.value, trim=True)} {cost.unit}".rstrip()


def _shown(value: object) -> str:
    """A profile value as the TOML file writes it (``false``, ``0``)."""
    return str(value).lower() if isinstance(value, bool) else repr(value)


def render_text(profile: Profile, advice: tuple[PoolAdvice, ...]) -> str:
    """The human report: per pool, candidates (fixed order) or the defer branch, then the
    infeasible methods with their missing prerequisites."""
    title = profile.name or profile.source
    lines = [f"credrank advise: {title} ({profile.source})"]
    if profile.description:
        lines.append(profile.description)
    lines.append(f"note: {NOT_A_RANKING}")
    for pa in advice:
        lines.append("")
        head = f"pool {pa.pool.name}"
        lines.append(f"{head} — {pa.pool.description}" if pa.pool.description else head)
        if pa.feasible:
            lines.append("  feasible candidates:")
        else:
            lines.append(f"  {pa.branch}")
        for ma in pa.methods:
            m = ma.method
            if not (ma.feasible and m.kind == "credibility"):
                continue
            lines.append(f"    {m.name} — {m.credrank}")
            lines.append(f"      validate: {m.validate}")
            for c in ma.costs:
                if c.value is None:
                    line = f"      cost: {c.name}: {c.formula}"
                else:
                    line = f"      cost: {c.name} = {c.formula} = {_value(c)}"
                if c.note:
                    line += f"  ({c.note})"
                lines.append(line)
        blocked = [ma for ma in pa.methods if not ma.feasible and ma.method.kind == "credibility"]
        if blocked:
            lines.append("  not feasible (missing prerequisites):")
            for ma in blocked:
                parts = [f"{x.key} needs {x.needs}, has {_shown(x.has)}"
                         + ("" if x.stated else " (not stated)") for x in ma.missing]
                lines.append(f"    {ma.method.name}: {'; '.join(parts)}")
        for ma in pa.methods:
            if ma.method.kind != "separate":
                continue
            state = ("feasible" if ma.feasible else "missing " + ", ".join(
                x.key for x in ma.missing))
            lines.append(f"  separate requirement: {ma.method.name}: "
                         f"{state}")
    return "\n".join(lines)


def render_derived(facts: IndexFacts, derived: tuple[Derivation, ...]) -> str:
    """What ``--index`` derived: each profile key, its value, the measurement and the rule;
    then the keys an index cannot show (left unstated)."""
    lines = ["", f"derived from the index ({facts.documents:,} documents):"]
    for d in derived:
        lines.append(f"  {d.key} = {_shown(d.value)}: {d.measured}")
        lines.append(f"      rule: {d.rule}")
    lines.append(f"  stored scores (no profile key): machine_text on "
                 f"{facts.with_machine_text:,}, credibility on {facts.with_credibility:,}, "
                 f"domain_score on {facts.with_domain_score:,} documents")
    lines.append("not derived (state them in a profile file to use them):")
    for key, why in NOT_DERIVED.items():
        lines.append(f"  {key}: {why}")
    return "\n".join(lines)


def _index_profile(index_dir: Path) -> tuple[Profile, IndexFacts, tuple[Derivation, ...]]:
    return profile_from_rows(index_rows(index_dir, INDEX_FIELDS), f"index {index_dir}")


def advise(
    profile: Annotated[Path | None, typer.Argument(
        help="a TOML profile: [[pool]] tables of resources (see credrank.advise.pools), or "
             f"a shipped example: {', '.join(BUNDLED_PROFILES)}; or use --index")] = None,
    index_dir: Annotated[Path | None, typer.Option(
        "--index", help="derive the profile from what this index holds (one pool: typed "
                        "URLs, evidence dates, source identities) instead of a profile file")
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="print the advice as JSON")] = False,
) -> None:
    """Feasible credibility methods per content pool, their missing prerequisites and costs
    — never a ranking."""
    if profile is not None and index_dir is not None and from_file("index_dir"):
        index_dir = None  # the PROFILE written wins over the defaults file's index
    if profile is not None and index_dir is not None:
        fail(f"PROFILE ({profile}) and --index ({index_dir}) exclude each other: give a "
             "profile file, or --index DIR to derive the profile from an index")
    if profile is None and index_dir is None:
        fail("expected a PROFILE file (or a shipped example: "
             f"{', '.join(BUNDLED_PROFILES)}) or --index DIR")
    derived: tuple[IndexFacts, tuple[Derivation, ...]] | None = None
    if index_dir is not None:
        loaded, facts, how = _index_profile(index_dir)
        derived = (facts, how)
    else:
        assert profile is not None
        path = profile
        if str(profile) in BUNDLED_PROFILES and not profile.exists():
            path = bundled_profile_path(str(profile))
        try:
            loaded = load_profile(path)
        except ProfileError as exc:
            fail(str(exc))
    advice = advise_profile(loaded)
    if json:
        doc = advice_document(loaded, advice)
        if derived is not None:
            facts, how = derived
            doc["derived"] = {"index": str(index_dir), "facts": facts.to_dict(),
                              "min_share": MIN_SHARE, "fields": [d.to_dict() for d in how],
                              "not_derived": [{"key": k, "why": v}
                                              for k, v in NOT_DERIVED.items()]}
        typer.echo(jsonlib.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        text = render_text(loaded, advice)
        if derived is not None:
            text += "\n" + render_derived(*derived)
        typer.echo(text)
