"""Model size known before loading (safetensors headers) and where a model is placed."""

from __future__ import annotations

import pytest

import viz_core as vc
from viz_core.errors import ModelLoadError
from viz_core.loading import footprint


def test_estimate_equals_the_loaded_parameter_count(tiny_models):
    m = vc.load("dates", dtype="float32")
    n = sum(p.numel() for p in m.model.parameters())
    fp = footprint.estimate("dates", "float32", "cpu")
    assert fp.parameters == n and fp.bytes == 4 * n and fp.dtype == "float32"
    half = footprint.estimate("dates", "bfloat16", "cpu")
    assert half.bytes == 2 * n
    model, path = tiny_models.load("llama")
    fp = footprint.estimate(str(path), "float32", "cpu")
    assert fp.parameters == model.n_parameters
    assert "parameters" in fp.describe() and "float32" in fp.describe()
    assert footprint.estimate("/no/such/folder", "auto", "cpu") is None


@pytest.mark.parametrize("weights,device,gpu,host,expected", [
    (1 << 30, "cuda", 8 << 30, 64 << 30, "device"),
    (20 << 30, "cuda", 8 << 30, 64 << 30, "device_map"),  # spread over GPU and host
    (1 << 30, "cpu", 0, 8 << 30, "device"),
])
def test_placement(weights, device, gpu, host, expected):
    assert footprint.placement(weights, device, gpu, host) == expected


@pytest.mark.parametrize("weights,device,gpu,host", [
    (100 << 30, "cuda", 8 << 30, 16 << 30), (10 << 30, "cpu", 0, 8 << 30)])
def test_placement_refuses_what_the_machine_cannot_hold(weights, device, gpu, host):
    with pytest.raises(ModelLoadError, match="bfloat16 halves it"):
        footprint.placement(weights, device, gpu, host)


def test_loading_refuses_with_sizes_before_reading_weights(tiny_models, monkeypatch):
    _, path = tiny_models.load("gpt2")
    from viz_core.loading import hf as hf_load

    monkeypatch.setattr(hf_load, "free_memory", lambda device: (0, 1000))
    with pytest.raises(ModelLoadError, match="GB of free memory"):
        vc.load(str(path), "cpu", dtype="float32")


@pytest.mark.parametrize("name", ["a\x00b", "<script>alert(1)</script>", "", "../../etc",
                                  "x" * 5000, "\ud800"])
def test_estimate_of_hostile_names_is_none_not_an_error(name):
    assert footprint.estimate(name, "auto", "cpu") is None
