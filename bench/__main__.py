"""`python -m bench [--quick] [--only NAME]`: one table, also written to bench/results.json."""

from __future__ import annotations

import argparse
import importlib
import json
import math
from pathlib import Path

from viz_core.capture.memory import applied

from .common import machine_note

MODULES = ["bench_capture", "bench_peers", "bench_beam", "bench_payload", "bench_latency",
           "bench_scaling", "bench_atlas", "bench_patching",
           "bench_contributions", "bench_distillation", "bench_flow", "bench_flow_table",
           "bench_edges"]
COLS = ["name", "ratio", "target", "ok", "ours_s", "min–max", "peer_s", "peer", "device"]
# per-module details worth a glance in the table (all fields are in results.json)
DETAILS = ("ratio_of_mins", "threads", "page_faults", "peer_page_faults", "same_output",
           "step50_over_step5", "our_bytes", "bertviz_bytes", "trace_mb", "trace_mb_all_points",
           "peak_growth_mb", "peer_peak_growth_mb", "peak_gb", "page_bytes", "n2_ratio", "model",
           "heatmap_shows_it", "examples_per_s", "peer_examples_per_s", "ray1_examples_per_s",
           "scaling_1_to_2", "steady_ray2", "steady_local", "max_effect_diff", "pearson_heads",
           "pearson_positions", "spearman_heads", "spearman_positions", "adds_up", "p95_s",
           "target_p95_s", "cpu_s", "cpu_meets_budget", "before_p50_s", "before_p95_s",
           "page_done_s", "server_s", "server_cpu_s", "ws_kb", "file_watcher",
           "spearman_mean", "spearman_std", "sequences", "edges", "edges_per_s",
           "peer_edges_per_s", "before_cpu_s", "after_cpu_s", "cpu_ratio", "eap_over_floor")


def fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else (f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}")
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10_000:
        return f"{v:,}"
    return "" if v is None else str(v)


def cells(r: dict) -> list[str]:
    ok = r.get("meets_target")
    spread = (f"{fmt(r['ours_min_s'])}–{fmt(r['ours_max_s'])}" if "ours_min_s" in r else "")
    extra = {"ok": "" if ok is None else ("yes" if ok else "NO"), "min–max": spread}
    out = [fmt(extra[c]) if c in extra else fmt(r.get(c)) for c in COLS]
    details = ", ".join(f"{k}={fmt(r[k])}" for k in DETAILS if k in r)
    return out + [details]


def merged(path: Path, rows: list[dict]) -> list[dict]:
    """The earlier table with this run's modules replaced (``--only``): a partial run keeps
    the other modules' rows. A row of another module with the name of a new row goes too."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = []
    ran = {r["module"] for r in rows}
    names = {r["name"] for r in rows}
    kept = [r for r in old if isinstance(r, dict) and r.get("module") not in ran
            and r.get("name") not in names]
    return kept + rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    ap.add_argument("--only", action="append", help="run only these modules")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's own); 1 "
                    "gives steadier numbers when other work shares the CPU")
    ap.add_argument("--default-malloc", action="store_true",
                    help="leave glibc's allocator settings as they are (the app's "
                    "reuse_freed_memory is applied otherwise): the 'before' of that fix")
    args = ap.parse_args()
    if not args.default_malloc:
        from viz_core.capture.memory import reuse_freed_memory

        reuse_freed_memory()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    rows = []
    machine = {"before": machine_note()}
    allocator = applied() or "glibc defaults"
    for name in args.only or MODULES:
        try:
            mod = importlib.import_module(f"bench.{name}")
        except ImportError as err:
            rows.append({"name": name, "module": name, "skipped": f"not available ({err})"})
            continue
        rows.extend({"module": name, **r} for r in mod.run(quick=args.quick))
    machine["after"] = machine_note()
    for r in rows:
        r.setdefault("machine", f"{machine['before']} -> {machine['after']}")
        r.setdefault("allocator", str(allocator))
    out = Path(__file__).resolve().parent / "results.json"
    out.write_text(json.dumps(merged(out, rows) if args.only else rows, indent=2, default=str))
    print(" | ".join([*COLS, "details"]))
    for r in rows:
        if "skipped" in r:
            print(f"{r['name']} | skipped: {r['skipped']}")
            continue
        print(" | ".join(cells(r)))
    print(f"\nmachine: {machine['before']} at the start, {machine['after']} at the end; "
          f"allocator: {allocator}")
    print(f"{len(rows)} rows written to {out}")


if __name__ == "__main__":
    main()
