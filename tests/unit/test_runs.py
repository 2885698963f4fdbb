"""ui.runs: typed requests are their own cache keys; equal choices share one cached run."""

import hashlib
from dataclasses import FrozenInstanceError

import pytest
from streamlit.runtime.caching.cache_type import CacheType
from streamlit.runtime.caching.hashing import update_hash

from attention_lab.ui import runs
from attention_lab.ui.runs import BatchRequest, BeamRequest, TraceRequest, freeze_ablation
from viz_core.training.toy import save_toy


def streamlit_key(value) -> str:
    """The hash st.cache_resource computes for this argument."""
    hasher = hashlib.md5()
    update_hash(value, hasher, cache_type=CacheType.RESOURCE)
    return hasher.hexdigest()


class Sel:  # the parts of ui.sidebar.Selection a request reads
    model_name, device, text, target = "toy", "cpu", "the cat", None


def test_requests_are_frozen_hashable_and_normalised():
    a = TraceRequest("m", "cpu", "x", "", capture=["pattern"],
                     ablate={"encoder.1.self": [3, 0], "encoder.0.self": [2]})
    b = TraceRequest("m", "cpu", "x", None, capture=("pattern",),
                     ablate=(("encoder.0.self", (2,)), ("encoder.1.self", (0, 3))))
    assert a == b and hash(a) == hash(b)
    assert a.target is None and a.ablate == (("encoder.0.self", (2,)), ("encoder.1.self", (0, 3)))
    assert streamlit_key(a) == streamlit_key(b)
    assert streamlit_key(a) != streamlit_key(TraceRequest("m", "cpu", "x"))
    with pytest.raises(FrozenInstanceError):
        a.text = "y"
    with pytest.raises(TypeError):  # a misspelt option is an error, not a silent new key
        TraceRequest.of(Sel, captures=("pattern",))
    assert BatchRequest.of(Sel, ["a", "b"]).sentences == ("a", "b")
    assert freeze_ablation(None) == () == freeze_ablation({})


def test_options_are_the_backend_keywords():
    assert TraceRequest.of(Sel).options() == {}  # the backend's defaults: every hook point
    req = TraceRequest.of(Sel, capture=("pattern",), ablate={"encoder.0.self": (1, 0)},
                          blocks=("decoder.cross",), max_new=5, pair="a dog")
    assert req.options() == {"capture": ("pattern",), "ablate": {"encoder.0.self": [0, 1]},
                             "blocks": ["decoder.cross"], "max_new": 5, "pair": "a dog"}
    assert TraceRequest.of(Sel, pair="") == TraceRequest.of(Sel)
    beam = BeamRequest.of(Sel, beam_size=3, max_new_tokens=7, prefix="")
    assert beam.options() == {"beam_size": 3, "max_len": 7, "length_penalty": 1.0,
                              "early_stopping": False, "prefix": None}
    assert beam.greedy().beam_size == 1 and beam.greedy().max_new_tokens == 7
    assert "ablate" in BeamRequest.of(Sel, ablate={"decoder.0.self": [0]}).options()


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return str(save_toy(tmp_path_factory.mktemp("ckpt") / "toy", seed=2))


def test_equal_requests_share_one_cached_run(toy):
    req = TraceRequest(toy, "cpu", "the cat saw the dog")
    first = runs.get_trace(req)
    assert runs.get_trace(TraceRequest(toy, "cpu", "the cat saw the dog", "")) is first
    ablated = runs.get_trace(TraceRequest(toy, "cpu", "the cat saw the dog",
                                          ablate={"encoder.0.self": [0, 1]}))
    assert ablated is not first
    assert ablated.output_text is not None
    light = runs.get_trace(TraceRequest(toy, "cpu", "the cat saw the dog", capture=("pattern",)))
    assert light is not first and light.blocks == first.blocks
    tree = runs.get_beam(BeamRequest(toy, "cpu", "the cat", beam_size=2, max_new_tokens=3))
    assert runs.get_beam(BeamRequest(toy, "cpu", "the cat", beam_size=2, max_new_tokens=3)) \
        is tree
    assert len(tree.hypotheses) == 2
