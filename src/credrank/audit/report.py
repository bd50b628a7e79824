"""A trust profile as a report: Markdown, and one self-contained HTML page (chapter 35.1).

Chapter 35.1's operating rules: "report defined component metrics, missing entries,
uncertainty and stage tags; keep privacy and other hard requirements independently visible".
So the report opens with the gate results (PASS/FAIL, a not-measured gate failing), then the
radar with its area (or "not defined") and caveats, then every dimension with its value, unit,
interval, declared scale and direction, r, metric, judge, denominator, stage tags and
command/data/settings. A dimension not measured reads "not measured — reason". The HTML page
escapes every profile text and embeds the images as base64 data URIs.
"""

from __future__ import annotations

import base64
import html
import os
import re
from collections.abc import Sequence
from pathlib import Path

from credrank.audit.profile import (
    Entry,
    GateResult,
    TrustProfile,
    audit_passed,
    check_gates,
    gate_texts,
)
from credrank.audit.radar import CAVEATS, RadarSeries, measured_elsewhere, radar_series
from credrank.core.files import atomic_write_text

__all__ = ["render_html", "render_markdown", "write_report"]

_MIME = {".png": "image/png", ".svg": "image/svg+xml"}


def _num(x: float) -> str:
    """Six significant digits (a gate's own explanation keeps the digits that decide it,
    :func:`~credrank.audit.profile.gate_texts`)."""
    return f"{x:g}"


def _verdict(results: Sequence[GateResult]) -> str:
    if not results:
        return "no hard gates declared"
    failed = sum(not r.passed for r in results)
    if failed:
        return f"FAIL — {failed} of {len(results)} gate(s) failed"
    return f"PASS — all {len(results)} gate(s) passed"


def _requirement(r: GateResult) -> str:
    shown = _num(r.gate.threshold) if r.value is None else gate_texts(r.value,
                                                                      r.gate.threshold)[1]
    return f"{r.gate.dimension} {r.gate.op} {shown}"


def _gate_value(r: GateResult) -> str:
    """The value beside its gate, with the digits that tell it from the threshold."""
    return "not measured" if r.value is None else gate_texts(r.value, r.gate.threshold)[0]


def _area_text(s: RadarSeries) -> str:
    if s.area is None:
        return (f"area not defined (gap: {', '.join(s.missing)} not measured; a missing axis "
                "is a gap, not 0)")
    return (f"area {s.area:.6f}, normalised {s.normalised_area:.6f} "
            f"(Σ r_i·r_(i+1) = {s.adjacent_product_sum:.6f})")


def _caveats(profile: TrustProfile, series: RadarSeries) -> list[str]:
    """The radar's caveats, then a note per axis measured on another system."""
    return [*CAVEATS, *measured_elsewhere([profile], [series.label])]


def _entry_facts(e: Entry) -> list[tuple[str, str]]:
    """(label, text) pairs of one entry, in the order the report shows them."""
    facts: list[tuple[str, str]] = [("stages", ", ".join(e.stages))]
    if e.measured and e.value is not None and e.scale is not None:
        value = _num(e.value) + (f" {e.unit}" if e.unit else "")
        facts.append(("value", value))
        if e.measured_on:
            facts.append(("measured on", e.measured_on))
        if e.reads_labels is not None:
            facts.append(("reads labels", "yes: evaluation labels" if e.reads_labels
                          else "no"))
        facts.append(("interval", "not reported" if e.interval is None
                      else f"[{_num(e.interval[0])}, {_num(e.interval[1])}]"))
        better = "higher" if e.higher_is_better else "lower"
        facts.append(("declared scale", f"[{_num(e.scale[0])}, {_num(e.scale[1])}], {better} "
                                        "is better"))
        facts.append(("radar r", f"{e.normalised:.6f}"))
    else:
        facts.append(("value", f"not measured — {e.reason}"))
    for key in ("metric", "unit", "judge", "denominator", "command", "data", "settings"):
        text = getattr(e, key)
        if key == "unit" and e.measured:
            continue  # shown with the value
        facts.append((key, text if text else "not stated"))
    return facts


def _md(text: str) -> str:
    """Escape a profile text for a Markdown table cell, list item or paragraph: one line, its
    inline markup (``*``, an ``_`` opening a word, `````, a link's ``](``) and table bars
    escaped, HTML's ``<`` as an entity, and a line opening that Markdown reads as a block
    (``# heading``, ``> quote``, ``- item``, ``1. item``) escaped too: a description opening
    with ``#`` became a heading."""
    out = re.sub(r"([\\`*|])", r"\\\1", " ".join(text.split("\n")))
    out = re.sub(r"(?<![A-Za-z0-9])_", r"\\_", out)  # an opener only: top_k stays as it is
    out = out.replace("](", "]\\(").replace("<", "&lt;")  # no link, no HTML
    return re.sub(r"^(\s*)([#>+-]|\d+[.)])(?=\s|$)", r"\1\\\2", out)


