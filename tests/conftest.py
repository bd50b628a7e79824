"""Shared test fixtures.

``shared_data``: the real data sets in ``../shared/data`` beside the checkout (never copied into
the repository); tests that use it are skipped with a clear message when it is absent.
``write``: writes a text or bytes file under ``tmp_path`` and returns its path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test when the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not available: expected the folder {SHARED_DATA} "
                    "(../shared/data beside the checkout, see shared/data/SOURCES.md)")
    return SHARED_DATA


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """``write(name, content)``: create ``tmp_path/name`` (str as UTF-8, bytes as is)."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
        return path

    return _write
