"""Composition scores (viz_core.analysis.composition) and QK attribution (viz_core.analysis.qk).

Composition: against a direct numpy recomputation (full d_model x d_model matrices, float64)
from the Hugging Face modules' own weights (Llama with grouped-query attention, GPT-2 with
its fused c_attn), and against closed-form cases built into our own model: a sender writing
only into the null space of the receiver's W_K gives exactly 0 K-composition; rank-one
circuits that line up give exactly 1; every score lies in [0, 1].

QK attribution: the (query component x key component) terms add up to the model's own
pre-softmax score cell of the trace (1e-4 relative, the issue's tolerance), for our rotary
model and every pre-norm family: GPT-2, Llama and Mistral (GQA + rotary), Qwen 2 (q/k/v
biases), Gemma 2 (before its softcap; the cap applied to the sum gives the trace's cell),
Gemma 3, Qwen 3 and OLMo 2 (q/k norms, per head or over all heads), Phi-3 (fused qkv) and
T5's decoder (relative position bias as its own row).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import viz_core as vc
from viz_core.backends.native import NativeModel
from viz_core.errors import InputError
from viz_core.model import Transformer, TransformerConfig
from viz_core.model.tokenizer import Vocab

TEXT = "the cat sat on the mat because it was tired"
REL = 1e-4


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return lambda family: tiny_models.load(family, seed=3)[0]


def _fro(m):
    return np.linalg.norm(m)


def _reference(per_block: dict[str, tuple], kind: str, sender: str, receiver: str) -> float:
    """Elhage et al.'s score from per-head numpy matrices (W_Q, W_K, W_V, W_O) per block."""
    def head(name):
        block, h = name.rsplit(".h", 1)
        wq, wk, wv, wo = (m[int(h)] for m in per_block[block])
        return wq.T @ wk, wo @ wv  # W_QK, W_OV (d x d)
    qk_r, ov_r = head(receiver)
    _, ov_s = head(sender)
    if kind == "K":
        return _fro(qk_r @ ov_s) / (_fro(qk_r) * _fro(ov_s))
    if kind == "Q":
        return _fro(qk_r.T @ ov_s) / (_fro(qk_r) * _fro(ov_s))
    return _fro(ov_r @ ov_s) / (_fro(ov_r) * _fro(ov_s))


def _check_all(frame, per_block):
    assert ((frame.score >= 0) & (frame.score <= 1)).all()
    for row in frame.itertuples():
        ref = _reference(per_block, row.kind, row.sender, row.receiver)
        assert row.score == pytest.approx(ref, rel=1e-8, abs=1e-12)


# ---- composition ---------------------------------------------------------------------------
def test_composition_llama_gqa_against_numpy(tiny):
    model = tiny("llama")
    hf = model.hf_model.model
    cfg = model.hf_model.config
    h, hkv, dh, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, \
        cfg.hidden_size
    group = h // hkv

    def per_block(fold):
        out = {}
        for i, layer in enumerate(hf.layers):
            a = layer.self_attn
            g = layer.input_layernorm.weight.detach().double().cpu().numpy() if fold else np.ones(d)
            wq = a.q_proj.weight.detach().double().cpu().numpy().reshape(h, dh, d) * g
            wk = a.k_proj.weight.detach().double().cpu().numpy().reshape(hkv, dh, d) * g
            wv = a.v_proj.weight.detach().double().cpu().numpy().reshape(hkv, dh, d) * g
            wo = a.o_proj.weight.detach().double().cpu().numpy().reshape(d, h, dh).transpose(1, 0, 2)
            # query head q reads key/value head q // group
            out[f"decoder.{i}.self"] = (wq, np.repeat(wk, group, 0), np.repeat(wv, group, 0),
                                        wo)
        return out

    for fold in (False, True):
        frame = model.composition(fold_norms=fold)
        n = cfg.num_hidden_layers
        assert len(frame) == 3 * h * h * n * (n - 1) // 2
        assert set(frame.kind) == {"Q", "K", "V"}
        _check_all(frame, per_block(fold))


def test_composition_gpt2_fused_projection_against_numpy(tiny):
    model = tiny("gpt2")
    cfg = model.hf_model.config
    h, d = cfg.n_head, cfg.n_embd
    dh = d // h
    out = {}
    for i, block in enumerate(model.hf_model.transformer.h):
        w = block.attn.c_attn.weight.detach().double().cpu().numpy().T  # Conv1D: (in, out) -> (out, in)
        wq, wk, wv = (m.reshape(h, dh, d) for m in np.split(w, 3, axis=0))
        wo = block.attn.c_proj.weight.detach().double().cpu().numpy().T.reshape(d, h, dh)
        out[f"decoder.{i}.self"] = (wq, wk, wv, wo.transpose(1, 0, 2))
    _check_all(model.composition(fold_norms=False), out)


def _constructed(d=16, heads=2):
    """A 2-layer decoder-only model of ours with every attention weight zero."""
    vocab = Vocab.build(["a b c d"])
    cfg = TransformerConfig(kind="decoder-only", tgt_vocab_size=len(vocab.tokens),
                            d_model=d, n_heads=heads, n_layers=0, n_decoder_layers=2,
                            d_ff=32, dropout=0.0, max_len=16, norm_first=True).validate()
    torch.manual_seed(0)
    net = Transformer(cfg).eval()
    with torch.no_grad():
        for layer in net.decoder:
            for lin in (layer.self_attn.W_Q, layer.self_attn.W_K, layer.self_attn.W_V,
                        layer.self_attn.W_O):
                lin.weight.zero_()
    return net, NativeModel(net, {"target": vocab}, {"name": "constructed"}, name="c")


