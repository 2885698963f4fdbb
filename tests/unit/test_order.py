"""Order blindness (viz_core.lessons.order, Backend.trace(permute=..., positions=...)).

Self-attention without positions is permutation-equivariant: for every encoder model (ours,
MiniLM, tiny BERT / RoBERTa / ALBERT / DistilBERT / Electra and T5's encoder), the shuffled
run's patterns, put back in the original order, equal the original's (atol 1e-5) with
positions off, and differ with positions on. A causal decoder stays order-aware without
positions (its mask). Special tokens stay in place; bad orders get clear messages.
"""

from __future__ import annotations

import numpy as np
import pytest

import viz_core as vc
from viz_core.errors import InputError
from viz_core.lessons.order import head_differences, parse_order, seeded_order, unshuffle

TEXT = "the cat sat on the mat because it was tired"


def _max_difference(model, text, positions, order=None, **kw):
    kind = "decoder.self" if model.kind == "decoder-only" else "encoder.self"
    n = model.count_tokens(text)
    order = order or seeded_order(n, 3)
    a = model.trace(text, positions=positions, blocks=[kind], **kw)
    b = model.trace(text, positions=positions, blocks=[kind], permute=order, **kw)
    names = [x.name for x in a.layers(kind)]
    assert names
    return max(float(head_differences(a[x].pattern, b[x].pattern, b.source_order).max())
               for x in names), a, b


@pytest.mark.parametrize("name", ["en-fr", "dates", "minilm"])
def test_shipped_encoders_are_order_blind_without_positions(name):
    model = vc.load(name, dtype="float32")  # float32 on a GPU too: the bound is float32's
    text = model.examples()[0] if name != "minilm" else TEXT
    off, _, _ = _max_difference(model, text, False, max_new=1)
    on, _, _ = _max_difference(model, text, True, max_new=1)
    assert off < 1e-5
    assert on > 1e-2


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "distilbert", "electra", "t5"])
def test_tiny_hf_encoders_are_order_blind_without_positions(tiny_models, family):
    model, _ = tiny_models.load(family, seed=4)
    kw = {"target": "le chat"} if model.kind == "encoder-decoder" else {}
    off, a, b = _max_difference(model, TEXT, False, **kw)
    on, _, _ = _max_difference(model, TEXT, True, **kw)
    assert off < 1e-5
    assert on > 10 * max(off, 1e-7)


@pytest.mark.parametrize("which", ["lm", "lm-rope", "llama", "gpt2"])
def test_causal_decoders_stay_order_aware_without_positions(tiny_models, which):
    model = vc.load(which) if which.startswith("lm") else tiny_models.load(which, seed=4)[0]
    off, a, _ = _max_difference(model, TEXT, False, max_new=0)
    assert off > 1e-3
    # the causal mask is still there with positions off
    block = a[a.blocks[0]]
    assert np.array_equal(block.mask, np.triu(np.ones_like(block.mask), 1))


def test_special_tokens_stay_put_and_tokens_move(tiny_models):
    model = vc.load("minilm")
    n = model.count_tokens("one two three four")
    a = model.trace("one two three four", blocks=["encoder.self"])
    b = model.trace("one two three four", blocks=["encoder.self"], permute=[3, 2, 1, 0])
    assert n == 4 and b.source_order == [0, 4, 3, 2, 1, 5]
    assert [a.source_tokens[i] for i in b.source_order] == b.source_tokens
    assert b.source_tokens[0] == "[CLS]" and b.source_tokens[-1] == "[SEP]"


def test_native_positions_off_means_no_table():
    """Off = the model's embeddings without the positional table: the first layer's input
    (the stream) equals the scaled token embedding alone."""
    model = vc.load("en-fr", dtype="float32")
    t = model.trace("the red car", positions=False, capture=("stream",), max_new=1)
    ids = model.src_vocab.encode("the red car")[0] + [model.cfg.eos_id]
    import torch
    emb = model.model.src_embed(torch.tensor(ids, device=model.device)) * \
        model.cfg.d_model ** 0.5
    assert torch.allclose(t.stream["encoder.0"]["in"], emb, atol=1e-5)
    t_on = model.trace("the red car", capture=("stream",), max_new=1)
    assert not torch.allclose(t_on.stream["encoder.0"]["in"], emb, atol=1e-3)


def test_bad_orders_and_unsupported_models(tiny_models):
    model = vc.load("en-fr")
    for bad in ([0, 0, 1], [0, 1], [1, 2, 3], ["a", "b", "c"]):
        with pytest.raises(InputError):
            model.trace("the red car", permute=bad)
    bart, _ = tiny_models.load("bart", seed=4)
    with pytest.raises(InputError, match="cannot be switched off"):
        bart.trace(TEXT, target="le chat", positions=False)
    gpt2, _ = tiny_models.load("gpt2", seed=4)
    with pytest.raises(InputError, match="max_new=0"):
        gpt2.trace(TEXT, positions=False)


def test_order_helpers_by_hand():
    m = np.arange(9).reshape(3, 3)
    # shuffled position p held original position order[p]
    order = [2, 0, 1]
    shuffled = m[np.ix_(order, order)]
    assert np.array_equal(unshuffle(shuffled, order), m)
    assert parse_order("2, 0 1", 3) == [2, 0, 1] == parse_order(" 2;0 ,1 ", 3)
    # int() reads "+1", "1_0" and other scripts' digits ("١" is 1): the order box does not
    for bad in ("0 0 1", "0 1", "a b c", "", "0 1 2 3", "<script>", "+2 0 1", "2 0 ١",
                "0 1_0 2", "2 0 " + "1" * 5000):
        with pytest.raises(InputError):
            parse_order(bad, 3)
    o = seeded_order(5, 7)
    assert sorted(o) == list(range(5)) and o != list(range(5)) and o == seeded_order(5, 7)
