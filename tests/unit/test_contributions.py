"""Direct logit attribution and the logit lens (viz_core.analysis.contributions), against the
models' own outputs.

- For our pre-norm models and every pre-norm Hugging Face family (tiny random weights): the
  components add up to the logit (1e-4 relative, the issue's tolerance), and that logit is
  the model's own (its forward pass, compared at 1e-5: our float32 head vs. the model's own);
  the default token is the model's argmax; ``against`` gives the logit difference.
- The lens's last layer is the model's own output: the same top-k ids, the final prediction
  at rank 0, probabilities equal to softmax(model logits).
- Post-norm models and encoder-only models refuse with a DecompositionError that says why.
- Bad positions, tokens and contrast tokens give InputErrors.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import viz_core as vc
from viz_core.errors import DecompositionError, InputError, VizError

PRE_NORM = ["gpt2", "t5", "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text",
            "phi3", "olmo2"]
TEXT = "the cat sat on the mat because it was tired"
NATIVE_TEXT = "the small black cats"
T5_TARGET = "the cat sat"
REL = 1e-4  # the tolerance for "adds up"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return lambda family: tiny_models.load(family, seed=3)[0]


@pytest.fixture(scope="module")
def native():
    cache = {}

    def get(name):
        if name not in cache:  # the induction model by its folder (shipped when trained)
            where = ROOT / "checkpoints" / name if name == "induction" else name
            cache[name] = vc.load(str(where), dtype="float32")  # the GPU's too
        return cache[name]
    return get


def _target(family):
    return T5_TARGET if family == "t5" else None


def hf_logits(model, text, target=None) -> torch.Tensor:
    """float32 (T, V): the Hugging Face model's own logits for the input analysis runs."""
    ids = model.tokenizer(text)["input_ids"]
    kwargs = {"input_ids": torch.tensor([ids], device=model.device)}
    if model.kind == "encoder-decoder":
        t = model.tokenizer(target)["input_ids"]
        if t and t[-1] == model.eos_id:
            t = t[:-1]
        start = int(model.hf_model.config.decoder_start_token_id)
        kwargs["decoder_input_ids"] = torch.tensor([[start] + t], device=model.device)
    with torch.no_grad():
        return model.hf_model(**kwargs).logits[0].float().cpu()


def native_logits(model, text) -> torch.Tensor:
    ids = [model.cfg.bos_id] + model.tgt_vocab.encode(text)[0]
    with torch.no_grad():
        return model.model(None, torch.tensor([ids], device=model.device)).float()[0].cpu()


def _adds_up(a):
    total = float(a.frame.contribution.sum())
    assert math.isclose(total, a.logit, rel_tol=REL, abs_tol=REL * 1e-2), (total, a.logit)


def _uncapped(model, logits):
    cap = model.logit_softcap()
    return logits if not cap else cap * torch.atanh(logits / cap)


# ---- sums and the model's own logit --------------------------------------------------------
@pytest.mark.parametrize("name", ["lm", "lm-rope", "induction"])
def test_native_attribution_adds_up_to_the_models_logit(native, name):
    if name == "induction" and not (ROOT / "checkpoints" / "induction").is_dir():
        pytest.skip("checkpoints/induction is not trained yet (make checkpoints)")
    model = native(name)
    logits = native_logits(model, NATIVE_TEXT)
    for position in (-1, 2):
        a = model.logit_attribution(NATIVE_TEXT, position=position)
        _adds_up(a)
        assert a.token_id == int(logits[position].argmax())  # default: the model's argmax
        # our head on the recorded stream vs. the model's own forward pass
        assert a.logit == pytest.approx(float(logits[position, a.token_id]), abs=1e-5)
    kinds = set(a.frame.kind)
    assert {"embed", "head", "mlp", "bias"} <= kinds
    assert ("position" in kinds) == (name == "lm")  # rotary models add no position rows
    heads = a.frame[a.frame.kind == "head"]
    assert len(heads) == model.cfg.n_decoder_layers * model.cfg.n_heads
    assert heads.component.iloc[model.cfg.n_heads + 1] == "decoder.1.self.h1"  # layer-major


