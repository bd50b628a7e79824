"""Where the test session writes (``tests/conftest.py``): in memory when there is room, unless
``--basetemp`` or ``$CREDRANK_TEST_TMP`` says where; the folder made for a run is removed when
the run passed and kept, said, when it failed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import (
    MEMORY_TMP,
    TEST_TMP_ENV,
    memory_tmp,
    pytest_configure,
    pytest_sessionfinish,
)


def fake_config(basetemp: str | None = None) -> SimpleNamespace:
    lines: list[str] = []
    reporter = SimpleNamespace(write_line=lines.append)
    return SimpleNamespace(option=SimpleNamespace(basetemp=basetemp), stash=pytest.Stash(),
                           lines=lines, pluginmanager=SimpleNamespace(
                               get_plugin=lambda name: reporter if name == "terminalreporter"
                               else None))


def test_memory_tmp_wants_a_tmpfs_mount_with_room(tmp_path: Path) -> None:
    assert memory_tmp(tmp_path / "absent") is None
    assert memory_tmp(tmp_path, need=0) is None  # a folder, not a tmpfs's mount point
    if memory_tmp(MEMORY_TMP, need=1) is None:
        pytest.skip(f"{MEMORY_TMP} is not a writable tmpfs here")
    assert memory_tmp(MEMORY_TMP, need=1) == MEMORY_TMP
    assert memory_tmp(MEMORY_TMP, need=1 << 62) is None  # not that much room


def test_a_run_writes_where_it_is_told_and_cleans_up_after_passing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # as the controller
    monkeypatch.setenv(TEST_TMP_ENV, str(tmp_path / "told"))
    config = fake_config()
    pytest_configure(config)  # type: ignore[arg-type]
    made = Path(config.option.basetemp)
    assert made.parent == tmp_path / "told" and made.is_dir()
    (made / "file").write_text("x")
    pytest_sessionfinish(SimpleNamespace(config=config), 0)  # type: ignore[arg-type]
    assert not made.exists()

    failed = fake_config()
    pytest_configure(failed)  # type: ignore[arg-type]
    kept = Path(failed.option.basetemp)
    pytest_sessionfinish(SimpleNamespace(config=failed), 1)  # type: ignore[arg-type]
    assert kept.is_dir() and failed.lines == [f"the tests' files are kept in {kept}"]

    (tmp_path / "given").mkdir()
    given = fake_config(str(tmp_path / "given"))  # --basetemp wins, and is never removed
    pytest_configure(given)  # type: ignore[arg-type]
    assert given.option.basetemp == str(tmp_path / "given")
    pytest_sessionfinish(SimpleNamespace(config=given), 0)  # type: ignore[arg-type]
    assert (tmp_path / "given").is_dir()

    monkeypatch.delenv(TEST_TMP_ENV)
    default = fake_config()
    pytest_configure(default)  # type: ignore[arg-type]
    if memory_tmp() is None:
        assert default.option.basetemp is None  # pytest's own choice
    else:
        assert Path(default.option.basetemp).parent == MEMORY_TMP
        pytest_sessionfinish(SimpleNamespace(config=default), 1)  # type: ignore[arg-type]
        assert default.lines == [f"the tests' files are kept in {default.option.basetemp} "
                                 "(in memory: remove it when done)"]
        pytest_sessionfinish(SimpleNamespace(config=default), 0)  # type: ignore[arg-type]
        assert not Path(default.option.basetemp).exists()

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw9")  # a worker takes the controller's
    worker = fake_config()
    pytest_configure(worker)  # type: ignore[arg-type]
    assert worker.option.basetemp is None
