"""Hugging Face models' linear pieces for contribution analysis (viz_core.analysis.parts).

Read from the loaded modules, the same way for every family: the final norm of the decoder
stack (``ln_f``, ``norm``, ``final_layer_norm``, ``layer_norm``), the output embedding (with
T5's d_model^-0.5 and BART's final_logits_bias folded in), each attention block's q/k/v/o
projections (separate ``q_proj``/``q``/``query`` layers or fused ``c_attn``/``qkv_proj``), its
norms from the family's stream points (families.py), and the model's own rotary embedding and
``apply_rotary_pos_emb`` for rotary families. The HFModel methods call these.
"""

from __future__ import annotations

import inspect
import sys

import torch
from torch import nn

from viz_core.i18n import N_

from ..analysis.parts import HeadWeights, NormSpec
from ..errors import InputError
from .typed import (
    not_in_vocabulary,
    not_one_token,
    typed_text,
    vocabulary_id,
    vocabulary_ids,
)


def norm_spec(module: nn.Module | None) -> NormSpec | None:
    """NormSpec of a LayerNorm or an RMSNorm-like module (Llama, T5, Qwen, Gemma: 1 + w)."""
    if module is None or isinstance(module, nn.Identity):
        return None
    if isinstance(module, nn.LayerNorm):
        return NormSpec("layer", module.weight, module.bias, float(module.eps))
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    weight = getattr(module, "weight", None)
    if eps is None or weight is None:
        raise NotImplementedError(f"unknown norm {type(module).__name__}")
    name = type(module).__name__
    if name.startswith("Gemma"):  # Gemma's RMSNorm multiplies by (1 + w)
        weight = 1.0 + weight.detach().float()
    return NormSpec("rms", weight, None, float(eps))


def _decoder_stack(backend) -> nn.Module:
    base = backend.hf_model.base_model
    return base.decoder if backend.architecture == "encoder-decoder" else base


def final_norm(backend, which: str = "decoder") -> NormSpec | None:
    """The norm at the end of the decoder stack (``which="encoder"``: of the encoder)."""
    stack = _decoder_stack(backend)
    if which == "encoder" and backend.architecture == "encoder-decoder":
        stack = backend.hf_model.base_model.encoder
    for attr in ("ln_f", "norm", "final_layer_norm", "layer_norm"):
        m = getattr(stack, attr, None)
        if isinstance(m, nn.Module):
            return norm_spec(m)
    return None


def unembedding(backend) -> tuple[torch.Tensor, torch.Tensor | None]:
    hf = backend.hf_model
    head = hf.get_output_embeddings()
    if head is None:
        raise InputError(N_("{value} has no output head (unembedding)."), value=backend.name or 'This model')
    w = head.weight.detach()
    cfg = hf.config
    if getattr(cfg, "model_type", "") == "t5" and getattr(cfg, "scale_decoder_outputs",
                                                          getattr(cfg, "tie_word_embeddings",
                                                                  False)):
        w = w * (cfg.d_model ** -0.5)  # T5 scales the decoder output before its tied head
    b = None if getattr(head, "bias", None) is None else head.bias.detach()
    extra = getattr(hf, "final_logits_bias", None)  # BART, Marian: (1, V) buffer
    if isinstance(extra, torch.Tensor):
        b = extra[0] if b is None else b + extra[0]
    return w, b


def logit_softcap(backend) -> float | None:
    cap = getattr(backend.hf_model.config, "final_logit_softcapping", None)
    return float(cap) if cap else None


def position_rows(backend, n: int) -> torch.Tensor | None:
    if backend.positional_kind != "learned" or backend.architecture != "decoder-only":
        return None  # rotary / relative add nothing; encoder-decoder families are post-norm
    table, _ = backend.adapter.positional_table(backend.hf_model, n)
    return None if table is None else table.detach()


