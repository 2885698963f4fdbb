"""New tokens for decoder-only models (issue 24, item 2): the sidebar control, the URL value
``new``, the cache key, 0 = the prompt alone, and each backend's default (the shipped toys
continue their prompt; a loaded HF decoder is traced on the prompt alone when generating
would cost more than the trace, and says so)."""

from __future__ import annotations

import pytest
import torch

import viz_core as vc
from attention_lab.ui.runs import TraceRequest
from attention_lab.ui.sidebar import Selection

TEXT = "the cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def llama(tiny_models):
    return tiny_models.load("llama", seed=1)  # (model, path)


# ---- backends ------------------------------------------------------------------------------
def test_a_loaded_decoder_is_traced_on_the_prompt_alone_by_default_and_says_so(llama):
    model, _ = llama
    trace = model.trace(TEXT)
    prompt = trace.source_tokens
    assert trace.target_tokens == prompt and trace.output_text == ""
    for name in trace.blocks:
        assert trace[name].query_tokens == prompt
    notes = [w for w in trace.warnings if "prompt alone" in w]
    assert len(notes) == 1 and "New tokens" in notes[0] and "\n" not in notes[0]


def test_a_loaded_decoder_continues_when_asked_like_generate(llama):
    model, _ = llama
    hf, tok = model.hf_model, model.tokenizer
    ids = torch.tensor([tok(TEXT)["input_ids"]])
    with torch.no_grad():
        gen = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                          num_beams=1, max_new_tokens=5, pad_token_id=model.pad_id)[0].tolist()
    cont = gen[ids.shape[1]:]
    if model.eos_id in cont:
        cont = cont[:cont.index(model.eos_id)]
    trace = model.trace(TEXT, max_new=5)
    assert len(trace.target_tokens) == ids.shape[1] + len(cont) > ids.shape[1]
    assert not [w for w in trace.warnings if "prompt alone" in w]  # asked for: no note


def test_zero_new_tokens_traces_the_prompt_alone_without_a_note(llama):
    model, _ = llama
    trace = model.trace(TEXT, max_new=0)
    assert trace.target_tokens == trace.source_tokens
    assert all(trace[n].query_tokens == trace.source_tokens for n in trace.blocks)
    assert not [w for w in trace.warnings if "prompt alone" in w]


@pytest.mark.parametrize("name", ["lm", "lm-rope"])
def test_the_shipped_toys_still_continue_by_default(name):
    model = vc.load(name)
    base = model.trace("the cat")
    alone = model.trace("the cat", max_new=0)
    n_prompt = len(alone.target_tokens)  # <bos> + the prompt
    assert len(base.target_tokens) > n_prompt and base.output_text
    assert base.target_tokens[:n_prompt] == alone.target_tokens
    assert not base.warnings


def test_cost_estimate_flips_where_the_closed_form_says():
    """Generating n tokens: prefill 2PT + 4LdT^2, n steps of STEP_TOKENS * 2P, attention
    4Ld(nT + n(n-1)/2); the trace over T + n: 2P(T+n) + 4Ld(T+n)^2. They are equal at
    T* = (STEP_TOKENS - 1) P / (2 L d) - (n + 1) / 2."""
    from viz_core.backends.continuation import STEP_TOKENS, continue_by_default

    P, L, d, n = 10_000_000, 4, 256, 20
    t_star = (STEP_TOKENS - 1) * P / (2 * L * d) - (n + 1) / 2
    assert not continue_by_default(P, L, d, int(t_star) - 1, n)
    assert continue_by_default(P, L, d, int(t_star) + 2, n)
    assert not continue_by_default(P, L, d, 10 ** 6, 0)  # nothing to generate


# ---- the request carries it ------------------------------------------------------------------
def test_the_selection_reaches_the_cache_key():
    a = Selection("lm", "auto", "the cat", None, object(), 0)
    b = Selection("lm", "auto", "the cat", None, object(), 3)
    assert TraceRequest.of(a) != TraceRequest.of(b)
    assert TraceRequest.of(b).options()["max_new"] == 3
    assert TraceRequest.of(a, capture=("pattern",)).max_new == 0
    assert TraceRequest.of(b, max_new=0) == TraceRequest.of(a)  # an explicit value wins


# ---- the app ------------------------------------------------------------------------------


def test_the_skip_note_is_shown_in_the_sessions_language():
    """The note is built once with the trace (shared by every session) and translated where
    it is shown (a zh screenshot showed it in English)."""
    from attention_lab.ui.errors import translated
    from viz_core import i18n
    from viz_core.backends.continuation import skip_note

    note = skip_note(20)
    assert str(note).startswith("Traced on the prompt alone: generating 20 new tokens")
    token = i18n._language.set("zh")
    try:
        shown = translated(note)
    finally:
        i18n._language.reset(token)
    assert "20" in shown and "只追踪了提示本身" in shown
