"""Our Transformer's linear pieces for contribution analysis (viz_core.analysis.parts).

The NativeModel methods final_norm(), unembedding(), head_weights(block) ... call these.
"""

from __future__ import annotations

import torch
from torch import nn

from viz_core.i18n import N_

from ..analysis.parts import HeadWeights, NormSpec
from ..errors import InputError
from ..model.positional import apply_rope
from .typed import (
    not_in_vocabulary,
    not_one_token,
    typed_text,
    vocabulary_id,
    vocabulary_ids,
)


def norm_spec(module: nn.Module | None) -> NormSpec | None:
    """NormSpec of our LayerNorm / RMSNorm (None for Identity: post-norm stacks' end)."""
    if module is None or isinstance(module, nn.Identity):
        return None
    if isinstance(module, nn.LayerNorm):
        return NormSpec("layer", module.weight, module.bias, float(module.eps))
    return NormSpec("rms", module.weight, None, float(module.eps))  # model.transformer.RMSNorm


def _layer(backend, stack: str, number: int):
    layers = backend.model.encoder if stack == "encoder" else backend.model.decoder
    if not 0 <= number < len(layers):
        raise InputError(N_("This model's {stack} has layers 0..{value}; no layer {number}."),
                            stack=stack, value=len(layers) - 1, number=number)
    return layers[number]


def head_weights(backend, block: str) -> HeadWeights:
    if not isinstance(block, str) or block not in backend.block_heads:
        raise InputError(N_("{block!r} is not a block of this model; its blocks are {list}."),
                         block=block, list=list(backend.block_heads))
    stack, number, kind = block.split(".")
    layer = _layer(backend, stack, int(number))
    attn = layer.cross_attn if kind == "cross" else layer.self_attn
    if attn is None:
        raise InputError(N_("{block!r} is not a block of this model."), block=block)
    h, hkv, dk = attn.n_heads, attn.n_kv_heads, attn.d_k
    d = attn.W_Q.weight.shape[1]
    sub = {"self": 0, "cross": 1}[kind]
    norm = norm_spec(layer.sublayer[sub].norm) if backend.cfg.norm_first else None
    rotate = None
    if attn.rope_base is not None:
        base = float(attn.rope_base)

        def rotate(x: torch.Tensor, position: int) -> torch.Tensor:
            pos = torch.tensor([int(position)], device=x.device)
            return apply_rope(x[:, None, :], pos, base)[:, 0]  # (n, d_head)

    def bias(lin, heads):
        return None if lin.bias is None else lin.bias.view(heads, dk)

    return HeadWeights(
        W_Q=attn.W_Q.weight.view(h, dk, d), W_K=attn.W_K.weight.view(hkv, dk, d),
        W_V=attn.W_V.weight.view(hkv, dk, d),
        W_O=attn.W_O.weight.view(d, h, dk).permute(1, 0, 2),
        b_Q=bias(attn.W_Q, h), b_K=bias(attn.W_K, hkv), b_V=bias(attn.W_V, hkv),
        b_O=attn.W_O.bias, norm=norm, rotate=rotate)


def token_id(backend, token, what: str = N_("token"), vocab=None) -> int:
    """The id of one token given as an id or as text (backends.typed): a vocabulary entry as typed
    or as the tokenizer reads it (trimmed, lowercased), else the text when it is one token
    of ``vocab`` (None: the backend's output vocabulary)."""
    if vocab is None:
        vocab = backend.tgt_vocab if backend.tgt_vocab is not None else backend.src_vocab
    found = vocabulary_id(token, len(vocab.tokens))
    if found is not None:
        return found
    token = typed_text(token, what)
    idx = vocab.index.get(token)
    if idx is None:  # as the tokenizer would read it: trimmed, lowercased
        t = token.strip()
        idx = vocab.index.get(t.lower() if vocab.lowercase else t)
    if idx is not None:
        return int(idx)
    ids, _, unknown = vocab.encode(token)
    if len(ids) == 1 and not unknown:
        return int(ids[0])
    if unknown or not ids:
        raise not_in_vocabulary(token, what)
    raise not_one_token(token, what, [vocab.display(vocab.tokens[int(i)]) for i in ids])


def token_strings(backend, ids) -> list[str]:
    vocab = backend.tgt_vocab if backend.tgt_vocab is not None else backend.src_vocab
    return [vocab.display(vocab.tokens[i]) for i in vocabulary_ids(ids, len(vocab.tokens))]
