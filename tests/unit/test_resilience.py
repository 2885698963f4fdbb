"""viz_core.loading.resilience.GuardedModel: an explicit wrapper (nothing on the backend is replaced)
that delegates the Backend API and retries a run on the CPU after a GPU out-of-memory error."""

from types import SimpleNamespace

import pytest
import torch

import viz_core as vc
from viz_core.loading import resilience
from viz_core.loading.resilience import GuardedModel, guard


class FakeBackend:
    """Just enough of a backend: runs that fail with OOM a given number of times."""

    name, family, card, max_tokens, can_generate = "fake", "bert", {}, 8, False
    architecture = kind = "encoder-only"

    def __init__(self, ooms: int = 0):
        self.ooms, self.calls = ooms, []
        self.device = torch.device("cuda")
        self.hf_model = torch.nn.Linear(2, 2)

    def _maybe_oom(self):
        if self.ooms:
            self.ooms -= 1
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")

    def trace(self, source, target=None, **options):
        self.calls.append(("trace", source, target, options, str(self.device)))
        self._maybe_oom()
        return SimpleNamespace(warnings=[], source=source)

    def trace_batch(self, sources, targets=None, **options):
        self.calls.append(("trace_batch", sources, targets, options, str(self.device)))
        self._maybe_oom()
        return [SimpleNamespace(warnings=[]) for _ in sources]

    def beam_search(self, source, beam_size=4, max_len=32, **options):
        self.calls.append(("beam_search", source, beam_size, options, str(self.device)))
        self._maybe_oom()
        return SimpleNamespace(settings={})

    def info(self):
        return {"name": self.name, "device": str(self.device)}

    def examples(self):
        return ["an example"]


def test_the_wrapper_delegates_the_backend_api_and_replaces_nothing():
    backend = FakeBackend()
    model = guard(backend)
    assert isinstance(model, GuardedModel) and guard(model) is model
    assert vars(backend).keys() == {"ooms", "calls", "device", "hf_model"}  # no method replaced
    assert (model.name, model.architecture, model.kind, model.family, model.max_tokens) == \
        ("fake", "encoder-only", "encoder-only", "bert", 8)
    assert model.card is backend.card and model.hf_model is backend.hf_model
    assert model.info() == backend.info() and model.examples() == ["an example"]
    assert not model.can_generate and model.device == backend.device
    assert model.notices == []
    with pytest.raises(AttributeError):
        model.no_such_attribute  # noqa: B018
    trace = model.trace("a", "b", capture=("pattern",))
    assert backend.calls == [("trace", "a", "b", {"capture": ("pattern",)}, "cuda")]
    assert trace.warnings == []


@pytest.mark.parametrize("method,args", [("trace", ("x",)), ("trace_batch", (["x", "y"],)),
                                         ("beam_search", ("x",))])
def test_gpu_oom_moves_the_model_to_the_cpu_once_and_retries(method, args):
    backend = FakeBackend(ooms=1)
    model = guard(backend)
    result = getattr(model, method)(*args)
    assert [c[-1] for c in backend.calls] == ["cuda", "cpu"]  # failed on the GPU, rerun on CPU
    assert str(model.device) == "cpu" and str(backend.device) == "cpu"
    assert next(backend.hf_model.parameters()).device.type == "cpu"
    assert model.notices == [resilience.OOM_NOTICE]
    for item in result if isinstance(result, list) else [result]:
        warnings = item.settings["warnings"] if method == "beam_search" else item.warnings
        assert warnings == [resilience.OOM_NOTICE]
    getattr(model, method)(*args)  # later runs stay on the CPU, the notice is not repeated
    assert model.notices == [resilience.OOM_NOTICE]


def test_other_errors_and_a_second_oom_are_raised():
    model = guard(FakeBackend(ooms=2))
    with pytest.raises(torch.cuda.OutOfMemoryError):
        model.trace("x")  # the CPU retry failed too: nothing left to fall back on


def test_surrogates_are_replaced_in_every_text_argument():
    backend = FakeBackend()
    model = guard(backend)
    trace = model.trace("a\ud800", target="b\udfff")
    _, source, target, _, _ = backend.calls[0]
    assert (source, target) == ("a\ufffd", "b\ufffd")
    assert trace.warnings == [resilience.SURROGATE_NOTICE]
    model.trace_batch(["ok", "x\ud800"])
    assert backend.calls[1][1] == ["ok", "x\ufffd"]
    assert resilience.replace_surrogates(("a", "\ud800")) == (("a", "\ufffd"), True)
    assert resilience.replace_surrogates(3) == (3, False)


def test_vc_load_returns_a_guarded_model():
    model = vc.load(vc.shipped_models()[0], "cpu")
    assert isinstance(model, GuardedModel)
    assert "trace" not in vars(model.backend)  # the backend object keeps its own methods
    assert model.cfg is model.backend.cfg and model.model is model.backend.model
