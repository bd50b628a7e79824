"""The reader of stdout going away (``credrank search … | head``): every command then ends as
a shell reports SIGPIPE, exit 141 with nothing on stderr. Standard library only, so that the
guard :func:`credrank.cli.root.run_app` puts on ``sys.stdout`` costs no import of its own
(``credrank.cli.common``, which brings rich, is imported by the commands that print with it)."""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn


def reader_gone() -> NoReturn:
    """End a command whose reader of stdout went away (``credrank search … | head``) as a shell
    reports SIGPIPE: exit 141, nothing on stderr. What is still buffered for stdout goes to
    the null device instead of failing again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a stdout without a file descriptor
        pass
    raise SystemExit(141)


class PipeStdout:
    """``sys.stdout`` while a command runs (:func:`credrank.cli.root.run_app`): a write or a
    flush whose reader went away ends the command as :func:`reader_gone` does, at the write,
    before any handler of the command can take the ``BrokenPipeError`` for another ``OSError``
    and before click turns it into exit 1 with nothing said (``credrank search --json | head``
    did). Everything else is the wrapped stream's."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def write(self, text: str) -> Any:
        try:
            return self.wrapped.write(text)
        except BrokenPipeError:
            reader_gone()

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except BrokenPipeError:
            reader_gone()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)