def test_composition_closed_form_zero_and_one():
    torch.manual_seed(1)
    net, model = _constructed()
    d, dk = 16, 8
    r, s = net.decoder[1].self_attn, net.decoder[0].self_attn
    with torch.no_grad():
        # receiver head 0: W_Q, W_K random on rows 0..7 but reading only e_0..e_7
        r.W_Q.weight[:dk, :dk] = torch.randn(dk, dk)
        r.W_K.weight[:dk, :dk] = torch.randn(dk, dk)
        r.W_V.weight[:dk] = torch.randn(dk, d)
        r.W_O.weight[:, :dk] = torch.randn(d, dk)
        # sender head 0 writes only into e_8..e_15: the null space of the receiver's W_K
        s.W_V.weight[:dk] = torch.randn(dk, d)
        s.W_O.weight[dk:, :dk] = torch.randn(dk, dk)
        # sender head 1: rank one, W_OV = b c^T with b the receiver head 1's key direction
        a, b, c = torch.randn(d), torch.randn(d), torch.randn(d)
        r.W_Q.weight[dk] = a  # receiver head 1: W_QK = a b^T
        r.W_K.weight[dk] = b
        s.W_O.weight[:, dk] = b
        s.W_V.weight[dk] = c
    frame = model.composition()
    score = {(row.kind, row.sender, row.receiver): row.score for row in frame.itertuples()}
    assert score[("K", "decoder.0.self.h0", "decoder.1.self.h0")] == pytest.approx(0, abs=1e-7)
    assert score[("K", "decoder.0.self.h1", "decoder.1.self.h1")] == pytest.approx(1, abs=1e-9)
    assert score[("K", "decoder.0.self.h1", "decoder.1.self.h0")] > 0.01
    assert ((frame.score >= 0) & (frame.score <= 1)).all()
    assert len(frame) == 3 * 2 * 2


# ---- QK attribution ------------------------------------------------------------------------
def _check_cell(model, block, head, query, key, text=TEXT, target=None):
    q = model.qk_attribution(text, block, head, query, key, target=target)
    opts = {"max_new": 0} if model.kind == "decoder-only" else {}
    trace = model.trace(text, target, capture=("q",), **opts)
    cell = float(trace[block].scores[head, query, key])  # the model's own score (softcapped)
    total = float(q.frame.contribution.sum())
    assert math.isclose(total, q.score, rel_tol=REL, abs_tol=1e-7), (total, q.score)
    cap = trace[block].softcap
    if cap:
        assert q.softcapped_score == pytest.approx(cell, abs=1e-6)
        assert math.tanh(total / cap) * cap == pytest.approx(cell, rel=REL, abs=1e-7)
    else:
        assert math.isclose(total, cell, rel_tol=REL, abs_tol=1e-7), (total, cell)
    layer = int(block.split(".")[1])
    layers = {c.split(".")[1] for c in q.frame.key_component if c.startswith("decoder.")}
    assert all(int(x) < layer for x in layers)  # only what was written before this block
    return q


def test_qk_native_rope():
    model = vc.load("lm-rope", dtype="float32")
    text = "the small black cats do not see"
    for head, i, j in ((0, 5, 2), (3, 7, 7), (1, 4, 0)):
        q = _check_cell(model, "decoder.1.self", head, i, j, text)
    assert {"embed", "decoder.0.self.h0", "decoder.0.mlp", "bias"} <= set(q.frame.key_component)
    _check_cell(model, "decoder.0.self", 2, 6, 3, text)  # layer 0: the embeddings alone


@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma2",
                                    "gemma3_text", "phi3", "olmo2", "t5"])
def test_qk_terms_add_up_to_the_traces_score(tiny, family):
    model = tiny(family)
    target = "the cat sat on the mat" if family == "t5" else None
    q = _check_cell(model, "decoder.1.self", 3, 5, 2, target=target)
    _check_cell(model, "decoder.1.self", 0, 4, 4, target=target)
    if family == "t5":
        assert "position bias" in set(q.frame.key_component)
    if family == "gpt2":
        assert "position" in set(q.frame.query_component)


def test_qk_masked_cell_and_bad_input(tiny):
    model = tiny("llama")
    q = _check_cell(model, "decoder.1.self", 1, 2, 6)  # key after the query: causal mask
    assert q.masked and any("before masking" in w for w in q.warnings)
    n = len(model.tokenizer(TEXT)["input_ids"])
    for args, msg in (((TEXT, "decoder.1.self", 4, 0, 0), "heads 0..3; no head 4"),
                      ((TEXT, "decoder.9.self", 0, 0, 0), "not a block"),
                      ((TEXT, "decoder.1.self", 0, n, 0), f"query position {n} is out of"),
                      ((TEXT, "decoder.1.self", 0, 0, -n - 1), "key position"),
                      ((TEXT, "decoder.1.self", "x", 0, 0), "whole number"),
                      (("", "decoder.1.self", 0, 0, 0), "empty")):
        with pytest.raises(InputError, match=msg):
            model.qk_attribution(*args)
    t5 = tiny("t5")
    with pytest.raises(InputError, match="self-attention blocks") as err:
        t5.qk_attribution(TEXT, "decoder.1.cross", 0, 0, 0)
    # its template and values, so the app shows it in the reader's language
    assert err.value.values == {"block": "decoder.1.cross"} and "{block!r}" in err.value.msgid
