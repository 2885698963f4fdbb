"""Issue 15's defects, each with a test that would have caught it: the Masks page with
Hugging Face models (pad tokens that are not "<pad>"), the Positional page's whole range,
Marian's half-split sin/cos labels and a readable model card on Home."""

import json

import numpy as np
import pytest

from tests.support.apptest import no_errors, open_app, z_of
from viz_core.training.toy import save_toy


@pytest.fixture(scope="module")
def toy_path(tmp_path_factory):
    return str(save_toy(tmp_path_factory.mktemp("ckpt") / "toy", seed=2))


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return {name: str(tiny_models.path(name, seed=0)) for name in ("gpt2", "marian", "roberta", "bart")}


def figs(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


# ---- masks ----------------------------------------------------------------------------


def _batch_panels(at):
    fig = figs(at)[0]
    titles = [a["text"] for a in fig["layout"]["annotations"] if "sentence" in a["text"]]
    heatmaps = [t for t in fig["data"] if t["type"] == "heatmap"]
    return titles, [z_of(h) for h in heatmaps], heatmaps


@pytest.mark.slow
def test_masks_page_counts_bert_padding_from_the_mask():
    at = open_app("masks", model="minilm", text="the quick brown fox jumps over the lazy dog",
                  mask_batch="the quick brown fox jumps over the lazy dog\nhi")
    no_errors(at)
    titles, zs, heatmaps = _batch_panels(at)
    assert titles[0] == "sentence 0 (len 11 of 11)"
    assert titles[1] == "sentence 1 (len 3 of 11)"  # [CLS] hi [SEP], then 8 [PAD]
    z = zs[1].reshape(11, 11)
    assert (z[:, 3:] == 1).all() and (z[:, :3] == 0).all()  # PAD columns drawn blocked
    assert "[PAD]" in json.dumps(heatmaps[1]["x"])


@pytest.mark.slow
def test_masks_page_counts_gpt2_padding_from_the_mask(tiny):
    at = open_app("masks", model=tiny["gpt2"], text="the cat sat on the mat",
                  mask_batch="the cat sat on the mat\nthe dog")
    no_errors(at)
    titles, zs, _ = _batch_panels(at)
    n = int(round(np.sqrt(zs[0].size)))
    short = int(titles[1].split("len ")[1].split(" ")[0])
    assert short < n  # "<|endoftext|>" padding is not counted
    z = zs[1].reshape(n, n)
    assert (z[:, short:] == 1).all()  # padding columns blocked for every row
    assert (z[:short, :short] == np.triu(np.ones((short, short)), 1)).all()  # causal part


def test_masks_page_native_union_panel_is_the_models_mask(toy_path):
    at = open_app("masks", model=toy_path, text="the cat saw the dog",
                  mask_batch="the cat saw the dog\nthe dog")
    no_errors(at)
    titles, _, _ = _batch_panels(at)
    assert len(titles) == 2 and "len" in titles[1]


# ---- positional -------------------------------------------------------------------------


def test_positional_page_draws_the_whole_range_with_the_input_marked(toy_path):
    at = open_app("positional", model=toy_path, text="the red car")
    no_errors(at)
    curves = figs(at)[0]
    lines = [t for t in curves["data"] if t.get("mode") == "lines"]
    xs = z_of({"z": lines[0]["x"]})
    assert len(xs) > 10 and xs[0] == 0  # the table's range, not 4 points
    marks = [t for t in curves["data"] if t.get("mode") == "markers"]
    assert len(z_of({"z": marks[0]["x"]})) >= 3  # the input's positions
    at = open_app("positional", model=toy_path, text="the red car", pe_from=5, pe_to=9)
    no_errors(at)
    lines = [t for t in figs(at)[0]["data"] if t.get("mode") == "lines"]
    np.testing.assert_array_equal(z_of({"z": lines[0]["x"]}), [5, 6, 7, 8, 9])


@pytest.mark.slow
def test_positional_page_labels_marian_by_halves(tiny):
    at = open_app("positional", model=tiny["marian"], text="the cat")
    no_errors(at)
    names = [t["name"] for t in figs(at)[0]["data"] if t.get("mode") == "lines"]
    assert "dim 1 (sin)" in names and "dim 16 (cos)" in names, names
    assert any("first half" in c.value for c in at.caption)


# ---- home -------------------------------------------------------------------------------


def test_home_shows_a_card_not_raw_json(toy_path):
    at = open_app("home", model=toy_path, text="the cat")
    no_errors(at)
    assert not at.json  # no collapsed {...}
    table = at.dataframe[0].value
    assert "Parameters" in table["field"].tolist()
    assert [m.label for m in at.metric] == ["Layers", "Heads", "d_model", "Parameters"]
