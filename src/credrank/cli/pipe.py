"""The reader of stdout going away (``credrank search … | head``): every command then ends as
a shell reports SIGPIPE, exit 141 with nothing on stderr; a stdout that refuses a write (a full
disk, a closed descriptor) ends it with ``error: stdout: REASON``, exit 1. Standard library
only, so that the guard :func:`credrank.cli.root.run_app` puts on ``sys.stdout`` costs no
import of its own (``credrank.cli.common``, which brings rich, is imported by the commands
that print with it)."""

from __future__ import annotations

import codecs
import errno
import io
import os
import select
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


def write_failed(exc: OSError) -> NoReturn:
    """End a command whose stdout refused a write (a full disk, ``> /dev/full``; a closed
    stdout): :func:`say_write_failed`, exit 1, as a shell tool ends on a write error."""
    say_write_failed(exc)
    raise SystemExit(1)


def say_write_failed(exc: OSError) -> None:
    """``error: stdout: REASON`` on stderr; what is still buffered for stdout goes to the null
    device instead of failing again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a stdout without a file descriptor
        pass
    try:
        sys.stderr.write(f"error: stdout: {exc.strerror or exc}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # no stderr either: the exit code says it
        pass


class ClosedStream(io.TextIOBase):
    """What ``sys.stdout`` is when the process started with it closed (``credrank … >&-``;
    Python makes it ``None``, and the first write was an ``AttributeError`` traceback): every
    write fails as writing to a closed descriptor does (``EBADF``), which
    :class:`PipeStdout` reports as :func:`write_failed`."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "the stream is closed (the process was started without it)")

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "the stream is closed (the process was started without it)")


class PipeStdout:
    """``sys.stdout`` while a command runs (:func:`credrank.cli.root.run_app`): a write or a
    flush whose reader went away ends the command as :func:`reader_gone` does, at the write,
    before any handler of the command can take the ``BrokenPipeError`` for another ``OSError``
    and before click turns it into exit 1 with nothing said (``credrank search --json | head``
    did). Everything else is the wrapped stream's.

    An unbuffered stdout (``python -u``, ``PYTHONUNBUFFERED=1``: a text stream written through
    to the raw file) is written here, every byte of it (:func:`_raw_file`): the text stream
    does not look at what the raw file took, so a write larger than the pipe holds, whose
    reader went away in the middle of it, lost the rest without an error and the command
    ended 0 (``credrank provenance hosts --json | head -1``, ``credrank reliability estimate
    … --json | head -1``)."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self._raw = _raw_file(wrapped)
        self._encoder: codecs.IncrementalEncoder | None = None
        if self._raw is not None:
            self._encoder = codecs.getincrementalencoder(wrapped.encoding)(
                wrapped.errors or "strict")

    def write(self, text: str) -> Any:
        try:
            if self._raw is None or not isinstance(text, str):
                return self.wrapped.write(text)
            return self._write_all(text)
        except BrokenPipeError:
            reader_gone()
        except OSError as exc:
            write_failed(exc)

    def _write_all(self, text: str) -> int:
        """Write ``text`` to the raw file until it took every byte (or failed)."""
        assert self._raw is not None and self._encoder is not None
        self.wrapped.flush()  # whatever the text stream holds goes first (nothing, written through)
        data = memoryview(self._encoder.encode(text))
        while data:
            n = self._raw.write(data)
            if n is None:  # a non-blocking stdout that is full: wait until it takes more
                select.select([], [self._raw], [])
                continue
            data = data[n:]
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except BrokenPipeError:
            reader_gone()
        except OSError as exc:
            write_failed(exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def _raw_file(stream: Any) -> io.RawIOBase | None:
    """The raw binary file under ``stream`` when ``stream`` is a text stream written through
    to it unbuffered (what ``python -u`` and ``PYTHONUNBUFFERED`` make of ``sys.stdout``), with
    no newline translation to do (``os.linesep`` is ``\\n``); else ``None`` (the stream's own
    buffered writer writes every byte or raises)."""
    if not isinstance(stream, io.TextIOWrapper) or not stream.write_through or os.linesep != "\n":
        return None
    raw = stream.buffer
    if not isinstance(raw, io.RawIOBase):
        return None
    try:
        codecs.getincrementalencoder(stream.encoding)
    except LookupError:
        return None
    return raw
