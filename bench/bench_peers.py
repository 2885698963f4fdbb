"""Attention Lab against the peers on one model: time and peak memory, each in its own process.

A GPT-2-small-shaped random model (12 layers x 12 heads x 768; --quick: 2 x 4 x 64), saved
once as a Hugging Face folder, at 512 / 2,048 / 8,192 tokens (where it survives):
- ours: ``model.trace`` plus what the Attention page reads first (every block pooled to
  64 x 64 for the grid, one head at display resolution);
- Hugging Face eager with ``output_attentions=True``, brought to numpy (what BertViz and most
  tools do);
- TransformerLens 4 ``TransformerBridge.run_with_cache`` keeping only the patterns.
Each runs in a fresh process: its memory is the peak RSS growth of the first call over the
loaded model (VmHWM reset before it), its time that of the second call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from .common import ratio_row, save_gpt2

SCRIPT = textwrap.dedent("""
    import json, os, sys, time, torch
    sys.path.insert(0, sys.argv[1])
    method, folder, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    def reset():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    ids = torch.randint(10, 200, (1, n))
    if method == "ours":
        import viz_core as vc
        from viz_core.backends.base import record, block_layout, blocks_from_records
        m = vc.load(folder, "cpu", dtype="float32")
        names, hf = m.block_names, m.hf_model
        toks = [str(i) for i in range(n)]
        def call():
            with torch.inference_mode():
                _, rec = record(lambda: hf(input_ids=ids), names=names, capture=("pattern",))
            blocks = blocks_from_records(rec, block_layout("decoder-only", 0,
                                                            m.n_decoder_layers, toks, toks))
            for b in blocks.values():
                b.overview(64)
            b.head(0) if n <= 1024 else b.overview(448, heads=[0])
            return blocks
    elif method == "eager":
        from transformers import AutoModelForCausalLM
        hf = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
        def call():
            with torch.inference_mode():
                out = hf(input_ids=ids, output_attentions=True)
            return [a.float().numpy() for a in out.attentions]
    else:
        from transformer_lens.model_bridge import TransformerBridge
        bridge = TransformerBridge.boot_transformers(folder, device="cpu")
        def call():
            with torch.inference_mode():
                return bridge.run_with_cache(ids, names_filter=lambda k: k.endswith("hook_pattern"))
    reset(); base = hwm()
    out = call(); peak = hwm() - base  # memory: the first call (nothing freed to reuse yet)
    del out
    t0 = time.perf_counter(); out = call(); wall = time.perf_counter() - t0  # time: the second
    print(json.dumps({"s": wall, "peak_growth": peak}))
""")


def available_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def measure(method: str, folder: Path, n: int) -> dict | None:
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT, root, method, str(folder), str(n)],
                             capture_output=True, text=True, timeout=1500, env=env)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout)[-300:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> list[dict]:
    sizes = [64] if quick else [512, 2048, 8192]
    layers, heads = (2, 4) if quick else (12, 12)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "gpt2"
        save_gpt2(folder, quick, n_positions=8192)
        for n in sizes:
            ours = measure("ours", folder, n)
            if not ours or "error" in ours:
                rows.append({"name": f"peers, {n} tokens", "skipped": str(ours)})
                continue
            for peer, label in (("eager", "HF eager output_attentions=True, to numpy"),
                                ("tl", "TransformerLens run_with_cache (patterns)")):
                name = f"trace + grid + one head vs {peer}, {n} tokens"
                need = layers * heads * n * n * 4  # every pattern, float32, at least once
                if need > 0.6 * available_bytes():
                    rows.append({"name": name, "skipped": f"{label} needs at least "
                                 f"{need / 2**30:.0f} GB for the patterns alone; this machine "
                                 f"has {available_bytes() / 2**30:.0f} GB free"})
                    continue
                theirs = measure(peer, folder, n)
                if not theirs or "error" in theirs:
                    rows.append({"name": name, "skipped": f"{label} did not survive: "
                                 f"{(theirs or {}).get('error', 'timeout')}"})
                    continue
                rows.append(ratio_row(name, {"median": ours["s"], "min": ours["s"],
                                             "max": ours["s"]},
                                      {"median": theirs["s"], "min": theirs["s"]}, label,
                                      "cpu", n_tokens=n,
                                      peak_growth_mb=ours["peak_growth"] / 2**20,
                                      peer_peak_growth_mb=theirs["peak_growth"] / 2**20))
    return rows
