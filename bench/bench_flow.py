"""How information flows (issue 29): information-flow routes against a trace, attention flow
against its time budget.

Rows:
- ``model.information_flow(text)`` on a GPT-2-small-shaped model (12 layers, 12 heads,
  d_model 768, random weights, the tests' tiny byte-level tokenizer) at 128 and 512 tokens, versus
  ``model.trace(text, max_new=0)`` of the same input, timed alternately (target <= 3x; the
  peak memory growth of one call beside it, target 1.5 GB).
- Attention flow of the same model's 12 layers at 64 tokens, every (output, input) pair: wall
  time and this process's CPU time (a busy machine stretches the first, not the second)
  against 5 s; and one output token's row, what the Information flow page computes.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import viz_core as vc

from .common import bench_devices, budget_row, paired, ratio_row, save_gpt2, summary

TARGET = 3.0
FLOW_BUDGET_S = 5.0
WORDS = ("the cat sat on the mat and the dog ran to the park while a bird sang in the old tree "
         "near the river because it was warm").split()


def text_of(model, n: int) -> str:
    """A text of about n tokens for this model's tokenizer."""
    ids = model.tokenizer(" ".join(WORDS * (n // 10 + 2)))["input_ids"][:n]
    return model.tokenizer.decode(ids)


def hwm() -> int | None:
    """This process's peak resident memory in bytes (Linux), None elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def peak_growth(fn) -> float | None:
    """MB the peak resident memory rises by over one call of fn (the peak reset first)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    base = hwm()
    fn()
    top = hwm()
    return None if base is None or top is None else (top - base) / 2**20


def cpu_timed(fn, repeat: int) -> tuple[dict, dict]:
    """(wall, this process's CPU) seconds of fn, median/min/max of ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return summary(walls), summary(cpus)


def run(quick: bool = False) -> list[dict]:
    sizes, n_flow, repeat = ((32,), 16, 2) if quick else ((128, 512), 64, 5)
    shape = "tiny GPT-2" if quick else "GPT-2-small-shaped"
    rows = []
    devices = bench_devices()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "gpt2-small"
        save_gpt2(folder, quick)
        for device in devices:
            model = vc.load(str(folder), device=device, dtype="float32")
            for n in sizes:
                text = text_of(model, n)
                tokens = len(model.trace(text, max_new=0, capture=()).target_tokens)

                def flow(model=model, text=text):
                    return model.information_flow(text)

                def trace(model=model, text=text):
                    return model.trace(text, max_new=0)

                ours, peer = paired(flow, trace, repeat, device)
                rows.append(ratio_row(
                    f"information_flow, {shape}, {tokens} tokens", ours, peer,
                    "our plain trace, same input", device, target=TARGET,
                    peak_growth_mb=peak_growth(flow) if device == "cpu" else None,
                    model="gpt2 12x12x768" if not quick else "tiny"))
        model = vc.load(str(folder), device="cpu", dtype="float32")
        short = text_of(model, n_flow)
        n_short = len(model.trace(short, max_new=0, capture=()).target_tokens)
        layers = model.info().get("layers") or ""
        wall, cpu = cpu_timed(lambda: model.attention_flow(short), max(1, repeat // 2))
        rows.append(budget_row(f"attention_flow, {shape}, {n_short} tokens, all pairs",
                               wall, FLOW_BUDGET_S, "cpu", cpu_s=cpu["median"],
                               cpu_meets_budget=bool(cpu["median"] <= FLOW_BUDGET_S),
                               layers=layers))
        wall, cpu = cpu_timed(lambda: model.attention_flow(short, outputs=[-1]), repeat)
        rows.append(budget_row(f"attention_flow, {shape}, {n_short} tokens, one output row",
                               wall, FLOW_BUDGET_S, "cpu", cpu_s=cpu["median"]))
    return rows


if __name__ == "__main__":  # python -m bench.bench_flow [--quick]
    import sys

    for row in run("--quick" in sys.argv):
        print(row)
