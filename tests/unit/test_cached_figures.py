"""runs.cached_figure: a figure is built once per (request, name, params) and keeps its plotly
dict (runs.SharedFigure), so showing it again on a head switch costs only its JSON; what
st.plotly_chart sends is the same as for the figure built afresh, and nothing a page does
with the shared dict (outline_cell's copy) changes it."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from attention_lab.ui import runs
from attention_lab.ui.runs import SharedFigure, TraceRequest, cached_figure
from viz_core.figures.cells import clickable_cells, outline_cell
from viz_core.figures.heatmap import matrix_heatmap


def heatmap() -> go.Figure:
    z = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]
    tokens = ["0·the", "1·cat", "2·sat"]
    return clickable_cells(matrix_heatmap(z, tokens, tokens, title="toy · head 0 · weights"))


@pytest.fixture
def request_():
    runs._figure.clear()
    yield TraceRequest("toy", "cpu", "the cat sat")
    runs._figure.clear()


def test_built_once_and_its_dict_kept(request_):
    built = []

    def build():
        built.append(1)
        return heatmap()

    fig = cached_figure(request_, "heatmap", ("b", 0), build)
    again = cached_figure(request_, "heatmap", ("b", 0), build)
    assert again is fig and built == [1]
    assert isinstance(fig, SharedFigure)
    assert fig.to_dict() is fig.to_dict()  # no copy per run
    cached_figure(request_, "heatmap", ("b", 1), build)  # other parameters: built again
    assert built == [1, 1]


def test_what_is_sent_is_the_figure_built_afresh(request_):
    import plotly.tools

    fig = cached_figure(request_, "heatmap", ("b", 0), heatmap)
    # what st.plotly_chart does with a figure: to_dict, then plotly's JSON
    sent = pio.to_json(plotly.tools.return_figure_from_figure_or_data(fig, True),
                       validate=False)
    assert json.loads(sent) == json.loads(pio.to_json(heatmap().to_dict(), validate=False))


def test_a_framed_copy_leaves_the_shared_figure_as_it_was(request_):
    fig = cached_figure(request_, "heatmap", ("b", 0), heatmap)
    before = json.dumps(fig.to_dict(), sort_keys=True, default=str)
    framed = outline_cell(fig, 2, 1)
    assert framed is not fig and len(framed.layout.shapes) == 1
    assert json.dumps(fig.to_dict(), sort_keys=True, default=str) == before
    assert not fig.layout.shapes
