"""The from-scratch Transformer against trusted references and its own invariants."""

import math

import pytest
import torch
from torch import nn

from viz_core.backends.base import record
from viz_core.capture.recorder import full_pattern
from viz_core.model import DecoderCache, Transformer, TransformerConfig
from viz_core.model.attention import MultiHeadAttention
from viz_core.model.masks import causal_mask, decoder_self_mask, padding_mask
from viz_core.model.positional import sinusoidal_encoding, wavelengths

ALL = ("q", "k", "v", "scores", "pattern", "z")


def patterns(rec, what="pattern") -> dict:
    """{block: float32 (B, H, Tq, Tk)} of the last call of each recorded block."""
    return {name: full_pattern(calls[-1], what) for name, calls in rec.records.items()}


def copy_into_mha(ours: MultiHeadAttention, d_model: int, n_heads: int) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.W_Q.weight, ours.W_K.weight, ours.W_V.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.W_Q.bias, ours.W_K.bias, ours.W_V.bias]))
        ref.out_proj.weight.copy_(ours.W_O.weight)
        ref.out_proj.bias.copy_(ours.W_O.bias)
    return ref.eval()


@pytest.mark.parametrize("masking", ["none", "padding", "causal", "both"])
@pytest.mark.parametrize("seed", [0, 1])
def test_attention_matches_torch_multihead_attention(masking, seed):
    torch.manual_seed(seed)
    B, T, S, d, h = 3, 5, 7, 32, 4
    ours = MultiHeadAttention(d, h).eval()
    ref = copy_into_mha(ours, d, h)
    x_q = torch.randn(B, T if masking in ("none", "padding") else S, d)
    x_kv = torch.randn(B, S, d) if masking in ("none", "padding") else x_q
    ids = torch.tensor([[5] * S, [5] * (S - 2) + [0, 0], [5] * 3 + [0] * (S - 3)])
    Tq = x_q.shape[1]
    kpm, attn_mask, causal = None, None, False
    if masking in ("padding", "both"):
        kpm = ids == 0
    if masking in ("causal", "both"):
        attn_mask, causal = causal_mask(Tq, S), True
    with torch.no_grad():
        (out, _), rec = record(lambda: ours(x_q, x_kv, kpm, causal, "blk"))
        (explicit, _), _ = record(lambda: ours(x_q, x_kv, kpm, causal, "blk"), capture=(),
                                  reference="explicit")
        fast, _ = ours(x_q, x_kv, kpm, causal)
        ref_out, ref_w = ref(x_q, x_kv, x_kv, key_padding_mask=kpm, attn_mask=attn_mask,
                             need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, ref_out, atol=1e-5, rtol=1e-5)
    # our recorded softmax vs nn.MultiheadAttention's weights: two float32 softmax kernels
    torch.testing.assert_close(patterns(rec)["blk"], ref_w, atol=1e-5, rtol=1e-5)


def test_fully_blocked_rows_give_zeros_not_nan():
    torch.manual_seed(0)
    attn = MultiHeadAttention(16, 2).eval()
    x = torch.randn(2, 4, 16)
    key_pad = torch.zeros(2, 4, dtype=torch.bool)
    key_pad[0] = True  # every key blocked for the first sequence
    key_pad[1, 2:] = True
    (out, _), _ = record(lambda: attn(x, x, key_pad, False, "b"), capture=(),
                         reference="explicit")
    (fast, _), rec = record(lambda: attn(x, x, key_pad, False, "b"))
    p = patterns(rec)["b"]
    assert not torch.isnan(p).any() and not torch.isnan(out).any()
    assert not torch.isnan(fast).any()
    assert torch.equal(p[0], torch.zeros_like(p[0]))
    assert torch.equal(p[1][..., 2:], torch.zeros_like(p[1][..., 2:]))
    torch.testing.assert_close(p[1].sum(-1), torch.ones(2, 4))
    torch.testing.assert_close(fast, out, atol=1e-5, rtol=1e-5)


def test_mask_semantics():
    ids = torch.tensor([[7, 8, 0], [7, 0, 0]])
    pad = padding_mask(ids, 0)
    assert pad.shape == (2, 3, 3)
    # padding blocks key columns for every query row, never whole query rows
    assert pad[0, :, 2].all() and not pad[0, :, :2].any()
    assert pad[1, 2, 1:].all() and not pad[1, 2, 0]
    c = causal_mask(3)
    assert torch.equal(c, torch.tensor([[False, True, True], [False, False, True],
                                        [False, False, False]]))
    assert torch.equal(decoder_self_mask(ids, 0), pad | c)
    # incremental: 2 new queries at absolute positions 3, 4 over 5 keys
    assert torch.equal(causal_mask(2, 5), causal_mask(5)[3:])


