"""Capture overhead: a traced forward pass versus the same pass without capture."""

from __future__ import annotations

import torch

import viz_core as vc
from viz_core.model import Hooks, Transformer, TransformerConfig

from .common import ratio_row, timeit

CAPTURE = ("q", "k", "v", "scores", "pattern", "z")


def native_model(max_len: int, device) -> Transformer:
    cfg = TransformerConfig(kind="encoder-decoder", src_vocab_size=1000, tgt_vocab_size=1000,
                            d_model=128, n_heads=4, n_layers=3, n_decoder_layers=3, d_ff=512,
                            dropout=0.0, max_len=max_len).validate()
    torch.manual_seed(0)
    return Transformer(cfg).to(device).eval()


def native_rows(sizes, repeat: int, device) -> list[dict]:
    rows = []
    model = native_model(max(sizes), device)
    for n in sizes:
        src = torch.randint(4, 1000, (1, n), device=device)
        tgt = torch.randint(4, 1000, (1, n), device=device)

        @torch.inference_mode()
        def fast():
            model(src, tgt)

        @torch.inference_mode()
        def traced():
            hooks = Hooks(capture=CAPTURE)
            model(src, tgt, hooks)
            # what a trace really costs: bringing every captured tensor to numpy on the CPU
            return {k: v.float().cpu().numpy() for k, v in hooks.cache.items()}

        rows.append(ratio_row(f"native capture overhead, {n} tokens", timeit(traced, repeat,
                              device=device), timeit(fast, repeat, device=device),
                              "same forward, SDPA, no capture", device, target=1.3, n_tokens=n))
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

        @torch.inference_mode()
        def raw():
            inputs = tok(text, return_tensors="pt", truncation=True).to(model.device)
            out = hf(**inputs, output_attentions=True)
            return [a.float().cpu().numpy() for a in out.attentions]

        def ours():
            return model.trace(text)

        rows.append(ratio_row(f"minilm trace vs output_attentions, {n} tokens",
                              timeit(ours, repeat, device=model.device),
                              timeit(raw, repeat, device=model.device),
                              "model(**inputs, output_attentions=True)", model.device,
                              target=1.1, n_tokens=n))
    return rows


def run(quick: bool = False) -> list[dict]:
    device = vc.pick_device("auto")
    sizes = [32] if quick else [32, 128, 512]
    repeat = 1 if quick else 7
    return native_rows(sizes, repeat, device) + hf_rows(sizes, repeat)
