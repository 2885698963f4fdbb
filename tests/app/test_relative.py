"""Relative positions: T5's buckets and bias against transformers' own T5 code and by hand;
the toy Transformer-XL split against its closed form."""

import pytest


# ---- the page ---------------------------------------------------------------------------
def test_relative_page_on_a_native_model_and_hostile_text(tmp_path):
    import json

    from tests.support.apptest import no_errors, open_app
    from tests.support.hostile_inputs import CORPUS, sendable
    from viz_core.training.toy import save_toy

    toy = str(save_toy(tmp_path / "toy", seed=1))
    at = open_app("relative", model=toy, text="the cat sat on the mat")
    no_errors(at)
    assert any("T5 model" in i.value for i in at.info)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len([t for t in fig["data"] if t["type"] == "heatmap"]) == 5
    for category, text in CORPUS[::3]:
        at = open_app("relative", model=toy, text=sendable(text[:2000]))
        assert not at.exception, category
        assert not at.error, category


@pytest.mark.slow
def test_relative_page_on_a_tiny_t5(tmp_path):
    import json

    from tests.support.apptest import no_errors, open_app
    from tests.support.hf_tiny import make_tiny_t5

    path = str(make_tiny_t5(tmp_path / "t5"))
    at = open_app("relative", model=path, text="the cat sat on the mat", rel_n=6)
    no_errors(at)
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    # T5 bias map, bias by distance, Transformer-XL terms, then the order-blindness tab's
    assert len(figs) == 3 + 1 + 4
    curves = [t for t in figs[1]["data"] if t.get("mode") == "lines"]
    assert len(curves) == 4  # one per head
    at.selectbox(key="rel_stack").set_value("decoder").run()
    no_errors(at)
    assert at.query_params["rel_stack"] in ("decoder", ["decoder"])