@pytest.mark.parametrize("d_model", [4, 16, 64, 128, 512])
def test_sinusoidal_encoding_is_the_closed_form(d_model):
    length = 50
    pe = sinusoidal_encoding(length, d_model)
    assert pe.dtype == torch.float32 and pe.shape == (length, d_model)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    w = wavelengths(d_model)
    assert w[0].item() == pytest.approx(2 * math.pi)
    assert w[-1].item() <= 10000 * 2 * math.pi


def make(kind="encoder-decoder", **kw):
    settings = dict(kind=kind, src_vocab_size=20 if kind != "decoder-only" else 0,
                    tgt_vocab_size=20 if kind != "encoder-only" else 0, d_model=32, n_heads=4,
                    n_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=32)
    settings.update(kw)
    torch.manual_seed(0)
    return Transformer(TransformerConfig(**settings).validate()).eval()


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_fast_path_equals_captured_path(norm_first, positional):
    model = make(norm_first=norm_first, positional=positional)
    src = torch.tensor([[4, 5, 6, 2, 0], [7, 8, 9, 10, 2]])
    tgt = torch.tensor([[1, 4, 5, 0], [1, 6, 7, 8]])
    with torch.no_grad():
        fast = model(src, tgt)
        slow, rec = record(lambda: model(src, tgt), capture=ALL)
        explicit, _ = record(lambda: model(src, tgt), capture=(), reference="explicit")
    torch.testing.assert_close(fast, slow, atol=0, rtol=0)  # recording changes nothing
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)  # the formula = SDPA
    assert set(rec.records) == {"encoder.0.self", "encoder.1.self", "decoder.0.self",
                                "decoder.0.cross", "decoder.1.self", "decoder.1.cross"}
    for key, p in patterns(rec).items():
        assert not torch.isnan(p).any(), key


