"""BERT's input split into token + segment + position rows (viz_core.lessons.embeddings), against
the models' own embedding modules, and the Sentence pairs page."""


import numpy as np
import pytest
import torch

import viz_core as vc
from tests.support.hf_tiny import make_tiny_bert, make_tiny_distilbert, make_tiny_roberta
from viz_core.figures.embeddings import segment_heatmap
from viz_core.lessons.embeddings import embedding_parts, embeddings_module, parts_rows, segment_runs
from viz_core.training.toy import save_toy


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    # on the CPU in float32, whatever the machine: the references below are the modules' own
    return {n: vc.load(str(make(root / n)), "cpu", dtype="float32") for n, make in
            (("bert", make_tiny_bert), ("roberta", make_tiny_roberta),
             ("distilbert", make_tiny_distilbert))}


def test_segment_runs_by_hand():
    assert segment_runs([0, 0, 0, 1, 1]) == [(0, 3, 0), (3, 5, 1)]
    assert segment_runs([0]) == [(0, 1, 0)]


def test_bert_parts_sum_and_layernorm_equal_the_models_embeddings(tiny):
    m = tiny["bert"]
    parts = embedding_parts(m, "the cat sat", "it was tired")
    assert parts.tokens[0] == "[CLS]" and parts.tokens.count("[SEP]") == 2
    sep = parts.tokens.index("[SEP]")
    assert parts.segments == [0] * (sep + 1) + [1] * (len(parts.tokens) - sep - 1)
    assert parts.positions == list(range(len(parts.tokens)))
    emb = embeddings_module(m.hf_model)
    ids = torch.tensor([parts.input_ids])
    with torch.inference_mode():
        ref = emb(input_ids=ids, token_type_ids=torch.tensor([parts.segments]))[0]
        # by hand: each part is a row of its table
        np.testing.assert_allclose(parts.segment[-1], emb.token_type_embeddings.weight[1])
        np.testing.assert_allclose(parts.position[2], emb.position_embeddings.weight[2])
        np.testing.assert_allclose(parts.token[1], emb.word_embeddings.weight[ids[0, 1]])
    np.testing.assert_allclose(parts.total, parts.token + parts.segment + parts.position,
                               atol=1e-6)
    np.testing.assert_allclose(parts.normed, ref.numpy(), atol=1e-5)
    norms = parts.norms()
    np.testing.assert_allclose(norms["segment"][0], np.linalg.norm(parts.segment[0]),
                               rtol=1e-6)
    rows = parts_rows(parts)
    assert rows[-1]["segment"] == "B" and rows[0]["segment"] == "A"


def test_bfloat16_model_parts_are_float32_and_normed_by_its_own_layernorm(tmp_path):
    """A bfloat16 model (the GPU's default precision) gives float32 parts: its LayerNorm runs
    in float32 with its own (bfloat16) parameters, not on mixed dtypes."""
    m = vc.load(str(make_tiny_bert(tmp_path / "bert")), "cpu", dtype="bfloat16")
    parts = embedding_parts(m, "the cat sat")
    emb = embeddings_module(m.hf_model)
    assert emb.LayerNorm.weight.dtype == torch.bfloat16 and parts.normed.dtype == np.float32
    with torch.no_grad():
        ref = torch.nn.functional.layer_norm(  # the same computation, written out
            torch.from_numpy(parts.total), emb.LayerNorm.normalized_shape,
            emb.LayerNorm.weight.float(), emb.LayerNorm.bias.float(), emb.LayerNorm.eps)
    np.testing.assert_allclose(parts.normed, ref.numpy(), atol=1e-6)


def test_roberta_positions_start_after_padding_and_distilbert_has_no_segments(tiny):
    r = embedding_parts(tiny["roberta"], "the cat sat")
    assert r.positions[0] == 2  # padding_idx 1 + 1
    emb = embeddings_module(tiny["roberta"].hf_model)
    with torch.inference_mode():
        ref = emb(input_ids=torch.tensor([r.input_ids]))[0]
    np.testing.assert_allclose(r.normed, ref.numpy(), atol=1e-5)
    d = embedding_parts(tiny["distilbert"], "the cat", "a dog")
    assert not d.has_segments and not d.segment.any()


def test_models_without_tables_and_empty_text_give_messages(tiny, tmp_path):
    with pytest.raises(vc.VizError):
        embedding_parts(vc.load(str(save_toy(tmp_path / "toy", seed=1))), "the cat")
    with pytest.raises(vc.VizError):
        embedding_parts(tiny["bert"], "   ")


def test_segment_heatmap_draws_one_stripe_per_segment_and_bold_specials():
    tokens = ["[CLS]", "a", "[SEP]", "b", "[SEP]"]
    fig = segment_heatmap(np.full((1, 5, 5), 0.2, np.float32)[0], tokens, [0, 0, 0, 1, 1])
    assert len(fig.layout.shapes) == 4  # A and B, above and to the left
    assert fig.layout.shapes[0].x0 == -0.5 and fig.layout.shapes[0].x1 == 2.5
    assert "<b>[CLS]</b>" in fig.layout.xaxis.ticktext
    # the query stripe sits between the plot and the query labels, never over the labels
    left = fig.layout.shapes[1]
    assert (left.xref, left.xsizemode, left.xanchor) == ("paper", "pixel", 0)
    assert left.x0 < left.x1 < 0
    assert fig.layout.yaxis.ticklabelstandoff > -left.x0
