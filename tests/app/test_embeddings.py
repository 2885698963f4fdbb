"""BERT's input split into token + segment + position rows (viz_core.lessons.embeddings), against
the models' own embedding modules, and the Sentence pairs page."""

import json

import pytest

from tests.support.apptest import no_errors, open_app
from tests.support.hostile_inputs import ONE_OF_EACH, sendable
from viz_core.training.toy import save_toy


@pytest.mark.slow
def test_pairs_page_on_minilm():
    at = open_app("pairs", model="minilm", text="The cat sat on the mat.",
                  pair="It was very tired.")
    no_errors(at)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(fig["layout"]["shapes"]) == 4
    table = at.dataframe[0].value
    assert table["segment"].tolist()[-1] == "B"
    assert table["token"].tolist().count("[SEP]") == 2
    at.text_input(key="pair").input("").run()
    no_errors(at)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(fig["layout"]["shapes"]) == 2  # one segment
    at.selectbox(key="pair_token").set_value(3).run()
    no_errors(at)


def test_pairs_page_explains_itself_on_other_models(tmp_path):
    at = open_app("pairs", model=str(save_toy(tmp_path / "toy", seed=1)), text="the cat")
    no_errors(at)
    assert any("encoder-only" in i.value for i in at.info)


@pytest.mark.slow
def test_pairs_page_takes_the_hostile_corpus_as_second_sentence():
    for category, text in ONE_OF_EACH:
        at = open_app("pairs", model="minilm", text="the cat", pair=sendable(text[:3000]))
        assert not at.exception, (category, [e.message for e in at.exception])
        assert not at.error, (category, text[:30], [e.value for e in at.error])
