"""Capture overhead: a traced forward pass versus the same pass without capture.

Native (random encoder-decoder, d_model 128, 4 heads, 3+3 layers): the explicit, hooked
attention with its captures brought to numpy (every hook point, and the patterns only that
the Attention page asks for), versus the same forward on the SDPA fast path, at 32/128/512
tokens. MiniLM: ``model.trace(text)`` versus the raw
``model(**inputs, output_attentions=True)`` call (tokenising and numpy included on both
sides), once with the patterns only (what the Attention page asks for) and once with every
hook point (q/k/v/scores/z recomputed after the run: no target). Both sides are timed
alternately in the same run.
"""

from __future__ import annotations

import torch

import viz_core as vc
from viz_core.backends.base import to_numpy
from viz_core.model import Hooks, Transformer, TransformerConfig

from .common import page_faults, paired, ratio_row

CAPTURE = ("q", "k", "v", "scores", "pattern", "z")


def native_model(max_len: int, device) -> Transformer:
    cfg = TransformerConfig(kind="encoder-decoder", src_vocab_size=1000, tgt_vocab_size=1000,
                            d_model=128, n_heads=4, n_layers=3, n_decoder_layers=3, d_ff=512,
                            dropout=0.0, max_len=max_len).validate()
    torch.manual_seed(0)
    return Transformer(cfg).to(device).eval()


def native_capture(model, src, tgt, capture=CAPTURE) -> dict:
    """One traced forward pass; every captured tensor as float32 numpy on the CPU."""
    with torch.inference_mode():
        hooks = Hooks(capture=capture)
        model(src, tgt, hooks)
        return {k: to_numpy(v) for k, v in hooks.cache.items()}


def native_rows(sizes, repeat: int, device) -> list[dict]:
    rows = []
    model = native_model(max(sizes), device)
    for n in sizes:
        src = torch.randint(4, 1000, (1, n), device=device)
        tgt = torch.randint(4, 1000, (1, n), device=device)

        def fast():
            with torch.inference_mode():
                return model(src, tgt)

        with torch.inference_mode():  # capture changes nothing downstream
            same = torch.allclose(model(src, tgt, Hooks(capture=("pattern",))), fast(),
                                  atol=1e-4)
        for capture, what in ((CAPTURE, "all hook points"),
                              (("pattern",), "patterns (Attention page)")):
            def traced(capture=capture):
                return native_capture(model, src, tgt, capture)

            cache = traced()
            t_ours, t_peer = paired(traced, fast, repeat, device)
            rows.append(ratio_row(f"native capture overhead, {n} tokens, {what}", t_ours,
                                  t_peer, "same forward, SDPA, no capture", device, target=1.3,
                                  n_tokens=n, captured=len(cache), same_output=same,
                                  page_faults=page_faults(traced),
                                  peer_page_faults=page_faults(fast)))
    return rows


def hf_rows(sizes, repeat: int) -> list[dict]:
    try:
        model = vc.load("minilm", "auto")
    except vc.VizError as err:
        return [{"name": "minilm capture overhead", "skipped": str(err)}]
    tok, hf = model.tokenizer, model.hf_model
    rows = []
    for n in sizes:
        text = " ".join(["word"] * (n - 2))

        def raw():
            with torch.inference_mode():
                inputs = tok(text, return_tensors="pt").to(model.device)
                out = hf(**inputs, output_attentions=True)
                return [a.float().cpu().numpy() for a in out.attentions]

        for capture, what, target in ((("pattern",), "patterns (Attention page)", 1.1),
                                      (CAPTURE, "all hook points", None)):
            def ours(capture=capture):
                return model.trace(text, capture=capture)

            trace = ours()
            block = trace[trace.blocks[0]]
            ref = raw()
            same = bool(abs(block.pattern - ref[0][0]).max() < 1e-5)
            t_ours, t_peer = paired(ours, raw, repeat, model.device)
            rows.append(ratio_row(f"minilm trace, {what}, {n} tokens", t_ours, t_peer,
                                  "model(**inputs, output_attentions=True)", model.device,
                                  target=target, n_tokens=n, same_output=same,
                                  shape=list(block.pattern.shape),
                                  has_scores=block.scores is not None))
    return rows


def run(quick: bool = False) -> list[dict]:
    device = vc.pick_device("auto")
    sizes = [32] if quick else [32, 128, 512]
    repeat = 1 if quick else 7
    return native_rows(sizes, repeat, device) + hf_rows(sizes, repeat)
