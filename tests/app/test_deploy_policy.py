"""Models a user can point at: the deployment policy, hostile checkpoints, limits.

- ATTENTION_LAB_* settings (or .streamlit/secrets) restrict names and sizes, checked before
  anything is read or allocated;
- corrupt or hostile checkpoints give a clear message in the app, which keeps working;
- Hugging Face models never run remote code; pickles are never unpickled;
- limits (beam size, max length, URL values) are clamped or refused with a message.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import viz_core as vc
from tests.support.apptest import APP
from tests.support.hostile_checkpoints import hostile_checkpoints
from viz_core.training.toy import save_toy

ENV = ("ATTENTION_LAB_ALLOWED_MODELS", "ATTENTION_LAB_ALLOW_LOCAL_PATHS",
       "ATTENTION_LAB_ALLOW_HUB", "ATTENTION_LAB_MAX_MODEL_MB", "ATTENTION_LAB_MAX_PARAMETERS")
SHIPPED = vc.shipped_models()[0]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in ENV:
        monkeypatch.delenv(key, raising=False)
    from viz_core.loading.policy import set_default_policy

    set_default_policy(None)
    yield
    set_default_policy(None)


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    return save_toy(tmp_path_factory.mktemp("ckpt") / "toy", seed=3)


# ---- parsing ----------------------------------------------------------------------------


# ---- names: refused before anything is read ------------------------------------------------


# ---- sizes: refused before allocation ------------------------------------------------------


# ---- hostile checkpoints -----------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    return root, hostile_checkpoints(root)


def test_app_shows_hostile_checkpoints_and_keeps_working(hostile):
    root, cases = hostile
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = SHIPPED
    at.switch_page("pages/attention.py")
    at.run()
    assert not at.exception and at.get("plotly_chart")
    for name, (path, _) in cases.items():
        at.selectbox(key="model_pick").set_value("Other (path or Hub id)…").run()
        at.text_input(key="model_custom").set_value(str(path)).run()
        assert not at.exception, (name, [e.message for e in at.exception])
        assert at.error and at.error[0].value.strip(), name
        assert not any("Something went wrong" in e.value for e in at.error), name
        # told in the sidebar, next to the name, and in the main area, which is otherwise empty
        told = [e.value for e in at.sidebar.error]
        assert told and told == [e.value for e in at.main.error], name
        at.selectbox(key="model_pick").set_value(SHIPPED).run()  # the app still works
        assert not at.exception and not at.error and at.get("plotly_chart"), name
    assert not (root / "UNPICKLED").exists()


def test_a_card_whose_examples_are_not_texts(toy, tmp_path):
    """A card.json is a file anyone writes: examples that are not texts (null, a number, a
    list of numbers or objects) crashed every page ("This app has encountered an error");
    now only the entries that are text are examples, and every page opens."""
    import json
    import shutil

    for i, examples in enumerate((None, 5, [1, {"a": 1}, "the cat sat", " "], "the dog")):
        folder = tmp_path / f"toy{i}"
        shutil.copytree(toy, folder)
        card = json.loads((folder / "card.json").read_text())
        (folder / "card.json").write_text(json.dumps({**card, "examples": examples}))
        texts = [] if i < 2 else (["the cat sat"] if i == 2 else ["the dog"])
        assert vc.load(str(folder)).examples() == texts
        for page in ("home", "attention"):
            at = open_app(page, model=str(folder))
            assert not at.exception, (examples, page, [e.message for e in at.exception])


# ---- the policy in the app ------------------------------------------------------------------
def open_app(page="attention", secrets=None, **params):
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in (secrets or {}).items():
        at.secrets[key] = value
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(f"pages/{page}.py")
    return at.run()


def test_app_allow_list_limits_the_model_box(monkeypatch, toy):
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_MODELS", SHIPPED)
    at = open_app(model=str(toy))
    assert not at.exception
    options = at.selectbox(key="model_pick").options  # as shown: "name — description"
    assert len(options) == 1 and options[0].startswith(SHIPPED)
    assert any("does not allow" in i.value for i in at.info)
    assert at.get("plotly_chart")  # the allowed model is shown instead


def test_app_secrets_switch_off_local_paths(toy):
    at = open_app(secrets={"attention_lab": {"allow_local_paths": False, "allow_hub": False}},
                  model=str(toy))
    assert not at.exception
    assert not any(o.startswith("Other") for o in at.selectbox(key="model_pick").options)
    assert any("does not allow" in i.value for i in at.info)


def test_app_size_cap_message(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MAX_MODEL_MB", "1")
    at = open_app(model="minilm")
    assert not at.exception
    assert any("MB" in e.value and "allows at most" in e.value for e in at.error)


# ---- limits ----------------------------------------------------------------------------------
def test_beam_limits_are_clamped_with_a_notice():
    gen = next((m for m in vc.shipped_models() if vc.load(m).can_generate), None)
    if gen is None:
        pytest.skip("no shipped generating model")
    at = open_app("beam", model=gen, text="9 may 2018", beam="99", max_len="100000")
    assert not at.exception
    assert at.number_input(key="beam").value == 16 and at.number_input(key="max_len").value == 256
    assert sum("out of range" in i.value for i in at.info) >= 2
    model = vc.load(gen)
    for kwargs in ({"beam_size": 17}, {"max_len": 257}, {"beam_size": 0}):
        with pytest.raises(vc.InputError):
            model.beam_search("9 may 2018", **kwargs)


def test_compare_has_exactly_two_panes():
    at = open_app("compare", model=SHIPPED, text="9 may 2018", text_b="10 june 2019")
    assert not at.exception
    keys = [c.proto.id for c in at.get("plotly_chart")]
    assert len(keys) in (2, 3)  # left, right (+ their difference)
