"""The generator protocol and two generators: an OpenAI-compatible client and an offline reader.

``Generator.generate(prompt, max_tokens=...) -> Generation(text, input_tokens, output_tokens)``
is all the reliability code needs (κ-RRSS, chapter 35.3).

* :class:`OpenAICompatibleGenerator` posts to ``{base_url}/v1/chat/completions`` with httpx.
  ``base_url`` and ``api_key`` default to the environment variables ``CREDRANK_LLM_BASE_URL``
  and ``CREDRANK_LLM_API_KEY`` (``model`` to ``CREDRANK_LLM_MODEL``). Timeouts, connection
  failures, HTTP errors and malformed responses raise :class:`GeneratorError` naming what was
  expected and what came.
* :class:`ExtractiveReader` answers offline from the passages in the prompt (rule in its
  docstring), so every pipeline runs without a model service.

Token counts come from the API's ``usage`` when present; otherwise (and always for the reader)
they are the declared estimate :func:`estimate_tokens`: the number of whitespace-separated
tokens (``Generation.estimated`` says which).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from credrank.core.validation import check_int, check_nonnegative, check_positive

if TYPE_CHECKING:
    import httpx

ENV_BASE_URL = "CREDRANK_LLM_BASE_URL"
ENV_API_KEY = "CREDRANK_LLM_API_KEY"
ENV_MODEL = "CREDRANK_LLM_MODEL"

#: the instruction used by :func:`build_prompt`
INSTRUCTION = ("Answer the question using only the passages below. Reply with a short answer "
               "(a few words). If the passages do not contain the answer, reply: I don't know.")


class GeneratorError(RuntimeError):
    """A generator could not produce an answer; the message says what was expected."""


@dataclass(frozen=True)
class Generation:
    """One generated answer and its token counts (``estimated``: counts are whitespace
    estimates, not the service's ``usage``)."""

    text: str
    input_tokens: int
    output_tokens: int
    estimated: bool = False


@runtime_checkable
class Generator(Protocol):
    """Anything that turns a prompt into a :class:`Generation`."""

    def generate(self, prompt: str, *, max_tokens: int = 64) -> Generation: ...


def estimate_tokens(text: str) -> int:
    """Declared token estimate: the number of whitespace-separated tokens of ``text``."""
    return len(text.split())


def build_prompt(question: str, passages: Sequence[str]) -> str:
    """The prompt κ-RRSS sends for one source: instruction, numbered passages, question.

    Layout (parsed back by :func:`parse_prompt`)::

        <INSTRUCTION>

        Passages:
        [1] first passage
        [2] second passage

        Question: <question>
        Answer:
    """
    lines = [INSTRUCTION, "", "Passages:"]
    lines += [f"[{i}] {' '.join(str(p).split())}" for i, p in enumerate(passages, start=1)]
    lines += ["", f"Question: {' '.join(question.split())}", "Answer:"]
    return "\n".join(lines)


_PASSAGE = re.compile(r"^\[(\d+)\]\s?(.*)$")


def parse_prompt(prompt: str) -> tuple[str, list[str]]:
    """``(question, passages)`` of a prompt made by :func:`build_prompt`.

    For other prompts: the question is the text after the last ``Question:`` marker, else the
    last line containing ``?``; the passages are the ``[n]`` lines, else every other
    non-empty line.
    """
    lines = prompt.splitlines()
    question = ""
    q_line = None
    for i, line in enumerate(lines):
        if line.strip().lower().startswith("question:"):
            question, q_line = line.split(":", 1)[1].strip(), i
    if q_line is None:
        for i, line in enumerate(lines):
            if "?" in line:
                question, q_line = line.strip(), i
    passages = [m.group(2) for line in lines if (m := _PASSAGE.match(line.strip()))]
    if not passages:
        passages = [line.strip() for i, line in enumerate(lines)
                    if line.strip() and i != q_line and line.strip().lower() != "answer:"]
    return question, passages


# --------------------------------------------------------------------------------------------
# offline reader
# --------------------------------------------------------------------------------------------

_STOPWORDS = frozenset("""a an the of in on at to for from by with and or but is are was were be
been being do does did what which who whom whose when where why how that this these those it its
as into than then there their they them he she his her we you your our not no yes can could
would should will shall may might must has have had about over under after before during per
i me my""".split())
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\S+")
_EDGE = re.compile(r"^[^\w]+|[^\w]+$")


def _stem(word: str) -> str:
    w = _EDGE.sub("", word.casefold())
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


class ExtractiveReader:
    """Offline generator: answers from the passages of a :func:`build_prompt` prompt.

    Rule: (1) split passages into sentences (after ``.``, ``!``, ``?``); (2) score each by the
    number of distinct question content words it contains (stop words removed, words compared
    after a crude suffix strip: -ing, -ed, -es, -s); (3) take the best sentence (ties: the
    earliest); if it shares no content word, answer ``I don't know``; (4) the answer is the
    longest run of consecutive sentence words that are not question words, trimmed of stop
    words and punctuation at both ends (ties: the earliest run); an empty run gives the
    whole sentence. Output is cut to ``max_tokens`` whitespace tokens. Token counts are the
    whitespace estimate.
    """

    def generate(self, prompt: str, *, max_tokens: int = 64) -> Generation:
        if not isinstance(prompt, str):
            raise GeneratorError(f"prompt: expected a str, got {type(prompt).__name__}")
        check_int("max_tokens", max_tokens, 1, error=GeneratorError)
        question, passages = parse_prompt(prompt)
        answer = self.answer(question, passages)
        words = answer.split()[:max_tokens]
        text = " ".join(words)
        return Generation(text, estimate_tokens(prompt), len(words), estimated=True)

    def answer(self, question: str, passages: Sequence[str]) -> str:
        """The extracted answer of ``question`` from ``passages`` (see class docstring)."""
        q_words = {_stem(w) for w in _WORD.findall(question)}
        q_content = {w for w in q_words if w and w not in _STOPWORDS}
        best, best_score = "", 0
        for passage in passages:
            for sentence in _SENTENCE.split(passage.strip()):
                words = {_stem(w) for w in _WORD.findall(sentence)}
                score = len(q_content & words)
                if score > best_score:
                    best, best_score = sentence, score
        if best_score == 0:
            return "I don't know"
        tokens = _WORD.findall(best)
        runs: list[list[str]] = []
        current: list[str] = []
        for tok in tokens:
            if _stem(tok) in q_words or not _stem(tok):
                if current:
                    runs.append(current)
                current = []
            else:
                current.append(tok)
        if current:
            runs.append(current)
        trimmed = []
        for run in runs:
            while run and _stem(run[0]) in _STOPWORDS:
                run = run[1:]
            while run and _stem(run[-1]) in _STOPWORDS:
                run = run[:-1]
            trimmed.append(run)
        longest = max(trimmed, key=len, default=[])
        if not longest:
            return _EDGE.sub("", best)
        return _EDGE.sub("", " ".join(longest))


# --------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP client
# --------------------------------------------------------------------------------------------

def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _endpoint(base_url: str) -> str:
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    if base.endswith("/v1"):
        return base + "/chat/completions"
    return base + "/v1/chat/completions"


class OpenAICompatibleGenerator:
    """Chat-completions client for any OpenAI-compatible server (vLLM, llama.cpp, OpenAI, …).

    Args:
        base_url: server root (``http://host:port``, with or without ``/v1``); default
            ``$CREDRANK_LLM_BASE_URL``.
        api_key: bearer token; default ``$CREDRANK_LLM_API_KEY`` (may be absent for local
            servers).
        model: model name; default ``$CREDRANK_LLM_MODEL``.
        timeout: seconds for connect, read and write.
        temperature: sampling temperature (0 = greedy).
        system_prompt: optional system message.
        transport: optional httpx transport (tests).
    """

    def __init__(self, base_url: str | None = None, api_key: str | None = None,
                 model: str | None = None, timeout: float = 30.0, *, temperature: float = 0.0,
                 system_prompt: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        base_url = base_url or os.environ.get(ENV_BASE_URL)
        if not base_url:
            raise GeneratorError(f"base_url: expected a URL such as http://127.0.0.1:8000, "
                                 f"got none (pass base_url= or set ${ENV_BASE_URL})")
        if not base_url.startswith(("http://", "https://")):
            raise GeneratorError(f"base_url: expected an http(s) URL, got {base_url!r}")
        model = model or os.environ.get(ENV_MODEL)
        if not model:
            raise GeneratorError(f"model: expected a model name, got none (pass model= or set "
                                 f"${ENV_MODEL})")
        self.timeout = check_positive("timeout", timeout, error=GeneratorError)
        self.temperature = check_nonnegative("temperature", temperature, error=GeneratorError)
        self.url = _endpoint(base_url)
        self.model = model
        self.system_prompt = system_prompt
        api_key = api_key if api_key is not None else os.environ.get(ENV_API_KEY)
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        import httpx  # here, not at import time: only this generator talks HTTP

        self._client = httpx.Client(timeout=httpx.Timeout(self.timeout), headers=headers,
                                    transport=transport)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAICompatibleGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def generate(self, prompt: str, *, max_tokens: int = 64) -> Generation:
        """POST one chat completion; the first choice's message content is the answer."""
        check_int("max_tokens", max_tokens, 1, error=GeneratorError)
        messages: list[dict[str, str]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": prompt})
        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                "temperature": self.temperature}
        import httpx

        try:
            response = self._client.post(self.url, json=body)
        except httpx.TimeoutException:
            raise GeneratorError(f"POST {self.url}: no response within the {self.timeout:g} s "
                                 "timeout; expected a chat completion") from None
        except httpx.HTTPError as exc:
            raise GeneratorError(f"POST {self.url}: request failed ({type(exc).__name__}: "
                                 f"{exc}); expected a reachable OpenAI-compatible server") from None
        if response.status_code != 200:
            raise GeneratorError(f"POST {self.url}: HTTP {response.status_code}; expected 200 "
                                 f"with a chat completion, got body {_snippet(response.text)!r}")
        try:
            payload = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise GeneratorError(f"POST {self.url}: expected a JSON chat completion, got "
                                 f"non-JSON body {_snippet(response.text)!r}") from None
        text = self._content(payload)
        usage = payload.get("usage")
        if usage is None:
            return Generation(text, estimate_tokens(prompt), estimate_tokens(text), True)
        if not isinstance(usage, dict):
            raise GeneratorError(f"POST {self.url}: usage: expected an object with "
                                 f"prompt_tokens and completion_tokens, got "
                                 f"{_snippet(json.dumps(usage))!r}")
        counts = [check_int(f"POST {self.url}: usage.{key}", usage.get(key), 0,
                            error=GeneratorError)
                  for key in ("prompt_tokens", "completion_tokens")]
        return Generation(text, counts[0], counts[1], False)

    def _content(self, payload: Any) -> str:
        if not isinstance(payload, dict):
            raise GeneratorError(f"POST {self.url}: expected a JSON object with 'choices', got "
                                 f"{type(payload).__name__}")
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices:
            raise GeneratorError(f"POST {self.url}: expected a non-empty 'choices' list, got "
                                 f"{_snippet(json.dumps(payload))!r}")
        first = choices[0]
        message = first.get("message") if isinstance(first, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise GeneratorError(f"POST {self.url}: expected choices[0].message.content to be a "
                                 f"string, got {_snippet(json.dumps(first))!r}")
        return content.strip()
