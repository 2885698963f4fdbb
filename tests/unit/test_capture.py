"""The one capture path (viz_core.capture.recorder) and lazy traces (viz_core.capture.trace),
against references.

- every family: patterns equal Hugging Face's own eager ``output_attentions``; the softmax of
  the captured scores under the mask gives the pattern; z reproduces the attention output
  (through the layer's own output projection); T5's scores include its position bias;
- ``overview`` equals numpy block means of the full pattern, ``head(h)`` equals pattern[h],
  ``window`` equals a slice;
- 16 threads reading one shared model's lazy traces get exactly their serial results;
- a 4,096-token native trace: shapes, finite values, rows summing to 1.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import viz_core as vc
from viz_core.backends.native import NativeModel
from viz_core.model import Transformer, TransformerConfig
from viz_core.model.tokenizer import Vocab

FAMILIES = ["bert", "distilbert", "roberta", "gpt2", "bart", "t5", "marian"]
TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return lambda family: tiny_models.load(family, seed=2)


def eager_reference(model, path):
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    auto = {"encoder-only": AutoModel, "decoder-only": AutoModelForCausalLM,
            "encoder-decoder": AutoModelForSeq2SeqLM}[model.kind]
    return auto.from_pretrained(path, attn_implementation="eager").eval()


def masked_softmax(scores, mask):
    s = np.where(mask[None], -np.inf, scores.astype(np.float64))
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
    return np.nan_to_num(p)


@pytest.mark.parametrize("family", FAMILIES)
def test_patterns_equal_hf_eager_and_scores_give_patterns(tiny, family):
    model, path = tiny(family)
    target = "le chat" if model.kind == "encoder-decoder" else None
    trace = model.trace(TEXT, target=target)
    ref = eager_reference(model, path)
    ids = torch.tensor([model.tokenizer(TEXT)["input_ids"]])
    kwargs = {"output_attentions": True}
    if model.kind == "decoder-only":
        ids = torch.tensor([model.tokenizer(TEXT)["input_ids"] + model.tokenizer(
            trace.output_text, add_special_tokens=False)["input_ids"]])[:, :len(
                trace.target_tokens)]
    if model.kind == "encoder-decoder":
        dec = model.tokenizer(text_target=target)["input_ids"]
        dec = dec[:-1] if dec[-1] == model.eos_id else dec
        kwargs["decoder_input_ids"] = torch.tensor(
            [[int(ref.config.decoder_start_token_id)] + dec])
    with torch.no_grad():
        out = ref(input_ids=ids, **kwargs)
    pairs = []
    if model.kind == "encoder-only":
        pairs = [(f"encoder.{i}.self", a) for i, a in enumerate(out.attentions)]
    elif model.kind == "decoder-only":
        pairs = [(f"decoder.{i}.self", a) for i, a in enumerate(out.attentions)]
    else:
        pairs = [(f"encoder.{i}.self", a) for i, a in enumerate(out.encoder_attentions)]
        pairs += [(f"decoder.{i}.self", a) for i, a in enumerate(out.decoder_attentions)]
        pairs += [(f"decoder.{i}.cross", a) for i, a in enumerate(out.cross_attentions)]
    assert pairs and {n for n, _ in pairs} == set(trace.blocks)
    for name, a in pairs:
        b = trace[name]
        np.testing.assert_allclose(b.pattern, a[0].numpy(), atol=1e-5, err_msg=name)
        np.testing.assert_allclose(masked_softmax(b.scores, b.mask), b.pattern, atol=1e-5,
                                   err_msg=name)
        np.testing.assert_allclose(b.z, b.pattern @ b.v, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("family", ["bert", "gpt2", "bart", "t5"])
def test_z_reproduces_the_attention_output(tiny, family):
    """The heads' outputs side by side, through the layer's own output projection, equal
    what the layer passed on (a test-local hook reads the projection's input)."""
    model, _ = tiny(family)
    block = "decoder.0.self" if model.kind == "decoder-only" else "encoder.0.self"
    module = model.adapter.block_modules(model.hf_model)[block]
    proj = {"bert": lambda m: None, "gpt2": lambda m: m.c_proj, "bart": lambda m: m.out_proj,
            "t5": lambda m: m.o}[family](module)
    if proj is None:  # BERT's output projection sits in the BertSelfOutput next to it
        proj = model.hf_model.base_model.encoder.layer[0].attention.output.dense
    seen = []
    handle = proj.register_forward_pre_hook(lambda mod, args: seen.append(args[0].clone()))
    try:
        target = "le chat" if model.kind == "encoder-decoder" else None
        trace = model.trace(TEXT, target=target)
    finally:
        handle.remove()
    z = trace[block].z  # (H, T, d)
    concat = np.transpose(z, (1, 0, 2)).reshape(z.shape[1], -1)
    np.testing.assert_allclose(concat, seen[-1][0].float().cpu().numpy(), atol=1e-5)


def test_t5_scores_include_the_relative_position_bias(tiny):
    model, _ = tiny("t5")
    trace = model.trace(TEXT, target="le chat")
    b = trace["encoder.0.self"]
    attn = model.hf_model.encoder.block[0].layer[0].SelfAttention
    n = b.shape[1]
    with torch.no_grad():
        bias = attn.compute_bias(n, n)[0].float().cpu().numpy()  # (H, n, n), from the model's own weights
    qk = b.q @ np.transpose(b.k, (0, 2, 1))  # T5 does not scale its scores
    assert np.abs(bias).max() > 1e-3  # the bias is really there
    np.testing.assert_allclose(b.scores, qk + bias, atol=1e-5)
    later = trace["encoder.1.self"]  # layer 0's bias is shared by every later layer
    np.testing.assert_allclose(later.scores, later.q @ np.transpose(later.k, (0, 2, 1)) + bias,
                               atol=1e-5)


def block_means(m: np.ndarray, size: int) -> np.ndarray:
    """Reference pooling: contiguous bins, position i of n in bin i*nb // n."""
    nq, nk = m.shape[-2:]
    bq, bk = min(nq, size), min(nk, size)
    rows = (np.arange(nq) * bq) // nq
    cols = (np.arange(nk) * bk) // nk
    out = np.zeros(m.shape[:-2] + (bq, bk))
    for i in range(bq):
        for j in range(bk):
            out[..., i, j] = m[..., rows == i, :][..., cols == j].mean(axis=(-2, -1))
    return out


@pytest.mark.parametrize("size", [1, 3, 7, 64])
def test_overview_head_and_window_equal_the_full_pattern(size):
    model = vc.load("dates")
    trace = model.trace("saturday 9 may 2015 and more words here")
    for name in trace.blocks:
        fresh = model.trace("saturday 9 may 2015 and more words here")[name]  # nothing read
        full = trace[name].pattern
        # block means summed in row chunks by the trace (float32, all heads at once) vs numpy's
        # float64 means of the full pattern: two reductions of float32 softmax outputs
        np.testing.assert_allclose(fresh.overview(size), block_means(full, size), atol=1e-5)
        np.testing.assert_allclose(fresh.overview(size, what="scores"),
                                   block_means(trace[name].scores, size), atol=1e-5)
        for h in range(full.shape[0]):
            np.testing.assert_allclose(fresh.head(h), full[h], atol=1e-7)
        np.testing.assert_allclose(fresh.window(1, (2, 5), (1, 4)), full[1, 2:5, 1:4],
                                   atol=1e-7)
        assert "pattern" not in fresh._cache  # no all-heads matrix was built for these


def test_head_out_of_range_and_bad_sizes_are_clear():
    trace = vc.load("dates").trace("9 may 2018")
    b = trace["encoder.0.self"]
    with pytest.raises(IndexError, match="heads 0.."):
        b.head(b.n_heads)
    with pytest.raises(ValueError):
        b.overview(0)


def test_sixteen_threads_reading_lazily_get_their_serial_results():
    model = vc.load("en-fr", dtype="float32")
    same = (np.testing.assert_array_equal if model.device.type == "cpu" else  # GPU kernels:
            lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5))  # not bit-reproducible
    texts = ["the red car", "I see it", "I do not see the cat", "the small black cats",
             "she eats the cake", "the dog"] * 3
    serial = {}
    for t in set(texts):
        tr = model.trace(t)
        serial[t] = {n: (tr[n].head(1), tr[n].overview(3), tr[n].pattern) for n in tr.blocks}
    shared = {t: model.trace(t) for t in set(texts)}  # traces read by several threads
    errors, barrier = [], threading.Barrier(16)

    def work(i):
        try:
            barrier.wait()
            t = texts[i]
            own = model.trace(t)
            for tr in (own, shared[t]):
                for n in reversed(tr.blocks):
                    h1, ov, full = serial[t][n]
                    same(tr[n].overview(3), ov)
                    same(tr[n].head(1), h1)
                    same(tr[n].pattern, full)
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]


