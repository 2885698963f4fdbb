"""Issue 14's views in the app (AppTest), on tiny Llama / Mistral / Gemma 2 / ALBERT models and
the shipped ones: layer-to-layer similarity (ALBERT's shared weights highlighted), key/value
groups on Head analysis (within/across table, a whole group switched off), each layer's real
mask on Masks (local window / global), Gemma 2's softcap on Inside a head."""

from __future__ import annotations

import json

import pytest

from tests.support.apptest import no_errors, open_app

TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return lambda family: str(tiny_models.path(family, seed=1))


def titles(at) -> list[str]:
    return [json.dumps(json.loads(c.proto.spec).get("layout", {}).get("title"))
            for c in at.get("plotly_chart")]


def z_shape(z) -> tuple[int, ...]:
    """Shape of a heatmap's z, sent as nested lists or as plotly's typed array."""
    if isinstance(z, dict):
        return tuple(int(n) for n in z["shape"].split(","))
    return (len(z), len(z[0]))


def subheaders(at) -> list[str]:
    return [s.value for s in at.subheader]


# ---- Head analysis -----------------------------------------------------------------------
def test_heads_albert_layer_to_layer_highlights_shared_weights(tiny):
    at = open_app("heads", model=tiny("albert"), text=TEXT)
    no_errors(at)
    assert "From one layer to the next" in subheaders(at)
    assert any("Shared weights" in i.value for i in at.info)
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if "one layer to the next" in json.dumps(json.loads(c.proto.spec)["layout"]))
    assert z_shape(spec["data"][0]["z"]) == (2, 5)  # 3 layers -> 2 steps; 4 heads + mean
    assert "Key/value groups (grouped-query attention)" not in subheaders(at)  # plain MHA


def test_heads_llama_kv_groups_table_and_group_ablation(tiny):
    at = open_app("heads", model=tiny("llama"), text=TEXT)
    no_errors(at)
    assert "Key/value groups (grouped-query attention)" in subheaders(at)
    assert any("kv 0: heads 0-1; kv 1: heads 2-3" in c.value for c in at.caption)
    table = next(d.value for d in at.dataframe if "within" in d.value.columns)
    assert list(table["layer"]) == [0, 1] and list(table["groups"]) == [2, 2]
    assert (table["within"] >= 0).all() and (table["across"] >= 0).all()
    assert not any("Shared weights" in i.value for i in at.info)
    group = at.selectbox(key="ablate_group")
    assert group.options[1] == "decoder.0.self · kv 1: heads 2-3"
    group.set_value(group.options[1]).run()
    no_errors(at)
    assert at.multiselect(key="ablate_heads").value == ["decoder.0.self:2", "decoder.0.self:3"]
    assert at.selectbox(key="ablate_group").value is None
    assert at.query_params["ablate"] in ("decoder.0.self:2,decoder.0.self:3",
                                         ["decoder.0.self:2,decoder.0.self:3"])
    assert any("ablated" in t for t in titles(at))
    # a second group adds its heads; the ones already chosen stay once
    at.selectbox(key="ablate_group").set_value("decoder.1.self · kv 0: heads 0-1").run()
    no_errors(at)
    assert at.multiselect(key="ablate_heads").value == [
        "decoder.0.self:2", "decoder.0.self:3", "decoder.1.self:0", "decoder.1.self:1"]


def test_heads_shipped_models_have_no_group_choice_and_compare_layers():
    at = open_app("heads", model="minilm", text="The quick brown fox.")
    no_errors(at)
    assert "From one layer to the next" in subheaders(at)
    assert not any("Shared weights" in i.value for i in at.info)
    assert not at.get("selectbox") or all(s.key != "ablate_group" for s in at.selectbox)


# ---- Masks -------------------------------------------------------------------------------
def mask_layer_table(at):
    return next(d.value for d in at.dataframe if "attention" in d.value.columns)


@pytest.mark.parametrize("family, labels", [
    ("gemma2", ["local, window 4", "global"]),
    ("mistral", ["local, window 4", "local, window 4"]),
    ("llama", ["global", "global"]),
])
def test_masks_page_shows_each_layers_real_mask(tiny, family, labels):
    at = open_app("masks", model=tiny(family), text=TEXT)
    no_errors(at)
    assert "This model's masks per layer" in subheaders(at)
    assert list(mask_layer_table(at)["attention"]) == labels
    assert any("each layer" in t for t in titles(at))
    first = "decoder.0.self: " + labels[0]
    assert any(c.value == first for c in at.caption)
    if family == "gemma2":  # the block picker follows: layer 1 is global
        at.selectbox(key="mask_block").set_value("decoder.1.self").run()
        no_errors(at)
        assert any(c.value == "decoder.1.self: global" for c in at.caption)
        assert any("sliding window" not in t and "union" in t for t in titles(at))
    if family == "mistral":
        assert any("sliding window of 4" in t for t in titles(at))


