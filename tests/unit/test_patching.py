"""Activation patching and attribution patching (issue 23, item 3).

References: closed forms (patching the whole layer-0 stream is the clean run; patching a
position where the two inputs agree changes nothing; patching every head restores a
prediction whose own token is shared), our own unbatched loop (one patched run per unit),
TransformerLens 4.3's head-output patching on the same weights, and torch.autograd on a
hand-built function for attribution patching.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import viz_core as vc
from tests.support.hf_tiny import make_patching_gpt2
from tests.support.hostile_inputs import CORPUS
from viz_core.analysis import patching as P
from viz_core.backends.patching import subject_for
from viz_core.capture.recorder import MaskSpec, attend, note
from viz_core.errors import InputError

CLEAN, CORRUPTED = "the small black cats", "the big black cats"


@pytest.fixture(scope="module")
def lm():
    # the CPU: these are exact closed forms, and a GPU's kernels differ between batch sizes
    return vc.load("lm", "cpu")


# ---- shapes and closed forms ---------------------------------------------------------------
def test_a_corruption_that_barely_moves_the_metric_is_said(lm):
    """Effects (and edge scores) are shares of clean - corrupted: under 1% of the metric's
    size, the result warns. The prediction after "... on the" hardly depends on cat / dog;
    after "the small black cats" it depends on "cats" (the page's suggested corruption)."""
    assert P.gap_warnings(5.0, 4.96, "m") and not P.gap_warnings(5.0, 4.94, "m")
    assert P.gap_warnings(0.2, 0.195, "m") and not P.gap_warnings(0.2, 0.18, "m")  # size 1
    for result in (lm.patch("the cat sat on the", "the dog sat on the"),
                   lm.edge_attribution("the cat sat on the", "the dog sat on the")):
        gap = abs(result.clean - result.corrupted)
        assert gap < 0.01 * abs(result.clean), (result.clean, result.corrupted)
        assert [w for w in result.warnings if "barely moves" in w], result.warnings
    moved = lm.patch("the small black cats", "the small black small")
    assert abs(moved.clean - moved.corrupted) > 0.5
    assert not [w for w in moved.warnings if "barely moves" in w]


def test_shapes_and_names(lm):
    info = lm.info()
    n_tokens = 1 + len(CLEAN.split())  # <bos> + words
    heads = lm.patch(CLEAN, CORRUPTED, over="heads")
    assert heads.effect.shape == (info["decoder_layers"], info["heads"])
    assert heads.rows == [f"decoder.{i}.self" for i in range(info["decoder_layers"])]
    layers = lm.patch(CLEAN, CORRUPTED, over="layers")
    assert layers.effect.shape == (info["decoder_layers"],)
    positions = lm.patch(CLEAN, CORRUPTED, over="positions")
    assert positions.effect.shape == (info["decoder_layers"], n_tokens)
    top = lm.trace(CLEAN, max_new=0).output_tokens[-1]  # the default target token
    assert heads.metric == f"logit {top!r} at {n_tokens - 1}" and heads.token == top
    assert heads.clean != heads.corrupted
    for p in (heads, layers, positions):
        assert np.isfinite(p.effect).all()
        assert len(p.frame) == p.effect.size


def effect_tol(p, rel: float = 1e-5) -> float:
    """An effect's tolerance for two float32 computations of other shapes: 1e-5 of the logits'
    size, in effect units (the effect divides by the clean - corrupted gap). A 16-core CPU's
    batched and unbatched matmuls differed by 3e-5 in the logit of `lm` here, 6e-5 in effect."""
    return rel * max(1.0, abs(p.clean), abs(p.corrupted)) / abs(p.clean - p.corrupted)


def test_closed_form_endpoints(lm):
    # The whole stream entering layer 0 is the clean run: exactly 1. A position where the
    # two inputs have the same token (and, before layer 0, the same stream) changes nothing.
    layers = lm.patch(CLEAN, CORRUPTED, over="layers")
    assert layers.effect[0] == pytest.approx(1.0, abs=effect_tol(layers))
    pos = lm.patch(CLEAN, CORRUPTED, over="positions")
    differ = 2  # <bos> the [small|big] ...
    assert pos.effect[0, differ] == pytest.approx(1.0, abs=effect_tol(pos))
    others = np.delete(pos.effect[0], differ)
    np.testing.assert_allclose(others, 0.0, atol=effect_tol(pos))


def test_every_head_at_once_is_clean_and_none_is_corrupted(lm):
    # The metric's own position (the last token) is the same in both inputs, so the clean
    # and corrupted runs differ there only through attention: patching every head's z at
    # every position restores the clean run's metric exactly; patching nothing is the
    # corrupted run.
    subject = subject_for(lm, CLEAN, CORRUPTED)
    with torch.no_grad():
        clean_out, rec = P._record_run(subject, "clean", True, False)
    metric = P.make_metric(subject, clean_out, None, None)
    clean = P.clean_values(rec, subject, "heads")
    every = [u for u in P.units(subject, "heads")[0]]
    got = P.run_groups(subject, [every, []], clean, metric)
    with torch.no_grad():
        corrupted = float(metric.fn(subject.run("corrupted", 1))[0])
    assert got[0] == pytest.approx(float(metric.fn(clean_out)[0]), abs=1e-5)
    assert got[1] == pytest.approx(corrupted, abs=1e-5)


# ---- batched against one patched run per unit ----------------------------------------------
# The default path batches copies and runs each batch as one copy below its first patched
# layer (widened there): both against one plain patched run per unit.
@pytest.mark.parametrize("over", ["heads", "positions"])
def test_batched_equals_unbatched_native(lm, over):
    batched = lm.patch(CLEAN, CORRUPTED, over=over)
    # the reference: one plain patched run per unit (no batch, no shared prefix)
    one_by_one = lm.patch(CLEAN, CORRUPTED, over=over, chunk=1, share_prefix=False)
    # the same model on a batch of copies vs on one copy (float32 matmuls of other shapes)
    np.testing.assert_allclose(batched.effect, one_by_one.effect, atol=effect_tol(batched))


@pytest.mark.slow
def test_batched_equals_unbatched_llama(tiny_models):
    model, _ = tiny_models.load("llama")
    clean, corrupted = "the cat sat on the mat", "the dog sat on the mat"
    for over in ("heads", "positions"):
        batched = model.patch(clean, corrupted, over=over, chunk=5)
        one_by_one = model.patch(clean, corrupted, over=over, chunk=1, share_prefix=False)
        np.testing.assert_allclose(batched.effect, one_by_one.effect, atol=1e-4)
        assert batched.effect.shape[0] == 2


# ---- TransformerLens parity ----------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2_path(tmp_path_factory):
    return make_patching_gpt2(tmp_path_factory.mktemp("patch-gpt2"))


@pytest.mark.slow
def test_heads_match_transformer_lens(gpt2_path):
    from transformer_lens import patching as tl_patching
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoTokenizer, GPT2LMHeadModel

    clean, corrupted = "the cat sat on the mat because it was", "the dog sat on the mat because it was"
    ours = vc.load(str(gpt2_path), device="cpu", dtype="float32")
    tok = AutoTokenizer.from_pretrained(gpt2_path)
    ids_clean = torch.tensor([tok(clean)["input_ids"]])
    ids_corr = torch.tensor([tok(corrupted)["input_ids"]])
    assert ids_clean.shape == ids_corr.shape
    # pick the target / contrast from the clean run: its top two predictions
    hf = GPT2LMHeadModel.from_pretrained(gpt2_path, attn_implementation="eager").eval()
    top2 = hf(ids_clean).logits[0, -1].topk(2).indices.tolist()
    token, against = (tok.convert_ids_to_tokens(i) for i in top2)
    p = ours.patch(clean, corrupted, token=token, against=against, over="heads")
    assert abs(p.clean - p.corrupted) > 0.1  # a real gap: the normalisation stays well posed

    bridge = TransformerBridge.boot_transformers(str(gpt2_path), hf_model=hf, tokenizer=tok,
                                                 device="cpu")
    bridge.eval()
    with torch.no_grad():
        clean_logits, cache = bridge.run_with_cache(ids_clean)
        corr_logits = bridge(ids_corr)

    def diff(logits):
        return logits[0, -1, top2[0]] - logits[0, -1, top2[1]]

    c, k = float(diff(clean_logits)), float(diff(corr_logits))
    # ours (SDPA, batched copies) vs TransformerLens (eager attention, one run per head)
    assert p.clean == pytest.approx(c, abs=1e-4) and p.corrupted == pytest.approx(k, abs=1e-4)
    with torch.no_grad():
        tl = tl_patching.get_act_patch_attn_head_out_all_pos(
            bridge, ids_corr, cache, lambda logits: (diff(logits) - k) / (c - k))
    np.testing.assert_allclose(p.effect, tl.numpy(), atol=1e-4)
    assert p.metric == f"logit diff {p.token!r} - {p.against!r} at {ids_clean.shape[1] - 1}"


# ---- attribution patching ------------------------------------------------------------------
def _hand_built_subject(seed=0):
    """One attention block on hand-made weights, through the real capture path (``note`` for
    the stream, ``attend`` for z): readout = W_U (W_O z + x) at the last position."""
    g = torch.Generator().manual_seed(seed)
    T, d, H = 5, 8, 2
    W = {n: torch.randn(d, d, generator=g) / d ** 0.5 for n in ("Q", "K", "V", "O")}
    W_U = torch.randn(7, d, generator=g)
    x_in = {"clean": torch.randn(T, d, generator=g)}
    x_in["corrupted"] = x_in["clean"].clone()
    x_in["corrupted"][1] = torch.randn(d, generator=g)

    def forward(x):  # x (n, T, d) -> readout (n, vocab)
        x = note("decoder.0", "in", x)
        n = x.shape[0]

        def split(t):
            return t.view(n, T, H, d // H).transpose(1, 2)

        q, k, v = (split(x @ W[c].T) for c in "QKV")
        z = attend("decoder.0.self", q, k, v, MaskSpec(T, T, causal=True), (d // H) ** -0.5)
        out = x + z.reshape(n, T, d) @ W["O"].T
        return out[:, -1] @ W_U.T

    def run(which, n):
        return forward(x_in[which].expand(n, -1, -1))

    subject = P.PatchSubject(clean_tokens=list("abcde"), corrupted_tokens=list("abXde"),
                             blocks={"decoder.0.self": H}, layers={"decoder.0": T}, run=run,
                             token_id=lambda text, what: int(text), position=T - 1)
    return subject, forward, x_in, W_U


def test_attribution_heads_exact_when_linear():
    # The readout is linear in z: the first-order term is the whole effect, so attribution
    # patching equals real patching.
    subject, *_ = _hand_built_subject()
    real = P.run_patching(subject, token="3", against="5", over="heads")
    approx = P.run_attribution_patching(subject, token="3", against="5", over="heads")
    np.testing.assert_allclose(approx.effect, real.effect, atol=1e-5)
    assert approx.clean == pytest.approx(real.clean) and approx.corrupted == pytest.approx(
        real.corrupted)


def test_attribution_positions_equal_autograd():
    # (clean - corrupted stream) . d metric / d stream, from torch.autograd on the plain
    # function (no recorder), against ours.
    subject, forward, x_in, W_U = _hand_built_subject(seed=1)
    approx = P.run_attribution_patching(subject, token="2", against="4", over="positions")
    x = x_in["corrupted"][None].clone().requires_grad_(True)
    out = forward(x)
    m = out[0, 2] - out[0, 4]
    (grad,) = torch.autograd.grad(m, x)
    with torch.no_grad():
        clean = forward(x_in["clean"][None])
    gap = float(clean[0, 2] - clean[0, 4]) - float(m.detach())
    expected = ((x_in["clean"] - x_in["corrupted"]) * grad[0]).sum(-1) / gap
    np.testing.assert_allclose(approx.effect[0], expected.numpy(), atol=1e-5)
    layers = P.run_attribution_patching(subject, token="2", against="4", over="layers")
    assert layers.effect[0] == pytest.approx(float(expected.sum()), abs=1e-5)


@pytest.mark.slow
def test_attribution_correlates_with_patching_gpt2(gpt2_path, capsys):
    model = vc.load(str(gpt2_path), device="cpu", dtype="float32")
    clean, corrupted = "the cat sat on the mat because it was", "the dog sat on the mat because it was"
    out = {}
    for over in ("heads", "positions"):
        real = model.patch(clean, corrupted, over=over)
        approx = model.attribution_patch(clean, corrupted, over=over)
        assert approx.effect.shape == real.effect.shape
        cmp = P.compare(real, approx)
        assert len(cmp.frame) == np.isfinite(real.effect).sum()
        out[over] = cmp.pearson
    with capsys.disabled():
        print(f"\nattribution vs activation patching, tiny GPT-2: Pearson r heads "
              f"{out['heads']:.3f}, positions {out['positions']:.3f}")
    assert out["heads"] > 0.5 and out["positions"] > 0.5


# ---- other models --------------------------------------------------------------------------
def test_encoder_decoder_rows(tmp_path):
    model = vc.load("en-fr", "cpu")
    p = model.patch("the red car", "the blue car", over="heads")
    cfg = model.cfg
    assert p.rows[: cfg.n_layers] == [f"encoder.{i}.self" for i in range(cfg.n_layers)]
    assert p.rows[cfg.n_layers:cfg.n_layers + 2] == ["decoder.0.self", "decoder.0.cross"]
    assert p.effect.shape == (cfg.n_layers + 2 * cfg.n_decoder_layers, cfg.n_heads)
    pos = model.patch("the red car", "the blue car", over="positions")
    assert pos.effect[0, 1] == pytest.approx(1.0, abs=effect_tol(pos))  # encoder.0, the word
    assert pos.rows[0] == "encoder.0"


@pytest.mark.slow
def test_minilm_cosine_metric():
    from transformers import AutoModel, AutoTokenizer

    model = vc.load("minilm")
    clean, corrupted = "the cat sat on the mat", "the dog sat on the mat"
    p = model.patch(clean, corrupted, over="layers")
    assert "cosine" in p.metric and p.clean == pytest.approx(1.0, abs=1e-6)
    assert p.effect[0] == pytest.approx(1.0, abs=1e-5)
    # the corrupted metric from transformers directly: mean-pooled over non-special tokens
    path = model.path
    tok, hf = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()

    def pooled(text):
        enc = tok(text, return_tensors="pt", return_special_tokens_mask=True)
        keep = (1 - enc.pop("special_tokens_mask")).float()[..., None]
        with torch.no_grad():
            h = hf(**enc).last_hidden_state
        return (h * keep).sum(1) / keep.sum(1)

    ref = float(torch.nn.functional.cosine_similarity(pooled(clean), pooled(corrupted)))
    assert p.corrupted == pytest.approx(ref, abs=1e-5)  # ours vs transformers' eager BERT
    with pytest.raises(InputError, match="no output head"):
        model.patch(clean, corrupted, token="cat")


# ---- messages ------------------------------------------------------------------------------
def test_unequal_token_counts_message(lm):
    with pytest.raises(InputError) as err:
        lm.patch("the small black cats", "the small cats")
    msg = str(err.value)
    assert "4 tokens" in msg and "3" in msg
    assert "token 2" in msg and "'black'" in msg and "'cats'" in msg


def test_token_messages(lm):
    with pytest.raises(InputError, match="not in this model's vocabulary"):
        lm.patch(CLEAN, CORRUPTED, token="zzzxqj")
    with pytest.raises(InputError, match="single token"):
        lm.patch(CLEAN, CORRUPTED, token="the cat")
    with pytest.raises(InputError, match="is the target token itself"):
        lm.patch(CLEAN, CORRUPTED, token="the", against="the")
    with pytest.raises(InputError, match="same"):
        lm.patch(CLEAN, CLEAN)
    with pytest.raises(InputError, match="outside"):
        lm.patch(CLEAN, CORRUPTED, position=99)
    with pytest.raises(InputError, match="'over'"):
        lm.patch(CLEAN, CORRUPTED, over="neurons")


TYPED = ["the", " the", "▁the", "Ġthe", "cat", "cats", ",", "the cat", "zzzxqj", "🙂", "猫",
         "[SEP]", "<unk>", "<eos>", "  ", "x" * 101, 3, 10**9, True, None]


def _read(read, token):
    try:
        return read(token)
    except InputError as err:
        return str(err).replace("target token", "token")


@pytest.mark.parametrize("which", ["lm", "gpt2", "t5"])
def test_a_token_box_reads_the_same_in_patching_and_logit_attribution(which, lm, gpt2_path,
                                                                      tiny_models):
    """One reader per family (backends.hf_parts / native_parts.token_id): patching's target
    box and logit attribution's give the same id, or the same message, for the same typing.
    Patching read a bare word as the vocabulary entry of those letters (GPT-2's "the" inside
    a word) where logit attribution read the word as running text has it (" the")."""
    model = {"lm": lambda: lm, "gpt2": lambda: vc.load(str(gpt2_path), device="cpu",
                                                       dtype="float32"),
             "t5": lambda: tiny_models.load("t5")[0]}[which]()
    clean, corrupted = (CLEAN, CORRUPTED) if which == "lm" else ("the cat sat", "the dog sat")
    subject = model.patching_subject(clean, corrupted)
    for token in TYPED:
        boxed = _read(lambda t: subject.token_id(t, "target token"), token)
        assert boxed == _read(model.token_id, token), token
    if which == "gpt2":  # a bare word is the word after a space, as in running text
        assert subject.token_id("the", "target token") == model.tokenizer(" the")["input_ids"][0]


def _hostile(model, clean, corrupted, token):
    # every box: a result or a clear InputError, never another exception
    for _, text in CORPUS:
        for kwargs in ({"clean": text, "corrupted": corrupted},
                       {"clean": clean, "corrupted": text},
                       {"clean": clean, "corrupted": corrupted, "token": text},
                       {"clean": clean, "corrupted": corrupted, "token": token,
                        "against": text}):
            try:
                p = model.patch(over="layers", **kwargs)
            except InputError as err:
                assert str(err)
            else:
                assert np.isfinite(p.effect).all()


def test_hostile_text_everywhere(lm):
    _hostile(lm, CLEAN, CORRUPTED, "the")


@pytest.mark.slow
def test_hostile_text_everywhere_gpt2(gpt2_path):
    # a Hugging Face tokenizer (lone surrogates are replaced before it sees them)
    model = vc.load(str(gpt2_path), device="cpu", dtype="float32")
    _hostile(model, "the cat sat on the mat", "the dog sat on the mat", " mat")


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gemma2", "albert"])
def test_shared_prefix_other_families(tiny_models, family):
    # Gemma 2: softcapped logits and a sliding window; ALBERT: one module serving every layer
    # (call-order names). The shared-prefix batch against one plain patched run per unit.
    model, _ = tiny_models.load(family)
    clean, corrupted = "the cat sat on the mat", "the dog sat on the mat"
    for over in ("heads", "positions"):
        fast = model.patch(clean, corrupted, over=over)
        plain = model.patch(clean, corrupted, over=over, chunk=1, share_prefix=False)
        np.testing.assert_allclose(fast.effect, plain.effect, atol=1e-4)
