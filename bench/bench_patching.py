"""Activation / attribution patching (issue 23): time, peak memory and agreement.

- ``patch(over="heads")``, all 144 heads of a GPT-2-small-shaped random model (12 layers x 12
  heads x 768, the tests' small byte-level vocabulary; --quick: 2 x 4 x 64) at 64 tokens, CPU,
  against TransformerLens 4.3's ``get_act_patch_attn_head_out_all_pos`` (one hooked run per
  head) on the same weights and the same normalised metric. Each in its own process, one
  call (TransformerLens takes minutes on 2 cores): its time and its peak RSS growth over the
  loaded model (VmHWM reset before it). Target: <= 0.5x.
- ``attribution_patch(over="heads")`` against ``model.trace`` of the clean text, same model,
  same process, interleaved. Target: <= 4x.
- Attribution patching's correlation (Pearson) with real patching, heads and positions, on a
  tiny GPT-2 and on the shipped induction model (checkpoints/induction) when it exists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from .common import paired, ratio_row, save_gpt2

N_TOKENS = 64

SCRIPT = textwrap.dedent("""
    import json, os, sys, time, torch
    sys.path.insert(0, sys.argv[1])
    method, folder, clean, corrupted = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    def reset():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    import viz_core as vc
    m = vc.load(folder, "cpu", dtype="float32")
    if method == "ours":
        def call():
            return m.patch(clean, corrupted, over="heads").effect
    else:
        from transformer_lens import patching
        from transformer_lens.model_bridge import TransformerBridge
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(folder)
        bridge = TransformerBridge.boot_transformers(folder, device="cpu", tokenizer=tok)
        bridge.eval()
        ids_c = torch.tensor([tok(clean)["input_ids"]])
        ids_k = torch.tensor([tok(corrupted)["input_ids"]])
        def call():
            with torch.no_grad():
                logits, cache = bridge.run_with_cache(ids_c)
                t = int(logits[0, -1].argmax())
                c = float(logits[0, -1, t])
                k = float(bridge(ids_k)[0, -1, t])
                return patching.get_act_patch_attn_head_out_all_pos(
                    bridge, ids_k, cache, lambda lg: (lg[0, -1, t] - k) / (c - k)).numpy()
    reset(); base = hwm()
    t0 = time.perf_counter(); out = call(); wall = time.perf_counter() - t0
    peak = hwm() - base
    print(json.dumps({"s": wall, "peak_growth": peak, "effect": out.tolist()}))
""")


def texts(folder: Path, n: int = N_TOKENS) -> tuple[str, str]:
    """A clean text of exactly n tokens and its corruption (one word swapped, same count)."""
    from transformers import AutoTokenizer

    from tests.support.hf_tiny import SENTENCES

    tok = AutoTokenizer.from_pretrained(folder)
    words = " ".join(SENTENCES[:5]).replace(",", "").split() * 10
    out: list[str] = []
    for w in words:
        if len(tok(" ".join(out + [w]))["input_ids"]) <= n:
            out.append(w)
    while len(tok(" ".join(out))["input_ids"]) < n:
        out.append("a")
    clean = " ".join(out)
    corrupted = clean.replace("cat", "dog", 1)
    assert len(tok(clean)["input_ids"]) == len(tok(corrupted)["input_ids"]) == n
    return clean, corrupted


def measure(method: str, folder: Path, clean: str, corrupted: str) -> dict | None:
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT, root, method, str(folder), clean,
                              corrupted], capture_output=True, text=True, timeout=3000,
                             env=env)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout)[-300:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def correlation_rows(quick: bool) -> list[dict]:
    import viz_core as vc
    from tests.support.hf_tiny import make_patching_gpt2
    from viz_core.analysis.patching import compare

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("tiny GPT-2 (3 x 4 x 64, random)", make_patching_gpt2(Path(tmp) / "g"),
                  "the cat sat on the mat because it was",
                  "the dog sat on the mat because it was")]
        induction = Path(__file__).resolve().parent.parent / "checkpoints" / "induction"
        if (induction / "config.json").exists():
            cases.append(("induction", induction, *induction_pair(induction)))
        for label, path, clean, corrupted in cases:
            try:
                model = vc.load(str(path), device="cpu", dtype="float32")
                r = {}
                for over in ("heads", "positions"):
                    cmp = compare(model.patch(clean, corrupted, over=over),
                                  model.attribution_patch(clean, corrupted, over=over))
                    r[over] = (cmp.pearson, cmp.spearman)
            except Exception as err:  # noqa: BLE001 - a row says what failed
                rows.append({"name": f"attribution vs patching correlation, {label}",
                             "skipped": f"{type(err).__name__}: {err}"[:200]})
                continue
            rows.append({"name": f"attribution vs patching correlation, {label}",
                         "pearson_heads": r["heads"][0], "spearman_heads": r["heads"][1],
                         "pearson_positions": r["positions"][0],
                         "spearman_positions": r["positions"][1], "model": label,
                         "clean": clean, "corrupted": corrupted, "device": "cpu"})
    return rows


def induction_pair(path: Path) -> tuple[str, str]:
    """Random lexicon words A B C .. A B (the model's training distribution; the metric is
    the prediction of C) as clean; the corrupted text keeps the first half and changes the
    second (issue 23's corruption)."""
    import random

    vocab = json.loads((path / "vocab.json").read_text())
    tokens = vocab.get("target", vocab.get("source", {})).get("tokens", [])
    words = [t for t in tokens[4:] if t.isalpha()]
    rng = random.Random(0)
    first = rng.sample(words, 24)
    other = rng.sample([w for w in words if w not in first], 24)
    return " ".join(first + first[:-1]), " ".join(first + other[:-1])


def run(quick: bool = False) -> list[dict]:
    import viz_core as vc

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "gpt2"
        save_gpt2(folder, quick)
        clean, corrupted = texts(folder)
        ours = measure("ours", folder, clean, corrupted)
        theirs = measure("tl", folder, clean, corrupted)
        heads = "8" if quick else "144"
        name = f"patch(over='heads'), {heads} heads, {N_TOKENS} tokens vs TransformerLens"
        if not ours or "error" in ours or not theirs or "error" in theirs:
            rows.append({"name": name, "skipped": f"ours {str(ours)[:200]}, "
                         f"TL {str(theirs)[:200]}"})
        else:
            import numpy as np

            diff = float(np.nanmax(np.abs(np.array(ours["effect"]) - np.array(theirs["effect"]))))
            rows.append(ratio_row(name, {"median": ours["s"], "min": ours["s"],
                                         "max": ours["s"]},
                                  {"median": theirs["s"], "min": theirs["s"]},
                                  "TransformerLens get_act_patch_attn_head_out_all_pos", "cpu",
                                  target=0.5, peak_growth_mb=ours["peak_growth"] / 2**20,
                                  peer_peak_growth_mb=theirs["peak_growth"] / 2**20,
                                  max_effect_diff=diff))
        model = vc.load(str(folder), "cpu", dtype="float32")
        atp, trace = paired(lambda: model.attribution_patch(clean, corrupted, over="heads"),
                            lambda: model.trace(clean, max_new=0), 2 if quick else 5, "cpu")
        rows.append(ratio_row(f"attribution_patch(over='heads'), {N_TOKENS} tokens vs trace",
                              atp, trace, "model.trace (same text)", "cpu", target=4.0))
    rows += correlation_rows(quick)
    return rows
