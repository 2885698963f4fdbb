"""Payload: bytes our attention figures send to the browser versus BertViz's head view.

For MiniLM-shaped attention (6 layers x 12 heads) at 32, 128 and 512 tokens (quick: 32),
we build our heatmap of one head, the head view of one layer (all 12 heads) and the
layer x head grid, and measure len(fig.to_json()). The peer is the HTML that
``bertviz.head_view(attention, tokens, html_action="return")`` produces for the same
attention (it embeds every layer x head x N^2 weight as JSON text).

Attention comes from the real all-MiniLM-L6-v2 through viz_core.load("minilm") when that
works, otherwise from random row-stochastic float32 patterns of the same shape (the row says
which). BertViz at 512 tokens builds a ~870 MB string: set BENCH_BERTVIZ_512=skip (or have
less than 6 GB of free memory) to extrapolate it from the 32 and 128 token measurements
instead; such rows say "extrapolated".

    python -m bench.bench_payload [--quick]      or      python -m bench --only bench_payload
"""

from __future__ import annotations

import gc
import os
import sys

import numpy as np

LAYERS, HEADS = 6, 12
SIZES = (32, 128, 512)


def random_attention(n: int, seed: int = 0) -> np.ndarray:
    """float32 [layer, head, n, n], rows softmax-distributed like real attention."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((LAYERS, HEADS, n, n), dtype=np.float32) * 2
    x -= x.max(-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(-1, keepdims=True)
    return x


def minilm_attention(n: int):
    """(patterns [6, 12, n, n], tokens, "minilm") from the real model, or None."""
    try:
        import viz_core as vc

        model = vc.load("minilm")
        trace = model.trace(" ".join(["the"] * (n - 2)))  # [CLS] the ... the [SEP]
        kind = trace.kinds()[0]
        patterns = trace.stack(kind)
        tokens = trace.layers(kind)[0].query_tokens
        if patterns.shape != (LAYERS, HEADS, n, n):
            return None
        return patterns.astype(np.float32), list(tokens), "minilm"
    except Exception:  # no backend yet / no model here: fall back to random attention
        return None


def attention(n: int):
    real = minilm_attention(n)
    if real is not None:
        return real
    tokens = ["[CLS]", *[f"w{i % 50}" for i in range(n - 2)], "[SEP]"]
    return random_attention(n), tokens, "random"


def our_figures(patterns: np.ndarray, tokens: list[str]) -> dict[str, int]:
    from viz_core.figures import attention_heatmap, head_view, layer_head_grid

    figs = {
        "heatmap (1 head)": attention_heatmap(patterns[0, 0], tokens, tokens),
        "head view (1 layer, 12 heads)": head_view(patterns[0], tokens, tokens),
        "layer x head grid (72 heads)": layer_head_grid(patterns),
    }
    return {name: len(fig.to_json()) for name, fig in figs.items()}


def bertviz_bytes(patterns: np.ndarray, tokens: list[str]) -> int:
    import torch
    from bertviz import head_view

    att = tuple(torch.from_numpy(np.ascontiguousarray(layer))[None] for layer in patterns)
    html = head_view(att, tokens, html_action="return")
    size = len(html.data)
    del html
    gc.collect()
    return size


def _free_bytes() -> int:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        return 1 << 40


def run(quick: bool = False) -> list[dict]:
    sizes = SIZES[:1] if quick else SIZES
    measured: dict[int, int] = {}
    rows = []
    for n in sizes:
        patterns, tokens, source = attention(n)
        ours = our_figures(patterns, tokens)
        skip = n >= 512 and (os.environ.get("BENCH_BERTVIZ_512", "") == "skip"
                             or _free_bytes() < 6 << 30)
        if skip and {32, 128} <= measured.keys():
            # BertViz's HTML is a fixed part plus one JSON number per weight: a + b * n^2.
            b = (measured[128] - measured[32]) / (128**2 - 32**2)
            peer, how = int(measured[32] + b * (n**2 - 32**2)), "extrapolated"
        else:
            peer, how = bertviz_bytes(patterns, tokens), "measured"
            measured[n] = peer
        del patterns
        gc.collect()
        for name, ours_b in [*ours.items(), ("all three together", sum(ours.values()))]:
            rows.append({"name": f"payload {name} @ {n} tok", "n_tokens": n,
                         "our_bytes": ours_b, "bertviz_bytes": peer, "bertviz": how,
                         "ratio": ours_b / peer, "peer": "bertviz.head_view HTML",
                         "attention": source, "target": None,
                         "device": "any (bytes: no timing)"})
    return rows


def main(argv: list[str]) -> None:
    rows = run(quick="--quick" in argv)
    print(f"{'figure':44s} {'tokens':>6s} {'ours (B)':>12s} {'bertviz (B)':>14s} "
          f"{'ratio':>8s}  bertviz / attention")
    for r in rows:
        print(f"{r['name'].split(' @ ')[0][8:]:44s} {r['n_tokens']:>6d} {r['our_bytes']:>12,d} "
              f"{r['bertviz_bytes']:>14,d} {r['ratio']:>8.4f}  {r['bertviz']} / "
              f"{r['attention']}")


if __name__ == "__main__":
    main(sys.argv[1:])
