"""Our model's modern options (issue 14, item 7): RoPE, grouped-query attention, RMSNorm.

Each is checked against a closed form or a trusted reference (nn.functional, transformers'
Llama rotary embedding), and the older checkpoints keep loading with the defaults.
"""

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from viz_core.backends.base import record
from viz_core.backends.native import NativeModel
from viz_core.capture.recorder import full_pattern
from viz_core.errors import CheckpointError
from viz_core.loading.entry import CHECKPOINTS
from viz_core.model import DecoderCache, Transformer, TransformerConfig
from viz_core.model.attention import MultiHeadAttention
from viz_core.model.checkpoint import load_checkpoint, save_checkpoint
from viz_core.model.positional import apply_rope, rope_frequencies
from viz_core.model.tokenizer import SPECIALS, Vocab
from viz_core.model.transformer import RMSNorm


def tiny(kind="decoder-only", **kw) -> TransformerConfig:
    base = dict(kind=kind, tgt_vocab_size=40, src_vocab_size=40 if kind != "decoder-only" else 0,
                d_model=32, n_heads=4, n_kv_heads=2, n_layers=2 if kind != "decoder-only"
                else 0, n_decoder_layers=2, d_ff=48, dropout=0.0, max_len=40,
                positional="rope", norm="rmsnorm", norm_first=True)
    base.update(kw)
    return TransformerConfig(**base).validate()


# ---- RMSNorm -------------------------------------------------------------------------------
def test_rmsnorm_closed_form():
    torch.manual_seed(0)
    norm = RMSNorm(16)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(16))
    x = torch.randn(3, 5, 16)
    xn, g = x.double().numpy(), norm.weight.detach().double().numpy()
    want = xn / np.sqrt((xn ** 2).mean(-1, keepdims=True) + norm.eps) * g
    # float32 RMSNorm vs the float64 closed form
    np.testing.assert_allclose(norm(x).detach().numpy(), want, rtol=1e-5, atol=1e-5)
    ref = torch.nn.RMSNorm(16, eps=norm.eps)
    with torch.no_grad():
        ref.weight.copy_(norm.weight)
    torch.testing.assert_close(norm(x), ref(x), atol=1e-5, rtol=1e-5)  # ours vs torch's kernel
    # no centring: adding a constant changes the output (LayerNorm would not notice)
    assert not torch.allclose(norm(x + 3.0), norm(x), atol=1e-3)


