"""CrAM attention intervention (chapter 35.5) on tiny random Llama / Qwen2 / GPT-2 models."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="CrAM needs torch (the embed extra)")
pytest.importorskip("transformers", reason="CrAM needs transformers (the lm extra)")

from credrank.cram.attention import (  # noqa: E402
    CRAM_ATTENTION,
    CramError,
    CramFallbackWarning,
    cram_attention_forward,
    reweight,
)
from credrank.cram.models import (  # noqa: E402
    FAMILIES,
    WhiteBoxError,
    check_white_box,
    stock_eager,
    tiny_model,
)
from credrank.cram.multipliers import (  # noqa: E402
    ZERO_RANGE_POLICY,
    CramInputError,
    prompt_token_multipliers,
    scores_to_multipliers,
    token_multipliers,
    token_spans,
)

MIN = torch.finfo(torch.float32).min


@pytest.fixture(scope="module")
def models() -> dict:
    return {family: tiny_model(family) for family in FAMILIES}


def attn_module(model, layer: int):
    if model.config.model_type == "gpt2":
        return model.transformer.h[layer].attn
    return model.model.layers[layer].self_attn


def qkv(model, batch: int = 2, q_len: int = 6, seed: int = 1):
    """Random query/key/value of the model's attention shapes, and a causal additive mask."""
    cfg = model.config
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    dim = cfg.hidden_size // heads
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, q_len, dim, generator=g) * 2
    k = torch.randn(batch, kv_heads, q_len, dim, generator=g) * 2
    v = torch.randn(batch, kv_heads, q_len, dim, generator=g)
    causal = torch.ones(q_len, q_len, dtype=torch.bool).tril()
    mask = torch.zeros(batch, 1, q_len, q_len).masked_fill(~causal, MIN)
    return q, k, v, mask


def ramp(batch: int, length: int) -> torch.Tensor:
    return torch.linspace(0.2, 1.0, length).repeat(batch, 1)


