"""CrAM: credibility-aware attention modification (chapter 35.5).

For selected (layer, head) pairs of a white-box Hugging Face causal LM, the post-softmax
attention weight of query row ``i`` on key token ``j`` is multiplied by a token multiplier
``c_j ∈ [0, 1]`` (``1`` outside the retrieved documents) and the row is renormalised over its
allowed (unmasked) keys ``A_i``::

    a'_ij = a_ij c_j / Σ_{k ∈ A_i} a_ik c_k        (j ∈ A_i;  a'_ij = 0 otherwise)

When every ``c_j > 0`` this equals ``softmax(logits_ij + log c_j)`` over the unmasked logits
(adding the raw ``c_j`` to the logits is a different operation). A row whose scaled mass is
zero keeps its original weights and is counted in the report, never turned into NaN.

Modules:

* :mod:`credrank.cram.multipliers` — pure (no torch): document scores → per-document
  multipliers (per-query min-max with a floor ``ε``; equal scores → all ``1``, reported),
  document character spans in the rendered prompt → token spans through the tokenizer's offset
  mapping, and the per-token multiplier vector.
* :mod:`credrank.cram.attention` — the reweighted attention function, registered with
  transformers' ``AttentionInterface`` / ``AttentionMaskInterface`` under
  :data:`~credrank.cram.attention.CRAM_ATTENTION`, and the :func:`~credrank.cram.attention.reweight`
  context manager that activates it (needs torch and transformers: the ``lm`` and ``embed``
  extras).
* :mod:`credrank.cram.models` — tiny random Llama / Qwen2 / GPT-2 models built from configs (for
  tests) and :func:`~credrank.cram.models.check_white_box`.

* :mod:`credrank.cram.heads` — head selection: the indirect effect
  ``IE_h = P0(a_wrong) − P_h*(a_wrong)`` (and its log form) by teacher forcing, batched so that
  forward passes grow with examples × layers, not with heads; ranking and the number of heads
  chosen on a validation split.
* :mod:`credrank.cram.prompt`, :mod:`credrank.cram.headsfile` and
  :mod:`credrank.cram.generate` — prompts with exact passage spans, the versioned heads file,
  generation with the intervention (``credrank cram calibrate`` / ``credrank cram answer``).

This package does not import torch at import time; the submodules that need it do.
"""
