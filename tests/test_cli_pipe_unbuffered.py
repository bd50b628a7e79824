"""A reader of stdout that goes away in the middle of a large write, with stdout unbuffered
(``python -u``, ``PYTHONUNBUFFERED=1``): exit 141, as with a buffered stdout.

Unbuffered, ``sys.stdout`` is a text stream written through to the raw file, which does not
look at what the raw file took: a write larger than the pipe holds (``credrank provenance hosts
--json``, ``credrank reliability estimate … --json``: one ``typer.echo`` of the whole document)
whose reader left in the middle lost the rest without an error, and the command ended 0
(``credrank provenance hosts --index DIR --json | head -1``). :class:`credrank.cli.pipe.PipeStdout`
now writes such a stream's bytes itself, every one of them or the pipe's error."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest

import credrank.cli.pipe as pipe
from cli_process import CREDRANK, FORBIDDEN
from credrank.cli.pipe import PipeStdout


class ShortWrites(io.RawIOBase):
    """A raw file that takes at most ``chunk`` bytes a write and, after ``limit`` bytes in
    all, fails as a pipe whose reader went away."""

    def __init__(self, chunk: int, limit: int | None = None) -> None:
        self.chunk, self.limit, self.data = chunk, limit, bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: object) -> int:
        view = memoryview(b)  # type: ignore[arg-type]
        if self.limit is not None and len(self.data) >= self.limit:
            raise BrokenPipeError(32, "Broken pipe")
        n = min(len(view), self.chunk)
        self.data += view[:n]
        return n


class Gone(Exception):
    """What :func:`credrank.cli.pipe.reader_gone` raises in these tests (it exits)."""


def _unbuffered(raw: ShortWrites) -> io.TextIOWrapper:
    return io.TextIOWrapper(raw, encoding="utf-8", write_through=True)  # type: ignore[arg-type]


def test_an_unbuffered_stdout_gets_every_byte_of_a_large_write() -> None:
    raw = ShortWrites(chunk=1000)
    out = PipeStdout(_unbuffered(raw))
    text = "é" * 50_000 + "\n"
    assert out.write(text) == len(text)
    out.write("tail\n")
    out.flush()
    assert raw.data.decode("utf-8") == text + "tail\n"  # the text stream alone kept 1000 bytes


def test_a_reader_gone_in_the_middle_of_an_unbuffered_write_ends_the_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def gone() -> None:
        raise Gone

    monkeypatch.setattr(pipe, "reader_gone", gone)
    raw = ShortWrites(chunk=65536, limit=65536)
    out = PipeStdout(_unbuffered(raw))
    with pytest.raises(Gone):  # the write returned as if done
        out.write("x" * 1_000_000)
    assert len(raw.data) == 65536


def test_a_buffered_stdout_is_written_as_before() -> None:
    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding="utf-8")
    out = PipeStdout(stream)
    out.write("a\n")
    out.flush()
    assert buffer.getvalue() == b"a\n" and out.encoding == "utf-8"
    with pytest.raises(TypeError):  # click's probe for a binary stream: the stream's answer
        out.write(b"")  # type: ignore[arg-type]


needs_script = pytest.mark.skipif(not CREDRANK.is_file(), reason="credrank script not installed")


@pytest.fixture(scope="module")
def many_hosts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of 3,000 documents from 3,000 hosts: ``provenance hosts`` prints ~1 MB."""
    from cli_inprocess import run_cli

    folder = tmp_path_factory.mktemp("many-hosts")
    corpus = folder / "many.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": f"doc {i} vitamin",
                                          "url": f"https://host{i}.example/x"}) + "\n"
                              for i in range(3000)), encoding="utf-8")
    proc = run_cli("index", corpus, "--index", folder / "idx", "--embedder", "hashing", "-q")
    assert proc.returncode == 0, proc.stderr
    return folder / "idx"


@pytest.fixture(scope="module")
def big_answers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1,500 sources × 4 questions: ``reliability estimate --json`` prints ~260 kB."""
    path = tmp_path_factory.mktemp("big-answers") / "big.csv"
    rows = [f"q{q},s{s},{'abc'[(s * 7 + q * 3) % 3]}" for s in range(1500) for q in range(4)]
    path.write_text("question_id,source_id,answer\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


@needs_script
@pytest.mark.parametrize("unbuffered", ["1", ""])
@pytest.mark.parametrize("command", ["provenance hosts --json", "provenance hosts",
                                     "reliability estimate --json"])
def test_a_reader_gone_in_the_middle_of_a_large_output_is_exit_141(
        command: str, unbuffered: str, many_hosts: Path, big_answers: Path) -> None:
    """The reader takes the first bytes and goes (``| head -1``) while the command is in the
    middle of writing more than the pipe holds: exit 141, nothing on stderr. Unbuffered,
    these ended 0."""
    args = command.split()
    args += ["--index", str(many_hosts)] if args[0] == "provenance" else [str(big_answers)]
    env = {k: v for k, v in os.environ.items()
           if k not in ("CREDRANK_EMBED_BACKEND", "PYTHONUNBUFFERED")}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    proc = subprocess.Popen([str(CREDRANK), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(1)  # the command is writing: the pipe holds its first bytes
    proc.stdout.close()
    stderr = proc.stderr.read().decode("utf-8", "replace")
    assert proc.wait(timeout=300) == 141, stderr
    for bad in (*FORBIDDEN, "BrokenPipeError"):
        assert bad not in stderr
