"""Issue 15's defects, each with a test that would have caught it: the Masks page with
Hugging Face models (pad tokens that are not "<pad>"), the Positional page's whole range,
Marian's half-split sin/cos labels and a readable model card on Home."""

import base64
import json

import numpy as np
import pytest

from attention_lab.ui.model_card import model_card_rows, model_metrics
from tests.hf_tiny import make_tiny_bart, make_tiny_gpt2, make_tiny_marian, make_tiny_roberta
from tests.test_app import no_errors, open_app
from viz_core.figures.masks import pad_columns, real_length
from viz_core.figures.positional import positional_curves, sinusoidal_table
from viz_core.lessons.positions import (
    find_offset,
    pair_of,
    sin_cos_labels,
    sinusoid_closed_form,
    sinusoid_layout,
    whole_table,
)
from viz_core.training.toy import save_toy

T, F = True, False


@pytest.fixture(scope="module")
def toy_path(tmp_path_factory):
    return str(save_toy(tmp_path_factory.mktemp("ckpt") / "toy", seed=2))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {name: str(make(root / name)) for name, make in
            (("gpt2", make_tiny_gpt2), ("marian", make_tiny_marian),
             ("roberta", make_tiny_roberta), ("bart", make_tiny_bart))}


def z_of(trace: dict) -> np.ndarray:
    """A plotly heatmap's z, whether a list or a typed array."""
    z = trace["z"]
    if isinstance(z, dict):
        dtype = {"u1": np.uint8, "f4": np.float32, "f8": np.float64, "i1": np.int8}[z["dtype"]]
        a = np.frombuffer(base64.b64decode(z["bdata"]), dtype=dtype)
        if "shape" in z:  # plotly writes "11, 11"
            a = a.reshape([int(x) for x in str(z["shape"]).split(",")])
        return a
    return np.asarray(z)


def figs(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


# ---- masks ----------------------------------------------------------------------------
def test_pad_columns_read_padding_not_causality():
    causal_pad = np.array([[F, T, T, T], [F, F, T, T], [F, F, T, T], [F, F, T, T]])
    np.testing.assert_array_equal(pad_columns(causal_pad), [F, F, T, T])
    assert real_length(causal_pad) == 2
    causal = np.triu(np.ones((3, 3), bool), 1)
    assert real_length(causal) == 3  # the last query sees every key
    assert real_length(np.zeros((2, 5), bool)) == 5


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
def test_sinusoid_layouts_by_closed_form():
    inter = sinusoidal_table(50, 16)
    assert sinusoid_layout(inter) == "interleaved"
    half = sinusoid_closed_form(50, 16, "half")
    assert sinusoid_layout(half) == "half"
    # by hand: PE(1, 0) = sin(1), PE(1, 8) = cos(1) in the half layout; PE(1, 1) = sin(1/10000^(2/16))
    assert half[1, 0] == pytest.approx(np.sin(1.0))
    assert half[1, 8] == pytest.approx(np.cos(1.0))
    assert half[1, 1] == pytest.approx(np.sin(10000 ** (-2 / 16)))
    assert sin_cos_labels(half)[:2] == ["sin", "sin"] and sin_cos_labels(half)[8] == "cos"
    assert sin_cos_labels(inter)[:2] == ["sin", "cos"]
    assert sinusoid_layout(np.random.default_rng(0).normal(size=(50, 16))) is None
    assert pair_of(1, 16, "half") == 9 and pair_of(1, 16, "interleaved") == 0
    odd = sinusoid_closed_form(10, 5, "half")
    assert odd.shape == (10, 5) and sinusoid_layout(odd) == "half"


def test_find_offset():
    table = np.arange(20, dtype=np.float32).reshape(10, 2)
    assert find_offset(table, table[2:5]) == 2
    assert find_offset(table, table[0:3]) == 0
    assert find_offset(table, table[0:3] + 1) is None


def test_curves_label_marian_dims_by_half_and_mark_the_input():
    table = sinusoid_closed_form(40, 8, "half")
    fig = positional_curves(table, [1, 4], sinusoidal=True, start=0, marks=["a", "<b>", "c"])
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names == ["dim 1 (sin)", "dim 4 (cos)"]  # parity would say "dim 1 (cos)"
    marks = [t for t in fig.data if t.mode == "markers"]
    assert list(marks[0].x) == [0, 1, 2] and "&lt;b>" in list(marks[0].text)


@pytest.mark.slow
def test_whole_tables_of_hf_models_with_their_offsets(tiny):
    import viz_core as vc

    for name, offset_word, layout in (("marian", "", "half"), ("roberta", "from row 2", None),
                                      ("bart", "from row 2", None)):
        m = vc.load(tiny[name])
        tr = m.trace("the cat sat on the mat")
        full, where = whole_table(m, tr.positional)
        assert full.shape[0] == 64, name  # the model's whole range, not the input's 7 rows
        np.testing.assert_allclose(full[: len(tr.positional)], tr.positional, atol=1e-6)
        assert offset_word in where
        assert sinusoid_layout(full) == layout


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
def test_model_card_rows_are_readable():
    info = {"name": "x", "kind": "encoder-only", "parameters": 22713216, "scores": True,
            "heads": 12, "layers": 6, "decoder_layers": 0, "d_model": 384, "path": None}
    rows = {r["field"]: r["value"] for r in model_card_rows(info, {"trained_steps": 3422})}
    assert rows["Parameters"] == "22,713,216"
    assert rows["Pre-softmax scores"] == "yes"
    assert rows["Kind"].startswith("encoder only")
    assert rows["Loaded from"] == "—"
    assert rows["Trained steps"] == "3422"
    assert model_metrics(info) == [("Layers", "6"), ("Heads", "12"), ("d_model", "384"),
                                   ("Parameters", "22.7 M")]
    assert model_metrics({"kind": "encoder-decoder", "layers": 2, "decoder_layers": 2,
                          "parameters": 908381})[0] == ("Layers", "2 + 2")


def test_home_shows_a_card_not_raw_json(toy_path):
    at = open_app("home", model=toy_path, text="the cat")
    no_errors(at)
    assert not at.json  # no collapsed {...}
    table = at.dataframe[0].value
    assert "Parameters" in table["field"].tolist()
    assert [m.label for m in at.metric] == ["Layers", "Heads", "d_model", "Parameters"]
