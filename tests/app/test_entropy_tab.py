"""The "Head entropy" tab of Which heads matter (attention_lab/ui/tabs/entropy.py): the drawn
map is the library's head_entropy of the sidebar's text, in the chosen measure, and the
measure is kept in the address."""

from __future__ import annotations

import json

import numpy as np

import viz_core as vc
from tests.support.apptest import no_errors, open_app, z_of
from viz_core.figures.entropy import entropy_matrix

TEXT = "the cat saw the dog and the cat saw the"


def _map(at) -> np.ndarray:
    (fig,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return np.asarray(z_of(fig["data"][0]), dtype=np.float64)


def test_the_tab_draws_head_entropy_of_the_text_in_the_chosen_measure():
    at = open_app("heads_matter", model="lm", text=TEXT, tab="entropy")
    no_errors(at)
    frame = vc.load("lm", "cpu").head_entropy(TEXT)
    expected, _, _ = entropy_matrix(frame, "normalised")
    np.testing.assert_allclose(_map(at), expected, rtol=1e-6)  # float32 on the wire
    at.radio(key="ent_measure").set_value("entropy").run()
    no_errors(at)
    expected, _, _ = entropy_matrix(frame, "entropy")
    np.testing.assert_allclose(_map(at), expected, rtol=1e-6)
    assert at.query_params["ent_measure"] == "entropy"
    shared = open_app("heads_matter", model="lm", text=TEXT, tab="entropy",
                      ent_measure="entropy")  # the address alone gives the same view
    np.testing.assert_allclose(_map(shared), expected, rtol=1e-6)
