"""Selection: pluralism (chapter 35.8) and fair exposure (chapter 35.9).

Pure numpy/scipy functions live in :mod:`~credrank.select.diversity`,
:mod:`~credrank.select.intents`, :mod:`~credrank.select.exposure`,
:mod:`~credrank.select.bvn` and :mod:`~credrank.select.fair`; the pipeline stages and the
``build_selector`` factory in :mod:`~credrank.select.stages`. (Top-k lives in
:mod:`credrank.select.topk` and is imported from there.)
"""

from credrank.select.stages import (
    CoverageSelect,
    ExposureSelect,
    FairSelect,
    MMRSelect,
    build_selector,
)

__all__ = ["CoverageSelect", "ExposureSelect", "FairSelect", "MMRSelect", "build_selector"]
