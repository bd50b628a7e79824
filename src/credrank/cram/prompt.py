"""Question + passages → a prompt string with each passage's exact character span (ch. 35.5).

CrAM needs to know which tokens of the prompt belong to which retrieved passage. The spans are
computed *while the string is built* (never by searching the rendered text):

* :func:`render_user_message` concatenates the instruction, ``Passage i: `` headers, the
  passages verbatim (not stripped or rewritten) separated by blank lines, and the question; the
  span of passage ``d`` is recorded as the text is appended.
* :func:`render_prompt` either uses that message as the plain prompt (``chat=False``), or puts it
  through the tokenizer's chat template as one user message (``chat=True``; the default when
  the tokenizer has a ``chat_template``). The template's prefix is located by rendering the
  template twice, with the message and with an empty message: the message must appear verbatim
  between the same prefix and suffix (otherwise the template rewrote it — trimming, escaping —
  and :class:`~credrank.cram.multipliers.CramInputError` is raised), and every span is offset by
  the prefix length.

Declared policies: passages keep their order (the caller's: file or rank order); a passage that
is empty or whitespace only is an error naming it; chat prompts are tokenised with
``add_special_tokens=False`` (the template already holds the special tokens), plain prompts with
``True`` (:attr:`RenderedPrompt.add_special_tokens` carries the choice to every model call).

:func:`byte_tokenizer` builds a byte-level BPE fast tokenizer with no merges (259 ids) in
memory, for the tiny random test models (:func:`credrank.cram.models.tiny_model` with
``vocab_size=BYTE_VOCAB``): real offsets, no download.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from credrank.cram.multipliers import CramInputError

#: name of the prompt template (recorded in heads files: calibration and use must match)
PROMPT_TEMPLATE = "credrank-cram-qa-v1"
INSTRUCTION = ("Answer the question using the passages below. Reply with a short answer "
               "only.")
#: size of :func:`byte_tokenizer`'s vocabulary (256 bytes + <pad>, <s>, </s>)
BYTE_VOCAB = 259


@dataclass(frozen=True)
class RenderedPrompt:
    """A rendered prompt: ``text[s:e] == passages[d]`` for ``(s, e) = spans[d]``."""

    text: str
    spans: tuple[tuple[int, int], ...]
    template: str
    chat: bool
    add_special_tokens: bool


def render_user_message(question: str, passages: Sequence[str]
                        ) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The plain question-answering message and each passage's ``[start, end)`` in it.

    Layout (template :data:`PROMPT_TEMPLATE`)::

        <instruction> ¶ Passage 1: <passage> ¶ Passage 2: <passage> ¶ Question: <q> / Answer:

    (¶: a blank line, /: a line break).

    With no passages the message is the instruction without "using the passages below".
    """
    if not isinstance(question, str) or not question.strip():
        raise CramInputError(f"question: expected non-empty text, got {question!r:.60}")
    parts: list[str] = []
    length = 0
    spans: list[tuple[int, int]] = []

    def add(piece: str) -> None:
        nonlocal length
        parts.append(piece)
        length += len(piece)

    add(INSTRUCTION if passages else "Answer the question. Reply with a short answer only.")
    add("\n\n")
    for d, passage in enumerate(passages):
        if not isinstance(passage, str) or not passage.strip():
            raise CramInputError(f"passage {d}: expected non-empty text, got {passage!r:.60}")
        add(f"Passage {d + 1}: ")
        start = length
        add(passage)
        spans.append((start, length))
        add("\n\n")
    add(f"Question: {question.strip()}\nAnswer:")
    return "".join(parts), tuple(spans)


def _chat(tokenizer: Any, content: str) -> str:
    return tokenizer.apply_chat_template([{"role": "user", "content": content}],
                                         add_generation_prompt=True, tokenize=False)


def has_chat_template(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` carries a chat template."""
    return bool(getattr(tokenizer, "chat_template", None))


def render_prompt(tokenizer: Any, question: str, passages: Sequence[str], *,
                  chat: bool | None = None) -> RenderedPrompt:
    """Render ``question`` and ``passages`` for ``tokenizer``'s model (see the module text).

    ``chat=None``: the chat template when the tokenizer has one, else the plain message.
    """
    message, spans = render_user_message(question, passages)
    use_chat = has_chat_template(tokenizer) if chat is None else bool(chat)
    if not use_chat:
        return RenderedPrompt(message, spans, PROMPT_TEMPLATE, False, True)
    if not has_chat_template(tokenizer):
        raise CramInputError(f"chat=True but {type(tokenizer).__name__} has no chat_template")
    full = _chat(tokenizer, message)
    empty = _chat(tokenizer, "")
    # the prefix is where the two renderings part; the message must sit verbatim between the
    # empty rendering's prefix and suffix
    p = 0
    limit = min(len(full), len(empty))
    while p < limit and full[p] == empty[p]:
        p += 1
    s = 0
    while s < limit - p and full[len(full) - 1 - s] == empty[len(empty) - 1 - s]:
        s += 1
    prefix = len(empty) - s
    if prefix != p and full[prefix:prefix + len(message)] == message:
        p = prefix  # the message began with the suffix's first characters
    if full != empty[:p] + message + empty[p:]:
        raise CramInputError(f"{type(tokenizer).__name__}'s chat template does not keep the user "
                             "message verbatim (it trims or rewrites it), so passage spans "
                             "cannot be placed; use chat=False")
    shifted = tuple((a + p, b + p) for a, b in spans)
    return RenderedPrompt(full, shifted, f"{PROMPT_TEMPLATE}+chat", True, False)


def byte_tokenizer(*, chat_template: str | None = None) -> Any:
    """An in-memory byte-level fast tokenizer (no merges, :data:`BYTE_VOCAB` ids; ``<pad>`` 0,
    ``<s>`` 1, ``</s>`` 2 then the 256 bytes) for the tiny test models; optional
    ``chat_template`` (Jinja)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for ch in sorted(alphabet):
        vocab[ch] = len(vocab)
    raw = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    raw.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", bos_token="<s>",
                                  eos_token="</s>")
    if chat_template is not None:
        tok.chat_template = chat_template
    return tok
