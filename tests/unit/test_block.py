"""The whole block (viz_core.analysis.block) and the stream points behind it, against references.

For our models and every Hugging Face family (tiny random models):
- the stream entering each layer equals the model's own ``output_hidden_states``;
- the points obey the model's norm placement exactly: pre-norm x_out = x_in + attention +
  feed-forward; post-norm each "<kind>.norm" is LayerNorm(stream + sublayer output), computed
  here with F.layer_norm from the module's own weights, and the layer's output is the last;
- the heads' shares z_h W_O[h]^T (z from the attention interface) plus W_O's bias equal the
  output of the model's own output projection (a forward hook): split, concat and W_O agree;
- a trace without "stream" keeps none; the shape steps match the recorded tensors.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import viz_core as vc
from tests.support.language import speaking
from viz_core.analysis.block import (
    STEP_LABELS,
    added,
    head_contributions,
    layer_rows,
    shape_steps,
    step_label,
    stream_norms,
)
from viz_core.backends.base import record

HF_FAMILIES = ["bert", "distilbert", "roberta", "gpt2", "bart", "t5", "marian", "albert",
               "electra", "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3",
               "olmo2"]
TEXT = "the cat sat on the mat because it was tired"
ATOL = 2e-5


def _close(a, b, atol=ATOL):
    a, b = (torch.as_tensor(x).detach().float().cpu() for x in (a, b))
    assert a.shape == b.shape
    err = float((a - b).abs().max())
    assert err <= atol * max(1.0, float(b.abs().max())), err


def _hf_run(model):
    """One recorded run with hidden states: (model output, recorder, stacks' hidden states)."""
    ids = torch.tensor([model.tokenizer(TEXT)["input_ids"]], device=model.device)
    kwargs = {"input_ids": ids, "output_hidden_states": True}
    if model.kind == "encoder-decoder":
        start = int(model.hf_model.config.decoder_start_token_id)
        kwargs["decoder_input_ids"] = torch.tensor([[start] + ids[0, :5].tolist()],
                                                   device=model.device)
    with torch.no_grad():
        out, rec = record(lambda: model.hf_model(**kwargs), capture=("z", "stream"),
                          names=model.block_names, stream_names=model.stream_names)
    if model.kind == "encoder-decoder":
        hidden = {"encoder": out.encoder_hidden_states, "decoder": out.decoder_hidden_states}
    else:
        hidden = {"encoder" if model.kind == "encoder-only" else "decoder": out.hidden_states}
    return out, rec, hidden


def _check_placement(points, placement, norms):
    """The stream points of one layer against the formula of its norm placement."""
    kinds = [k for k in ("self", "cross", "ffn") if added(points, k, placement) is not None]
    assert "self" in kinds and "ffn" in kinds
    if placement == "post":
        x = points["in"]
        for kind in kinds:
            norm = norms[kind]
            if isinstance(norm, torch.nn.LayerNorm):
                ref = F.layer_norm(x.float() + points[kind].float(), norm.normalized_shape,
                                   norm.weight.float(), norm.bias.float(), norm.eps)
                _close(points[f"{kind}.norm"], ref)
            x = points[f"{kind}.norm"]
        _close(points["out"], x)
    else:
        total = points["in"].float() + sum(added(points, k, placement).float() for k in kinds)
        _close(points["out"], total)


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return lambda family: tiny_models.load(family, seed=3)


@pytest.mark.parametrize("family", HF_FAMILIES)
def test_hf_stream_points_match_the_model(tiny, family):
    model, _ = tiny(family)
    out, rec, hidden = _hf_run(model)
    placement = model.norm_placement
    mods = model._stream_modules
    assert rec.states, "no stream recorded"
    for stack, states in hidden.items():
        layers = [k for k in rec.states if k.startswith(stack + ".")]
        assert len(layers) == len(states) - 1, (layers, len(states))
        for i in range(len(layers)):
            pts = rec.states[f"{stack}.{i}"]
            # the stream entering layer i is the model's own hidden state i
            _close(pts["in"], states[i])
            if i + 1 < len(layers):
                _close(pts["out"], rec.states[f"{stack}.{i + 1}"]["in"])
            norms = {k: mods.get((f"{stack}.{i}", f"{k}.norm")) for k in ("self", "cross", "ffn")}
            _check_placement(pts, placement, norms)
    # W_O: the heads' shares (z from the attention interface) + bias = the projection's output
    for name, calls in rec.records.items():
        stack, layer, kind = name.split(".")
        z = calls[-1].z[0].transpose(0, 1)  # (H, Tq, d_v)
        w, b = model.output_projection(name)
        total = head_contributions(z, w).sum(0) + (0 if b is None else b.detach().float())
        _close(total, rec.states[f"{stack}.{layer}"][kind][0])


NATIVE = ["dates", "en-fr", "lm", "lm-rope"]


@pytest.mark.parametrize("name", NATIVE)
def test_native_stream_points_match_the_model(name):
    model = vc.load(name, dtype="float32")  # float32 on a GPU too: the tolerance is float32's
    text = model.examples()[0]
    trace = model.trace(text, capture=("z", "stream"))
    net = model.model
    placement = model.norm_placement
    assert placement == ("pre" if net.cfg.norm_first else "post")
    for stack in ("encoder", "decoder"):
        layers = sorted(k for k in trace.stream if k.startswith(stack + "."))
        if not layers:
            continue
        modules = net.encoder if stack == "encoder" else net.decoder
        for i, layer in enumerate(layers):
            pts = {k: v[None] for k, v in trace.stream[layer].items()}
            sub = modules[i].sublayer
            kinds = ["self", "cross", "ffn"] if len(sub) == 3 else ["self", "ffn"]
            _check_placement(pts, placement, {k: sub[j].norm for j, k in enumerate(kinds)})
            if i + 1 < len(layers):
                _close(trace.stream[layer]["out"], trace.stream[layers[i + 1]]["in"])
        # the stream entering layer 0 is the scaled embedding plus positions (the model's own)
        tokens = trace.source_tokens if stack == "encoder" else trace.target_tokens
        assert trace.stream[layers[0]]["in"].shape[0] == len(tokens)
    if model.kind == "encoder-decoder":  # the last encoder layer's output is the memory
        src_ids = torch.tensor([model.src_vocab.encode(text)[0] + [model.cfg.eos_id]],
                               device=model.device)
        with torch.no_grad():
            memory = net.encode(src_ids)[0]
        last = sorted(k for k in trace.stream if k.startswith("encoder."))[-1]
        _close(net.encoder_norm(trace.stream[last]["out"]), memory)
    for name_ in trace.blocks:
        block = trace[name_]
        stack, layer, kind = name_.split(".")
        w, b = model.output_projection(name_)
        total = head_contributions(block.z, w).sum(0) + b.detach().float()
        _close(total, trace.stream[f"{stack}.{layer}"][kind])


def test_head_contributions_equal_concat_then_w_o():
    """Split/concat convention: sum over heads of z_h W_O[h]^T == concat(z) @ W_O^T."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(5, 4, 3, generator=g)  # (Tq, H, d_v)
    w = torch.randn(7, 12, generator=g)  # (d_model, H * d_v)
    lin = torch.nn.Linear(12, 7, bias=False)
    lin.weight.data = w
    ref = lin(z.reshape(5, 12))
    parts = head_contributions(z.transpose(0, 1), w)
    assert parts.shape == (4, 5, 7)
    _close(parts.sum(0), ref, 1e-5)  # per-head products summed vs one float32 GEMM
    # head 2 alone: zero the other heads' slots before the projection
    only = torch.zeros_like(z)
    only[:, 2] = z[:, 2]
    _close(parts[2], lin(only.reshape(5, 12)), 1e-5)  # one head's product vs the GEMM


def test_rows_norms_and_shapes_from_a_trace():
    model = vc.load("en-fr", dtype="float32")
    trace = model.trace("the red car", capture=("z", "stream"))
    rows = layer_rows(trace, "decoder", model.norm_placement)
    assert [r.layer for r in rows] == ["decoder.0", "decoder.1"]
    for r in rows:
        pts = trace.stream[r.layer]
        assert r.stream_in == pytest.approx(float(pts["in"].norm(dim=-1).mean()), rel=1e-6)
        assert set(r.adds) == {"self", "cross", "ffn"}
        assert r.ratio("cross") == pytest.approx(r.adds["cross"] / r.stream_in)
    norms = stream_norms(trace, "encoder")
    assert norms.shape == (3, len(trace.source_tokens))
    assert norms[-1] == pytest.approx(
        trace.stream["encoder.1"]["out"].norm(dim=-1).cpu().numpy(), rel=1e-6)
    block = trace["decoder.1.cross"]
    steps = dict((s, shape) for s, _, shape in shape_steps(block, model.info(), trace))
    tq, tk, h = len(block.query_tokens), len(block.key_tokens), block.n_heads
    d_k = model.cfg.d_model // h
    assert steps["scores"] == f"[1, {h}, {tq}, {tk}]"
    assert steps["W_O"] == f"[1, {tq}, {model.cfg.d_model}]"
    assert f"[1, {tq}, {h * d_k}]" in steps["concat"]
    assert str(model.cfg.d_ff) in steps["feed-forward"]
    # every step is a formula or has a label in the reader's language
    formulas = {"Q = x W_Q", "K, V", "softmax", "z = pattern · V", "W_O"}
    assert set(steps) - formulas <= set(STEP_LABELS)
    with speaking("zh"):
        assert all(step_label(s) != s for s in set(steps) - formulas)
    assert [step_label(s) for s in steps] == list(steps)


def test_no_stream_unless_asked(tiny):
    native = vc.load("lm")
    assert native.trace("the cat").stream == {}
    model, _ = tiny("gpt2")
    assert model.trace(TEXT, target="it was").stream == {}
    assert model.trace(TEXT, target="it was", capture=("stream",)).stream
