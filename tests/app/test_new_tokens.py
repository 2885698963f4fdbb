"""New tokens for decoder-only models (issue 24, item 2): the sidebar control, the URL value
``new``, the cache key, 0 = the prompt alone, and each backend's default (the shipped toys
continue their prompt; a loaded HF decoder is traced on the prompt alone when generating
would cost more than the trace, and says so)."""

from __future__ import annotations

import pytest

from tests.support.apptest import heatmap_z, no_errors, open_app

TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def llama(tiny_models):
    return tiny_models.load("llama", seed=1)  # (model, path)


def z_rows(z) -> int:
    return int(z["shape"].split(",")[0]) if isinstance(z, dict) else len(z)


# ---- backends ------------------------------------------------------------------------------


# ---- the request carries it ------------------------------------------------------------------


# ---- the app ------------------------------------------------------------------------------
def test_control_for_decoders_only_and_two_values_are_two_runs():
    at = open_app("attention", model="lm", text="the cat", new=0)
    no_errors(at)
    box = at.number_input(key="max_new")
    assert box.value == 0
    rows_alone = z_rows(heatmap_z(at)[0])
    assert rows_alone == 3  # <bos> the cat
    box.set_value(4).run()
    no_errors(at)
    assert 3 < z_rows(heatmap_z(at)[0]) <= 7
    assert at.query_params["new"] in ("4", ["4"])
    box.set_value(None).run()  # empty: the toy's own default, which continues
    no_errors(at)
    assert z_rows(heatmap_z(at)[0]) > 3 and "new" not in at.query_params
    enc_dec = open_app("attention", model="en-fr", text="the cat")
    no_errors(enc_dec)
    assert not [w for w in enc_dec.number_input if w.key == "max_new"]


def test_app_default_for_a_loaded_decoder_says_it_skipped_generation(llama):
    _, path = llama
    at = open_app("attention", model=str(path), text=TEXT)
    no_errors(at)
    assert at.number_input(key="max_new").value is None
    assert any("prompt alone" in w.value for w in at.warning)
    at.number_input(key="max_new").set_value(3).run()
    no_errors(at)
    assert not any("prompt alone" in w.value for w in at.warning)


@pytest.mark.parametrize("raw, shown, says", [
    ("-5", 0, "out of range"),
    ("99999999999999999999", 256, "out of range"),  # MAX_NEW_TOKENS
    ("abc", None, "not a number"),
    ("<script>alert(1)</script>", None, "not a number"),
    ("2.5", None, "not a number"),
    (" 2 ", 2, None),
    ("", None, None),
])
def test_hostile_url_values(raw, shown, says):
    from attention_lab.ui.generation import MAX_NEW_TOKENS

    assert MAX_NEW_TOKENS == 256
    at = open_app("attention", model="lm", text="the cat", new=raw)
    no_errors(at)
    assert at.number_input(key="max_new").value == shown
    infos = " ".join(i.value for i in at.info)
    if says:
        assert says in infos and "<script>" not in infos