def test_rows_sum_to_one_and_blocked_cells_are_zero_with_all_pad_rows():
    model = make()
    src = torch.tensor([[4, 5, 2, 0], [0, 0, 0, 0]])  # second source: all padding
    tgt = torch.tensor([[1, 4, 0], [1, 0, 0]])
    with torch.no_grad():
        _, rec = record(lambda: model(src, tgt), capture=("pattern",))
    src_block = padding_mask(src, 0)
    masks = {"encoder": src_block, "self": decoder_self_mask(tgt, 0),
             "cross": padding_mask(src, 0, n_queries=3)}
    for key, p in patterns(rec).items():
        block = key
        m = masks["encoder" if block.startswith("encoder") else block.split(".")[-1]][:, None]
        m = m.expand_as(p)
        assert not torch.isnan(p).any(), key
        assert torch.equal(p[m], torch.zeros_like(p[m])), key
        allowed_any = (~m).any(-1)
        sums = p.sum(-1)
        torch.testing.assert_close(sums[allowed_any], torch.ones_like(sums[allowed_any]))
        assert torch.equal(sums[~allowed_any], torch.zeros_like(sums[~allowed_any]))


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
def test_causality_later_tokens_do_not_change_earlier_positions(kind):
    model = make(kind)
    src = torch.tensor([[4, 5, 6, 2]]) if kind == "encoder-decoder" else None
    a = torch.tensor([[1, 7, 8, 9, 10]])
    b = a.clone()
    b[0, 3:] = torch.tensor([15, 16])
    outs = []
    for tgt in (a, b):
        with torch.no_grad():
            out, rec = record(lambda tgt=tgt: model(src, tgt), capture=("pattern",))
        outs.append((out, patterns(rec)))
    torch.testing.assert_close(outs[0][0][:, :3], outs[1][0][:, :3], atol=0, rtol=0)
    assert not torch.allclose(outs[0][0][:, 3:], outs[1][0][:, 3:])
    for key, p in outs[0][1].items():
        if key.startswith("decoder"):
            assert torch.equal(p[..., :3, :3], outs[1][1][key][..., :3, :3]), key
            if key.endswith(".self"):
                c = causal_mask(5)[None, None].expand_as(p)
                assert torch.equal(p[c], torch.zeros_like(p[c]))


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
def test_kv_cache_decoding_equals_full_decoding(kind):
    model = make(kind)
    src = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0]]) if kind == "encoder-decoder" else None
    tgt = torch.tensor([[1, 9, 10, 11, 12, 13], [1, 14, 15, 16, 17, 18]])
    with torch.no_grad():
        memory = model.encode(src) if src is not None else None
        full = model.decode(tgt, memory, src)
        cache = DecoderCache()
        steps = [model.decode(tgt[:, :2], memory, src, cache=cache)]
        for t in range(2, tgt.shape[1]):
            steps.append(model.decode(tgt[:, t:t + 1], memory, src, cache=cache))
        assert cache.length == tgt.shape[1]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_cache_reorder_selects_beams():
    model = make("decoder-only")
    tgt = torch.tensor([[1, 4, 5], [1, 6, 7]])
    with torch.no_grad():
        cache = DecoderCache()
        model.decode(tgt, cache=cache)
        swapped = cache.reorder(torch.tensor([1, 1, 0]))
        nxt = torch.tensor([[9], [9], [9]])
        got = model.decode(nxt, cache=swapped)
        want = model.decode(torch.cat([tgt[[1, 1, 0]], nxt], 1))[:, -1:]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_encoder_only_and_config_validation():
    model = make("encoder-only")
    out = model(torch.tensor([[4, 5, 2]]), None)
    assert out.shape == (1, 3, 32)
    from viz_core.errors import CheckpointError

    with pytest.raises(CheckpointError):
        TransformerConfig(d_model=30, n_heads=4, src_vocab_size=5, tgt_vocab_size=5).validate()
    with pytest.raises(CheckpointError, match="parameters"):
        TransformerConfig(d_model=65536, n_heads=4, d_ff=10**6, src_vocab_size=5,
                          tgt_vocab_size=5).validate()


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only", "encoder-only"])
def test_every_bad_config_value_is_a_checkpoint_error(kind):
    """Every field of a config.json given a value of the wrong type or out of range is one
    CheckpointError from from_dict: the special token ids, dropout and the two switches
    were not checked (None, "x", -1 or 10**30 as bos_id gave TypeError, ValueError or
    IndexError at the first trace: "Something went wrong" in the app)."""
    from viz_core.errors import CheckpointError

    good = TransformerConfig(kind=kind, src_vocab_size=20, tgt_vocab_size=30, d_model=32,
                             n_heads=4, d_ff=64, max_len=16).to_dict()
    TransformerConfig.from_dict(good)
    vocab = 30 if kind == "decoder-only" else 20  # the ids must fit every vocabulary used
    out_of_range = {"d_model": [-1, 0, 30], "n_heads": [-1, 0, 5], "n_kv_heads": [0, 3, True],
                    "d_ff": [-1, True], "max_len": [0, 10**6], "dropout": [True, 1.0, -0.1],
                    "rope_base": [True, 1.0, 1e13], "norm_first": [1, 0], "kind": ["gpt"],
                    "share_embeddings": [1, "yes"], "positional": ["alibi"], "norm": ["x"],
                    **{f: [-1, vocab, 10**30, True] for f in ("pad_id", "bos_id", "eos_id",
                                                               "unk_id")}}
    for field in good:
        wrong_type = [] if field == "n_kv_heads" else [None]  # None: as many as n_heads
        for value in [*wrong_type, "x", [], {}, *out_of_range.get(field, [])]:
            with pytest.raises(CheckpointError, match="invalid model config"):
                TransformerConfig.from_dict({**good, field: value})
    with pytest.raises(CheckpointError, match=f"bos_id must be a token id in 0..{vocab - 1}"):
        TransformerConfig.from_dict({**good, "bos_id": vocab})


def test_softmax_runs_in_float32_for_low_precision_weights():
    model = make().to(torch.bfloat16)
    src = torch.tensor([[4, 5, 6, 2]])
    tgt = torch.tensor([[1, 7, 8]])
    with torch.no_grad():
        out, rec = record(lambda: model(src, tgt), capture=("scores", "pattern"))
    assert out.dtype == torch.bfloat16
    for key, t in [*patterns(rec).items(), *patterns(rec, "scores").items()]:
        assert t.dtype == torch.float32, key
    for t in patterns(rec).values():
        torch.testing.assert_close(t.sum(-1), torch.ones_like(t.sum(-1)), atol=1e-6, rtol=0)
