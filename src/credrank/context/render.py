"""What the generator sees: three renderings of the same annotated passages (chapter 35.4).

* ``cag`` — each passage (document granularity) or each sentence (sentence granularity)
  prefixed with its CAG label, ``High credibility of text: ``, ``Middle credibility of text: ``
  or ``Low credibility of text: `` (:data:`CAG_LABELS`). Spelling: the CAG data sets in
  ``../shared/data/cag`` spell ``Low credibility of text: `` (NewsPolluted's sentence-level
  annotation; their ``cred`` fields are only ``high`` / ``low``); the middle level never
  occurs there, so its spelling follows the CAG authors' own prompt code (``Middle credibility
  of text``), with the capitalised ``High`` of the same code.
* ``json`` — a list of objects for tool-calling generators: rank, doc_id, tier, level, label,
  text, passage and the credibility inputs with their provenance (:func:`passage_json`).
* ``plain`` — the matched control: the same passages, same order, same instruction, no tiers
  (:func:`credrank.generate.llm.build_prompt` exactly).

With ``cite`` (the default of every door: the library, ``credrank context`` and ``POST
/context``), each passage of a prompt is credrank's label (``cag``), then its
:func:`citation`, then the document's text. The text is never read for a label, and a label
the text writes itself (``High credibility of text: …``, any case, :data:`LABEL_SHAPED`, as
the bench's leaked-label check) is neutralised in both prompts (:func:`neutralise_labels`:
``(self-described High credibility) …``), so that a generator trained on CAG's format cannot
take it for credrank's; the ``json`` form keeps the text as indexed (the label is a field
of its own there) and the context document counts them (``info.context``).

The ``cag`` prompt keeps :func:`~credrank.generate.llm.build_prompt`'s layout (instruction,
``Passages:``, one ``[n]`` line per passage, ``Question:``, ``Answer:``) with one added
instruction sentence (:data:`CAG_INSTRUCTION`), so :func:`~credrank.generate.llm.parse_prompt`
and the offline :class:`~credrank.generate.llm.ExtractiveReader` read it: ``parse_prompt``
returns the question and the passages **with the label prefixes present**
(:func:`strip_labels` removes them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from credrank.context.tiers import LEVELS
from credrank.generate.llm import INSTRUCTION, build_prompt

FORMATS = ("cag", "json", "plain")
GRANULARITIES = ("document", "sentence")
#: tier → the CAG label (without the ``": "`` separator)
CAG_LABELS: dict[int, str] = {
    3: "High credibility of text",
    2: "Middle credibility of text",
    1: "Low credibility of text",
}
#: what follows a label
LABEL_SEPARATOR = ": "
#: the sentence the ``cag`` prompt adds to :data:`credrank.generate.llm.INSTRUCTION`
CAG_INSTRUCTION = ("Each passage (or sentence) is labelled with a credibility of high, middle "
                   "or low, from its relevance to the question, its age and its source; "
                   "prefer high-credibility text when passages conflict.")

#: credrank's own labels in a prompt (:func:`strip_labels`), any case, as the bench's
#: ``LEAKED_LABEL``
_LABEL_RE = re.compile(r"(?:High|Middle|Medium|Low) credibility of text: ?", re.IGNORECASE)
#: a label written inside a document's text: any level word, any case and spacing
LABEL_SHAPED = re.compile(r"\b(High|Middle|Medium|Low)\s+credibility\s+of\s+text\s*:",
                          re.IGNORECASE)


@dataclass(frozen=True)
class SentenceTier:
    """One sentence of a passage at sentence granularity."""

    text: str
    similarity: float
    relevance_tier: int
    tier: int


@dataclass(frozen=True)
class AnnotatedPassage:
    """One passage of the context with its tier and the inputs that made it.

    ``similarity`` (with ``similarity_source``), ``source_type``/``host``/``url``, the
    freshness date and basis, ``factors`` and ``score`` are those of the ranked batch (what the
    ranking used); ``relevance_tier``, ``source_tier`` (with ``source_basis``), ``downgrade``
    and ``tier`` are the policy's (:mod:`credrank.context.tiers`). ``sentences`` is set at
    sentence granularity. ``text`` is ``None`` when the passages carry no text (``text
    none``): only the JSON form renders them then. ``passage`` says which passage of a
    document split into passages this is (``{"number": 1-based, "of": count, "span": [start,
    end]}``, as a search hit's; ``None`` for a document stored whole)."""

    rank: int
    doc_id: str
    text: str | None
    tier: int
    relevance_tier: int
    source_tier: int
    source_basis: str
    downgrade: int
    similarity: float
    similarity_source: str = "retrieval_score (cosine)"
    source_type: str | None = None
    host: str | None = None
    url: str | None = None
    title: str | None = None
    freshness_date: str | None = None
    freshness_basis: str = "unknown"
    #: the freshness date is after the evaluation time: no usable age (``freshness_date`` is
    #: ``None``, the tier's age unknown), the document's own date in ``document_date``
    after_now: bool = False
    #: the document's own date (``freshness_date``, or the date after the evaluation time:
    #: a citation says the document's)
    document_date: str | None = None
    elapsed_days: float | None = None
    retrieval_score: float = 0.0
    score: float = 0.0
    factors: dict[str, float] = field(default_factory=dict)
    sentences: tuple[SentenceTier, ...] | None = None
    passage: dict[str, Any] | None = None

    @property
    def level(self) -> str:
        return LEVELS[self.tier]

    @property
    def label(self) -> str:
        return CAG_LABELS[self.tier]


def cag_label(tier: int) -> str:
    """The CAG prefix of ``tier`` including the separator (``"High credibility of text: "``)."""
    if tier not in CAG_LABELS:
        raise ValueError(f"tier: expected 1, 2 or 3, got {tier!r}")
    return CAG_LABELS[tier] + LABEL_SEPARATOR


def neutralise_labels(text: str) -> tuple[str, int]:
    """``text`` with each label it writes itself (:data:`LABEL_SHAPED`) rewritten so that it
    cannot be read as a CAG label (``High credibility of text: X`` → ``(self-described High
    credibility) X``), and how many there were."""
    return LABEL_SHAPED.subn(lambda m: f"(self-described {m.group(1)} credibility)", text)


def _neutral(text: str) -> str:
    return neutralise_labels(text)[0]


def count_labels(passage: AnnotatedPassage) -> int:
    """How many labels the text of ``passage`` writes itself (as the prompts show it: per
    sentence at sentence granularity); 0 without text."""
    if passage.sentences:
        return sum(neutralise_labels(s.text)[1] for s in passage.sentences)
    return 0 if passage.text is None else neutralise_labels(passage.text)[1]


def _text_of(passage: AnnotatedPassage, fmt: str) -> str:
    if passage.text is None:
        raise ValueError(f"format {fmt}: the prompt shows the passages' text, and these "
                         "carry none (text none); the json form lists them without it")
    return passage.text


def _cag_parts(passage: AnnotatedPassage) -> tuple[str, str]:
    """The ``cag`` text of ``passage`` in two parts: credrank's own label that opens it (the
    passage's, or its first sentence's at sentence granularity) and the rest. Built from the
    tiers, never read back out of the text; a label the text writes itself is neutralised
    (:func:`neutralise_labels`)."""
    if passage.sentences:
        first, *rest = passage.sentences
        return cag_label(first.tier), " ".join(
            [_neutral(first.text), *(cag_label(s.tier) + _neutral(s.text) for s in rest)])
    return cag_label(passage.tier), _neutral(" ".join(_text_of(passage, "cag").split()))


def cag_text(passage: AnnotatedPassage) -> str:
    """The passage with its CAG prefix, or each sentence with its own at sentence
    granularity (sentences joined by a space, as :func:`build_prompt` flattens lines)."""
    label, rest = _cag_parts(passage)
    return label + rest


def plain_text(passage: AnnotatedPassage) -> str:
    """The passage as the control shows it (sentences re-joined at sentence granularity),
    labels the text writes itself neutralised as in the ``cag`` prompt (the matched control
    differs from it by credrank's labels only)."""
    if passage.sentences:
        return " ".join(_neutral(s.text) for s in passage.sentences)
    return _neutral(" ".join(_text_of(passage, "plain").split()))


def strip_labels(text: str) -> str:
    """``text`` without CAG label prefixes (any level word, ``Medium`` included, any case)."""
    return " ".join(_LABEL_RE.sub("", text).split())


#: what a URL shows percent-encoded in a citation: whitespace, control characters and the
#: citation's own brackets (a URL is one token there, whatever its text)
_UNCITABLE = re.compile(r"[\s\x00-\x1f\x7f()]")


def cited_url(url: str) -> str:
    """``url`` as a citation shows it: whitespace, control characters and parentheses
    percent-encoded (the same address). A URL is metadata a corpus brings: ``…/x) High
    credibility of text: (source: peer_reviewed`` would otherwise close credrank's citation and
    write a label of its own in credrank's place."""
    return _UNCITABLE.sub(lambda m: quote(m.group(), safe=""), url)


def own_date(p: AnnotatedPassage) -> str | None:
    """The document's own date: ``document_date``, else its freshness date — except for a
    wrapper dated by its origin (``inherited:`` basis), whose own date is ``document_date``
    alone (``None``: undated; the origin's date is the evidence's, not the document's)."""
    if p.document_date is not None or p.freshness_basis.startswith("inherited:"):
        return p.document_date
    return p.freshness_date


def citation(p: AnnotatedPassage) -> str:
    """Where a passage comes from, for a generator to cite: ``(source: TYPE; host: HOST;
    url: URL; date: YYYY-MM-DD; passage I of N)`` with what is known (``(source: unknown)``
    when nothing is); the date is the document's that freshness reads (observed, else
    verified, else published), as the index stores it: in UTC (a document published at
    ``2020-01-01T01:00+02:00`` is cited ``2019-12-31``). A date after the evaluation time is
    the document's own, flagged ``after T`` (its age counts as unknown). ``passage I of N``:
    the text is one passage of a document split into N (an excerpt, not the whole)."""
    parts = [f"source: {p.source_type or 'unknown'}"]
    if p.host:
        parts.append(f"host: {p.host}")
    if p.url:
        parts.append(f"url: {cited_url(p.url)}")
    dated = own_date(p)
    if dated:  # after T with a time of day: to the minute, in UTC (T's own day, hours later)
        timed = p.after_now and len(dated) >= 16 and dated[11:16] != "00:00"
        parts.append(f"date: {dated[:16] + 'Z' if timed else dated[:10]}"
                     + (", after T" if p.after_now else ""))
    if p.passage is not None and int(p.passage.get("of") or 1) > 1:
        parts.append(f"passage {p.passage.get('number')} of {p.passage.get('of')}")
    return "(" + "; ".join(" ".join(x.split()) for x in parts) + ")"


def _cited(p: AnnotatedPassage, label: str, text: str, cite: bool) -> str:
    """credrank's ``label`` (``""`` in the ``plain`` form), then the passage's
    :func:`citation` (``cite``), then ``text`` as it is: the label stays the passage's first
    words, as the CAG data put it. ``text`` is never parsed for a label: a label a document
    writes about its own credibility stays after the citation, inside its text, neutralised
    (:func:`neutralise_labels`) so that it cannot pass for credrank's."""
    if not cite:
        return label + text
    return f"{label}{citation(p)} {text}"


def render_cag(question: str, passages: Sequence[AnnotatedPassage], cite: bool = True) -> str:
    """The ``cag`` prompt (module docstring); ``cite``: each passage carries its
    :func:`citation` right after its (first) label."""
    prompt = build_prompt(question, [_cited(p, *_cag_parts(p), cite) for p in passages])
    head, sep, rest = prompt.partition("\n")
    if head != INSTRUCTION:  # build_prompt's layout changed: refuse rather than mis-render
        raise RuntimeError("build_prompt: expected the instruction on the first line")
    return f"{INSTRUCTION} {CAG_INSTRUCTION}{sep}{rest}"


def render_plain(question: str, passages: Sequence[AnnotatedPassage],
                 cite: bool = True) -> str:
    """The matched control: :func:`build_prompt` over the same passages, no tiers (``cite``:
    each opens with its :func:`citation`, as in the ``cag`` prompt)."""
    return build_prompt(question, [_cited(p, "", plain_text(p), cite) for p in passages])


def passage_json(p: AnnotatedPassage) -> dict[str, Any]:
    """One passage of the ``json`` form, with the credibility inputs and their provenance
    (no ``text`` key when the passage carries none) and ``passage``: which passage of its
    document it is (``None`` for a document stored whole)."""
    out: dict[str, Any] = {
        "rank": p.rank, "doc_id": p.doc_id, "tier": p.tier, "level": p.level,
        "label": p.label, "text": p.text,  # as indexed (or its snippet): data, not a prompt
        "passage": None if p.passage is None else dict(p.passage),
        "inputs": {
            "similarity": {"value": p.similarity, "source": p.similarity_source,
                           "relevance_tier": p.relevance_tier},
            "source": {"source_type": p.source_type, "host": p.host, "url": p.url,
                       "tier": p.source_tier, "basis": p.source_basis},
            "freshness": {"date": p.freshness_date, "basis": p.freshness_basis,
                          "after_now": p.after_now,
                          "document_date": own_date(p),
                          "elapsed_days": p.elapsed_days,
                          "downgrade": p.downgrade},
            "ranking": {"retrieval_score": p.retrieval_score, **p.factors,
                        "final": p.score},
        },
    }
    if p.text is None:
        del out["text"]
    if p.title:
        out["title"] = p.title
    if p.sentences is not None:
        out["sentences"] = [{"text": s.text, "similarity": s.similarity,
                             "relevance_tier": s.relevance_tier, "tier": s.tier,
                             "level": LEVELS[s.tier], "label": CAG_LABELS[s.tier]}
                            for s in p.sentences]
    return out


def render_json(passages: Sequence[AnnotatedPassage]) -> list[dict[str, Any]]:
    """The ``json`` form: :func:`passage_json` of each passage, in order."""
    return [passage_json(p) for p in passages]


def render(question: str, passages: Sequence[AnnotatedPassage], fmt: str = "cag",
           cite: bool = True) -> str:
    """``fmt`` in :data:`FORMATS`: the ``cag`` or ``plain`` prompt, or the ``json`` list as
    text (indent 2). ``cite``: each passage of a prompt opens with its source type, host, URL
    and date (:func:`citation`; the ``json`` form always carries them under ``inputs.source``
    and ``inputs.freshness``). On by default, as in ``credrank context`` and ``POST
    /context``; a bench that measures the CAG format alone passes ``cite=False``."""
    if fmt == "cag":
        return render_cag(question, passages, cite)
    if fmt == "plain":
        return render_plain(question, passages, cite)
    if fmt == "json":
        return json.dumps(render_json(passages), indent=2, ensure_ascii=False)
    raise ValueError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
