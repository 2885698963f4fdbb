"""Scaling: trace time, trace memory and page bytes of the native model at 64..2048 tokens.

A random encoder-decoder (d_model 128, 4 heads, 3+3 layers, max_len 2048), teacher-forced so
both the source and the decoder input have N tokens. Each size runs in a fresh subprocess so
its peak memory (ru_maxrss growth during the traces) is its own. Two captures per size:

- "pattern": what the Attention page asks for (weights view) -> the timed row; its trace
  bytes are what the lazy trace holds (q and k per block, linear in N);
- "all": every hook point (q, k, v, z), then every pattern and score read -> memory only
  (N^2: what a trace costs once every view of every block has been opened).

Memory: growth of the peak resident set (VmHWM, reset before each capture) over the RSS
before it; on a GPU, plus torch's peak allocation there.

Attention is N^2: time and trace bytes grow ~4x per doubling at large N. The page's figures
(one head's heatmap, the layer x head grid, the head view, mean over heads, rollout) pool or
sample long inputs, so page bytes must stay bounded (roughly flat beyond ~512 tokens).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SIZES = (64, 256, 1024, 2048)
QUICK_SIZES = (64, 128)
ROOT = Path(__file__).resolve().parent.parent
PAGE_BYTES_CAP = 8_000_000  # all five figures together; grows far slower than N^2


def model(max_len: int, device="cpu"):
    from viz_core.backends.native import NativeModel
    from viz_core.training.toy import toy_model

    m = toy_model("encoder-decoder", seed=0, d_model=128, n_heads=4, n_layers=3,
                  n_decoder_layers=3, d_ff=512, max_len=max_len)
    if str(device) == "cpu":
        return m
    return NativeModel(m.model.to(device), {"source": m.src_vocab, "target": m.tgt_vocab},
                       m.card, name=m.name)


def page_bytes(trace) -> dict[str, int]:
    """JSON bytes of each figure the Attention page can show for encoder layer 0, head 0."""
    from viz_core.figures.aggregates import aggregate_heatmap, rollout_figure
    from viz_core.figures.grid import layer_head_grid
    from viz_core.figures.headview import block_head_view
    from viz_core.figures.heatmap import block_heatmap

    kind = trace.kinds()[0]
    block = trace.layers(kind)[0]
    figs = {"heatmap": block_heatmap(block, 0),
            "grid": layer_head_grid(trace.stack(kind)),
            "head view": block_head_view(block, heads=[0], top_k=5),
            "mean": aggregate_heatmap(block.pattern, block.query_tokens, block.key_tokens,
                                      how="mean", mask=block.mask),
            "rollout": rollout_figure(trace.stack(kind), block.query_tokens)}
    return {name: len(fig.to_json()) for name, fig in figs.items()}


def measure(n: int, repeat: int, device: str = "cpu", tag: str = "pattern") -> dict:
    """Run inside the subprocess: one size, one capture ("pattern" or "all")."""
    import resource
    import time

    import numpy as np
    import torch

    from viz_core.training.toy import WORDS

    torch.manual_seed(0)
    m = model(max(n, 64), device)
    cuda = device.startswith("cuda")
    words = [WORDS[i % 20] for i in range(n - 1)]  # n - 1 words + <eos> = n source tokens
    text = " ".join(words)

    def status_mb(field: str) -> float | None:
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
        except OSError:
            pass
        return None

    def reset_peak() -> float:
        """Start a new peak at the current RSS; returns the current RSS (MB). Linux keeps
        ru_maxrss across exec (a child of a big parent starts 'high'): use VmHWM, reset
        through clear_refs."""
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        now = status_mb("VmRSS")
        return now if now is not None else resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss / 1024

    def peak_mb() -> float:  # host peak RSS since reset_peak, plus the GPU's peak
        host = status_mb("VmHWM")
        if host is None:
            host = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        return host + (torch.cuda.max_memory_allocated() / 2**20 if cuda else 0.0)

    m.trace("the cat", target="the cat")  # warm-up (small: leaves the memory peak alone)
    opts = {"capture": ("pattern",)} if tag == "pattern" else {}  # {}: every hook point
    before = reset_peak()
    times, trace = [], None
    for _ in range(repeat if tag == "pattern" else 1):
        trace = None  # one trace alive at a time: the peak is one trace's
        t0 = time.perf_counter()
        trace = m.trace(text, target=text, **opts)  # numpy on the CPU: synchronised
        times.append(time.perf_counter() - t0)
    peak = peak_mb()
    blocks = list(trace.block_traces.values())
    held = sum(b.captured_bytes() for b in blocks)  # the lazy trace: q, k (v, z): O(N d)
    if tag == "all":  # and what reading every pattern and score of every block adds: O(N^2)
        for b in blocks:
            b.pattern, b.scores  # noqa: B018 - read to materialise them
        held += sum(b.computed_bytes() for b in blocks)
    enc = trace.layers("encoder.self")[0]
    out: dict = {"n_tokens": n, tag: {
        "times": times,
        "trace_bytes": int(held),
        "peak_growth_mb": max(0.0, peak - before),
        "shape": list(enc.pattern.shape),
        "rows_sum_to_1": bool(np.allclose(enc.pattern.sum(-1), 1, atol=1e-4)),
    }}
    if tag == "pattern":
        out["page_bytes"] = page_bytes(trace)
    return out


def run_size(n: int, repeat: int, device: str) -> dict:
    """Both captures at n tokens, each in a fresh process (its own memory peak)."""
    import torch

    out: dict = {}
    for tag in ("pattern", "all"):
        code = (f"import json, torch, bench.bench_scaling as b; "
                f"torch.set_num_threads({torch.get_num_threads()}); "
                f"print('RESULT' + json.dumps(b.measure({n}, {repeat}, {device!r}, {tag!r})))")
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                              text=True, timeout=1800)
        lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT")]
        if not lines:
            raise RuntimeError(f"scaling run at {n} tokens failed:\n{proc.stderr[-2000:]}")
        out.update(json.loads(lines[0][len("RESULT"):]))
    return out


def run(quick: bool = False) -> list[dict]:
    import viz_core as vc

    from .common import summary

    sizes = QUICK_SIZES if quick else SIZES
    repeat = 1 if quick else 3
    device = str(vc.pick_device("auto"))
    rows, first = [], None
    for n in sizes:
        r = run_size(n, repeat, device)
        t = summary(r["pattern"]["times"])
        first = first or (n, t["median"])
        page = r["page_bytes"]
        rows.append({
            "name": f"scaling native trace, {n} tokens (pattern capture)",
            "n_tokens": n, "ours_s": t["median"], "ours_min_s": t["min"],
            "ours_max_s": t["max"], "runs": t["runs"],
            "ratio": t["median"] / first[1], "peer": f"trace time at {first[0]} tokens",
            "peer_s": first[1], "n2_ratio": (n / first[0]) ** 2, "target": None,
            "trace_mb": r["pattern"]["trace_bytes"] / 2**20,
            "trace_mb_all_points": r["all"]["trace_bytes"] / 2**20,
            "peak_growth_mb": r["pattern"]["peak_growth_mb"],
            "peak_growth_mb_all_points": r["all"]["peak_growth_mb"],
            "all_points_s": r["all"]["times"][0],
            "page_bytes": sum(page.values()), "page_bytes_by_figure": page,
            "page_bounded": sum(page.values()) <= PAGE_BYTES_CAP,
            "shape": r["pattern"]["shape"], "rows_sum_to_1": r["pattern"]["rows_sum_to_1"],
            "device": device,
        })
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