def long_native(n: int) -> NativeModel:
    words = [f"w{i}" for i in range(20)]
    vocab = Vocab.build([" ".join(words)])
    cfg = TransformerConfig(kind="decoder-only", src_vocab_size=len(vocab.tokens),
                            tgt_vocab_size=len(vocab.tokens), d_model=32, n_heads=2,
                            n_layers=0, n_decoder_layers=2, d_ff=64, dropout=0.0,
                            max_len=n + 8).validate()
    torch.manual_seed(0)
    return NativeModel(Transformer(cfg), {"target": vocab, "source": vocab},
                       {"name": "long"}, name="long")


@pytest.mark.slow
def test_a_4096_token_native_trace():
    model = long_native(4096)
    text = " ".join(f"w{i % 20}" for i in range(4094))
    trace = model.trace(text, target="w1")
    b = trace["decoder.1.self"]
    H, Tq, Tk = b.shape
    assert (H, Tq) == (2, Tk) and Tq >= 4096
    ov = b.overview(256)
    assert ov.shape == (2, 256, 256) and np.isfinite(ov).all()
    one = b.head(0)
    assert one.shape == (Tq, Tk) and np.isfinite(one).all()
    np.testing.assert_allclose(one.sum(-1), 1.0, atol=1e-4)
    assert (np.triu(one, k=1) == 0).all()  # causal: nothing after the query