# ---- one attention block -----------------------------------------------------------------
def _linear(m: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(W [out, in], b) of a Linear or a GPT-2 Conv1D (which stores [in, out])."""
    w = m.weight.detach()
    if type(m).__name__ == "Conv1D":
        w = w.t()
    b = getattr(m, "bias", None)
    return w, None if b is None else b.detach()


def _projections(attn: nn.Module, h: int, hkv: int, d_head: int):
    """((W_Q, b_Q), (W_K, b_K), (W_V, b_V)) as [out, in] matrices, for any layout."""
    for names in (("q_proj", "k_proj", "v_proj"), ("q", "k", "v"), ("query", "key", "value"),
                  ("q_lin", "k_lin", "v_lin")):
        mods = [getattr(attn, n, None) for n in names]
        if all(isinstance(m, nn.Module) for m in mods):
            return tuple(_linear(m) for m in mods)
    for name in ("c_attn", "qkv_proj", "Wqkv"):
        m = getattr(attn, name, None)
        if isinstance(m, nn.Module):
            w, b = _linear(m)
            sizes = [h * d_head, hkv * d_head, hkv * d_head]
            ws = torch.split(w, sizes, dim=0)
            bs = torch.split(b, sizes) if b is not None else (None,) * 3
            return tuple(zip(ws, bs))
    raise NotImplementedError(f"unknown attention layout {type(attn).__name__}")


def _rotation(backend, attn: nn.Module, layer: int):
    """rotate(x (n, d_head), position) with the model's own rotary embedding and its
    family's apply_rotary_pos_emb (partial rotary, scaled ropes included)."""
    hf = backend.hf_model
    rotary = getattr(hf.base_model, "rotary_emb", None)
    apply = getattr(sys.modules[type(attn).__module__], "apply_rotary_pos_emb", None)
    if rotary is None or apply is None:
        raise NotImplementedError(f"no rotary embedding found for {backend.family}")
    extra = {}
    if "layer_type" in inspect.signature(rotary.forward).parameters:
        types = getattr(hf.config, "layer_types", None)
        extra["layer_type"] = types[layer] if types else None

    def rotate(x: torch.Tensor, position: int) -> torch.Tensor:
        ids = torch.tensor([[int(position)]], device=x.device)
        cos, sin = rotary(x[None].to(torch.float32), ids, **extra)  # (1, 1, d_rot)
        q = x.float()[None, :, None, :]  # (1, n, 1, d_head): n "heads" at one position
        out, _ = apply(q, q, cos.float(), sin.float())
        return out[0, :, 0]

    return rotate


def head_weights(backend, block: str) -> HeadWeights:
    attn = backend._modules.get(block) if isinstance(block, str) else None
    if attn is None:
        raise InputError(N_("{block!r} is not a block of this model; its blocks are {list}."),
                            block=block, list=list(backend._modules))
    stack, number, kind = block.split(".")
    layer = f"{stack}.{number}"
    h = backend._heads[block]
    w_o, b_o = backend.output_projection(block)  # (d, H * d_v)
    d = w_o.shape[0]
    d_head = getattr(attn, "head_dim", None) or getattr(attn, "key_value_proj_dim", None) \
        or getattr(attn, "attention_head_size", None) or w_o.shape[1] // h
    d_head = int(d_head)
    total_kv = None
    for names in (("k_proj",), ("k",), ("key",), ("k_lin",)):
        m = getattr(attn, names[0], None)
        if isinstance(m, nn.Module):
            total_kv = _linear(m)[0].shape[0]
    hkv = total_kv // d_head if total_kv else backend.kv_heads
    (wq, bq), (wk, bk), (wv, bv) = _projections(attn, h, hkv, d_head)
    pts = backend._stream_modules
    placement = backend.norm_placement
    norm = None
    if placement in ("pre", "pre+post"):
        norm = norm_spec(pts.get((layer, f"{kind}.norm")))
    post = norm_spec(pts.get((layer, f"{kind}.post_norm")))
    q_norm = norm_spec(getattr(attn, "q_norm", None))
    k_norm = norm_spec(getattr(attn, "k_norm", None))
    per_head = q_norm is None or q_norm.weight is None or q_norm.weight.numel() == d_head
    rotate = None
    if backend.positional_kind == "rotary" and kind == "self":
        rotate = _rotation(backend, attn, int(number))
    dv = w_o.shape[1] // h
    return HeadWeights(
        W_Q=wq.reshape(h, d_head, d), W_K=wk.reshape(hkv, d_head, d),
        W_V=wv.reshape(hkv, dv, d), W_O=w_o.detach().reshape(d, h, dv).permute(1, 0, 2),
        b_Q=None if bq is None else bq.reshape(h, d_head),
        b_K=None if bk is None else bk.reshape(hkv, d_head),
        b_V=None if bv is None else bv.reshape(hkv, dv),
        b_O=None if b_o is None else b_o.detach(), norm=norm, post_norm=post,
        q_norm=q_norm, k_norm=k_norm, qk_norm_per_head=per_head, rotate=rotate)


# ---- tokens ------------------------------------------------------------------------------
def _bare_word(token: str) -> bool:
    """A typed word of Latin letters or digits, no space or marker before it."""
    return token[:1].isascii() and token[:1].isalnum()


def token_id(backend, token, what: str = N_("token")) -> int:
    """The id of one token given as an id or as text (backends.typed): an exact vocabulary entry
    ("Ġcat", "▁cat", "##ing", "[SEP]"), else the text when the tokenizer reads it as one
    token. ``what`` names the box in messages ("target token")."""
    tok = backend.tokenizer
    size = backend.unembedding()[0].shape[0] if backend.architecture != "encoder-only" \
        else len(tok)
    found = vocabulary_id(token, size)
    if found is not None:
        return found
    token = typed_text(token, what)
    vocab = tok.get_vocab()
    if token in vocab and not _bare_word(token) and vocab[token] < size:  # as stored
        return int(vocab[token])
    text = " " + token[1:] if token.startswith("▁") and len(token) > 1 else token
    # A bare word ("cat": the token box strips spaces) is the word as running text has it,
    # after a space: GPT-2's "Ġcat", SentencePiece's "▁cat", not the same letters inside a
    # longer word ("cat" of "con|cat"), which a byte-level or SentencePiece vocabulary also
    # holds. Punctuation and CJK are read as typed: no space precedes them. "▁cat", the
    # app's way of showing a word start, is " cat".
    if _bare_word(text):
        texts = (" " + text, text)
    elif text.startswith(" "):
        texts = (text,)
    else:
        texts = (text, " " + text)
    unk = tok.unk_token_id
    for t in texts:
        ids = _token_ids(tok, t, token)
        if len(ids) == 1 and ids[0] != unk and ids[0] < size:
            return int(ids[0])
    if token in vocab and vocab[token] < size:  # a bare word the tokenizer never gives alone
        return int(vocab[token])
    ids = _token_ids(tok, texts[0], token)
    if not ids or (unk is not None and unk in ids) or max(ids) >= size:
        raise not_in_vocabulary(token, what)
    raise not_one_token(token, what, backend.shown_tokens(ids))


def _token_ids(tok, text: str, token: str) -> list[int]:
    try:  # verbose=False: no "longer than the maximum" warning in the server log
        return tok(text, add_special_tokens=False, verbose=False)["input_ids"]
    except Exception:  # noqa: BLE001 - lone surrogates (Rust tokenizers refuse them), a
        # WordPiece without its [UNK]: tokenizers raises a bare Exception
        raise InputError(N_("{token!r} cannot be read by this model's tokenizer."),
                         token=token) from None


def token_strings(backend, ids) -> list[str]:
    return backend.shown_tokens(vocabulary_ids(ids, len(backend.tokenizer)))