def test_masks_page_per_layer_on_shipped_models():
    at = open_app("masks", model="lm", text="the cat")
    no_errors(at)
    table = mask_layer_table(at)
    assert len(table) >= 1 and set(table["attention"]) == {"global"}
    at = open_app("masks", model="minilm", text="The quick brown fox.")
    no_errors(at)
    assert "This model's masks per layer" not in subheaders(at)  # an encoder: no such view


# ---- Inside a head -------------------------------------------------------------------------
def test_inside_gemma2_shows_scores_before_and_after_the_softcap(tiny):
    at = open_app("inside", model=tiny("gemma2"), text=TEXT, query=4)
    no_errors(at)
    assert any("softcapping" in i.value for i in at.info)
    spec = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(spec) == 10
    cap = next(s for s in spec if "softcap" in json.dumps(s["layout"].get("title")))
    before = cap["data"][2]["y"]
    at.selectbox(key="query").set_value(7).run()
    no_errors(at)
    cap = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
               if "softcap" in json.dumps(json.loads(c.proto.spec)["layout"].get("title")))
    assert cap["data"][2]["y"] != before  # another query: other keys, other scores


@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_inside_gqa_names_the_shared_kv_head_and_has_no_softcap(tiny, family):
    at = open_app("inside", model=tiny(family), text=TEXT, head=3)
    no_errors(at)
    assert any("head 3 reads key/value head 1, shared with heads 2, 3" in c.value
               for c in at.caption)
    assert len(at.get("plotly_chart")) == 9
    assert not any("softcapping" in i.value for i in at.info)


def test_inside_shipped_lm_is_unchanged():
    at = open_app("inside", model="lm", text="the cat")
    no_errors(at)
    assert len(at.get("plotly_chart")) == 9
    assert not any("Grouped-query" in c.value for c in at.caption)


# ---- hostile input on the new views --------------------------------------------------------
HOSTILE_CATEGORIES = ("empty", "huge", "emoji", "control", "surrogate", "script", "latex", "rtl")


@pytest.mark.parametrize("page", ["heads", "masks", "inside"])
def test_new_views_answer_hostile_text_on_tiny_gemma2(tiny, page):
    from tests.support.apptest import assert_answered, type_text
    from tests.support.hostile_inputs import CORPUS

    at = open_app(page, model=tiny("gemma2"), text=TEXT)
    no_errors(at)
    seen = set()
    for category, text in CORPUS:
        if category not in HOSTILE_CATEGORIES or category in seen:
            continue
        seen.add(category)
        at = type_text(at, text)
        assert_answered(at, page, "gemma2", category, text)
    assert seen == set(HOSTILE_CATEGORIES)


# ---- Attention page: local/global caption, kv groups on the grid ---------------------------
def test_attention_labels_local_and_global_layers_and_groups_the_grid(tiny):
    at = open_app("attention", model=tiny("gemma2"), text=TEXT)
    no_errors(at)
    assert any(c.value == "layer 0: local (window 4)" for c in at.caption)
    grid = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if "All layers" in json.dumps(json.loads(c.proto.spec)["layout"].get("title")))
    labels = [a["text"] for a in grid["layout"].get("annotations", [])]
    assert "kv 0: heads 0-1" in labels and "kv 1: heads 2-3" in labels
    at.number_input(key="layer").set_value(1).run()
    no_errors(at)
    assert any(c.value == "layer 1: global" for c in at.caption)
    at = open_app("attention", model=tiny("llama"), text=TEXT)  # no local layers: no label
    no_errors(at)
    assert not any(c.value.startswith("layer 0:") for c in at.caption)


@pytest.mark.parametrize("family", ["mistral", "gemma3_text"])
def test_head_search_opens_on_a_key_the_last_query_can_see(tiny, family):
    """A sliding window of 4 hides key 0 from the last query: the pair picker starts on the
    first key that query sees (it started on key 0, and the tab opened on an error), and a
    key outside the window says so, naming the keys it may pick."""
    at = open_app("heads_matter", model=tiny(family), text=TEXT, tab="search")
    no_errors(at)
    q, k = at.selectbox(key="hs_q").value, at.selectbox(key="hs_k").value
    assert (q, k) == (len(at.selectbox(key="hs_q").options) - 1, q - 3)
    assert at.dataframe and len(at.dataframe[0].value)
    at.selectbox(key="hs_k").set_value(0).run()
    assert not at.exception
    assert [e.value.replace("\\", "") for e in at.error] == [  # (shown literally: escaped)
        f"Query {q} may not attend to key 0 in these blocks: their sliding window lets a query "
        f"see only itself and the 3 keys before it. Pick a key from {q - 3} to {q}."]
