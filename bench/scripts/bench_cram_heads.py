"""CrAM head selection: batched (many heads per forward pass) vs one pass per head per example.

On a tiny randomly initialised Llama (default 4 layers × 8 heads, grouped-query attention; no
download) and N synthetic misinformation examples (a word-level tokenizer built in code; each
prompt holds one real and one fake passage, ideal scores: fake 0, real 1), computes the mean
indirect effects ``IE_h = P_0(a_wrong) − P_h*(a_wrong)`` (chapter 35.5) of every head twice:

  * per head — the reference: one forward pass per example for ``P_0`` and one per
               (example, head) for ``P_h*``: ``N (1 + L·H)`` passes
  * batched  — one row per (example, head) job, each row intervening on its own head
               (``reweight(..., row_heads=...)``), ``--rows`` rows per pass (default H):
               ``⌈N/R⌉ + ⌈N·L·H/R⌉`` passes

and prints forward passes, wall time, the largest effect difference and whether the two
rankings (by ``ie`` and ``ie_log``) are identical. A third column is the first-order
estimate (attribution patching, ``head_attributions``: one forward and one backward pass per
example, whatever the number of heads; ``credrank cram calibrate --method attribution``) with
its Spearman correlation to the exact effects and the overlap of the top-k heads (k = 10% of
the heads). Wall-clock on a shared CPU: a measurement, not a test; each path is run
``--repeat`` times and the median kept.

    python bench/scripts/bench_cram_heads.py [--layers 4] [--heads 8] [--examples 6] [--rows R]
                                          [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics

import numpy as np

from credrank.cram.heads import (
    CalibrationExample,
    head_attributions,
    head_effects,
    rank_heads,
)
from credrank.cram.models import tiny_model

NOUNS = ("moon sun river city tower bridge forest island castle library garden harbour "
         "mountain desert valley lake").split()
STUFF = ("rock cheese glass paper iron gold salt sand wood stone ice silk").split()
GLUE = "question : what is the made of ? doc1 doc2 answer . it was built from".split()


def make_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["[PAD]", "[UNK]", *dict.fromkeys(GLUE + NOUNS + STUFF)]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]")
    return tok, len(words)


def make_examples(n: int, seed: int = 0) -> list[CalibrationExample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        noun = NOUNS[i % len(NOUNS)]
        right, wrong, wrong2 = rng.sample(STUFF, 3)
        real = f"the {noun} is made of {right} . it was built from {right} ."
        fake = f"the {noun} is made of {wrong} {wrong2} . it was built from {wrong} {wrong2} ."
        docs, scores = ([real, fake], [1.0, 0.0]) if i % 2 == 0 else ([fake, real], [0.0, 1.0])
        prompt = f"question : what is the {noun} made of ? doc1 : {docs[0]} doc2 : {docs[1]} " \
                 "answer :"
        spans = [(prompt.index(d), prompt.index(d) + len(d)) for d in docs]
        out.append(CalibrationExample(prompt=prompt, doc_char_spans=spans, doc_scores=scores,
                                      answer_wrong=f"{wrong} {wrong2}", answer_right=right))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--examples", type=int, default=6)
    ap.add_argument("--rows", type=int, default=None, help="rows per batched pass (default H)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    tok, vocab = make_tokenizer()
    model = tiny_model("llama", num_hidden_layers=args.layers, num_attention_heads=args.heads,
                       num_key_value_heads=max(1, args.heads // 2), hidden_size=8 * args.heads,
                       intermediate_size=16 * args.heads, vocab_size=vocab)
    examples = make_examples(args.examples)
    head_effects(model, tok, examples[:1], rows_per_pass=args.rows)  # warm-up
    runs = {}
    for name, batched in (("per head", False), ("batched", True)):
        res = [head_effects(model, tok, examples, batched=batched, rows_per_pass=args.rows)
               for _ in range(max(1, args.repeat))]
        runs[name] = (res[0], statistics.median(r.seconds for r in res))
    (slow, slow_s), (fast, fast_s) = runs["per head"], runs["batched"]
    att_runs = [head_attributions(model, tok, examples) for _ in range(max(1, args.repeat))]
    att, att_s = att_runs[0], statistics.median(r.seconds for r in att_runs)
    from scipy.stats import spearmanr

    k = max(1, (args.layers * args.heads) // 10)
    overlap = {by: len(set(rank_heads(att, by)[:k]) & set(rank_heads(slow, by)[:k])) / k
               for by in ("ie", "ie_log")}
    rho = {by: float(spearmanr(getattr(slow, by).ravel(), getattr(att, by).ravel()).statistic)
           for by in ("ie", "ie_log")}
    same = {by: rank_heads(fast, by) == rank_heads(slow, by) for by in ("ie", "ie_log")}
    result = {
        "model": f"tiny random llama, {args.layers} layers x {args.heads} heads "
                 f"({args.layers * args.heads} heads), width {8 * args.heads}",
        "examples": args.examples,
        "rows_per_pass": fast.rows_per_pass,
        "torch_threads": 1,
        "python": platform.python_version(),
        "per_head": {"passes": slow.passes, "seconds": round(slow_s, 4)},
        "batched": {"passes": fast.passes, "seconds": round(fast_s, 4)},
        "speedup": round(slow_s / fast_s, 2) if fast_s > 0 else None,
        "max_abs_diff_ie": float(np.abs(fast.ie - slow.ie).max()),
        "max_abs_diff_ie_log": float(np.abs(fast.ie_log - slow.ie_log).max()),
        "rankings_identical": same,
        "top5_ie": [list(h) for h in rank_heads(fast)[:5]],
        "fallback_rows": fast.fallback_rows,
        "attribution": {"passes": att.passes, "backward_passes": att.passes,
                        "seconds": round(att_s, 4), "spearman_vs_exact": rho,
                        "top_k": k, "top_k_overlap": overlap},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(result["model"] + f"; {args.examples} examples; median of {args.repeat} runs; "
          "1 torch thread")
    print(f"{'':24}{'per head':>12}{'batched':>12}{'attribution':>14}")
    print(f"{'forward passes':24}{slow.passes:>12}{fast.passes:>12}{att.passes:>14}")
    print(f"{'backward passes':24}{0:>12}{0:>12}{att.passes:>14}")
    print(f"{'rows per pass':24}{1:>12}{fast.rows_per_pass:>12}{1:>14}")
    print(f"{'wall time (s)':24}{slow_s:>12.3f}{fast_s:>12.3f}{att_s:>14.3f}")
    print(f"speedup {result['speedup']}x; max |Δ IE| {result['max_abs_diff_ie']:.2e}, "
          f"max |Δ IE_log| {result['max_abs_diff_ie_log']:.2e}; rankings identical: "
          f"ie {same['ie']}, ie_log {same['ie_log']}; top-5 heads {result['top5_ie']}")
    print(f"attribution (first order) vs exact: Spearman ie {rho['ie']:.3f}, ie_log "
          f"{rho['ie_log']:.3f}; top-{k} overlap ie {overlap['ie']:.0%}, ie_log "
          f"{overlap['ie_log']:.0%}")


if __name__ == "__main__":
    main()
