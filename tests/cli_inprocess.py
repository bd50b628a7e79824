"""The ``credrank`` command run inside the test process, for tests (not a test file).

:func:`run_cli` has the signature and the result of :func:`cli_process.run_cli` — ``credrank
*args`` in ``cwd`` with the environment a user's shell gives it (the current one without
``CREDRANK_EMBED_BACKEND``, ``COLUMNS=200``, then ``env`` on top), its stdout and stderr as text
and its exit code — but it calls the console script's own code, :func:`credrank.cli.run` (what
``credrank.cli:main`` runs before it leaves the process), in this process. A model, an import
or a parsed table is then loaded once per test session instead of once per call (``credrank``
as a process pays 1-3 s of interpreter start, imports and the MiniLM load every time).

What only a process shows — the entry point, native aborts, signals, a closed pipe, the
service as a server — stays with :mod:`cli_process` (its docstring lists those tests).
Everything a command reads from its process is set for the call and put back after it, so that
calls stay independent of each other and of the test order:

* ``os.environ`` (replaced as a whole: the config discovery and every variable a command reads
  at call time see the call's environment) and the working directory;
* ``sys.argv``, ``sys.stdin`` (``input`` or an empty stream), ``sys.stdout`` and
  ``sys.stderr`` (text streams over bytes, UTF-8, not terminals, as a pipe is);
* the consoles of :mod:`credrank.cli.common`, whose width and colours rich reads from the
  environment when a console is made: re-made for the call and again after it;
* the Python warning filters as a fresh interpreter has them, warnings printed on stderr (as a
  process prints them, not recorded by pytest), once per call;
* the SIGINT and SIGTERM handlers, the root logger's handlers and level;
* the embedder cache of :mod:`credrank.index.embed` when the call's environment chooses another
  MiniLM backend or artifact than the session's (``CREDRANK_EMBED_BACKEND``,
  ``CREDRANK_ONNX_DIR``): cleared before and after such a call, kept otherwise.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from cli_process import FORBIDDEN, assert_clean_error

#: the variables that choose which MiniLM :func:`credrank.index.embed.get_embedder` loads
MODEL_VARIABLES = ("CREDRANK_EMBED_BACKEND", "CREDRANK_ONNX_DIR")
#: the warning filters of a fresh ``python`` (``python -c "import warnings;
#: print(warnings.filters)"``), first to last
FRESH_FILTERS: tuple[tuple[str, type[Warning], str], ...] = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
)


def _stream(data: bytes = b"") -> TextIO:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=None,
                            write_through=True)


def _text(stream: TextIO) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    # a pipe read with text=True: universal newlines, as subprocess.run decodes it
    return buffer.getvalue().decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def _remake_consoles() -> None:
    """Make the consoles of :mod:`credrank.cli.common` again (the same objects, so every module
    that imported them sees it) from the current environment and streams, as the first import
    of a fresh process makes them."""
    common = sys.modules.get("credrank.cli.common")
    if common is None:  # not imported yet: its first import makes them from the current state
        return
    common.console.__init__(**common.CONSOLE_OPTIONS)
    common.err.__init__(**common.ERR_OPTIONS)


def _clear_embedders() -> None:
    embed = sys.modules.get("credrank.index.embed")
    if embed is not None:
        embed.get_embedder.cache_clear()


def _show(message: Any, category: type[Warning], filename: str, lineno: int,
          file: TextIO | None = None, line: str | None = None) -> None:
    """``warnings.showwarning`` as the interpreter's own: the warning on (the call's) stderr."""
    try:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
    except OSError:
        pass


@contextmanager
def _process_state(argv: list[str], environ: Mapping[str, str], cwd: Path | None,
                   stdin: TextIO, stdout: TextIO, stderr: TextIO) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.argv, sys.stdin, sys.stdout, sys.stderr
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    root = logging.getLogger()
    saved_logging = list(root.handlers), root.level
    model_changed = any(environ.get(k) != saved_env.get(k) for k in MODEL_VARIABLES)
    try:
        os.environ.clear()
        os.environ.update(environ)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = ["credrank", *argv]
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        if model_changed:
            _clear_embedders()
        _remake_consoles()
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in reversed(FRESH_FILTERS):
                warnings.filterwarnings(action, category=category, module=module)
            warnings.showwarning = _show
            yield
    finally:
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for s, handler in saved_signals.items():
            signal.signal(s, handler)
        root.handlers[:] = saved_logging[0]
        root.setLevel(saved_logging[1])
        if model_changed:
            _clear_embedders()
        _remake_consoles()


def run_cli(*args: str | Path, cwd: Path | None = None, env: Mapping[str, str] | None = None,
            timeout: float = 300, input: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    """``credrank *args`` (each ``str()``-ed) in ``cwd``, in the current environment without
    ``CREDRANK_EMBED_BACKEND``, with ``COLUMNS=200`` and then ``env`` on top, run in this
    process; ``input`` is its stdin (default: empty). ``timeout`` is accepted for the
    signature of :func:`cli_process.run_cli` and not enforced (a call in process cannot be
    stopped from outside; pytest's own limits apply)."""
    del timeout
    from credrank.cli import run

    argv = [str(a) for a in args]
    environ = {k: v for k, v in os.environ.items() if k != "CREDRANK_EMBED_BACKEND"}
    environ.update({"COLUMNS": "200", **(env or {})})
    stdin = _stream((input or "").encode("utf-8"))
    stdout, stderr = _stream(), _stream()
    with _process_state(argv, environ, cwd, stdin, stdout, stderr):
        try:
            code = run(argv)
        except SystemExit as exc:  # what escapes run() (it returns its codes) as a process exits
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
    return subprocess.CompletedProcess(["credrank", *argv], code, _text(stdout), _text(stderr))


__all__ = ["FORBIDDEN", "assert_clean_error", "run_cli"]
