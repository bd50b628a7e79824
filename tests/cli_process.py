"""The ``credrank`` console script as a subprocess, for tests (not a test file).

:func:`run_cli` runs ``credrank *args`` as a user runs it: a fresh process, the default MiniLM
backend (``CREDRANK_EMBED_BACKEND`` removed from the environment) and a 200-column console, so
that rich wraps few lines. :func:`assert_clean_error` checks the refusal every command owes a
bad invocation: exit 2, an ``error:`` line on stderr naming what was wrong, and neither a Python
traceback nor a native abort (issue 23). ``CREDRANK`` is the script's path, for the tests that
skip when it is not installed.

A process costs an interpreter start, the imports and (for most commands) the MiniLM load, 1-3 s
each: the tests of what a command prints and does call it in process (:mod:`cli_inprocess`,
the same signature and result). These are the tests that start a process, each for what only a
process shows:

* ``test_cli_exit.py``: the issue-23 reproductions (a native abort at the exit of the process,
  after an error overtook the model load; repeated) and one error case of each way a command
  refuses, through the console script (its exit status, its stderr);
* ``test_cli_process.py``: the entry point's exit status, a reader of stdout that went away
  (exit 141, no traceback), a stdout on a full disk or closed and a closed stderr;
* ``test_index.py``, ``test_index_lock.py``, ``test_credibility_index.py`` (``PausedIndexer``,
  ``credrank score credibility``): SIGINT and SIGTERM in the middle of a run, the index lock
  between processes; ``test_priors_cli.py``: concurrent writers in several processes;
* ``serving.py`` (``test_serve*.py``, ``test_browser.py`` and the HTTP tests of other files):
  ``credrank serve`` as a server on a port, over HTTP, stopped by a signal;
* ``test_readme.py``: the commands and snippets of the README and docs as a user runs them;
  ``test_packaging.py``: the console script with a ``credrank.toml``;
* ``test_cli_startup.py``, ``test_packaging.py``, ``test_onnx_embed.py``, ``test_adapters.py``,
  ``test_advise.py``, ``test_audit_cli.py``, ``test_bench_distribution.py``: a fresh
  interpreter, to see what a command or an import loads (``sys.modules`` starts empty only
  there); ``test_credibility_transfer.py``: a bench script's own argument errors.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

CREDRANK = Path(sys.executable).with_name("credrank")
#: what a refusal may never print on stderr: a Python traceback or a native abort
FORBIDDEN = ("Traceback", "terminate called", "Aborted", "core dumped")


def run_cli(*args: str | Path, cwd: Path | None = None, env: Mapping[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``credrank *args`` (each ``str()``-ed) in ``cwd``, in the current environment without
    ``CREDRANK_EMBED_BACKEND``, with ``COLUMNS=200`` and then ``env`` on top."""
    full_env = {k: v for k, v in os.environ.items() if k != "CREDRANK_EMBED_BACKEND"}
    full_env.update({"COLUMNS": "200", **(env or {})})
    return subprocess.run([str(CREDRANK), *map(str, args)], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def assert_clean_error(proc: subprocess.CompletedProcess[str], *expected: str,
                       starts: bool = False) -> None:
    """Exit 2, ``error:`` on stderr (its very start with ``starts``), none of ``FORBIDDEN`` on
    stderr nor a traceback on stdout, and each ``expected`` fragment in stderr with its
    whitespace runs made single spaces (rich wraps long lines)."""
    message = " ".join(proc.stderr.split())
    context = (f"exit {proc.returncode}\nstdout: {proc.stdout[-2000:]}\n"
               f"stderr: {proc.stderr[-3000:]}")
    for bad in FORBIDDEN:
        assert bad not in proc.stderr, context
    assert "Traceback" not in proc.stdout, context
    assert proc.returncode == 2, context
    assert "error:" in message, context
    if starts:
        assert message.startswith("error: "), context
    for fragment in expected:
        assert fragment in message, f"expected {fragment!r} in stderr\n{context}"
