"""Tiny random-weight decoders of the families people debug today, built offline for tests.

Each ``make_tiny(family, path)`` writes a model folder (config, safetensors weights, the
byte-level GPT-2 tokenizer of tests/support/hf_tiny.py) and returns it. Sizes: hidden 32, 2 layers,
4 query heads over 2 key/value heads (grouped-query attention), 64 positions; Mistral and the
Gemma families get a sliding window of 4 on their local layers, Gemma 2 a logit softcap.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tests.support.hf_tiny import MAX_POSITIONS, _save, gpt2_tokenizer

COMMON = dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=MAX_POSITIONS)


def _config(family: str, vocab: int, eos: int):
    import transformers as tf

    ids = dict(vocab_size=vocab, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    if family == "llama":
        return tf.LlamaConfig(**COMMON, **ids), tf.LlamaForCausalLM
    if family == "mistral":
        return tf.MistralConfig(**COMMON, **ids, sliding_window=4), tf.MistralForCausalLM
    if family == "qwen2":
        return tf.Qwen2Config(**COMMON, **ids), tf.Qwen2ForCausalLM
    if family == "qwen3":
        return tf.Qwen3Config(**COMMON, **ids, head_dim=8), tf.Qwen3ForCausalLM
    if family == "gemma2":
        return tf.Gemma2Config(**COMMON, **ids, head_dim=8, sliding_window=4,
                               attn_logit_softcapping=5.0, final_logit_softcapping=30.0,
                               query_pre_attn_scalar=8), tf.Gemma2ForCausalLM
    if family == "gemma3_text":
        return tf.Gemma3TextConfig(**COMMON, **ids, head_dim=8, sliding_window=4,
                                   query_pre_attn_scalar=8,
                                   layer_types=["sliding_attention", "full_attention"]
                                   ), tf.Gemma3ForCausalLM
    if family == "phi3":
        return tf.Phi3Config(**COMMON, **ids), tf.Phi3ForCausalLM
    if family == "olmo2":
        return tf.Olmo2Config(**COMMON, **ids), tf.Olmo2ForCausalLM
    raise ValueError(family)


MODERN = ["llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3", "olmo2"]


def make_tiny(family: str, path, seed: int = 0) -> Path:
    tok = gpt2_tokenizer()
    cfg, cls = _config(family, len(tok), tok.eos_token_id)
    torch.manual_seed(seed)
    model = cls(cfg)
    with torch.no_grad():  # random norms' weights start at 0 or 1: spread the logits a bit
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return _save(model, tok, path)
