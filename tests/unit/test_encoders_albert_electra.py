"""ALBERT and ELECTRA through the one capture path, against Hugging Face's own eager attention.

Tiny random models (tests/support/hf_tiny_encoders.py): patterns equal ``output_attentions``, the
softmax of the captured scores under the mask gives the pattern, z equals pattern @ v; ALBERT's
one shared attention module, called once per layer, gives blocks encoder.0..N-1.self in call
order, and its successive layers' patterns differ only because their inputs do.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.hf_tiny_encoders import ALBERT_LAYERS
from viz_core.analysis.heads import layer_to_layer_divergence, masked_softmax

TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return lambda family: tiny_models.load(family, seed=3)


def eager_attentions(path, ids, **kw):
    from transformers import AutoModel

    ref = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        return ref(input_ids=ids, output_attentions=True, **kw).attentions


@pytest.mark.parametrize("family", ["albert", "electra"])
def test_patterns_equal_hf_eager_and_scores_give_patterns(tiny, family):
    model, path = tiny(family)
    assert model.kind == "encoder-only" and model.info()["family"] == family
    trace = model.trace(TEXT)
    ids = torch.tensor([model.tokenizer(TEXT)["input_ids"]])
    attentions = eager_attentions(path, ids)
    n_layers = ALBERT_LAYERS if family == "albert" else 2
    assert len(attentions) == n_layers
    assert trace.blocks == [f"encoder.{i}.self" for i in range(n_layers)]
    assert trace.source_tokens[0] == "[CLS]" and trace.source_tokens[-1] == "[SEP]"
    for i, a in enumerate(attentions):
        b = trace[f"encoder.{i}.self"]
        assert b.kv_group == [0, 1, 2, 3] and b.window_size is None
        np.testing.assert_allclose(b.pattern, a[0].numpy(), atol=1e-5, err_msg=b.name)
        np.testing.assert_allclose(masked_softmax(b.scores, b.mask), b.pattern, atol=1e-5)
        np.testing.assert_allclose(b.z, b.pattern @ b.v, atol=1e-5)


@pytest.mark.parametrize("family", ["albert", "electra"])
def test_padding_of_a_batch_equals_hf_eager_with_its_attention_mask(tiny, family):
    model, path = tiny(family)
    short, long = "the cat", TEXT
    traces = model.trace_batch([short, long])
    enc = model.tokenizer([short, long], padding=True, return_tensors="pt")
    attentions = eager_attentions(path, enc["input_ids"], attention_mask=enc["attention_mask"])
    n_short = int(enc["attention_mask"][0].sum())
    b = traces[0]["encoder.0.self"]
    # the blocked columns are the padding keys, for every row
    assert b.mask[:, n_short:].all() and not b.mask[:, :n_short].any()
    np.testing.assert_allclose(b.pattern[:, :n_short, :n_short],
                               attentions[0][0, :, :n_short, :n_short].numpy(), atol=1e-5)


def test_albert_shared_layers_are_named_by_call_order(tiny):
    model, _ = tiny("albert")
    cfg = model.hf_model.config
    assert cfg.num_hidden_groups == 1 and cfg.num_hidden_layers == ALBERT_LAYERS
    modules = model.adapter.block_modules(model.hf_model)
    assert list(modules) == [f"encoder.{i}.self" for i in range(ALBERT_LAYERS)]
    assert len({id(m) for m in modules.values()}) == 1  # one module, called three times
    trace = model.trace(TEXT)
    stacked = trace.stack("encoder.self")
    # shared weights, different inputs: the patterns move, but each layer is its own capture
    div = layer_to_layer_divergence(stacked)
    assert div.shape == (ALBERT_LAYERS - 1, 4) and (div > 0).all()
    assert not np.allclose(stacked[0], stacked[1])


def test_albert_ablation_switches_off_one_call_of_the_shared_module(tiny):
    model, _ = tiny("albert")
    base = model.trace(TEXT, capture=("z",))
    abl = model.trace(TEXT, capture=("z",), ablate={"encoder.1.self": [2]})
    assert (abl["encoder.1.self"].z[2] == 0).all()
    # layer 0 runs before the ablated call and the same module is untouched there
    np.testing.assert_array_equal(abl["encoder.0.self"].z, base["encoder.0.self"].z)
    assert not (abl["encoder.0.self"].z[2] == 0).all()
    assert not np.allclose(abl["encoder.2.self"].pattern, base["encoder.2.self"].pattern)
