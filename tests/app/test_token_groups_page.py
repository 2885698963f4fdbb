"""The Attention page's "Tokens" control (issue 32 item 2) on a byte-level model trained here
on Chinese text: grouped by character, the cut characters are whole on the axes and the
heatmap is the grouped attention of the head; in the URL as `group`."""

from __future__ import annotations

import json

import numpy as np
import pytest

import viz_core as vc
from tests.support.apptest import no_errors, open_app, z_of
from tests.support.hf_tiny import ZH_TEXT, make_tiny_gpt2_zh
from viz_core.analysis.token_groups import group_label, grouped_attention, token_groups


@pytest.fixture(scope="module")
def zh_model(tmp_path_factory):
    return str(make_tiny_gpt2_zh(tmp_path_factory.mktemp("zh_gpt2_page") / "m"))


@pytest.mark.parametrize("by", ["character", "word"])
def test_grouped_heatmap_is_the_grouped_attention_of_the_head(zh_model, by):
    at = open_app("attention", model=zh_model, text=ZH_TEXT, layer=0, head=1, group=by)
    no_errors(at)
    trace = vc.load(zh_model, "cpu", dtype="float32").trace(ZH_TEXT, max_new=0)
    tokens = trace.target_tokens
    groups = token_groups(tokens, by)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    heat = fig["data"][0]
    want = grouped_attention(trace["decoder.0.self"].head(1), groups)
    # the page's figure and this reference: the same float64 sums, drawn as float32; blocked
    # cells (every token pair of a later key group) are NaN on the page, 0 here
    z = z_of(heat)
    assert np.isnan(z).any() and (want[np.isnan(z)] == 0).all()
    np.testing.assert_allclose(np.nan_to_num(z), want, atol=1e-6)
    labels = [group_label([tokens[i] for i in g]) for g in groups]
    assert "龘" in labels and not any("¹/" in lab for lab in labels)
    ticks = json.dumps(fig["layout"], ensure_ascii=False)
    assert "龘" in ticks and "龘¹/₃" not in ticks  # the axes show the whole character
    assert at.query_params["group"] in (by, [by])
    assert any("mean of its tokens' rows" in c.value for c in at.caption)


def test_token_view_is_the_default_and_scores_are_not_grouped(zh_model):
    at = open_app("attention", model=zh_model, text=ZH_TEXT)
    no_errors(at)
    assert at.selectbox(key="group").value == "token"
    at = open_app("attention", model=zh_model, text=ZH_TEXT, group="character", view="scores")
    no_errors(at)
    assert any("this is the token view" in c.value for c in at.caption)
