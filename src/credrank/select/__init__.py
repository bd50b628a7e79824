"""Selection: pluralism (chapter 35.8) and fair exposure (chapter 35.9).

Pure numpy/scipy functions live in :mod:`~credrank.select.diversity`,
:mod:`~credrank.select.intents`, :mod:`~credrank.select.exposure`,
:mod:`~credrank.select.bvn` and :mod:`~credrank.select.fair`; the pipeline stages and the
``build_selector`` factory in :mod:`~credrank.select.stages`. (Top-k lives in
:mod:`credrank.select.topk` and is imported from there.)

The names below are imported on first use (PEP 562): importing ``credrank.select.topk`` for a
plain search runs this file, and must not pay for the selectors (FA*IR's tables, scipy).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from credrank.select.stages import (
        CoverageSelect,
        ExposureSelect,
        FairSelect,
        MMRSelect,
        build_selector,
    )

__all__ = ["CoverageSelect", "ExposureSelect", "FairSelect", "MMRSelect", "build_selector"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("credrank.select.stages"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