@pytest.mark.parametrize("family", PRE_NORM)
def test_hf_attribution_adds_up_to_the_models_logit(tiny, family):
    model = tiny(family)
    target = _target(family)
    logits = _uncapped(model, hf_logits(model, TEXT, target))
    a = model.logit_attribution(TEXT, target)
    _adds_up(a)
    assert a.token_id == int(logits[-1].argmax())
    # our head (frozen-scale sum's reference) vs. the model's own forward pass
    assert a.logit == pytest.approx(float(logits[-1, a.token_id]), abs=1e-5)
    if model.logit_softcap():
        assert "before the cap" in a.note and a.softcapped_logit is not None
    heads = a.frame[a.frame.kind == "head"]
    blocks = [b for b in model.info() and model._heads if b.startswith("decoder.")]
    assert len(heads) == sum(model._heads[b] for b in blocks)


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2"])
def test_against_gives_the_logit_difference(tiny, family):
    model = tiny(family)
    logits = _uncapped(model, hf_logits(model, TEXT))
    top2 = logits[2].topk(2).indices.tolist()
    a = model.logit_attribution(TEXT, position=2, token=top2[1], against=top2[0])
    _adds_up(a)
    ref = float(logits[2, top2[1]] - logits[2, top2[0]])
    assert a.logit == pytest.approx(ref, abs=1e-5)
    assert a.logit < 0 and a.against_id == top2[0]


def test_gpt2_embedding_and_position_rows(tiny):
    """The split of the stream entering layer 0: the token's own wte row and the wpe row,
    each through ln_f (scale of the real final stream, read by a hook) and the unembedding."""
    model = tiny("gpt2")
    ids = model.tokenizer(TEXT)["input_ids"]
    a = model.logit_attribution(TEXT, position=3)
    w_u = model.hf_model.lm_head.weight.float()
    ln_f = model.hf_model.transformer.ln_f
    hf = model.hf_model.transformer
    with torch.no_grad():
        x = _final_stream(model, ids)[3]
        s = (x.var(unbiased=False) + ln_f.eps).sqrt()
        parts = {"embed": hf.wte.weight[ids[3]], "position": hf.wpe.weight[3]}
        got = a.frame.set_index("component").contribution
        for name, vec in parts.items():
            ref = float(((vec - vec.mean()) / s * ln_f.weight) @ w_u[a.token_id])
            assert got[name] == pytest.approx(ref, abs=1e-5)


def _final_stream(model, ids):
    """The residual stream leaving the last layer (before ln_f), via a forward hook."""
    seen = {}
    h = model.hf_model.transformer.ln_f.register_forward_hook(
        lambda m, args, out: seen.setdefault("x", args[0][0].detach()))
    try:
        with torch.no_grad():
            model.hf_model(torch.tensor([ids], device=model.device))
    finally:
        h.remove()
    return seen["x"]


# ---- the logit lens ------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["gpt2", "t5", "llama", "gemma2", "olmo2"])
def test_lens_last_layer_is_the_models_output(tiny, family):
    model = tiny(family)
    target = _target(family)
    logits = hf_logits(model, TEXT, target)  # softcapped where the model caps
    lens = model.logit_lens(TEXT, target, k=3)
    n_layers = model.info()["decoder_layers"]
    assert lens.layers == ["embed"] + [f"decoder.{i}" for i in range(n_layers)]
    probs = torch.softmax(logits, -1)
    top = probs.topk(3, dim=-1)
    assert (lens.top_ids[-1] == top.indices.numpy()).all()
    # our head on the recorded stream vs. the model's own forward pass
    assert lens.top_probs[-1] == pytest.approx(top.values.numpy(), abs=1e-5)
    assert (lens.rank[-1] == 0).all()
    assert (lens.prediction_ids == logits.argmax(-1).numpy()).all()
    assert lens.prob[-1] == pytest.approx(top.values[:, 0].numpy(), abs=1e-5)
    assert lens.top_probs.shape == (n_layers + 1, logits.shape[0], 3)
    assert (lens.rank >= 0).all() and ((lens.prob >= 0) & (lens.prob <= 1)).all()


