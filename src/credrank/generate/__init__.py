"""Generators: the protocol κ-RRSS calls (chapter 35.3), an HTTP client and an offline reader."""

from credrank.generate.llm import (
    ExtractiveReader,
    Generation,
    Generator,
    GeneratorError,
    OpenAICompatibleGenerator,
    build_prompt,
    estimate_tokens,
    parse_prompt,
)

__all__ = [
    "ExtractiveReader",
    "Generation",
    "Generator",
    "GeneratorError",
    "OpenAICompatibleGenerator",
    "build_prompt",
    "estimate_tokens",
    "parse_prompt",
]