def test_precision_option_keeps_patterns_float32():
    model = vc.load("dates", dtype="bfloat16")
    assert model.info()["dtype"] == "bfloat16"
    b = model.trace("9 may 2018")["decoder.0.cross"]
    assert b.pattern.dtype == np.float32 and b.scores.dtype == np.float32
    np.testing.assert_allclose(b.pattern.sum(-1), 1.0, atol=1e-5)
    ref = vc.load("dates", dtype="float32").trace("9 may 2018", target=model.trace(
        "9 may 2018").output_text)["decoder.0.cross"]
    assert np.abs(b.pattern - ref.pattern).max() < 0.05  # bf16 drift, not a different model
    assert vc.load("dates", "cpu").info()["dtype"] == "float32"  # auto on a CPU
    with pytest.raises(vc.VizError, match="dtype"):
        vc.load("dates", dtype="float8")


def test_the_written_out_softmax_can_be_differentiated_with_a_fully_blocked_row():
    """softmax_rows (the explicit formula: softcapped models' forward, reference runs) zeroes a
    fully blocked row after the softmax; with autograd on it must not do so in place, as
    softmax's backward reads its output (the GPU always takes that branch). Reference: the
    same loss built from torch.softmax of the masked scores, its blocked row left out."""
    from viz_core.capture.recorder import softmax_rows

    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 5, requires_grad=True)
    blocked = torch.zeros(2, 1, 4, 5, dtype=torch.bool)
    blocked[..., 3:] = True  # keys 3, 4 blocked for every query
    blocked[1, 0, 2] = True  # example 1's query 2 sees nothing
    w = torch.randn(2, 3, 4, 5)
    p = softmax_rows(x * 1.0, blocked)  # a fresh tensor, as scores_of returns
    (grad,) = torch.autograd.grad((p * w).sum(), x)
    assert p[1, :, 2].eq(0).all() and torch.isfinite(grad).all()
    ref = torch.softmax(x.masked_fill(blocked, float("-inf")), dim=-1)
    keep = ~blocked.all(-1, keepdim=True)
    (ref_grad,) = torch.autograd.grad((ref * w).where(keep, 0).nansum(), x)
    torch.testing.assert_close(p, ref.where(keep, 0), rtol=0, atol=0)
    torch.testing.assert_close(grad, ref_grad.nan_to_num(), rtol=0, atol=1e-7)
