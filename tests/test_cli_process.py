"""What only a process shows of the ``credrank`` console script: its exit status through the
entry point (``credrank.cli:main`` leaves with ``os._exit``) and a reader of stdout that went
away. The other process tests are listed in :mod:`cli_process`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cli_process import CREDRANK, FORBIDDEN, run_cli

pytestmark = pytest.mark.skipif(not CREDRANK.is_file(), reason="credrank script not installed")


def test_the_entry_point_exits_with_the_commands_code() -> None:
    version = run_cli("--version")
    assert (version.returncode, version.stderr) == (0, "")
    assert version.stdout.startswith("credrank ")
    # no command: the root help on stdout, then usage exit 2 (as typer's no_args_is_help)
    bare = run_cli()
    assert bare.returncode == 2 and "Usage: credrank" in bare.stdout and bare.stderr == ""


@pytest.mark.parametrize("command", ["version", "search", "search --json"])
def test_a_reader_that_went_away_is_exit_141_without_a_traceback(
        command: str, demo_index_hashing: Path) -> None:
    """stdout a pipe whose read end is closed before the command starts: the first write
    fails (EPIPE, no race), and credrank stops quietly as a shell reports SIGPIPE — the fast
    path (``--version``), a command that prints through rich (``search``; rich's own
    answer was exit 1 with an empty stderr) and one that prints with ``print`` (``search
    --json``; click's answer was exit 1 with an empty stderr)."""
    args = (["--version"] if command == "version" else
            ["search", "vitamin d", "--index", str(demo_index_hashing),
             *(["--json"] if command.endswith("--json") else [])])
    read, write = os.pipe()
    os.close(read)
    try:
        env = {k: v for k, v in os.environ.items() if k != "CREDRANK_EMBED_BACKEND"}
        proc = subprocess.run([str(CREDRANK), *args], stdout=write,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=300,
                              check=False)
    finally:
        os.close(write)
    assert proc.returncode == 141, proc.stderr
    for bad in (*FORBIDDEN, "BrokenPipeError"):
        assert bad not in proc.stderr


@pytest.mark.parametrize("command", ["help", "search", "search --json"])
@pytest.mark.parametrize("stdout", ["full", "closed"])
def test_a_stdout_that_refuses_writes_is_one_error_line_exit_1(
        command: str, stdout: str, demo_index_hashing: Path) -> None:
    """stdout on a full disk (``/dev/full``) or closed (``>&-``: Python's ``sys.stdout`` is
    ``None``): a traceback (``OSError: No space left on device``, ``AttributeError:
    'NoneType' object has no attribute 'write'``); now one line naming stdout, exit 1."""
    args = (["--help"] if command == "help" else
            ["search", "vitamin d", "--index", str(demo_index_hashing),
             *(["--json"] if command.endswith("--json") else [])])
    env = {k: v for k, v in os.environ.items() if k != "CREDRANK_EMBED_BACKEND"}
    with open("/dev/full", "w") as full:
        proc = subprocess.run([str(CREDRANK), *args], stderr=subprocess.PIPE, text=True,
                              env=env, timeout=300, check=False,
                              **({"stdout": full} if stdout == "full" else
                                 {"stdout": subprocess.DEVNULL,
                                  "preexec_fn": lambda: os.close(1)}))
    reason = ("No space left on device" if stdout == "full"
              else "the stream is closed (the process was started without it)")
    assert (proc.returncode, proc.stderr) == (1, f"error: stdout: {reason}\n")


def test_a_closed_stderr_keeps_the_exit_code() -> None:
    """``credrank … 2>&-``: a usage error exited 1 (the ``AttributeError`` of writing its
    message to ``None``); the message goes nowhere, as asked, and the code stays 2."""
    proc = subprocess.run([str(CREDRANK), "search", "x", "--index", "/nonexistent/idx"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          timeout=300, check=False, preexec_fn=lambda: os.close(2))
    assert proc.returncode == 2 and proc.stdout == ""


def test_the_console_script_puts_idle_blas_threads_to_sleep(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``main`` (the entry point) sets ``OPENBLAS_THREAD_TIMEOUT`` before the command runs,
    unless the user set it; ``run`` called from Python leaves the environment alone."""
    import credrank.cli as cli

    real_run = cli.run
    seen: list[str | None] = []

    def command(args: list[str] | None = None) -> int:
        seen.append(os.environ.get("OPENBLAS_THREAD_TIMEOUT"))
        return 3

    def leave(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(cli, "run", command)
    monkeypatch.setattr(cli, "exit_process", leave)
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "")  # restored as it was after the test
    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT")
    with pytest.raises(SystemExit) as first:
        cli.main()
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "20")
    with pytest.raises(SystemExit):
        cli.main()
    assert first.value.code == 3 and seen == [cli.IDLE_BLAS_SPIN, "20"]
    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT")
    assert real_run(["--version"]) == 0 and "OPENBLAS_THREAD_TIMEOUT" not in os.environ
