"""The analysis table (viz_core.analysis.registry): every registered analysis is a method of
every backend and of the guarded model vc.load returns, with the function's own name,
docstring and signature; the guarded ones get the OOM fallback and surrogate cleaning of
resilience.guarded; an unknown name is a clear error. Also the Literal choices' boundary
check (viz_core.model.choices) and BlockTrace.source, the public view analyses read."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from typing import get_args

import pytest
import torch

import viz_core as vc
from viz_core.analysis import registry
from viz_core.backends.base import Backend
from viz_core.errors import ChoiceError, InputError
from viz_core.loading import resilience
from viz_core.loading.resilience import GuardedModel
from viz_core.model import choices


@pytest.fixture(scope="module")
def model():
    return vc.load("dates", "cpu")


def _function(name):
    module, _, attr = registry.ANALYSES[name].partition(":")
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("name", list(registry.ANALYSES))
def test_every_row_is_a_method_that_reads_like_its_function(model, name):
    fn = _function(name)
    assert list(inspect.signature(fn).parameters)[0] in ("model", "model_or_trace")
    params = list(inspect.signature(fn).parameters.values())[1:]
    for bound in (getattr(model, name), getattr(model.backend, name)):
        assert bound.__name__ == fn.__name__ == name
        assert bound.__doc__ == fn.__doc__ and fn.__doc__  # help(model.<name>) reads right
        assert list(inspect.signature(bound).parameters.values()) == params
    assert getattr(model.backend, name).__func__ is fn  # the function itself, bound
    assert getattr(Backend, name) is fn
    assert inspect.unwrap(getattr(GuardedModel, name)) is inspect.unwrap(fn)


def test_the_table_is_the_only_place_analyses_are_declared():
    for cls in (Backend, GuardedModel):
        for name in registry.ANALYSES:
            assert isinstance(vars(cls)[name], registry.AnalysisMethod), (cls, name)


def test_run_calls_an_analysis_by_name_and_refuses_an_unknown_one(model):
    frame = vc.analysis.run(model, "composition", fold_norms=False)
    assert frame.equals(model.backend.composition(fold_norms=False))
    with pytest.raises(InputError, match="no analysis named 'bogus'.*head_entropy"):
        vc.analysis.run(model, "bogus")
    with pytest.raises(AttributeError, match="no attribute 'bogus'; its analyses are"):
        model.bogus  # noqa: B018 - what getattr(model, request.name) says


class FakeBackend:
    """Fails with a GPU OOM a given number of times, then returns what it was given."""

    name, architecture = "fake", "decoder-only"

    def __init__(self, ooms: int):
        self.ooms, self.device, self.seen = ooms, torch.device("cuda"), []
        self.hf_model = torch.nn.Linear(2, 2)


def probe(model, text: str, target: str | None = None, *, k: int = 1):
    """An analysis for the test: records its arguments and the device it ran on."""
    model.seen.append((text, target, k, str(model.device)))
    if model.ooms:
        model.ooms -= 1
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
    return type("Result", (), {"warnings": []})()


def test_guarded_analyses_fall_back_to_the_cpu_and_clean_text():
    method = resilience.guarded(probe)
    model = GuardedModel(FakeBackend(ooms=1))
    result = method(model, "a\ud800", target="b", k=3)
    assert model.backend.seen == [("a\ufffd", "b", 3, "cuda"), ("a\ufffd", "b", 3, "cpu")]
    assert result.warnings == [resilience.OOM_NOTICE, resilience.SURROGATE_NOTICE]
    assert model.notices == [resilience.OOM_NOTICE]
    assert inspect.signature(method) == inspect.signature(probe)
    assert method.__doc__ == probe.__doc__
    with pytest.raises(torch.cuda.OutOfMemoryError):  # the CPU retry failed too
        method(GuardedModel(FakeBackend(ooms=2)), "x")


def test_a_registered_analysis_on_a_guarded_model_is_guarded(monkeypatch):
    model = vc.load("dates", "cpu")
    original = type(model.backend).trace
    calls = []

    def flaky(self, *args, **kwargs):
        calls.append(str(self.device))
        if len(calls) == 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(model.backend), "trace", flaky)
    frame = model.head_entropy("9 may 2018")
    assert len(calls) == 2 and resilience.OOM_NOTICE in model.notices
    assert frame.equals(vc.load("dates", "cpu").head_entropy("9 may 2018"))


# ---- Literal choices -------------------------------------------------------------------------
def test_choose_accepts_exactly_the_literal_and_names_it():
    for value in get_args(choices.Over):
        assert choices.choose(value, choices.Over, "over") == value
    with pytest.raises(ChoiceError) as err:
        choices.choose("head", choices.Over, "over")
    assert str(err.value) == "'over' must be 'heads', 'layers' or 'positions', not 'head'."
    assert isinstance(err.value, InputError) and isinstance(err.value, ValueError)
    with pytest.raises(ChoiceError):
        choices.choose(None, choices.View, "view")


def test_boundaries_check_their_choices(model):
    with pytest.raises(InputError, match="'over' must be 'heads', 'layers' or 'positions'"):
        model.patch("9 may 2018", "9 jun 2018", over="tokens")
    trace = model.trace("9 may 2018")
    with pytest.raises(ValueError, match="'what'"):
        trace["decoder.0.self"].head(0, what="weights")
    with pytest.raises(ValueError, match="'kind'"):
        trace.layers("encoder")


def test_the_backend_reports_values_of_its_literal_types(model):
    assert model.architecture in get_args(choices.Architecture)
    assert model.positional_kind in get_args(choices.PositionalKind)
    assert model.norm_placement in get_args(choices.NormPlacement)


# ---- BlockTrace.source: the public view analyses read ---------------------------------------
def test_block_source_is_the_recorded_call_read_only(model):
    trace = model.trace("9 may 2018")
    block = trace["decoder.0.self"]
    src = block.source
    assert src.q.shape[0] == block.n_heads and src.z is not None
    torch.testing.assert_close(src.q.float().numpy(), block.q, rtol=0, atol=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        src.q = None
    eager = vc.BlockTrace("encoder.0.self", pattern=block.pattern)
    assert eager.source is None


ODD = [None, -1, 2.5, float("nan"), float("inf"), True, "", "   ", [1, 2], {}, b"bytes",
       object()]


@pytest.mark.parametrize("which", ["lm", "gpt2"])
def test_every_argument_of_every_analysis_refuses_odd_values_in_one_line(which, tiny_models):
    """Each parameter of each registered analysis given values of the wrong kind: a result or
    a VizError, never Python's own error from deep inside (a Python user's view of bad
    input). Before: target=5 was "'int' object has no attribute 'strip'", position=inf an
    OverflowError, chunk="" int()'s ValueError, referent_heads(texts=5) "'int' object is
    not iterable" and threshold=None "'<' not supported"."""
    model = vc.load("lm", "cpu") if which == "lm" else tiny_models.load("gpt2")[0]
    texts = {"patch": 2, "attribution_patch": 2, "edge_attribution": 2,
             "referent_patching": 1, "referent_heads": 1}
    clean, corrupted = "the small black cats", "the big black cats"
    wrong = []
    for name in registry.ANALYSES:
        params = [p for p in list(inspect.signature(registry.function(name)).parameters.values())[1:]
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        required = [p for p in params if p.default is p.empty]
        args = [clean, corrupted][:texts.get(name, 1)]
        args = ([[clean]] if name.startswith("referent") else args)[:len(required)]
        args += [clean] * (len(required) - len(args))
        for i, p in enumerate(params):
            for value in ODD:
                call, kw = list(args), {}
                if i < len(required):
                    call[i] = value
                else:
                    kw[p.name] = value
                try:
                    getattr(model, name)(*call, **kw)
                except vc.VizError:
                    pass
                except Exception as err:  # noqa: BLE001 - what the test looks for
                    wrong.append(f"{name}({p.name}={value!r:.20}): {type(err).__name__}: {err}")
    assert wrong == [], wrong[:10]


CONTRACT = {  # Backend methods a Python user calls: (positional arguments, options)
    "trace": (("the cat sat",), ["target", "capture", "blocks", "ablate", "max_new",
                                 "permute", "positions"]),
    "beam_search": (("the cat sat",), ["beam_size", "max_len", "length_penalty",
                                       "early_stopping", "num_return", "prefix", "ablate"]),
    "trace_batch": ((["the cat sat", "a dog"],), ["targets", "capture", "blocks", "ablate"]),
    "check_faithfulness": (("the cat sat",), ["target", "max_tokens"]),
    "count_tokens": (("the cat",), []),
    "token_strings": (([1, 2],), []),
    "head_weights": (("decoder.0.self",), []),
}


@pytest.mark.parametrize("which", ["lm", "gpt2"])
def test_every_argument_of_the_backend_contract_refuses_odd_values_in_one_line(which,
                                                                               tiny_models):
    """As above, for what the Backend contract offers besides the analyses. Before:
    capture=-1 "'int' object is not iterable", blocks="decoder.0.self" kept nothing (a set of
    its letters), ablate="x" "'str' object has no attribute 'items'", max_new=2.5 a
    TypeError in the decoder, prefix=5 "'int' object has no attribute 'strip'",
    length_penalty=10**12 an OverflowError in the search, head_weights(5) "'int' object has
    no attribute 'split'", token_strings(None) "not iterable", and a decoder-only batch with
    fewer targets than inputs an IndexError."""
    model = vc.load("lm", "cpu") if which == "lm" else tiny_models.load("gpt2")[0]
    odd = [*ODD, 0, "x", 10**12]
    wrong = []
    for name, (args, options) in CONTRACT.items():
        fn = getattr(model, name)
        trials = [((value, *args[1:]), {}) for value in odd]
        trials += [(args, {option: value}) for option in options for value in odd]
        for call, kw in trials:
            try:
                fn(*call, **kw)
            except vc.VizError:
                pass
            except Exception as err:  # noqa: BLE001 - what the test looks for
                wrong.append(f"{name}({call[0]!r:.20}, {kw!r:.30}): {type(err).__name__}: {err}")
    assert wrong == [], wrong[:10]
    kept = model.trace("the cat sat", blocks="decoder.0.self", max_new=0)
    assert list(kept.blocks) == ["decoder.0.self"]  # one name is that block, not its letters
