"""White-box checks for CrAM and tiny random causal LMs built from configs (for tests).

CrAM (chapter 35.5) edits post-softmax attention inside the model, so it needs a
transformers model whose attention layers dispatch through ``ALL_ATTENTION_FUNCTIONS`` (the
``AttentionInterface``) and expose their layer index. :func:`check_white_box` verifies that and
raises :class:`WhiteBoxError` ("CrAM needs white-box attention …") otherwise — for a hosted or
text-only API, a llama.cpp runtime, an encoder-decoder, or an attention variant the
intervention would silently bypass.

The builders (:func:`tiny_config`, :func:`tiny_model`) make randomly initialised Llama, Qwen2
and GPT-2 models of a few thousand parameters from configs alone: no download, milliseconds.
Llama and Qwen2 use grouped-query attention (4 query heads over 2 key/value heads) so the
``repeat_kv`` path is exercised.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FAMILIES = ("llama", "qwen2", "gpt2")
WHITE_BOX_HINT = ("CrAM needs white-box attention: a transformers causal LM (Llama, Qwen2, GPT-2 "
                  "families) whose attention layers dispatch through the AttentionInterface")


class WhiteBoxError(TypeError):
    """The model's attention cannot be intervened on by CrAM."""


@dataclass(frozen=True)
class WhiteBox:
    """What :func:`check_white_box` learned about an interveneable model.

    ``modules`` maps ``id(attention module)`` to its layer index; ``layer_types`` is each
    layer's attention type (:func:`attention_types`).
    """

    num_layers: int
    num_heads: int
    modules: dict[int, int]
    layer_types: tuple[str, ...]


def stock_eager(module: Any) -> Callable[..., Any] | None:
    """The model family's own stock ``eager_attention_forward`` for an attention module."""
    owner = sys.modules.get(type(module).__module__)
    fn = getattr(owner, "eager_attention_forward", None)
    return fn if callable(fn) else None


def _fail(model: Any, why: str) -> WhiteBoxError:
    return WhiteBoxError(f"{WHITE_BOX_HINT}; {type(model).__name__} cannot be used: {why}")


def check_white_box(model: Any) -> WhiteBox:
    """Check that CrAM can intervene on ``model``'s attention, or raise :class:`WhiteBoxError`.

    Requirements: a ``transformers.PreTrainedModel`` decoder-only model that supports
    attention backends (``_supports_attention_backend``) and can switch its implementation at
    run time; one attention module per layer with a ``layer_idx`` and a family stock
    ``eager_attention_forward`` (the function the intervention wraps); no cross-attention; and,
    for GPT-2, ``reorder_and_upcast_attn=False`` (that path bypasses the interface); and at
    least one full-attention layer (:func:`attention_types`: a config's ``layer_types``, or a
    ``sliding_window`` in force, which makes every layer sliding). Heads of sliding or chunked
    layers are never selectable (:mod:`credrank.cram.attention`).
    """
    try:
        from transformers import PreTrainedModel
    except ImportError as exc:  # pragma: no cover - the lm extra is missing
        raise WhiteBoxError(f"{WHITE_BOX_HINT}; transformers is not installed "
                            "(pip install 'credrank[lm,embed]')") from exc
    if not isinstance(model, PreTrainedModel):
        raise _fail(model, "it is not a transformers PreTrainedModel (text-only APIs and "
                           "llama.cpp/GGUF runtimes expose no attention weights)")
    config = model.config
    if getattr(config, "is_encoder_decoder", False):
        raise _fail(model, "encoder-decoder models are not supported (decoder-only causal LMs)")
    if getattr(config, "add_cross_attention", False):
        raise _fail(model, "cross-attention is not supported")
    if getattr(config, "reorder_and_upcast_attn", False):
        raise _fail(model, "GPT-2's reorder_and_upcast_attn path bypasses the AttentionInterface")
    if not getattr(model, "_supports_attention_backend", False):
        raise _fail(model, "the class does not declare _supports_attention_backend")
    if not model._can_set_attn_implementation():
        raise _fail(model, "its attention does not dispatch through ALL_ATTENTION_FUNCTIONS")
    num_layers = getattr(config, "num_hidden_layers", None)
    num_heads = getattr(config, "num_attention_heads", None)
    if not isinstance(num_layers, int) or not isinstance(num_heads, int):
        raise _fail(model, "its config has no num_hidden_layers / num_attention_heads")
    modules: dict[int, int] = {}
    seen: dict[int, str] = {}
    for name, sub in model.named_modules():
        if not type(sub).__name__.endswith("Attention"):
            continue
        layer = getattr(sub, "layer_idx", None)
        if not isinstance(layer, int):
            raise _fail(model, f"attention module {name!r} has no integer layer_idx")
        if stock_eager(sub) is None:
            raise _fail(model, f"attention module {name!r} ({type(sub).__name__}) has no stock "
                               "eager_attention_forward in its modeling module")
        if layer in seen:
            raise _fail(model, f"attention modules {seen[layer]!r} and {name!r} share layer "
                               f"{layer}")
        seen[layer] = name
        modules[id(sub)] = layer
    if sorted(seen) != list(range(num_layers)):
        raise _fail(model, f"found attention modules for layers {sorted(seen)}, expected "
                           f"0..{num_layers - 1}")
    layer_types = attention_types(config, num_layers)
    if "full_attention" not in layer_types:
        raise _fail(model, f"no layer uses full attention ({describe_sliding(config)}): CrAM "
                           "indexes its multipliers by absolute key position, which sliding or "
                           "chunked attention does not keep, so no head could be reweighted")
    return WhiteBox(num_layers=num_layers, num_heads=num_heads, modules=modules,
                    layer_types=layer_types)


