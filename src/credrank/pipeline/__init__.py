"""The pipeline is the configuration: a :class:`PipelineSpec` (plain data, the one validator),
the stage :data:`CATALOG` (name → class, kind, rank; lazy) and the one builder
(:func:`compile_spec`, :func:`decide_pushdown`)."""

from credrank.pipeline.catalog import CATALOG, Entry
from credrank.pipeline.compile import (
    Compiled,
    Pushdown,
    PushdownError,
    build_stages,
    compile_rerank,
    compile_search,
    compile_spec,
    context,
    decide_pushdown,
)
from credrank.pipeline.spec import PipelineSpec, SpecError, StageSpec

__all__ = ["CATALOG", "Compiled", "Entry", "PipelineSpec", "Pushdown", "PushdownError",
           "SpecError", "StageSpec", "build_stages", "compile_rerank", "compile_search",
           "compile_spec", "context", "decide_pushdown"]
