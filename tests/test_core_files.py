"""credrank.core.files: the file fingerprint and the staged folder replacement that the ONNX
export and the SmolLM2 preparation share."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from credrank.core.files import file_sha256, folder_step_main, staged_folder


def test_file_sha256_is_the_digest_of_the_bytes(tmp_path: Path) -> None:
    data = os.urandom(3 << 20) + b"tail"  # several read blocks and a partial one
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()
    assert file_sha256(str(path)) == file_sha256(path)


def test_a_finished_folder_replaces_the_target_readable_by_all(tmp_path: Path) -> None:
    target = tmp_path / "share" / "artifact"
    target.mkdir(parents=True)
    (target / "model.bin").write_text("old")  # an earlier build: the names a build writes
    with staged_folder(target, "the artifact", "--dir") as tmp:
        assert tmp.parent == target.parent and tmp != target
        (tmp / "model.bin").write_text("new")
        (tmp / "meta.json").write_text("{}")
        assert (target / "model.bin").read_text() == "old"  # it stands until the block ends
    assert sorted(p.name for p in target.iterdir()) == ["meta.json", "model.bin"]
    assert (target / "model.bin").read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert [p.name for p in target.parent.iterdir()] == ["artifact"]  # no temporary left


def test_a_folder_of_the_users_is_never_removed(tmp_path: Path) -> None:
    # `credrank models export-onnx --dir DIR` deleted whatever DIR held
    mine = tmp_path / "mydocs"
    (mine / "sub").mkdir(parents=True)
    (mine / "precious.txt").write_text("keep")
    with pytest.raises(RuntimeError, match=r"mydocs: expected an empty folder or one holding "
                                           r"the artifact, got a folder holding 'precious\.txt' "
                                           r"and 1 more; nothing was removed"):
        with staged_folder(mine, "the artifact", "--dir") as tmp:
            (tmp / "model.bin").write_text("new")
    assert sorted(p.name for p in mine.iterdir()) == ["precious.txt", "sub"]
    assert [p.name for p in tmp_path.iterdir()] == ["mydocs"]  # the build discarded
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    with pytest.raises(RuntimeError, match=r"afile: expected a folder for the artifact, got a "
                                           r"file"):
        with staged_folder(a_file, "the artifact", "--dir"):
            pass


def test_a_failed_folder_is_removed_and_the_target_left_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "artifact"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(ValueError, match="half built"):
        with staged_folder(target, "the artifact", "--dir") as tmp:
            (tmp / "new.txt").write_text("new")
            raise ValueError("half built")
    assert sorted(p.name for p in target.iterdir()) == ["old.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["artifact"]


def test_a_folder_that_cannot_be_made_names_what_and_where_else(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(RuntimeError, match=r"cannot write the artifact under .*file.*"
                                           r"choose another folder with --dir"):
        with staged_folder(blocker / "artifact", "the artifact", "--dir"):
            pass


def test_folder_step_main_passes_dir_and_force_and_says_a_failure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[Path | None, bool]] = []

    def build(directory: Path | None, *, force: bool) -> None:
        calls.append((directory, force))
        if force:
            raise RuntimeError("disk full; nothing installed")

    def main(argv: list[str]) -> int:
        return folder_step_main(argv, prog="step", description="a step", dir_help="where",
                                force_help="again", build=build)

    assert main(["--dir", str(tmp_path)]) == 0
    assert main([]) == 0
    assert capsys.readouterr().err == ""
    assert main(["--force"]) == 2
    assert capsys.readouterr().err == "error: disk full; nothing installed\n"
    assert calls == [(tmp_path, False), (None, False), (None, True)]
    with pytest.raises(SystemExit):  # argparse's own refusal of an unknown option
        main(["--bogus"])