def test_lens_in_chunks_of_positions(tiny, monkeypatch):
    """Long inputs: the lens computes its (positions x vocabulary) logits a few rows at a
    time; the result is the same as all at once."""
    from viz_core.analysis import contributions

    model = tiny("gpt2")
    whole = model.logit_lens(TEXT, k=4)
    vocab = model.unembedding()[0].shape[0]
    monkeypatch.setattr(contributions, "LENS_CHUNK_BYTES", 3 * 4 * vocab)  # 3 rows a chunk
    chunked = model.logit_lens(TEXT, k=4)
    assert (chunked.top_ids == whole.top_ids).all() and (chunked.rank == whole.rank).all()
    assert chunked.top_probs == pytest.approx(whole.top_probs, abs=1e-6)


def test_lens_native_and_earlier_layers(native):
    """Every row is the final norm + unembedding of that layer's stream (the model's own
    decoder_norm and generator applied to the hidden state after layer 0)."""
    model = native("lm")
    lens = model.logit_lens(NATIVE_TEXT, k=2)
    ids = torch.tensor([[model.cfg.bos_id] + model.tgt_vocab.encode(NATIVE_TEXT)[0]],
                       device=model.device)
    net = model.model
    with torch.no_grad():
        x = net.embed(net.tgt_embed, ids)
        x0 = net.decoder[0](x, None, None, None, 0, None)
        ref0 = torch.softmax(net.generator(net.decoder_norm(x0)), -1)[0]
        ref_embed = torch.softmax(net.generator(net.decoder_norm(x)), -1)[0]
        final = torch.softmax(net(None, ids), -1)[0]
    for row, ref in ((0, ref_embed), (1, ref0), (2, final)):
        assert lens.top_probs[row] == pytest.approx(ref.topk(2).values.cpu().numpy(), abs=1e-5)
    assert (lens.rank[-1] == 0).all()
    assert len(lens.frame) == 3 * len(lens.tokens)


# ---- where it does not apply ---------------------------------------------------------------
@pytest.mark.parametrize("name", ["en-fr", "dates"])
def test_post_norm_native_models_say_why(native, name):
    with pytest.raises(DecompositionError, match="post-norm.*renormalised.*patching"):
        native(name).logit_attribution("9 may 2018")


@pytest.mark.parametrize("family", ["bert", "bart", "marian"])
def test_post_norm_hf_models_say_why(tiny, family):
    model = tiny(family)
    with pytest.raises(DecompositionError, match="renormalised after every sublayer"):
        model.logit_attribution(TEXT)
    with pytest.raises(DecompositionError):
        model.qk_attribution(TEXT, "encoder.1.self", 0, 1, 0)
    if family == "bert":
        with pytest.raises(DecompositionError, match="encoder-only.*no logit lens"):
            model.logit_lens(TEXT)


def test_post_norm_lens_still_works(native):
    """The lens needs no decomposition: en-fr's decoder stream through its generator."""
    lens = native("en-fr").logit_lens("the cat is black", "le chat est noir")
    assert (lens.rank[-1] == 0).all()


# ---- bad input -----------------------------------------------------------------------------
def test_bad_targets_say_what_is_wrong(native, tiny):
    lm = native("lm")
    n = len(lm.logit_attribution(NATIVE_TEXT).tokens)
    with pytest.raises(InputError, match=f"position {n} is out of range.*{n} tokens"):
        lm.logit_attribution(NATIVE_TEXT, position=n)
    with pytest.raises(InputError, match="out of range"):
        lm.logit_attribution(NATIVE_TEXT, position=-n - 1)
    with pytest.raises(InputError, match="whole number"):
        lm.logit_attribution(NATIVE_TEXT, position="last")
    with pytest.raises(InputError, match="not in this model's vocabulary"):
        lm.logit_attribution(NATIVE_TEXT, token="zyzzyva")
    with pytest.raises(InputError, match="out of range"):
        lm.logit_attribution(NATIVE_TEXT, token=10**6)
    with pytest.raises(InputError, match="contrast token is the target token itself"):
        lm.logit_attribution(NATIVE_TEXT, token="cats", against="cats")
    with pytest.raises(InputError, match="empty"):
        lm.logit_attribution("   ")
    for bad in (2.5, float("inf"), float("nan"), True, "1e99"):
        with pytest.raises(InputError, match="whole number"):
            lm.logit_attribution(NATIVE_TEXT, position=bad)
    assert lm.logit_attribution(NATIVE_TEXT, position="2").position == 2  # a URL value
    with pytest.raises(InputError, match="k must be"):
        lm.logit_lens(NATIVE_TEXT, k=0)
    gpt2 = tiny("gpt2")
    with pytest.raises(InputError, match="not one token"):
        gpt2.logit_attribution(TEXT, token="thisisnotonetoken zz")
    with pytest.raises(InputError, match="contrast token"):
        gpt2.logit_attribution(TEXT, token=" cat", against=" cat")
    a = gpt2.logit_attribution(TEXT, token=" cat")  # a word the vocabulary holds
    assert a.token_id == gpt2.tokenizer(" cat", add_special_tokens=False)["input_ids"][0]


