"""The generator protocol: the OpenAI-compatible client against a loopback stub server, and
the offline extractive reader."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from credrank.generate import (
    ExtractiveReader,
    Generation,
    Generator,
    GeneratorError,
    OpenAICompatibleGenerator,
    build_prompt,
    estimate_tokens,
)
from credrank.reliability.rrss import kappa_rrss

RELEASE = threading.Event()


class Handler(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict]] = []

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        Handler.requests.append({"path": self.path, "body": body,
                                 "auth": self.headers.get("Authorization")})
        route = self.path.split("/")[1]
        content = {"choices": [{"message": {"role": "assistant", "content": " Paris \n"}}]}
        if route == "ok":
            content["usage"] = {"prompt_tokens": 42, "completion_tokens": 2}
            self._send(200, json.dumps(content).encode())
        elif route == "nousage":
            self._send(200, json.dumps(content).encode())
        elif route == "badusage":
            content["usage"] = {"prompt_tokens": "many"}
            self._send(200, json.dumps(content).encode())
        elif route == "hang":
            RELEASE.wait(5)
            try:
                self._send(200, json.dumps(content).encode())
            except OSError:
                pass
        elif route == "badjson":
            self._send(200, b"{not json", "text/plain")
        elif route == "nochoices":
            self._send(200, json.dumps({"object": "chat.completion"}).encode())
        elif route == "nocontent":
            self._send(200, json.dumps({"choices": [{"message": {"content": None}}]}).encode())
        elif route == "fail":
            self._send(500, b"internal error: model crashed", "text/plain")
        else:
            self._send(404, b"no route")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    RELEASE.set()
    httpd.shutdown()
    httpd.server_close()


def _client(server: str, route: str, **kwargs) -> OpenAICompatibleGenerator:
    kwargs.setdefault("timeout", 2.0)
    return OpenAICompatibleGenerator(f"{server}/{route}", kwargs.pop("api_key", "secret"),
                                     kwargs.pop("model", "stub-model"), **kwargs)


def test_ok_with_usage_and_request_shape(server):
    Handler.requests.clear()
    with _client(server, "ok") as gen:
        out = gen.generate("What is the capital of France?", max_tokens=7)
    assert out == Generation("Paris", 42, 2, estimated=False)
    req = Handler.requests[-1]
    assert req["path"] == "/ok/v1/chat/completions"
    assert req["auth"] == "Bearer secret"
    assert req["body"]["model"] == "stub-model" and req["body"]["max_tokens"] == 7
    assert req["body"]["messages"] == [
        {"role": "user", "content": "What is the capital of France?"}]


def test_base_url_with_v1_suffix(server):
    Handler.requests.clear()
    with OpenAICompatibleGenerator(f"{server}/ok/v1", None, "m") as gen:
        gen.generate("hi")
    assert Handler.requests[-1]["path"] == "/ok/v1/chat/completions"


def test_missing_usage_falls_back_to_the_declared_estimate(server):
    with _client(server, "nousage") as gen:
        out = gen.generate("one two three four")
    assert out.estimated and out.input_tokens == 4 and out.output_tokens == 1
    assert estimate_tokens("  a b\tc\n") == 3


def test_timeout_is_a_clear_error(server):
    with _client(server, "hang", timeout=0.3) as gen, \
            pytest.raises(GeneratorError, match=r"no response within the 0\.3 s timeout"):
        gen.generate("hello")


@pytest.mark.parametrize(("route", "needle"), [
    ("badjson", "expected a JSON chat completion, got non-JSON body '{not json'"),
    ("nochoices", "expected a non-empty 'choices' list, got"),
    ("nocontent", "expected choices[0].message.content to be a string"),
    ("badusage", "usage.prompt_tokens: expected an integer >= 0"),
    ("fail", "HTTP 500; expected 200 with a chat completion, got body 'internal error"),
    ("nowhere", "HTTP 404"),
])
def test_malformed_responses_are_clear_errors(server, route, needle):
    with _client(server, route) as gen, pytest.raises(GeneratorError) as err:
        gen.generate("hello")
    assert needle in str(err.value)
    assert f"/{route}/v1/chat/completions" in str(err.value)


def test_connection_refused_is_a_generator_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with _client(f"http://127.0.0.1:{port}", "ok") as gen, \
            pytest.raises(GeneratorError, match="request failed"):
        gen.generate("hello")


def test_configuration_from_environment(server, monkeypatch):
    Handler.requests.clear()
    monkeypatch.setenv("CREDRANK_LLM_BASE_URL", f"{server}/ok")
    monkeypatch.setenv("CREDRANK_LLM_API_KEY", "from-env")
    monkeypatch.setenv("CREDRANK_LLM_MODEL", "env-model")
    with OpenAICompatibleGenerator() as gen:
        assert gen.generate("x").text == "Paris"
    assert Handler.requests[-1]["auth"] == "Bearer from-env"
    assert Handler.requests[-1]["body"]["model"] == "env-model"


def test_missing_configuration_names_the_variable(monkeypatch):
    monkeypatch.delenv("CREDRANK_LLM_BASE_URL", raising=False)
    with pytest.raises(GeneratorError, match="CREDRANK_LLM_BASE_URL"):
        OpenAICompatibleGenerator(model="m")
    monkeypatch.delenv("CREDRANK_LLM_MODEL", raising=False)
    with pytest.raises(GeneratorError, match="CREDRANK_LLM_MODEL"):
        OpenAICompatibleGenerator("http://127.0.0.1:1")
    with pytest.raises(GeneratorError, match="http"):
        OpenAICompatibleGenerator("ftp://x", model="m")
    with pytest.raises(GeneratorError, match="timeout"):
        OpenAICompatibleGenerator("http://x", model="m", timeout=0)


def test_rrss_can_turn_service_errors_into_abstentions(server):
    with _client(server, "fail") as bad:
        res = kappa_rrss("q?", {"s": 1.0}, lambda q, s, k: ["Paris."], bad, on_error="abstain")
        assert [a.status for a in res.attempts] == ["error"] and res.answer is None
        with pytest.raises(GeneratorError):
            kappa_rrss("q?", {"s": 1.0}, lambda q, s, k: ["Paris."], bad)


# ---------------------------------------------------------------------------------------------
# offline reader
# ---------------------------------------------------------------------------------------------

def test_both_generators_satisfy_the_protocol(server):
    with _client(server, "ok") as gen:
        assert isinstance(gen, Generator)
    assert isinstance(ExtractiveReader(), Generator)


@pytest.mark.parametrize(("question", "passages", "answer"), [
    ("What virus causes COVID-19?", ["COVID-19 is caused by the SARS-CoV-2 virus."],
     "SARS-CoV-2"),
    ("What is the capital of France?",
     ["Berlin is in Germany. The capital of France is Paris.", "France is large."], "Paris"),
    ("Who wrote Hamlet?", ["Bananas are yellow."], "I don't know"),
])
def test_extractive_reader_rule(question, passages, answer):
    out = ExtractiveReader().generate(build_prompt(question, passages))
    assert out.text == answer
    assert out.estimated and out.input_tokens == estimate_tokens(build_prompt(question, passages))
    assert out.output_tokens == len(answer.split())


def test_extractive_reader_respects_max_tokens():
    out = ExtractiveReader().generate(
        build_prompt("Where is it?", ["It is in the big old red house by the lake."]),
        max_tokens=2)
    assert out.output_tokens == 2 and len(out.text.split()) == 2


def test_extractive_reader_on_a_foreign_prompt():
    # no [n] passages and no "Question:" marker: the line with "?" is the question
    out = ExtractiveReader().generate("Rome is the capital of Italy.\n"
                                      "What is the capital of Italy?")
    assert out.text == "Rome"
