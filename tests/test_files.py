"""Crash-safe file replacement (:mod:`credrank.core.files`): what a replaced or new file is
readable by."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from credrank.core.files import atomic_write_text, save_json


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_written_file_is_readable_as_a_file_open_makes_it(tmp_path: Path) -> None:
    """A temporary file (mkstemp) is 0600: renamed into place as it was, a model file for a
    service running as another user was unreadable to it, and replacing a 0644 file made it
    0600. A new file gets 0666 less the umask; a replaced one keeps its permissions."""
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "new.txt", "x")
        save_json(tmp_path / "model.json", {"a": 1})
        assert _mode(tmp_path / "new.txt") == 0o644 and _mode(tmp_path / "model.json") == 0o644
        kept = tmp_path / "kept.json"
        kept.write_text("{}", encoding="utf-8")
        kept.chmod(0o640)
        save_json(kept, {"b": 2})
        assert _mode(kept) == 0o640 and kept.read_text(encoding="utf-8").startswith("{")
    finally:
        os.umask(old)


def test_a_failed_write_leaves_the_old_file_and_names_the_path(tmp_path: Path,
                                                              monkeypatch) -> None:
    """On a full disk the audit's radar.svg was left truncated and the error said only
    ``[Errno 28] No space left on device``."""
    import errno

    from credrank.core import files

    target = tmp_path / "radar.svg"
    target.write_text("<svg>old</svg>", encoding="utf-8")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    try:
        files.atomic_write_bytes(target, b"<svg>new, cut short")
    except OSError as exc:
        assert exc.errno == errno.ENOSPC and exc.filename == str(target)
    else:
        raise AssertionError("expected the full disk's OSError")
    assert target.read_text(encoding="utf-8") == "<svg>old</svg>"
    assert [p.name for p in tmp_path.iterdir()] == ["radar.svg"]  # no temporary file left


def test_a_device_pipe_or_folder_is_never_replaced_and_a_link_is_kept(tmp_path: Path) -> None:
    """``cram calibrate --out /dev/full --force`` (as root) renamed its file over the device:
    /dev/full became a JSON file. A path that is no regular file is refused, naming it; a
    symbolic link to a file is written through (the link stays a link)."""
    import pytest

    from credrank.core.files import replacing

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    for target, kind in ((fifo, "a device, a pipe or a socket"), (folder, "a folder")):
        with pytest.raises(OSError, match=f"exists and is {kind}, not a regular file") as got:
            atomic_write_text(target, "x")
        assert got.value.filename == str(target)
        with pytest.raises(OSError, match="not a regular file"), replacing(target):
            raise AssertionError("the block never runs")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and folder.is_dir()
    assert os.listdir(tmp_path) == sorted(os.listdir(tmp_path)) and len(os.listdir(tmp_path)) == 2
    real = tmp_path / "real.json"
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text(encoding="utf-8") == "new"
