"""Where things live inside each supported Hugging Face family (transformers 5.x layout).

The HF backend never patches a model per call. What it needs from the weights it reads here:

- ``attention_qkv``: queries, keys and values of one self-attention layer, recomputed from the
  hidden state that entered the layer with the layer's own projection modules (BERT family and
  GPT-2 only), so pre-softmax scores can be shown without hooking the forward pass.
- ``positional_table``: the rows of the learned / sinusoidal table the model really adds for
  positions 0..n-1 (RoBERTa and BART offset their position ids).
- ``install_ablation_hooks``: head ablation. transformers 5 removed ``head_mask``; we register,
  once at load time (before the model is shared), a forward pre-hook on each attention block's
  output projection. The hook does nothing unless the *current context* asks for ablation
  through a ContextVar that ``ablation(...)`` sets for the duration of one call. ContextVars are
  per thread, so concurrent traces never see each other's settings, and nothing is stored on a
  module per call. Zeroing head h's slice of the output projection's input is exactly zeroing
  that head's output z (the native backend's hook_z ablation).
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

import torch

FAMILY_OF_MODEL_TYPE = {
    "bert": "bert", "roberta": "roberta", "distilbert": "distilbert", "gpt2": "gpt2",
    "bart": "bart", "t5": "t5", "marian": "marian",
}
KIND_OF_FAMILY = {
    "bert": "encoder-only", "roberta": "encoder-only", "distilbert": "encoder-only",
    "gpt2": "decoder-only",
    "bart": "encoder-decoder", "t5": "encoder-decoder", "marian": "encoder-decoder",
}
# Families whose pre-softmax scores (and q, k, v, z) we can recompute exactly.
SCORE_FAMILIES = ("bert", "roberta", "distilbert", "gpt2")
BYTE_LEVEL_FAMILIES = ("roberta", "gpt2", "bart")
SUPPORTED_TEXT = ("BERT (incl. MiniLM), RoBERTa, DistilBERT, GPT-2, BART, T5, Marian")

# {block name: sorted head indices} for the running call; None outside an ablated call.
_ABLATE: ContextVar[dict[str, list[int]] | None] = ContextVar("attention_lab_hf_ablate",
                                                              default=None)


def base_of(model):
    """The bare transformer inside a model with a head (BertModel, GPT2Model, BartModel, ...)."""
    return model.base_model


def encoder_layers(model, family: str):
    base = base_of(model)
    if family in ("bert", "roberta"):
        return list(base.encoder.layer)
    if family == "distilbert":
        return list(base.transformer.layer)
    if family in ("bart", "marian"):
        return list(base.encoder.layers)
    if family == "t5":
        return list(model.encoder.block)
    return []


def decoder_layers(model, family: str):
    base = base_of(model)
    if family == "gpt2":
        return list(base.h)
    if family in ("bart", "marian"):
        return list(base.decoder.layers)
    if family == "t5":
        return list(model.decoder.block)
    return []


def n_heads(config) -> int:
    for attr in ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads",
                 "num_heads"):
        value = getattr(config, attr, None)
        if value:
            return int(value)
    raise ValueError("cannot tell the number of heads from the config")


def output_projections(model, family: str) -> dict[str, tuple[torch.nn.Module, int]]:
    """{block name: (module whose input is the heads' concatenated output z, n_heads)}."""
    cfg = model.config
    out: dict[str, tuple[torch.nn.Module, int]] = {}
    for i, layer in enumerate(encoder_layers(model, family)):
        if family in ("bert", "roberta"):
            out[f"encoder.{i}.self"] = (layer.attention.output.dense, n_heads(cfg))
        elif family == "distilbert":
            out[f"encoder.{i}.self"] = (layer.attention.out_lin, n_heads(cfg))
        elif family in ("bart", "marian"):
            out[f"encoder.{i}.self"] = (layer.self_attn.out_proj, layer.self_attn.num_heads)
        elif family == "t5":
            sa = layer.layer[0].SelfAttention
            out[f"encoder.{i}.self"] = (sa.o, sa.n_heads)
    for i, layer in enumerate(decoder_layers(model, family)):
        if family == "gpt2":
            out[f"decoder.{i}.self"] = (layer.attn.c_proj, n_heads(cfg))
        elif family in ("bart", "marian"):
            out[f"decoder.{i}.self"] = (layer.self_attn.out_proj, layer.self_attn.num_heads)
            out[f"decoder.{i}.cross"] = (layer.encoder_attn.out_proj,
                                         layer.encoder_attn.num_heads)
        elif family == "t5":
            self_attn, cross = layer.layer[0].SelfAttention, layer.layer[1].EncDecAttention
            out[f"decoder.{i}.self"] = (self_attn.o, self_attn.n_heads)
            out[f"decoder.{i}.cross"] = (cross.o, cross.n_heads)
    return out


def _ablation_prehook(block: str, heads_total: int):
    def prehook(module, args):
        spec = _ABLATE.get()
        if not spec or block not in spec:
            return None  # the usual case: this call does not ablate this block
        z = args[0]  # (B, T, H * d_head): the heads' outputs side by side
        shape = z.shape
        z = z.reshape(*shape[:-1], heads_total, shape[-1] // heads_total).clone()  # (B, T, H, dh)
        z[..., spec[block], :] = 0
        return (z.reshape(shape), *args[1:])

    return prehook


def install_ablation_hooks(model, family: str) -> dict[str, int]:
    """Register the (inert by default) ablation pre-hooks; call once, at load time only.

    Returns {block name: n_heads} for validating ablation requests.
    """
    heads = {}
    for block, (module, h) in output_projections(model, family).items():
        module.register_forward_pre_hook(_ablation_prehook(block, h))
        heads[block] = h
    return heads


@contextlib.contextmanager
def ablation(spec: dict[str, list[int]] | None):
    """Ablate heads for everything run inside this block, in this thread/context only."""
    token = _ABLATE.set(spec or None)
    try:
        yield
    finally:
        _ABLATE.reset(token)


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)  # (B, H, T, dh)


def attention_qkv(model, family: str, layer_index: int, hidden: torch.Tensor,
                  need=("q", "k", "v")):
    """q, k, v (B, H, T, dh) and the score scale of one self-attention layer.

    hidden: the hidden state entering that layer, i.e. ``output_hidden_states[layer_index]``.
    Mirrors the layer's own forward: BERT/RoBERTa/DistilBERT (post-LN) project the layer input
    directly; GPT-2 (pre-LN) projects ``ln_1(input)`` with one Conv1D ``c_attn`` split in 3.
    need: which of q, k, v to compute (separate projections skip the others: None).
    """
    if family in ("bert", "roberta", "distilbert"):
        if family == "distilbert":
            sa = encoder_layers(model, family)[layer_index].attention
            h, proj = sa.n_heads, {"q": sa.q_lin, "k": sa.k_lin, "v": sa.v_lin}
        else:
            sa = encoder_layers(model, family)[layer_index].attention.self
            h, proj = sa.num_attention_heads, {"q": sa.query, "k": sa.key, "v": sa.value}
        q, k, v = (_split_heads(proj[p](hidden), h) if p in need else None
                   for p in ("q", "k", "v"))
        return q, k, v, float(sa.scaling)
    if family == "gpt2":
        block = decoder_layers(model, family)[layer_index]
        attn = block.attn
        h = attn.num_heads
        q, k, v = attn.c_attn(block.ln_1(hidden)).split(attn.split_size, dim=2)  # one Conv1D
        scale = attn.scaling  # includes scale_attn_weights and scale_attn_by_inverse_layer_idx
        return _split_heads(q, h), _split_heads(k, h), _split_heads(v, h), float(scale)
    raise ValueError(f"no score recomputation for {family}")


def positional_table(model, family: str, n: int):
    """(rows [n, d_model] the model adds for positions 0..n-1, kind, note)."""
    base = base_of(model)
    if family in ("bert", "distilbert"):
        w = base.embeddings.position_embeddings.weight
        return w[:n], "learned", "learned absolute position embeddings"
    if family == "roberta":
        start = model.config.pad_token_id + 1  # RoBERTa numbers positions from padding_idx + 1
        w = base.embeddings.position_embeddings.weight
        return w[start:start + n], "learned", (
            f"learned absolute position embeddings (rows {start}.. : RoBERTa offsets position "
            f"ids by padding_idx + 1)")
    if family == "gpt2":
        return base.wpe.weight[:n], "learned", "learned absolute position embeddings (wpe)"
    if family == "bart":
        emb = base.encoder.embed_positions
        off = int(getattr(emb, "offset", 2))
        return emb.weight[off:off + n], "learned", (
            f"encoder's learned position embeddings (rows {off}.. : BART offsets positions by "
            f"{off}); the decoder has its own table")
    if family == "marian":
        w = base.encoder.embed_positions.weight
        return w[:n], "sinusoidal", ("fixed sinusoidal table, sin in the first half of the "
                                     "dimensions and cos in the second (not interleaved)")
    return None, "relative", "relative position bias, no absolute encoding"


def max_positions(model, family: str) -> int | None:
    """Longest sequence the architecture can take (None: no absolute limit, e.g. T5)."""
    cfg = model.config
    if family == "roberta":
        return int(cfg.max_position_embeddings) - int(cfg.pad_token_id) - 1
    if family == "gpt2":
        return int(cfg.n_positions)
    if family in ("bert", "distilbert", "bart", "marian"):
        return int(cfg.max_position_embeddings)
    return None