def _code(text: str) -> str:
    """``text`` as a Markdown code span: fenced by more backticks than it holds in a row (a
    config file named with a backtick broke the span)."""
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_markdown(profile: TrustProfile, results: Sequence[GateResult] | None = None,
                    images: Sequence[Path | str] = ()) -> str:
    """The report as Markdown; ``results`` defaults to :func:`check_gates` of the profile and
    ``images`` (e.g. the radar PNG) are linked by the paths given."""
    results = check_gates(profile) if results is None else list(results)
    series = radar_series(profile)
    lines = [f"# Trust audit: {_md(profile.title)}", ""]
    if profile.description:
        lines += [_md(profile.description), ""]
    lines += [f"Profile: {_code(str(profile.source))}", "", "## Hard gates", "",
              f"**Audit: {_verdict(results)}.** Gates are checked on raw values, apart from "
              "any average or area; a gate on a dimension not measured fails.", ""]
    if results:
        lines += ["| result | gate | requirement | value | reason |",
                  "|---|---|---|---|---|"]
        lines += [f"| **{r.label}** | {_md(r.gate.name)} | {_md(_requirement(r))} | "
                  f"{_md(_gate_value(r))} | {_md(r.gate.reason)} |" for r in results]
        lines.append("")
    lines += ["## Radar", ""]
    lines += [f"![radar]({Path(p).as_posix()})" for p in images]
    if images:
        lines.append("")
    lines += [f"{_md(series.label)}: {_area_text(series)}.", ""]
    lines += [f"- {_md(c)}" for c in _caveats(profile, series)]
    lines += ["", "## Dimensions", ""]
    for e in profile.entries:
        lines += [f"### {e.dimension}", ""]
        lines += [f"- **{label}**: {_md(text)}" for label, text in _entry_facts(e)]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _data_uri(path: Path | str) -> str:
    p = Path(path)
    mime = _MIME.get(p.suffix.lower())
    if mime is None:
        raise ValueError(f"{p}: expected a .png or .svg image to embed, got {p.suffix!r}")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ValueError(f"{p}: cannot read the image to embed: {exc}") from None
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


_STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3rem .5rem;
text-align:left;vertical-align:top}.pass{color:#1e7b34;font-weight:bold}.fail{color:#b03a2e;
font-weight:bold}.missing{color:#b03a2e}img{max-width:100%}dt{font-weight:bold}"""


def render_html(profile: TrustProfile, results: Sequence[GateResult] | None = None,
                images: Sequence[Path | str] = ()) -> str:
    """The report as one self-contained HTML page: the same content as
    :func:`render_markdown`, every text escaped, images embedded as base64 data URIs."""
    results = check_gates(profile) if results is None else list(results)
    series = radar_series(profile)
    esc = html.escape
    title = f"Trust audit: {profile.title}"
    verdict = _verdict(results)
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{esc(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
           f"<h1>{esc(title)}</h1>"]
    if profile.description:
        out.append(f"<p>{esc(profile.description)}</p>")
    out += [f"<p>Profile: <code>{esc(profile.source)}</code></p>",
            '<section id="gates">', "<h2>Hard gates</h2>",
            f'<p class="{"pass" if audit_passed(results) else "fail"}">Audit: '
            f"{esc(verdict)}.</p>",
            "<p>Gates are checked on raw values, apart from any average or area; a gate on a "
            "dimension not measured fails.</p>"]
    if results:
        out.append("<table><tr><th>result</th><th>gate</th><th>requirement</th><th>value</th>"
                   "<th>reason</th></tr>")
        for r in results:
            cls = "pass" if r.passed else "fail"
            out.append(f'<tr><td class="{cls}">{esc(r.label)}</td><td>{esc(r.gate.name)}</td>'
                       f"<td>{esc(_requirement(r))}</td><td>{esc(_gate_value(r))}</td>"
                       f"<td>{esc(r.gate.reason)}</td></tr>")
        out.append("</table>")
    out += ["</section>", '<section id="radar">', "<h2>Radar</h2>"]
    for p in images:
        out.append(f'<p><img alt="{esc(Path(p).name)}" src="{_data_uri(p)}"></p>')
    out.append(f"<p>{esc(series.label)}: {esc(_area_text(series))}.</p>")
    out.append("<ul>" + "".join(f"<li>{esc(c)}</li>" for c in _caveats(profile, series))
               + "</ul>")
    out += ["</section>", '<section id="dimensions">', "<h2>Dimensions</h2>"]
    for e in profile.entries:
        out.append(f'<h3 id="{esc(e.dimension)}">{esc(e.dimension)}</h3><dl>')
        for label, text in _entry_facts(e):
            cls = ' class="missing"' if text.startswith("not measured") else ""
            out.append(f"<dt>{esc(label)}</dt><dd{cls}>{esc(text)}</dd>")
        out.append("</dl>")
    out += ["</section>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


def write_report(profile: TrustProfile, out_dir: Path | str,
                 results: Sequence[GateResult] | None = None,
                 images: Sequence[Path | str] = (), stem: str = "report") -> tuple[Path, Path]:
    """Write ``STEM.md`` (images linked relative to ``out_dir``) and ``STEM.html`` (images
    embedded) into ``out_dir``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = check_gates(profile) if results is None else list(results)
    relative = [os.path.relpath(Path(p).resolve(), out.resolve()) for p in images]
    md, page = out / f"{stem}.md", out / f"{stem}.html"
    atomic_write_text(md, render_markdown(profile, results, relative))
    atomic_write_text(page, render_html(profile, results, images))
    return md, page
