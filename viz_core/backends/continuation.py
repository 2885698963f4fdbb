"""Whether a decoder-only Hugging Face model continues its prompt before it is traced.

Asked for no particular number of new tokens (``max_new=None``), a loaded decoder is traced
on the prompt alone when generating the continuation would cost more than the trace itself,
and the trace says so in one line. The estimate counts multiply-adds from the model's size
and the token counts; no clock is read, so the same model and prompt always decide alike.

- The trace: one batched forward over prompt + new tokens: 2 * params flops per token (each
  weight is read once for all tokens), plus attention, 4 * layers * d_model * n^2.
- Generating: a prefill over the prompt (the same forward), then one step per new token. A
  step moves one token but still reads every weight: memory-bound on CPUs and GPUs alike, it
  costs as much as STEP_TOKENS tokens of a batched forward. Issue 24's measurement of a
  Qwen2.5-0.5B shape on 2 CPU cores gives about 18 (20 steps in 2.1 s against 5.9 ms per
  prompt token); bench/decoder_default.py reports it as step_tokens. 8 keeps the estimate
  on the side of continuing.
"""

from __future__ import annotations

from ..i18n import N_, Message

STEP_TOKENS = 8  # one decoding step ~ this many tokens of a batched forward (memory-bound)


def forward_flops(params: int, layers: int, d_model: int, tokens: int) -> float:
    """Multiply-adds x 2 of one forward over ``tokens`` tokens (weights + attention)."""
    return 2.0 * params * tokens + 4.0 * layers * d_model * tokens * tokens


def generation_flops(params: int, layers: int, d_model: int, prompt: int, new: int) -> float:
    """A prefill over the prompt, then ``new`` single-token steps (each reads every weight)."""
    attention = 4.0 * layers * d_model * (new * prompt + new * (new - 1) / 2)
    return (forward_flops(params, layers, d_model, prompt) + new * STEP_TOKENS * 2.0 * params
            + attention)


def continue_by_default(params: int, layers: int, d_model: int, prompt: int, new: int) -> bool:
    """Whether generating ``new`` tokens costs no more than tracing prompt + new tokens."""
    if new <= 0:
        return False
    return (generation_flops(params, layers, d_model, prompt, new)
            <= forward_flops(params, layers, d_model, prompt + new))


def skip_note(new: int) -> str:
    """The one-line note of a trace taken on the prompt alone by default (a Message: the app
    shows it in the session's language)."""
    return Message(N_("Traced on the prompt alone: generating {new} new tokens first would take "
                      "longer than the trace itself. Set New tokens (max_new) above 0 to see "
                      "the model's continuation."), new=new)


def default_new_tokens(hf_model, prompt: int, new: int, warnings: list[str]) -> int:
    """The new tokens to generate when the caller chose none: ``new``, or 0 with a note."""
    cfg = hf_model.config
    params = sum(p.numel() for p in hf_model.parameters())
    layers = int(getattr(cfg, "num_hidden_layers", 0) or 0)
    d_model = int(getattr(cfg, "hidden_size", 0) or 0)
    if new <= 0 or continue_by_default(params, layers, d_model, prompt, new):
        return max(new, 0)
    warnings.append(skip_note(new))
    return 0
