"""Run ``credrank serve`` as a real uvicorn process on loopback, for tests (not a test file).

``running_server(index_dir, *args, env=…)`` starts ``python -m credrank.cli serve --index DIR
--port PORT *args`` on a free loopback port, polls ``/readyz`` until it answers 200 (or the
process exits, or ``deadline_s`` passes: then it raises with the process's output), yields a
:class:`ServerHandle` and, on exit, sends SIGTERM and waits for the process. ``env`` entries
are added to this process's environment (e.g. the variable ``--api-key-env`` names).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx


class ServerError(AssertionError):
    """The server did not become ready (its output is in the message)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_record(line: str) -> dict[str, Any] | None:
    """``line`` as a structured log record (a JSON object), else ``None``."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


@dataclass
class ServerHandle:
    """A running server: ``url`` (``http://127.0.0.1:PORT``), ``port``, ``proc``."""

    url: str
    port: int
    proc: subprocess.Popen[str]
    _lines: list[str] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _reading: bool = True

    def stderr_lines(self) -> list[str]:
        """Everything the process has written so far (stdout and stderr), line by line."""
        with self._cond:
            return list(self._lines)

    def log_records(self) -> list[dict[str, Any]]:
        """The output lines that are JSON objects (the structured log)."""
        return [record for line in self.stderr_lines()
                if (record := log_record(line)) is not None]

    def wait_for_record(self, predicate: Callable[[dict[str, Any]], bool],
                        deadline_s: float = 60) -> dict[str, Any]:
        """The first structured log record satisfying ``predicate`` (matched as data, never
        as text: the JSON's spacing is the formatter's), waiting up to ``deadline_s``."""
        line = self.wait_for_line(
            lambda text: (record := log_record(text)) is not None and predicate(record),
            deadline_s)
        record = log_record(line)
        assert record is not None
        return record

    def wait_for_line(self, predicate: Callable[[str], bool], deadline_s: float = 60) -> str:
        """The first output line satisfying ``predicate``, waiting up to ``deadline_s``."""
        end = time.monotonic() + deadline_s
        with self._cond:
            while True:
                for line in self._lines:
                    if predicate(line):
                        return line
                left = end - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reading):
                    raise ServerError("no matching output line; output:\n"
                                      + "\n".join(self._lines[-50:]))
                self._cond.wait(min(left, 1.0))

    def _drained(self, timeout_s: float = 30) -> None:
        """Wait until the process's output has been read to its end."""
        with self._cond:
            self._cond.wait_for(lambda: not self._reading, timeout_s)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self._lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._reading = False
            self._cond.notify_all()

    def stop(self, timeout_s: float = 120) -> int:
        """SIGTERM, then wait for the exit status (kill after ``timeout_s``)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=60)


@contextmanager
def running_server(index_dir: Path, *args: str, env: dict[str, str] | None = None,
                   deadline_s: float = 120) -> Iterator[ServerHandle]:
    """``credrank serve --index index_dir *args`` on a free port, ready (see the module)."""
    port = free_port()
    cmd = [sys.executable, "-m", "credrank.cli", "serve", "--index", str(index_dir),
           "--port", str(port), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    handle = ServerHandle(url=f"http://127.0.0.1:{port}", port=port, proc=proc)
    reader = threading.Thread(target=handle._read, name=f"serve-{port}-output", daemon=True)
    reader.start()
    try:
        _wait_ready(handle, deadline_s)
        yield handle
    finally:
        handle.stop()
        reader.join(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()


def _wait_ready(handle: ServerHandle, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    with httpx.Client(timeout=5.0) as client:
        while True:
            if handle.proc.poll() is not None:
                handle._drained()
                raise ServerError(f"credrank serve exited with {handle.proc.returncode} before "
                                  "it was ready; output:\n" + "\n".join(handle.stderr_lines()))
            try:
                if client.get(handle.url + "/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > end:
                raise ServerError(f"credrank serve not ready after {deadline_s} s; output:\n"
                                  + "\n".join(handle.stderr_lines()))
            try:  # the poll interval: returns at once if the process exits meanwhile
                handle.proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass


# -- in-process apps, for the tests where timing matters -----------------------------------------

class Hold:
    """A test hook of :class:`~credrank.serve.work.ServiceState` (``state.hook = hold``): the
    first work to reach ``point`` waits there until ``release`` is set — or, with
    ``until_cancelled``, until the server cancels it (its time limit passed) — so a test can
    hold a request at a known stage without sleeping. Every point reached is recorded with
    the token's state; ``ended`` is set when a work returns or raises."""

    def __init__(self, point: str, *, until_cancelled: bool = False) -> None:
        self.point, self.until_cancelled = point, until_cancelled
        self.reached, self.release, self.ended = (threading.Event(), threading.Event(),
                                                  threading.Event())
        self.points: list[tuple[str, str]] = []

    def __call__(self, point: str, token: Any) -> None:
        self.points.append((point, token.state))
        if point == "end":
            self.ended.set()
            return
        if point == self.point and not self.reached.is_set():
            self.reached.set()
            (token.cancel_requested if self.until_cancelled else self.release).wait(60)


@contextmanager
def in_process(index_dir: Path, *, tables: tuple[Path, ...] = (), **config: Any
               ) -> Iterator[Any]:
    """``create_app`` over ``index_dir`` opened as its writer, in this process; ``config``:
    :class:`~credrank.serve.config.ServeConfig` fields. Yields the app; its state is
    ``app.state.service`` (closed on exit). Drive it with :func:`asgi_client`."""
    from credrank.searcher import Searcher
    from credrank.serve.app import create_app
    from credrank.serve.config import ServeConfig

    searcher = Searcher.open(index_dir, tables=list(tables), create=True)
    try:
        app = create_app(searcher, ServeConfig(**config))
    except BaseException:
        searcher.close()
        raise
    try:
        yield app
    finally:
        app.state.service.close()


def asgi_client(app: Any) -> httpx.AsyncClient:
    """An async client that calls ``app`` in this process (no network, no lifespan)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app",
                             timeout=120)


class Deadline:
    """A ``sleep`` for ``ServiceState.sleep`` that the test ends: every time limit the
    service measures with it ends when the test calls :meth:`expire`, except a limit of
    ``real`` seconds (a grace period the test wants measured for real)."""

    def __init__(self, *, real: float | None = None) -> None:
        self.real = real
        self._expired: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._expired is None:
            self._expired = asyncio.Event()
        return self._expired

    async def __call__(self, seconds: float) -> None:
        if self.real is not None and seconds == self.real:
            await asyncio.sleep(seconds)
        else:
            await self._event().wait()

    def expire(self) -> None:
        self._event().set()
