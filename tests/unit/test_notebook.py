"""The notebook face: trace.show(), block.show(head), block.head_view(heads), model.show_beam
return the same plotly figures as the figure builders the app uses, and docs/quickstart.ipynb
promises every figure (it runs cell by cell on a real kernel, nbclient + ipykernel, in
tests/unit/test_package.py: on the fresh venv's kernel, with the wheel of this clone)."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

import viz_core as vc
from tests.support.notebook import NOTEBOOK, PLOTLY_MIME
from viz_core import figures
from viz_core.capture.trace import BlockTrace

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def en_fr():
    model = vc.load("en-fr", device="cpu")
    return model, model.trace("the small black cats eat the cake")


def same_figure(a: go.Figure, b: go.Figure) -> bool:
    return a.to_json() == b.to_json()


# ---- the methods -------------------------------------------------------------------------
def test_trace_show_is_the_grid_of_the_last_kind(en_fr):
    _, trace = en_fr
    fig = trace.show()
    assert isinstance(fig, go.Figure)
    assert trace.kinds()[-1] == "decoder.cross"
    ref = figures.trace_grid(trace, "decoder.cross", title="decoder.cross: layers × heads")
    assert same_figure(fig, ref)
    enc = trace.show("encoder.self")
    assert same_figure(enc, figures.trace_grid(trace, "encoder.self",
                                               title="encoder.self: layers × heads"))
    with pytest.raises(ValueError, match="no 'decoder.bogus' blocks"):
        trace.show("decoder.bogus")


def test_block_show_is_one_heads_heatmap(en_fr):
    _, trace = en_fr
    block = trace["decoder.1.cross"]
    for head in (0, block.n_heads - 1):
        fig = block.show(head=head)
        assert same_figure(fig, figures.block_heatmap(block, head))
        # the drawn matrix is the head's own pattern (queries = rows, keys = columns)
        np.testing.assert_array_equal(np.asarray(fig.data[0].z, dtype=np.float32),
                                      block.head(head))
    assert same_figure(block.show(1, view="scores"), figures.block_heatmap(block, 1, "scores"))
    with pytest.raises(IndexError, match="no head 9"):
        block.show(head=9)
    with pytest.raises(ValueError, match="weights' or 'scores"):
        block.show(0, view="bogus")


def test_block_show_pools_a_long_input():
    # 1 head over 1,100 tokens: past the exact limit (1,024), drawn as block means
    rng = np.random.default_rng(0)
    n = 1100
    logits = rng.standard_normal((1, n, n)).astype(np.float32)
    pattern = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    tokens = [f"t{i}" for i in range(n)]
    block = BlockTrace("encoder.0.self", pattern=pattern.astype(np.float32),
                       mask=np.zeros((n, n), dtype=bool), query_tokens=tokens, key_tokens=tokens)
    fig = block.show(0)
    assert same_figure(fig, figures.heatmap.block_pooled_heatmap(block, 0))
    assert "block means" in fig.layout.title.text
    assert np.asarray(fig.data[0].z).shape[0] < n


def test_head_view_draws_the_chosen_heads(en_fr):
    _, trace = en_fr
    block = trace["encoder.1.self"]
    fig = block.head_view(heads=[0, 2])
    assert same_figure(fig, figures.block_head_view(block, [0, 2]))
    names = {t.name for t in fig.data if t.name}
    assert any("0" in n for n in names) and any("2" in n for n in names)
    with pytest.raises(IndexError):
        block.head_view(heads=[7])


def test_show_beam_draws_the_models_beam_search(en_fr, tmp_path):
    model, _ = en_fr
    fig = model.show_beam("the red car", beam_size=3, max_len=10)
    tree = model.beam_search("the red car", beam_size=3, max_len=10)
    assert same_figure(fig, figures.beam_tree_figure(tree))
    # the best hypothesis's words are on the drawing
    labels = " ".join(str(t) for tr in fig.data if tr.text is not None for t in tr.text)
    assert all(w in labels for w in tree.hypotheses[0].tokens if w.isalpha())
    out = tmp_path / "beam.html"
    fig.write_html(out)  # a script's way to keep it
    assert "plotly" in out.read_text(encoding="utf-8").lower()


def test_figures_display_themselves_in_jupyter(en_fr, monkeypatch):
    """A cell's value is shown through _repr_mimebundle_: under Jupyter's renderer (plotly
    picks it in a kernel) the bundle carries the figure's own JSON."""
    import plotly.io as pio

    _, trace = en_fr
    fig = trace["decoder.0.cross"].show(head=1)
    monkeypatch.setattr(pio.renderers, "default", "plotly_mimetype")
    bundle = fig._repr_mimebundle_(include=None, exclude=None)
    z = bundle[PLOTLY_MIME]["data"][0]["z"]  # plotly's typed array: base64 of float32
    shape = tuple(int(n) for n in z["shape"].split(","))
    shown = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape)
    np.testing.assert_array_equal(shown, trace["decoder.0.cross"].head(1))


# ---- the notebook ------------------------------------------------------------------------


def test_notebook_promises_the_issues_figures():
    """The tagged figure cells cover the heatmap, the grid, the head view, the beam tree and
    your own model (checked on the source, so a removed cell cannot pass unnoticed)."""
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    figure_src = "\n".join(c.source for c in nb.cells
                           if "figure" in c.get("metadata", {}).get("tags", []))
    for call in (".show(head=", "trace.show()", ".head_view(", ".show_beam(",
                 'vc.load("minilm")', "vc.load(str(folder))"):
        assert call in figure_src, call
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "vc.load(\"en-fr\")" in code and "trace_npz" in code and "save_pretrained" in code
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "commit the notebook without outputs"