def attention_types(config: Any, num_layers: int) -> tuple[str, ...]:
    """Each layer's attention type: the config's ``layer_types`` when it has them; else
    ``"sliding_attention"`` for every layer when ``sliding_window`` is set (and
    ``use_sliding_window`` is not False: Mistral-style configs slide every layer by that one
    field), else ``"full_attention"``."""
    types = getattr(config, "layer_types", None)
    if types:
        return tuple(str(t) for t in types)
    if sliding_window(config) is not None:
        return ("sliding_attention",) * num_layers
    return ("full_attention",) * num_layers


def sliding_window(config: Any) -> Any:
    """The config's ``sliding_window`` when it is in force (set, and ``use_sliding_window``
    not False), else ``None``."""
    window = getattr(config, "sliding_window", None)
    if window is None or getattr(config, "use_sliding_window", True) is False:
        return None
    return window


def describe_sliding(config: Any) -> str:
    """Why the layers count as non-full attention, for an error message."""
    types = getattr(config, "layer_types", None)
    if types:
        return f"layer_types {sorted(set(map(str, types)))}"
    return f"sliding_window={sliding_window(config)!r} applies to every layer"


def tiny_config(family: str, **overrides: Any) -> Any:
    """A tiny config for ``family`` ("llama", "qwen2" or "gpt2"): 2 layers, 4 heads, width 32.

    ``initializer_range=0.2`` (not the usual 0.02) makes random attention peaked enough for
    reweighting to show. Keyword ``overrides`` replace any field.
    """
    from transformers import GPT2Config, LlamaConfig, Qwen2Config

    common: dict[str, Any] = {"vocab_size": 96, "initializer_range": 0.2, "bos_token_id": 1,
                              "eos_token_id": 2, "pad_token_id": 0}
    fields: dict[str, Any]
    if family == "llama":
        fields = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 2,
                  "max_position_embeddings": 128, "tie_word_embeddings": False}
        return LlamaConfig(**{**common, **fields, **overrides})
    if family == "qwen2":
        fields = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 2,
                  "max_position_embeddings": 128, "tie_word_embeddings": False,
                  "use_sliding_window": False}
        return Qwen2Config(**{**common, **fields, **overrides})
    if family == "gpt2":
        fields = {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 128,
                  "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
        return GPT2Config(**{**common, **fields, **overrides})
    raise ValueError(f"family: expected one of {', '.join(FAMILIES)}, got {family!r}")


def tiny_model(family: str, *, seed: int = 0, attn_implementation: str = "eager",
               **overrides: Any) -> Any:
    """A randomly initialised tiny causal LM of ``family`` in eval mode (seeded, no download)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = tiny_config(family, **overrides)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)
    return model.eval()


#: the models of ``credrank cram … --model NAME`` and ``credrank bench cram-nq --model NAME``
MODEL_NAMES = ("smollm2", "tiny-llama", "tiny-qwen2", "tiny-gpt2")


@dataclass(frozen=True)
class LoadedModel:
    """A white-box model, its fast tokenizer and its registry name."""

    name: str
    model: Any
    tokenizer: Any


class ModelUnavailableError(RuntimeError):
    """A ``--model`` that cannot be loaded here: a module it needs is not installed."""


def missing_module(name: str, exc: ImportError) -> ModelUnavailableError:
    """The one-line hint for a model ``name`` whose import failed with ``exc``: the same
    for every model (``NAME: the module 'torch' is missing; install the lm extra …``)."""
    from credrank.generate.local import INSTALL_HINT

    module = exc.name or str(exc)
    label = "SmolLM2" if name == "smollm2" else name
    return ModelUnavailableError(f"{label}: the module {module!r} is missing; {INSTALL_HINT}")


def load_cram_model(name: str) -> LoadedModel:
    """The model of ``--model NAME`` (:data:`MODEL_NAMES`), checked white-box.

    ``smollm2``: SmolLM2-135M-Instruct from the installed GGUF
    (:mod:`credrank.generate.local`; the shared cached instance is switched to eager attention);
    ``tiny-FAMILY``: a seeded random tiny model with :func:`credrank.cram.prompt.byte_tokenizer`
    (for tests; its answers are noise). An unknown name is a ``ValueError``; a missing module
    (torch, transformers) a :class:`ModelUnavailableError` with the install hint, whatever the
    model.
    """
    if name not in MODEL_NAMES:
        raise ValueError(f"--model: unknown model {name!r}; expected one of "
                         f"{', '.join(MODEL_NAMES)}")
    try:
        return _load(name)
    except ImportError as exc:
        raise missing_module(name, exc) from exc


def _load(name: str) -> LoadedModel:
    if name == "smollm2":
        from credrank.generate.local import load_local_model, model_path

        tok, model = load_local_model(model_path())
        model.set_attn_implementation("eager")
    elif name.startswith("tiny-") and name in MODEL_NAMES:
        from credrank.cram.models import tiny_model
        from credrank.cram.prompt import BYTE_VOCAB, byte_tokenizer

        family = name.removeprefix("tiny-")
        positions: dict[str, Any] = {
            "n_positions" if family == "gpt2" else "max_position_embeddings": 8192}
        model = tiny_model(family, vocab_size=BYTE_VOCAB, **positions)
        tok = byte_tokenizer()
    else:  # pragma: no cover - load_cram_model checked the name
        raise ValueError(f"--model: unknown model {name!r}")
    check_white_box(model)
    return LoadedModel(name, model, tok)