# (a) nothing selected: bit-identical to the stock eager implementation
@pytest.mark.parametrize("family", FAMILIES)
def test_no_heads_is_bit_identical_to_stock_eager(models, family):
    model = models[family]
    ids = torch.randint(3, 96, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        stock = model(ids).logits
        with reweight(model, [], ramp(2, 9)) as report:
            assert model.config._attn_implementation == CRAM_ATTENTION
            ours = model(ids).logits
    assert model.config._attn_implementation == "eager"  # restored
    assert torch.equal(stock, ours)
    assert report.calls == 0 and report.fallback_rows == 0


# (b) unselected heads bit-identical, selected heads differ
@pytest.mark.parametrize("family", FAMILIES)
def test_unselected_heads_identical_selected_differ(models, family):
    model = models[family]
    module = attn_module(model, 1)
    q, k, v, mask = qkv(model)
    stock_out, stock_w = stock_eager(module)(module, q, k, v, mask, scaling=module.scaling)
    selected = [1, 3]
    with reweight(model, [(1, h) for h in selected] + [(0, 0)], ramp(2, 6)) as report:
        out, w = cram_attention_forward(module, q, k, v, mask, scaling=module.scaling)
    others = [h for h in range(model.config.num_attention_heads) if h not in selected]
    assert torch.equal(out[:, :, others], stock_out[:, :, others])
    assert torch.equal(w[:, others], stock_w[:, others])
    for h in selected:
        assert not torch.allclose(out[:, :, h], stock_out[:, :, h])
    assert report.calls == 1 and report.rows == 2 * 2 * 6
    # the whole model: selected heads change the logits, and outside the context nothing does
    ids = torch.randint(3, 96, (1, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        stock = model(ids).logits
        with reweight(model, [(0, 1)], ramp(1, 8)):
            changed = model(ids).logits
        again = model(ids).logits
    assert not torch.allclose(stock, changed)
    assert torch.equal(stock, again)


# (c) c_j > 0: equals stock attention with log c_j added to the unmasked logits
@pytest.mark.parametrize("family", FAMILIES)
def test_equals_log_multiplier_added_to_logits(models, family):
    model = models[family]
    module = attn_module(model, 0)
    q, k, v, mask = qkv(model, seed=3)
    c = torch.tensor([[1.0, 0.5, 0.05, 0.8, 1.0, 0.3], [0.2, 1.0, 1.0, 0.01, 0.6, 1.0]])
    heads = [0, 2]
    with reweight(model, [(0, h) for h in heads], c):
        out, w = cram_attention_forward(module, q, k, v, mask, scaling=module.scaling)
    rep = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    logits = q @ kk.transpose(-1, -2) * module.scaling + mask + torch.log(c)[:, None, None, :]
    ref_w = torch.softmax(logits, dim=-1)
    ref_out = (ref_w @ vv).transpose(1, 2)
    for h in heads:
        torch.testing.assert_close(w[:, h], ref_w[:, h], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out[:, :, h], ref_out[:, :, h], rtol=1e-5, atol=1e-5)
    # the chapter's worked example: masses .30/.20/.50, multipliers .8/.1/1 -> .24/.02/.50 over .76
    a = torch.tensor([0.30, 0.20, 0.50])
    scaled = a * torch.tensor([0.8, 0.1, 1.0])
    assert math.isclose(float(scaled[0] / scaled.sum()), 0.24 / 0.76, rel_tol=1e-6)


# (d) masked positions stay zero (padding)
@pytest.mark.parametrize("family", FAMILIES)
def test_masked_positions_stay_zero(models, family):
    model = models[family]
    module = attn_module(model, 0)
    q, k, v, mask = qkv(model, seed=4)
    mask[0, :, :, :2] = MIN  # batch 0: two left-padding keys
    with reweight(model, [(0, 1)], torch.full((2, 6), 0.5)) as report:
        _, w = cram_attention_forward(module, q, k, v, mask, scaling=module.scaling)
    assert torch.isfinite(w).all()
    assert torch.all(w[0, 1, 2:, :2] == 0)
    causal_masked = torch.ones(6, 6, dtype=torch.bool).triu(1)
    assert torch.all(w[1, 1][causal_masked] == 0)
    assert torch.all(w[0, 1, 2:][causal_masked[2:]] == 0)
    # rows 0-1 of batch 0 have no allowed key (padding queries): left as stock computed them
    assert report.fallback_rows == 0  # fully masked padding rows are not counted
    # the whole model with a padded batch: finite logits, and pads ignored for the real rows
    ids = torch.randint(3, 96, (2, 7), generator=torch.Generator().manual_seed(5))
    am = torch.ones(2, 7, dtype=torch.long)
    am[1, :3] = 0
    with torch.no_grad(), reweight(model, [(0, 1), (1, 2)], ramp(2, 7)):
        logits = model(ids, attention_mask=am).logits
    assert torch.isfinite(logits).all()


# (e) zero scaled mass: original row kept, counted, reported, no NaN
@pytest.mark.parametrize("family", FAMILIES)
def test_zero_mass_row_falls_back_and_is_counted(models, family):
    model = models[family]
    module = attn_module(model, 1)
    q, k, v, mask = qkv(model, seed=6)
    stock_out, stock_w = stock_eager(module)(module, q, k, v, mask, scaling=module.scaling)
    c = torch.ones(2, 6)
    c[:, :2] = 0.0  # query rows 0 and 1 only see keys 0..1 (causal): zero mass there
    with pytest.warns(CramFallbackWarning, match="zero scaled mass"):
        with reweight(model, [(1, 0), (1, 3)], c) as report:
            out, w = cram_attention_forward(module, q, k, v, mask, scaling=module.scaling)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert report.fallback_rows == 2 * 2 * 2  # batch × heads × rows {0, 1}
    assert report.fallback_by_layer == {1: 8}
    assert "8 rows had zero scaled mass" in report.summary()
    for h in (0, 3):
        assert torch.equal(w[:, h, :2], stock_w[:, h, :2])
        assert torch.equal(out[:, :2, h], stock_out[:, :2, h])
        assert torch.all(w[:, h, 2:, :2] == 0)  # later rows: c = 0 keys get no weight
        torch.testing.assert_close(w[:, h, 2:].sum(-1), torch.ones(2, 4))


# (f) KV cache: cached and uncached greedy generation agree
@pytest.mark.parametrize("family", FAMILIES)
def test_cached_and_uncached_generation_agree(models, family):
    model = models[family]
    ids = torch.randint(3, 96, (1, 8), generator=torch.Generator().manual_seed(7))
    c = torch.ones(1, 8)
    c[0, 2:6] = 0.05
    runs = {}
    for use_cache in (True, False):
        with torch.no_grad(), reweight(model, [(0, 1), (1, 0), (1, 2)], c) as report:
            gen = model.generate(ids, max_new_tokens=6, min_new_tokens=6, do_sample=False,
                                 use_cache=use_cache, output_logits=True,
                                 return_dict_in_generate=True, pad_token_id=0)
        runs[use_cache] = (gen, report)
    (cached, rep_c), (plain, rep_p) = runs[True], runs[False]
    assert torch.equal(cached.sequences, plain.sequences)
    for a, b in zip(cached.logits, plain.logits, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    assert rep_c.calls == rep_p.calls == 2 * 6 and rep_c.fallback_rows == 0
    # the intervention matters for generation too (different from the unweighted model)
    with torch.no_grad():
        stock = model.generate(ids, max_new_tokens=6, min_new_tokens=6, do_sample=False,
                               output_logits=True, return_dict_in_generate=True, pad_token_id=0)
    assert not torch.allclose(stock.logits[0], cached.logits[0])


def test_batch_broadcast_and_errors(models):
    model = models["llama"]
    module = attn_module(model, 0)
    q, k, v, mask = qkv(model)
    with reweight(model, [(0, 0)], ramp(1, 6)):  # one row for the whole batch
        one, _ = cram_attention_forward(module, q, k, v, mask, scaling=module.scaling)
    with reweight(model, [(0, 0)], ramp(2, 6)):
        two, _ = cram_attention_forward(module, q, k, v, mask, scaling=module.scaling)
    assert torch.equal(one, two)
    with reweight(model, [(0, 0)], ramp(3, 6)), pytest.raises(CramError, match="3 rows"):
        cram_attention_forward(module, q, k, v, mask, scaling=module.scaling)
    for heads in ([(2, 0)], [(0, 4)], [(0,)], [(True, 0)]):
        with pytest.raises(CramError, match="heads"), reweight(model, heads, ramp(1, 6)):
            pass
    for bad in (torch.tensor([[0.5, 1.5]]), torch.tensor([[0.5, float("nan")]]),
                torch.ones(1, 2, 3), torch.tensor([[True, False]])):
        with pytest.raises(CramError, match="multipliers"), reweight(model, [], bad):
            pass
    with reweight(model, [], ramp(1, 6)), pytest.raises(CramError, match="already active"):
        with reweight(model, [], ramp(1, 6)):
            pass
    assert model.config._attn_implementation == "eager"


# (g) scores -> multipliers -> token multipliers
def test_min_max_with_floor_and_zero_range_policy():
    docs = scores_to_multipliers([0.8, 0.1, 0.45], floor=0.2)
    assert docs.values[0] == 1.0 and math.isclose(docs.values[1], 0.2)
    assert math.isclose(docs.values[2], 0.2 + 0.8 * 0.5)
    assert not docs.zero_range and "floor 0.2" in docs.policy
    for scores in ([0.3, 0.3, 0.3], [5.0]):
        same = scores_to_multipliers(scores)
        assert same.zero_range and set(same.values) == {1.0} and same.policy == ZERO_RANGE_POLICY
    # the paper's plain min-max (35.5): scores 0.8 and 0.1 map to one and zero
    assert scores_to_multipliers([0.8, 0.1], floor=0.0).values == (1.0, 0.0)
    for bad, kw in (([], {}), ([0.1, float("nan")], {}), ([0.1, 0.2], {"floor": -0.1}),
                    ([0.1, 0.2], {"floor": 1.5}), ([0.1, 0.2], {"floor": 1.0})):
        with pytest.raises(CramInputError):
            scores_to_multipliers(bad, **kw)
    # floor 1 would make every multiplier 1: CrAM off, so it is refused, not run
    with pytest.raises(CramInputError, match=r"floor: expected a number in \[0, 1\), got 1"):
        scores_to_multipliers([0.1, 0.2], floor=1)


@pytest.fixture(scope="module")
def fast_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = "[UNK] question : who wrote it ? doc1 doc2 the moon is made of rock cheese . answer"
    vocab = {w: i for i, w in enumerate(words.split())}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return raw, PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]")


def test_token_spans_from_offsets(fast_tokenizer):
    raw, wrapped = fast_tokenizer
    doc_a, doc_b = "the moon is made of rock .", "the moon is made of cheese ."
    prompt = f"question : who wrote it ? doc1 : {doc_a} doc2 : {doc_b} answer :"
    spans = [(prompt.index(doc_a), prompt.index(doc_a) + len(doc_a)),
             (prompt.index(doc_b), prompt.index(doc_b) + len(doc_b))]
    for tok in (raw, wrapped):
        res = prompt_token_multipliers(tok, prompt, spans, [0.9, 0.1], floor=0.25)
        assert res.token_spans == ((8, 15), (17, 24))
        expected = np.ones(len(res.input_ids))
        expected[8:15], expected[17:24] = 1.0, 0.25
        np.testing.assert_array_equal(res.multipliers, expected)
    a_char = spans[0][0] + 4  # inside "moon": that token belongs to document A
    assert token_spans(res.offsets, [(a_char, a_char + 1)]) == [(9, 10)]
    with pytest.raises(CramInputError, match=r"passage-b.*covers no token"):
        token_spans([(0, 3), (4, 7)], [(0, 3), (3, 4)], names=["passage-a", "passage-b"])
    with pytest.raises(CramInputError, match="overlap"):
        token_spans([(0, 3), (4, 7)], [(0, 5), (4, 7)])
    with pytest.raises(CramInputError, match="share token"):
        token_spans([(0, 7)], [(0, 3), (4, 7)])
    with pytest.raises(CramInputError, match="offset mapping"):
        prompt_token_multipliers(type("Slow", (), {"is_fast": False})(), prompt, spans, [1, 0])
    vec = token_multipliers(5, [(1, 3)], [0.0])
    np.testing.assert_array_equal(vec, [1, 0, 0, 1, 1])


# (h) white-box check
def test_check_white_box_errors(models):
    box = check_white_box(models["gpt2"])
    assert (box.num_layers, box.num_heads) == (2, 4) and sorted(box.modules.values()) == [0, 1]
    with pytest.raises(WhiteBoxError, match=r"CrAM needs white-box attention.*PreTrainedModel"):
        check_white_box(torch.nn.Linear(2, 2))
    with pytest.raises(WhiteBoxError, match="CrAM needs white-box attention"):
        check_white_box(object())
    upcast = tiny_model("gpt2", reorder_and_upcast_attn=True)
    with pytest.raises(WhiteBoxError, match="reorder_and_upcast_attn"):
        with reweight(upcast, [], torch.ones(1, 3)):
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with reweight(models["qwen2"], [(0, 0)], torch.ones(1, 3)) as report:
            pass
    assert report.fallback_rows == 0


def test_sliding_window_is_not_full_attention() -> None:
    """A config with ``sliding_window`` set and no ``layer_types`` (Mistral) slides every
    layer: it passed as full attention, and CrAM then answered differently with and without
    the KV cache. Such layers are never selectable; a model with none left is refused."""
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM, MistralConfig

    from credrank.cram.models import attention_types

    fields = {"vocab_size": 96, "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 8, "max_position_embeddings": 128}
    torch.manual_seed(0)
    sliding = AutoModelForCausalLM.from_config(MistralConfig(**fields, sliding_window=4),
                                               attn_implementation="eager").eval()
    with pytest.raises(WhiteBoxError, match=r"no layer uses full attention \(sliding_window=4 "
                                            r"applies to every layer\)"):
        check_white_box(sliding)
    with pytest.raises(WhiteBoxError, match="sliding_window=4"), \
            reweight(sliding, [(0, 0)], torch.ones(1, 3)):
        pass
    full = AutoModelForCausalLM.from_config(MistralConfig(**fields, sliding_window=None),
                                            attn_implementation="eager").eval()
    assert check_white_box(full).layer_types == ("full_attention", "full_attention")
    # a config's layer_types decide per layer (Qwen2: the layers from max_window_layers slide)
    mixed = tiny_model("qwen2", use_sliding_window=True, sliding_window=4, max_window_layers=1)
    assert check_white_box(mixed).layer_types == ("full_attention", "sliding_attention")
    with pytest.raises(CramError, match="layer 1 uses 'sliding_attention'"), \
            reweight(mixed, [(1, 0)], torch.ones(1, 3)):
        pass
    off = SimpleNamespace(sliding_window=4, use_sliding_window=False)
    assert attention_types(off, 2) == ("full_attention", "full_attention")
    assert attention_types(SimpleNamespace(sliding_window=4), 2) == ("sliding_attention",) * 2
    assert attention_types(SimpleNamespace(), 1) == ("full_attention",)