@pytest.mark.slow
def test_hostile_texts_and_tokens(native, tiny):
    from tests.support.hostile_inputs import CORPUS

    models = [native("lm"), tiny("gpt2")]
    for model in models:
        for _, text in CORPUS:
            prompt = TEXT if model.family != "native" else NATIVE_TEXT
            for call in (lambda m=model, t=text: m.logit_attribution(t),
                         lambda m=model, t=text, p=prompt: m.logit_attribution(p, token=t),
                         lambda m=model, t=text: m.logit_lens(t, k=2)):
                try:
                    out = call()
                except VizError:
                    continue
                if hasattr(out, "frame") and hasattr(out, "logit"):
                    _adds_up(out)


@pytest.mark.parametrize("family", ["gpt2", "t5", "qwen3", "gemma2", "olmo2"])
def test_norm_specs_reproduce_the_models_norms(tiny, family):
    """Every NormSpec the analysis uses (final, block input, sublayer output, q/k norms) is
    the module it describes: same output on random input (Gemma's 1 + w, T5's RMS, LayerNorm
    with its bias, OLMo 2's norm over all heads)."""
    model = tiny(family)
    torch.manual_seed(0)
    stack = model.hf_model.base_model
    stack = stack.decoder if model.kind == "encoder-decoder" else stack
    final = next(getattr(stack, a) for a in ("ln_f", "norm", "final_layer_norm")
                 if hasattr(stack, a))
    pairs = [(model.final_norm(), final)]
    for block in [b for b in model._heads if b.startswith("decoder.") and b.endswith("self")]:
        hw = model.head_weights(block)
        layer = block.rsplit(".", 1)[0]
        attn = model._modules[block]
        for spec, point in ((hw.norm, "self.norm"), (hw.post_norm, "self.post_norm")):
            module = model._stream_modules.get((layer, point))
            assert (spec is None) == (module is None or model.norm_placement == "output"
                                      and point == "self.norm")
            if spec is not None:
                pairs.append((spec, module))
        for spec, name in ((hw.q_norm, "q_norm"), (hw.k_norm, "k_norm")):
            assert (spec is None) == (getattr(attn, name, None) is None)
            if spec is not None:
                pairs.append((spec, getattr(attn, name)))
    for spec, module in pairs:
        width = spec.weight.shape[-1]
        x = torch.randn(5, width) * 3 + 0.5
        with torch.no_grad():
            # our float32 NormSpec vs. the model's own module on the same input
            x = x.to(next(module.parameters()).device)  # the model's device, as the spec's
            torch.testing.assert_close(spec(x), module(x).float(), atol=1e-5, rtol=0)
    assert len(pairs) >= 3


def test_a_typed_word_is_the_word_as_running_text_has_it(tiny):
    """The token box strips spaces, so a typed word comes bare ("the"). A byte-level BPE
    holds both "the" (the letters inside a longer word) and "Ġthe" (the word after a space,
    as running text has it): the word is the second; it was the first, so the attribution
    explained a token the model does not predict there. Punctuation stays as typed, and the
    app's own way of showing a word ("▁the") reads back."""
    gpt2 = tiny("gpt2")
    vocab = gpt2.tokenizer.get_vocab()
    assert "the" in vocab and "Ġthe" in vocab  # both forms held
    running = gpt2.tokenizer("the cat sat on the", add_special_tokens=False)["input_ids"][-1]
    assert running == vocab["Ġthe"]
    assert gpt2.token_id("the") == running
    assert gpt2.token_id("▁the") == running and gpt2.token_strings([running]) == ["▁the"]
    assert gpt2.token_id("Ġthe") == running  # a vocabulary entry as stored
    assert gpt2.token_id(".") == vocab["."]
    assert gpt2.logit_attribution(TEXT, token="the").token_id == running
