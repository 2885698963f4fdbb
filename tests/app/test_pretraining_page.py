"""The Pretraining objectives page (AppTest): every scheme on a native model, MiniLM and tiny
GPT-2 / T5 models; the order box, the k slider and the seed take hostile input."""

import json

import pytest

from tests.support.apptest import no_errors, open_app
from tests.support.hf_tiny import make_tiny_gpt2, make_tiny_t5
from tests.support.hostile_inputs import ONE_OF_EACH, sendable
from viz_core.training.toy import save_toy

SCHEMES = ["BERT masked LM", "RoBERTa dynamic masking", "Whole-word masking",
           "ERNIE entity/phrase masking", "GPT", "UniLM", "XLNet", "MASS",
           "T5 span corruption", "BART noising"]
TEXT = "the cat sat on the mat . the dog saw a red house ."


@pytest.fixture(scope="module")
def toy_path(tmp_path_factory):
    return str(save_toy(tmp_path_factory.mktemp("ckpt") / "toy", seed=2))


def figs(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_every_scheme_on_a_native_model(toy_path):
    at = open_app("pretraining", model=toy_path, text=TEXT)
    no_errors(at)
    for scheme in SCHEMES:
        at.selectbox(key="pt_scheme").set_value(scheme).run()
        no_errors(at)
        assert figs(at), scheme
        # the first objective is the default, which leaves the address
        assert at.query_params.get("pt_scheme") == (None if scheme == SCHEMES[0] else scheme)
    # BART: five noising functions, each with its masks
    assert len(at.get("plotly_chart")) == 5


def test_gpt_mask_is_causal_on_the_page(toy_path):
    at = open_app("pretraining", model=toy_path, text="a b c", pt_scheme="GPT")
    no_errors(at)
    z = figs(at)[0]["data"][0]["z"]
    assert z == [[0, 1, 1], [0, 0, 1], [0, 0, 0]] or "bdata" in z  # typed array or list


def test_xlnet_order_box_takes_an_order_and_refuses_junk(toy_path):
    at = open_app("pretraining", model=toy_path, text="a b c d", pt_scheme="XLNet")
    no_errors(at)
    at.text_input(key="pt_order").input("3 1 2 0").run()
    no_errors(at)
    assert not at.warning
    shown = figs(at)[0]
    assert "query stream" in json.dumps(shown)
    at.text_input(key="pt_order").input("0 0 1 2").run()
    no_errors(at)
    assert any("Order not used" in w.value for w in at.warning)


def test_seed_redraws_and_mass_k_limits(toy_path):
    at = open_app("pretraining", model=toy_path, text=TEXT, pt_scheme="BERT masked LM")
    before = at.dataframe[0].value.to_dict()
    at.number_input(key="pt_seed").set_value(7).run()
    no_errors(at)
    assert at.dataframe[0].value.to_dict() != before
    at = open_app("pretraining", model=toy_path, text="a b c d e", pt_scheme="MASS", pt_k=99)
    no_errors(at)
    assert at.number_input(key="pt_k").value == 5  # clamped to the sentence length
    table = at.dataframe[0].value
    assert table["tokens"].tolist()[1] == "[MASK] [MASK] [MASK] [MASK] [MASK]"


@pytest.mark.slow
def test_minilm_uses_its_wordpieces_without_specials():
    at = open_app("pretraining", model="minilm", text="Playing unbelievably well",
                  pt_scheme="Whole-word masking")
    no_errors(at)
    original = at.dataframe[0].value["original"].tolist()
    assert "[CLS]" not in original and "[SEP]" not in original
    assert any(t.startswith("##") for t in original)


@pytest.mark.slow
@pytest.mark.parametrize("make", [make_tiny_gpt2, make_tiny_t5])
def test_tiny_hf_models(make, tmp_path):
    path = str(make(tmp_path / "m"))
    for scheme in ("T5 span corruption", "XLNet", "UniLM"):
        at = open_app("pretraining", model=path, text="the cat sat on the mat.",
                      pt_scheme=scheme)
        no_errors(at)
        assert figs(at)


@pytest.mark.slow
def test_hostile_corpus_in_text_and_order_box(toy_path):
    for category, text in ONE_OF_EACH:
        text = sendable(text[:5000])  # what a URL can carry
        at = open_app("pretraining", model=toy_path, text=text, pt_scheme="XLNet",
                      pt_order=text[:200], pt_k=text[:20])
        assert not at.exception, (category, text[:40], [e.message for e in at.exception])
        assert not at.error, (category, text[:40])
        if figs(at):
            continue
        assert at.warning, (category, text[:40])  # empty text: a clear message
    at = open_app("pretraining", model=toy_path, text=TEXT, pt_scheme="MASS", pt_k="<b>")
    assert not at.exception
    assert any("not a number" in i.value for i in at.info)
