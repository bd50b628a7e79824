"""CrAM head selection (chapter 35.5): batched vs one-pass-per-head effects on tiny models."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="CrAM needs torch (the embed extra)")
pytest.importorskip("transformers", reason="CrAM needs transformers (the lm extra)")

from credrank.cram.attention import CramError, cram_attention_forward, reweight  # noqa: E402
from credrank.cram.heads import (  # noqa: E402
    LOG_PROB_EPS,
    CalibrationExample,
    HeadSelectionError,
    answer_log_prob,
    choose_n_heads,
    head_effects,
    rank_heads,
)
from credrank.cram.models import WhiteBoxError, stock_eager, tiny_model  # noqa: E402

WORDS = ("[PAD] [UNK] question : who wrote it ? where is the moon made of doc1 doc2 doc3 rock "
         "cheese green blue paris rome . answer shakespeare marlowe a poet playwright says")
REAL = ["the moon is made of rock .", "shakespeare wrote it .", "the moon is rock ."]
FAKE = ["the moon is made of green cheese .", "marlowe wrote it a playwright says .",
        "the moon is cheese ."]
WRONG = ["green cheese", "marlowe", "cheese"]
QUESTIONS = ["question : what is the moon made of ?", "question : who wrote it ?",
             "question : what is the moon made of ?"]


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(dict.fromkeys(WORDS.split()))}
    vocab["what"] = len(vocab)
    raw = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]")


def example(i: int, fake_first: bool = False) -> CalibrationExample:
    docs = [FAKE[i], REAL[i]] if fake_first else [REAL[i], FAKE[i]]
    scores = [0.0, 1.0] if fake_first else [1.0, 0.0]
    prompt = f"{QUESTIONS[i]} doc1 : {docs[0]} doc2 : {docs[1]} answer :"
    spans = [(prompt.index(d), prompt.index(d) + len(d)) for d in docs]
    return CalibrationExample(prompt=prompt, doc_char_spans=spans, doc_scores=scores,
                              answer_wrong=WRONG[i])


EXAMPLES = [example(0), example(1, fake_first=True), example(2)]


# (a) batched and one-pass-per-head effects and rankings agree
@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_batched_equals_per_head(tokenizer, family):
    model = tiny_model(family, seed=3)
    fast = head_effects(model, tokenizer, EXAMPLES, batched=True)
    slow = head_effects(model, tokenizer, EXAMPLES, batched=False)
    np.testing.assert_allclose(fast.ie, slow.ie, rtol=0, atol=1e-6)
    np.testing.assert_allclose(fast.ie_log, slow.ie_log, rtol=0, atol=1e-5)
    np.testing.assert_allclose(fast.p0_log, slow.p0_log, rtol=0, atol=1e-5)
    for by in ("ie", "ie_log"):
        assert rank_heads(fast, by) == rank_heads(slow, by)
    assert np.all(np.isfinite(fast.ie)) and np.all(np.isfinite(fast.ie_log))
    assert np.abs(fast.ie).max() > 0  # the intervention does something
    assert fast.n_examples == slow.n_examples == 3
    # effects are the definitions: P0 − P_h and log P0 − log P_h, averaged
    mults = [_mults(tokenizer, ex) for ex in EXAMPLES]
    prompts = [ex.prompt for ex in EXAMPLES]
    answers = [ex.answer_wrong for ex in EXAMPLES]
    p0 = answer_log_prob(model, tokenizer, prompts, answers)
    ph = answer_log_prob(model, tokenizer, prompts, answers, multipliers=mults, heads=[(1, 2)])
    assert math.isclose(fast.ie[1, 2], float(np.mean(np.exp(p0) - np.exp(ph))), abs_tol=1e-7)
    assert math.isclose(fast.ie_log[1, 2], float(np.mean(p0 - ph)), abs_tol=1e-6)


def _mults(tokenizer, ex: CalibrationExample) -> np.ndarray:
    """Ideal multipliers by hand: fake passage 0, everything else 1."""
    enc = tokenizer(ex.prompt, return_offsets_mapping=True)
    fake = ex.doc_char_spans[int(np.argmin(ex.doc_scores))]
    return np.array([0.0 if a < fake[1] and b > fake[0] else 1.0
                     for a, b in enc["offset_mapping"]])


# (b) pass counts: batched grows with layers (and batches), not heads × examples
def test_pass_counts(tokenizer):
    n = len(EXAMPLES)
    for layers, heads in ((2, 4), (2, 8), (3, 8)):
        model = tiny_model("llama", num_hidden_layers=layers, num_attention_heads=heads,
                           num_key_value_heads=heads // 2, hidden_size=8 * heads)
        fast = head_effects(model, tokenizer, EXAMPLES)
        assert fast.rows_per_pass == heads
        assert fast.passes == math.ceil(n / heads) + n * layers  # one pass per (example, layer)
        big = head_effects(model, tokenizer, EXAMPLES, rows_per_pass=n * layers * heads)
        assert big.passes == 2  # baselines, then every (example, head) job at once
        if heads == 4 and layers == 2:
            slow = head_effects(model, tokenizer, EXAMPLES, batched=False)
            assert slow.passes == n * (1 + layers * heads)
            assert slow.rows_per_pass == 1 and slow.seconds > 0
            np.testing.assert_allclose(big.ie, slow.ie, atol=1e-6)


# (c) multi-token answer: teacher-forced log-prob = sum of per-token log-probs by hand
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_multi_token_answer_log_prob(tokenizer, family):
    model = tiny_model(family, seed=1)
    ex = EXAMPLES[1]
    answer = "marlowe a poet"
    prompt_ids = tokenizer(ex.prompt)["input_ids"]
    answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    assert len(answer_ids) == 3
    mult = _mults(tokenizer, ex)
    for heads in ([], [(0, 1), (1, 3)]):
        by_hand = 0.0
        with torch.no_grad():
            for t in range(len(answer_ids)):  # one explicit pass per answer token
                ids = torch.tensor([prompt_ids + answer_ids[:t]])
                if heads:
                    with reweight(model, heads, torch.tensor(mult[None], dtype=torch.float32)):
                        logits = model(ids).logits
                else:
                    logits = model(ids).logits
                by_hand += float(torch.log_softmax(logits[0, -1].double(), -1)[answer_ids[t]])
        kw = {"multipliers": [mult], "heads": heads} if heads else {}
        ours = answer_log_prob(model, tokenizer, ex.prompt, answer, **kw)
        assert ours.shape == (1,) and math.isclose(float(ours[0]), by_hand, abs_tol=1e-5)
        tokens = answer_log_prob(model, tokenizer, ex.prompt, answer, per_token=True, **kw)
        assert len(tokens[0]) == 3 and math.isclose(float(tokens[0].sum()), float(ours[0]))
    # batched rows (different lengths, padded) equal the rows run alone
    prompts = [e.prompt for e in EXAMPLES]
    answers = ["green cheese", "marlowe a poet", "cheese"]
    together = answer_log_prob(model, tokenizer, prompts, answers)
    alone = [float(answer_log_prob(model, tokenizer, p, a)[0])
             for p, a in zip(prompts, answers, strict=True)]
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert np.all(together >= 3 * LOG_PROB_EPS)


# (d) choose_n_heads: the minimiser of the validation curve, ties to the smallest n
def test_choose_n_heads(tokenizer):
    model = tiny_model("llama", seed=3)
    effects = head_effects(model, tokenizer, EXAMPLES[:2])
    ranked = rank_heads(effects)
    assert len(ranked) == 8
    valid = [EXAMPLES[2]]
    grid = (0, 1, 2, 4, 8, 100)
    n, curve = choose_n_heads(model, tokenizer, ranked, valid, grid=grid)
    assert sorted(curve) == [0, 1, 2, 4, 8]  # 100 > 8 ranked heads: dropped
    assert curve[n] == min(curve.values())
    assert n == min(k for k in curve if curve[k] == min(curve.values()))
    # the curve is the validation mean P(a_wrong) with the top-n heads reweighted
    p = answer_log_prob(model, tokenizer, valid[0].prompt, valid[0].answer_wrong,
                        multipliers=[_mults(tokenizer, valid[0])], heads=ranked[:2])
    assert math.isclose(curve[2], math.exp(float(p[0])), rel_tol=1e-5)
    p0 = answer_log_prob(model, tokenizer, valid[0].prompt, valid[0].answer_wrong)
    assert math.isclose(curve[0], math.exp(float(p0[0])), rel_tol=1e-5)
    # ties go to the smallest n: with a tolerance covering the whole curve every n ties
    n_tie, _ = choose_n_heads(model, tokenizer, ranked, valid, grid=(4, 2, 8), tol=10.0)
    assert n_tie == 2
    n_log, curve_log = choose_n_heads(model, tokenizer, ranked, valid, grid=grid,
                                      by="log_prob", rows_per_pass=2)
    assert curve_log[n_log] == min(curve_log.values())
    assert all(math.isclose(curve_log[k], math.log(curve[k]), abs_tol=1e-5) for k in curve)
    # rank ties broken by (layer, head)
    effects.ie[:] = 0.0
    effects.ie[1, 3] = 0.5
    assert rank_heads(effects)[:3] == [(1, 3), (0, 0), (0, 1)]
    for bad in ({"grid": (9, 10)}, {"grid": (-1,)}, {"by": "p"}, {"tol": -1.0}):
        with pytest.raises(HeadSelectionError):
            choose_n_heads(model, tokenizer, ranked, valid, **bad)
    with pytest.raises(HeadSelectionError, match="distinct"):
        choose_n_heads(model, tokenizer, [(0, 0), (0, 0)], valid)


# (e) errors: empty calibration / validation sets, non-white-box models
def test_errors(tokenizer):
    model = tiny_model("llama")
    with pytest.raises(HeadSelectionError, match="calibration set is empty"):
        head_effects(model, tokenizer, [])
    with pytest.raises(HeadSelectionError, match="validation set is empty"):
        choose_n_heads(model, tokenizer, [(0, 0)], [])
    for bad in (torch.nn.Linear(2, 2), tiny_model("gpt2", reorder_and_upcast_attn=True)):
        with pytest.raises(WhiteBoxError, match="CrAM needs white-box attention"):
            head_effects(bad, tokenizer, EXAMPLES)
        with pytest.raises(WhiteBoxError, match="CrAM needs white-box attention"):
            choose_n_heads(bad, tokenizer, [(0, 0)], EXAMPLES)
    with pytest.raises(HeadSelectionError, match="by: expected"):
        rank_heads(head_effects(model, tokenizer, EXAMPLES[:1]), by="p")
    with pytest.raises(HeadSelectionError, match="rows_per_pass"):
        head_effects(model, tokenizer, EXAMPLES, rows_per_pass=0)


# per-row heads in reweight(): each row reweights only its own heads, others stay bit-identical
def test_row_heads_per_row_selection():
    model = tiny_model("llama", seed=2)
    module = model.model.layers[1].self_attn
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 4, 6, 8, generator=g) * 2
    k = torch.randn(3, 2, 6, 8, generator=g) * 2
    v = torch.randn(3, 2, 6, 8, generator=g)
    mask = torch.zeros(3, 1, 6, 6).masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(),
                                               torch.finfo(torch.float32).min)
    c = torch.linspace(0.2, 1.0, 6).repeat(3, 1)
    stock_out, stock_w = stock_eager(module)(module, q, k, v, mask, scaling=module.scaling)
    rows = [[(1, 0)], [(1, 2), (0, 1)], []]
    with reweight(model, None, c, row_heads=rows) as report:
        out, w = cram_attention_forward(module, q, k, v, mask, scaling=module.scaling)
    assert report.rows == 2 * 6  # (row 0, head 0) and (row 1, head 2), 6 queries each
    for r, own in enumerate(({0}, {2}, set())):
        with reweight(model, [(1, h) for h in own], c[r:r + 1]):
            ref_out, ref_w = cram_attention_forward(module, q[r:r + 1], k[r:r + 1],
                                                    v[r:r + 1], mask[r:r + 1],
                                                    scaling=module.scaling)
        for h in range(4):
            if h in own:
                torch.testing.assert_close(out[r, :, h], ref_out[0, :, h])
                torch.testing.assert_close(w[r, h], ref_w[0, h])
            else:
                assert torch.equal(out[r, :, h], stock_out[r, :, h])
                assert torch.equal(w[r, h], stock_w[r, h])
    # common heads apply to every row; the row count must match the multipliers
    with reweight(model, [(1, 1)], c[:1], row_heads=rows) as report:
        cram_attention_forward(module, q, k, v, mask, scaling=module.scaling)
    assert report.rows == (3 + 2) * 6
    with pytest.raises(CramError, match="row_heads"), reweight(model, None, c[:2],
                                                               row_heads=rows):
        pass
    with pytest.raises(CramError, match="heads"), reweight(model, None, c, row_heads=[[(5, 0)]]):
        pass


# (h) attribution patching: the gradient is the derivative of the interpolated intervention,
#     t = 0 is stock, t = e_h is exactly CrAM on head h alone, and the first-order ranking
#     tracks the exact one
def _log_p_at(model, tokenizer, ex, t_values):
    from credrank.cram.attention import attribution_patch

    ids = tokenizer(ex.prompt + " " + ex.answer_wrong, return_tensors="pt")["input_ids"]
    p = len(tokenizer(ex.prompt)["input_ids"])
    mult = torch.ones(ids.shape[1])
    mult[:p] = torch.as_tensor(_mults(tokenizer, ex), dtype=torch.float32)
    with torch.no_grad(), attribution_patch(model, mult) as (strength, _):
        strength.copy_(torch.as_tensor(t_values, dtype=torch.float32))
        logits = model(input_ids=ids).logits[0].double()
    lp = torch.log_softmax(logits, dim=-1)
    return float(sum(lp[p - 1 + k, ids[0, p + k]] for k in range(ids.shape[1] - p)))


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_attribution_is_the_derivative(tokenizer, family):
    from credrank.cram.heads import head_attributions

    model = tiny_model(family, seed=3)
    ex = EXAMPLES[0]
    shape = (model.config.num_hidden_layers, model.config.num_attention_heads)
    att = head_attributions(model, tokenizer, [ex])
    assert att.method == "attribution" and att.passes == 1
    p0 = answer_log_prob(model, tokenizer, ex.prompt, ex.answer_wrong)[0]
    assert math.isclose(att.p0_log[0], p0, abs_tol=1e-5)
    assert math.isclose(_log_p_at(model, tokenizer, ex, np.zeros(shape)), p0, abs_tol=1e-5)
    for layer, head in ((0, 0), (1, 2)):
        e = np.zeros(shape)
        e[layer, head] = 1.0
        # t = e_h reproduces CrAM on that head alone (the exact P_h*)
        exact = answer_log_prob(model, tokenizer, ex.prompt, ex.answer_wrong,
                                multipliers=[_mults(tokenizer, ex)], heads=[(layer, head)])[0]
        assert math.isclose(_log_p_at(model, tokenizer, ex, e), exact, abs_tol=1e-5)
        # central finite difference of log P in t_h at 0 = −IE^log estimate
        h = 1e-2
        fd = (_log_p_at(model, tokenizer, ex, h * e) - _log_p_at(model, tokenizer, ex, -h * e)) \
            / (2 * h)
        assert math.isclose(-att.ie_log[layer, head], fd, rel_tol=1e-2, abs_tol=1e-5)
        assert math.isclose(att.ie[layer, head], math.exp(p0) * att.ie_log[layer, head],
                            rel_tol=1e-9, abs_tol=1e-12)


def test_attribution_ranking_tracks_exact(tokenizer):
    from scipy.stats import spearmanr

    from credrank.cram.heads import head_attributions

    model = tiny_model("llama", seed=3)
    exact = head_effects(model, tokenizer, EXAMPLES)
    approx = head_attributions(model, tokenizer, EXAMPLES)
    assert approx.passes == len(EXAMPLES) < exact.passes
    rho = spearmanr(exact.ie_log.ravel(), approx.ie_log.ravel()).statistic
    assert rho > 0.6, rho  # 0.76 on this seeded model: close, not equal (first order)
    with pytest.raises(HeadSelectionError, match="empty"):
        head_attributions(model, tokenizer, [])
