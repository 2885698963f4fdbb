"""Timing helpers: medians of several runs, with min and max, on the device named."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import torch


def bench_devices() -> list[str]:
    """The devices a bench runs on: the CPU, and the GPU when there is one. BENCH_DEVICES
    (comma-separated, e.g. "cuda") narrows it, for a GPU machine whose CPU rows (and their CPU
    peers) are not wanted."""
    found = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    wanted = [d.strip() for d in os.environ.get("BENCH_DEVICES", "").split(",") if d.strip()]
    return [d for d in found if d in wanted] if wanted else found


def sync(device) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def timeit(fn: Callable[[], object], repeat: int = 5, warmup: int = 1, device="cpu") -> dict:
    """Median/min/max wall seconds of fn() over `repeat` runs after `warmup` runs."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return {"median": statistics.median(times), "min": min(times), "max": max(times),
            "runs": repeat}


def ratio_row(name: str, ours: dict, peer: dict, peer_name: str, device, target=None,
              **extra) -> dict:
    """One table row: our median over the peer's median, measured in the same run."""
    r = ours["median"] / peer["median"] if peer["median"] > 0 else float("nan")
    row = {"name": name, "ours_s": ours["median"], "ours_min_s": ours["min"],
           "ours_max_s": ours["max"], "peer": peer_name, "peer_s": peer["median"],
           "ratio": r, "device": str(device), "target": target,
           "threads": torch.get_num_threads()}
    if "min" in peer and peer["min"] > 0:  # best case of each: steadier on a busy machine
        row["ratio_of_mins"] = ours["min"] / peer["min"]
    if target is not None:
        row["meets_target"] = bool(r <= target)
    row.update(extra)
    return row


def summary(times: list[float]) -> dict:
    return {"median": statistics.median(times), "min": min(times), "max": max(times),
            "runs": len(times)}


def paired(fn_a, fn_b, repeat: int, device) -> tuple[dict, dict]:
    """Time a and b alternately (a shared, busy machine drifts: interleaving keeps the
    ratio fair); median/min/max seconds of each, after one warm-up call of each."""
    fn_a(), fn_b()  # warm-up
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(repeat):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for j in order:
            sync(device)
            t0 = time.perf_counter()
            (fn_a, fn_b)[j]()
            sync(device)
            times[j].append(time.perf_counter() - t0)
    return summary(times[0]), summary(times[1])


def page_faults(fn: Callable[[], object], calls: int = 3) -> float | None:
    """Minor page faults per call of fn() (fresh pages the kernel had to zero-fill): unlike
    wall time, a count that other work on the machine does not disturb. None off Unix."""
    try:
        import resource
    except ImportError:
        return None
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def budget_row(name: str, ours: dict, budget_s: float, device, **extra) -> dict:
    """A latency row against a fixed budget: ratio = median / budget (<= 1 meets it)."""
    return ratio_row(name, ours, {"median": budget_s}, f"budget {budget_s * 1000:.0f} ms",
                     device, target=1.0, **extra)


def machine_note(sample_s: float = 0.5) -> str:
    """Whether other work shared the CPU while we measured (timings are noisier then):
    the CPU that processes other than this one and its children used over sample_s."""
    cores = os.cpu_count() or 1
    try:
        import psutil
    except ImportError:
        load = os.getloadavg()[0]
        return f"{'busy' if load > 0.5 * cores else 'idle'} (load {load:.1f} on {cores} cores)"
    me = psutil.Process()
    mine = {me.pid, *(c.pid for c in me.children(recursive=True))}
    procs, training = [], False
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.info["pid"] in mine:
            continue
        training |= "viz_core.training.train" in " ".join(proc.info.get("cmdline") or [])
        try:
            proc.cpu_percent(None)
            procs.append(proc)
        except psutil.Error:
            pass
    time.sleep(sample_s)
    used = 0.0
    for proc in procs:
        try:
            used += proc.cpu_percent(None)
        except psutil.Error:
            pass
    busy = training or used > 50
    what = f"others used {used / 100:.1f} of {cores} cores" + (", training running"
                                                              if training else "")
    return f"{'busy' if busy else 'idle'} ({what})"


def save_gpt2(folder, quick: bool, n_positions: int = 1024, vocab_size: int | None = None
              ) -> None:
    """A GPT-2-small-shaped model with random weights (2 x 4 x 64 in quick mode) and the tests'
    tiny tokenizer, saved to ``folder`` for the peer benchmarks. ``vocab_size``: rows of its
    embedding and unembedding (default: the tokenizer's ~400; GPT-2's own is 50,257, of which
    the tiny tokenizer writes only its first ids)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from tests.support.hf_tiny import gpt2_tokenizer

    tok = gpt2_tokenizer()
    tok.model_max_length = n_positions  # the tiny tokenizer says 64: the model takes more
    shape = dict(n_layer=2, n_head=4, n_embd=64) if quick else dict(n_layer=12, n_head=12,
                                                                      n_embd=768)
    cfg = GPT2Config(vocab_size=vocab_size or len(tok), n_positions=n_positions,
                     bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, **shape)
    torch.manual_seed(0)
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
