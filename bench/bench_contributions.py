"""Direct logit attribution against a plain trace of the same input (issue 23).

Row: ``model.logit_attribution(text)`` on a GPT-2-small-shaped model (12 layers, 12 heads,
d_model 768, random weights, the small byte-level vocabulary of tests/support/hf_tiny.py) at 512
tokens, versus ``model.trace(text, max_new=0)`` of the same input (target <= 1.3x; CPU, and
the GPU when there is one). Both timed alternately (common.paired). The attribution is one
recorded run with the stream and z kept, plus each head's share at one position through the
frozen final norm and one unembedding row; the logit lens is timed beside it for reference.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import viz_core as vc

from .common import bench_devices, paired, ratio_row, save_gpt2

TARGET = 1.3


def _text(model, n: int) -> str:
    """A text of exactly n tokens for this tokenizer (words of the tiny corpus)."""
    from tests.support.hf_tiny import SENTENCES

    words = " ".join(SENTENCES * (n // 20 + 2))
    ids = model.tokenizer(words)["input_ids"][:n]
    text = model.tokenizer.decode(ids)
    assert abs(len(model.tokenizer(text)["input_ids"]) - n) <= 2
    return text


def trace_of(model, text):
    return model.trace(text, max_new=0, capture=())


def run(quick: bool = False) -> list[dict]:
    n, repeat = (128, 3) if quick else (512, 7)
    rows = []
    devices = bench_devices()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "gpt2-small"
        save_gpt2(folder, quick)
        for device in devices:
            model = vc.load(str(folder), device=device, dtype="float32")
            text = _text(model, n)
            tokens = len(trace_of(model, text).target_tokens)  # what the model really read
            shape = "GPT-2-small-shaped" if not quick else "tiny GPT-2"

            def attribution(model=model, text=text):
                return model.logit_attribution(text)

            def trace(model=model, text=text):
                return model.trace(text, max_new=0)

            def lens(model=model, text=text):
                return model.logit_lens(text, k=5)

            a = attribution()
            ok = abs(float(a.frame.contribution.sum()) - a.logit) <= 1e-4 * max(1, abs(a.logit))
            ours, peer = paired(attribution, trace, repeat, device)
            rows.append(ratio_row(f"logit_attribution, {shape}, {tokens} tokens", ours, peer,
                                  "our plain trace, same input", device, target=TARGET,
                                  adds_up=ok, model="gpt2 12x12x768" if not quick else "tiny"))
            ours, peer = paired(lens, trace, max(3, repeat // 2), device)
            rows.append(ratio_row(f"logit_lens (k=5), {shape}, {tokens} tokens", ours, peer,
                                  "our plain trace, same input", device,
                                  model="gpt2 12x12x768" if not quick else "tiny"))
    return rows