# ---- RoPE -----------------------------------------------------------------------------------
def test_rope_frequencies_closed_form():
    d, base = 16, 500.0
    want = np.array([base ** (-2 * i / d) for i in range(d // 2)])
    np.testing.assert_allclose(rope_frequencies(d, base).numpy(), want, rtol=1e-12)


def test_rope_closed_form_per_pair():
    """Half-split pairs (i, i + d/2) turned by pos * theta_i: a plain 2-D rotation."""
    torch.manual_seed(1)
    d, pos = 8, torch.tensor([0, 3, 17])
    x = torch.randn(2, 3, d, dtype=torch.float64)
    out = apply_rope(x, pos, 100.0)
    theta = 100.0 ** (-np.arange(0, d, 2) / d)
    for t, p in enumerate(pos.tolist()):
        for i in range(d // 2):
            a = p * theta[i]
            x1, x2 = x[..., t, i].numpy(), x[..., t, i + d // 2].numpy()
            # float32 angles and cos/sin (as in HF) vs the float64 closed form: at position 17
            # the angle alone is rounded by up to ~1e-6 rad, times |x| of a few
            np.testing.assert_allclose(out[..., t, i].numpy(), x1 * math.cos(a) - x2 * math.sin(a),
                                       atol=1e-5)
            np.testing.assert_allclose(out[..., t, i + d // 2].numpy(),
                                       x2 * math.cos(a) + x1 * math.sin(a), atol=1e-5)
    torch.testing.assert_close(out[..., 0, :], x[..., 0, :])  # position 0: no turn


@pytest.mark.parametrize("m, n, shift", [(0, 0, 5), (7, 2, 11), (3, 19, 30), (25, 1, 100)])
def test_rope_score_depends_only_on_distance(m, n, shift):
    """q_m . k_n = sum_i c_i cos((n - m) theta_i) + s_i sin((n - m) theta_i), with
    c_i = q1 k1 + q2 k2 and s_i = q2 k1 - q1 k2 per pair: the same at (m + s, n + s)."""
    torch.manual_seed(m * 31 + n)
    d, base = 16, 10000.0
    q, k = torch.randn(d, dtype=torch.float64), torch.randn(d, dtype=torch.float64)

    def score(a, b):
        qa = apply_rope(q[None], torch.tensor([a]), base)[0]
        kb = apply_rope(k[None], torch.tensor([b]), base)[0]
        return float(qa @ kb)

    h = d // 2
    theta = rope_frequencies(d, base).numpy()
    q1, q2, k1, k2 = q[:h].numpy(), q[h:].numpy(), k[:h].numpy(), k[h:].numpy()
    phi = (n - m) * theta
    closed = float(((q1 * k1 + q2 * k2) * np.cos(phi) + (q2 * k1 - q1 * k2) * np.sin(phi)).sum())
    assert score(m, n) == pytest.approx(closed, abs=1e-4)
    assert score(m + shift, n + shift) == pytest.approx(closed, abs=1e-4)
    if m != n:  # and it does depend on the distance
        assert abs(score(m, n + 1) - closed) > 1e-6


def test_rope_equals_transformers_llama_rotary():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                      rope_theta=500.0, max_position_embeddings=128)
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 9, 16), torch.randn(2, 2, 9, 16)
    pos = torch.arange(5, 14)
    cos, sin = LlamaRotaryEmbedding(cfg)(q, pos[None])
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(apply_rope(q, pos, 500.0), q_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(apply_rope(k, pos, 500.0), k_ref, atol=1e-5, rtol=1e-5)


# ---- grouped-query attention -----------------------------------------------------------------
def reference_attention(attn: MultiHeadAttention, x, key_pad, causal):
    """softmax(Q K^T / sqrt(d_k)) V with K, V repeated per query head (repeat_interleave):
    query head h reads key/value head h // (H / Hkv)."""
    B, T, _ = x.shape
    H, Hkv, dk = attn.n_heads, attn.n_kv_heads, attn.d_k
    q = attn.W_Q(x).view(B, T, H, dk).transpose(1, 2)
    k = attn.W_K(x).view(B, T, Hkv, dk).transpose(1, 2)
    v = attn.W_V(x).view(B, T, Hkv, dk).transpose(1, 2)
    if attn.rope_base is not None:
        pos = torch.arange(T)
        q, k = apply_rope(q, pos, attn.rope_base), apply_rope(k, pos, attn.rope_base)
    k = k.repeat_interleave(H // Hkv, dim=1)
    v = v.repeat_interleave(H // Hkv, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(dk)  # (B, H, T, T)
    blocked = torch.zeros(B, T, T, dtype=torch.bool)
    if key_pad is not None:
        blocked |= key_pad[:, None, :]
    if causal:
        blocked |= torch.ones(T, T, dtype=torch.bool).triu(1)
    p = F.softmax(s.masked_fill(blocked[:, None], float("-inf")), dim=-1)
    z = (p @ v).transpose(1, 2).reshape(B, T, H * dk)
    return attn.W_O(z), p


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
@pytest.mark.parametrize("rope", [None, 10000.0])
@pytest.mark.parametrize("masking", ["none", "padding", "causal"])
def test_gqa_attention_matches_reference(kv_heads, rope, masking):
    torch.manual_seed(kv_heads)
    attn = MultiHeadAttention(32, 4, n_kv_heads=kv_heads, rope_base=rope).eval()
    assert attn.W_K.weight.shape == (kv_heads * 8, 32)
    x = torch.randn(2, 6, 32)
    key_pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2]) if masking == "padding" \
        else None
    causal = masking == "causal"
    with torch.no_grad():
        (out, (k, _)), rec = record(lambda: attn(x, x, key_pad, causal, "b"))
        (explicit, _), _ = record(lambda: attn(x, x, key_pad, causal, "b"), capture=(),
                                  reference="explicit")
        ref_out, ref_p = reference_attention(attn, x, key_pad, causal)
    assert k.shape == (2, kv_heads, 6, 8)  # the cache holds kv heads only
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, ref_out, atol=1e-5, rtol=1e-5)
    # our recorded softmax vs the explicit reference's: two float32 softmax kernels
    torch.testing.assert_close(full_pattern(rec.records["b"][-1]), ref_p, atol=1e-5, rtol=1e-5)


def test_gqa_with_all_heads_is_multi_head_attention():
    """n_kv_heads = n_heads is the old module: same parameters, same output."""
    torch.manual_seed(3)
    old = MultiHeadAttention(32, 4).eval()
    new = MultiHeadAttention(32, 4, n_kv_heads=4).eval()
    new.load_state_dict(old.state_dict())
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(new(x, x, None, True)[0], old(x, x, None, True)[0])


# ---- the whole model ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["decoder-only", "encoder-decoder"])
def test_kv_cache_decoding_equals_full_decoding_with_rope(kind):
    torch.manual_seed(0)
    model = Transformer(tiny(kind)).eval()
    tgt = torch.randint(4, 40, (3, 12))
    src = torch.randint(4, 40, (3, 7)) if kind == "encoder-decoder" else None
    with torch.no_grad():
        memory = model.encode(src) if src is not None else None
        full = model.decode(tgt, memory, src)
        cache = DecoderCache()
        steps = [model.decode(tgt[:, :5], memory, src, cache)]
        for t in range(5, 12):
            steps.append(model.decode(tgt[:, t:t + 1], memory, src, cache))
    assert cache.length == 12
    assert cache[0]["self"][0].shape == (3, 2, 12, 8)  # (B, Hkv, T, d_k)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_rope_model_has_no_position_table_and_sees_order():
    torch.manual_seed(0)
    model = Transformer(tiny()).eval()
    assert model.positions is None and model.positional_table(5) is None
    assert not any("position" in name for name in model.state_dict())
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():  # RoPE alone makes the model order-aware (no table, no causal trick)
        a = model.decode(ids)[0, -1]
        b = model.decode(ids[:, [1, 0, 2, 3]])[0, -1]
    assert not torch.allclose(a, b, atol=1e-4)


def vocab_of(n):
    return Vocab([*SPECIALS] + [f"w{i}" for i in range(n - 4)])


def test_save_load_round_trip(tmp_path):
    torch.manual_seed(0)
    model = Transformer(tiny()).eval()
    save_checkpoint(model, {"target": vocab_of(40)}, tmp_path, {"name": "t"})
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["positional"] == "rope" and saved["n_kv_heads"] == 2
    assert saved["norm"] == "rmsnorm" and saved["rope_base"] == 10000.0
    loaded, _, _ = load_checkpoint(tmp_path)
    assert loaded.cfg == model.cfg
    ids = torch.randint(4, 40, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(loaded.decode(ids), model.decode(ids))


def test_old_configs_load_with_defaults():
    raw = json.loads((CHECKPOINTS / "lm" / "config.json").read_text())
    assert "n_kv_heads" not in raw and "norm" not in raw  # written before these options
    model, _, _ = load_checkpoint(CHECKPOINTS / "lm")
    cfg = model.cfg
    assert (cfg.kv_heads, cfg.norm, cfg.positional_kind) == (cfg.n_heads, "layernorm",
                                                             "sinusoidal")
    assert model.positions is not None


@pytest.mark.parametrize("bad", [dict(n_kv_heads=3), dict(n_kv_heads=0), dict(n_kv_heads=True),
                                 dict(norm="batchnorm"), dict(rope_base=1.0),
                                 dict(rope_base="x"), dict(d_model=36, n_heads=4)])
def test_bad_configs_are_refused(bad):
    with pytest.raises(CheckpointError):
        tiny(**bad)


def test_native_backend_reports_rotary_and_kv_heads():
    torch.manual_seed(0)
    model = Transformer(tiny()).eval()
    backend = NativeModel(model, {"target": vocab_of(40)}, name="tiny-rope")
    assert backend.positional_kind == "rotary" and backend.kv_heads == 2
    info = backend.info()
    assert info["kv_heads"] == 2 and info["heads"] == 4 and info["positional_kind"] == "rotary"
    trace = backend.trace("w1 w2 w3 w4", max_new=3)
    assert trace.positional is None and trace.positional_kind == "rotary"
    assert "RoPE" in trace.positional_note
    block = trace["decoder.0.self"]
    assert block.kv_heads == 2 and list(block.kv_group) == [0, 0, 1, 1]
    torch.testing.assert_close(torch.from_numpy(block.pattern).sum(-1),
                               torch.ones(block.pattern.shape[:2]))
    assert backend.check_faithfulness("w1 w2 w3") < 1e-4
