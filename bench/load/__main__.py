"""`python -m bench.load` (`make load`): a class of students on one server, measured.

    python -m bench.load                        30 sessions on one app process
    python -m bench.load --replicas 2           the same through nginx (attention-lab serve)
    python -m bench.load --sessions 4 --head-switches 3 --text-changes 1 --pages masks

Starts the server itself (the flags `attention-lab serve` gives its replicas), warms each
app process with one visit per model (the teacher's), then runs the sessions of
bench/load/scenario.py over Streamlit's own protocol (bench/load/protocol.py): no browser, so
the clients' CPU is this process's, reported apart from the server's. Prints p50/p95/max per
kind of interaction, errors, whether each session saw only its own text, the server's peak
RSS and RSS per session, and CPU; --out FILE writes the same as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import psutil

from bench.load.protocol import Driver, Session
from bench.load.scenario import KINDS, PAGES, Outcome, Profile, run_sessions

ROOT = Path(__file__).resolve().parents[2]


# ---- the server ---------------------------------------------------------------------------
def _wait_health(url: str, proc: subprocess.Popen, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")


@contextmanager
def server(replicas: int, log_dir: Path):
    """replicas 0: one app process, straight; N >= 1: `attention-lab serve --replicas N`.
    Yields (base URL, the top process, the app processes' own URLs)."""
    from attention_lab.cli import APP_ENV
    from attention_lab.serve import free_loopback_port, replica_argv

    port = free_loopback_port()
    env = {**os.environ, **APP_ENV}
    log = open(log_dir / "server.log", "w")  # noqa: SIM115 - closed below
    if replicas == 0:
        proc = subprocess.Popen(replica_argv(port), cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    else:
        proc = subprocess.Popen(
            [sys.executable, "-m", "attention_lab", "serve", "--replicas", str(replicas),
             "--port", str(port), "--address", "127.0.0.1", "--state-dir",
             str(log_dir / "serve")], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_health(base + ("/_stcore/health" if replicas == 0 else "/healthz"), proc)
        if replicas == 0:
            apps = [base]
        else:
            text = (log_dir / "server.log").read_text()
            apps = re.findall(r"replica \d+: (http://127\.0\.0\.1:\d+)", text)
        yield base, proc, apps
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []


class Sampler(threading.Thread):
    """The server's RSS (every process of it, nginx included) every 0.5 s, per app process
    too; its CPU seconds between start() and stop()."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.samples: list[float] = []
        self.per_app: dict[int, float] = {}
        self.halt = threading.Event()
        self.cpu0 = self.cpu_seconds()

    def cpu_seconds(self) -> float:
        total = 0.0
        for p in tree(self.proc):
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    def run(self):
        while not self.halt.is_set():
            total = 0.0
            for p in tree(self.proc):
                try:
                    rss = p.memory_info().rss / 1e6
                    if "streamlit" in " ".join(p.cmdline()):
                        self.per_app[p.pid] = max(self.per_app.get(p.pid, 0.0), rss)
                    total += rss
                except psutil.Error:
                    pass
            self.samples.append(total)
            self.halt.wait(0.5)

    def stop(self) -> float:
        """-> the server's CPU seconds since start."""
        self.halt.set()
        self.join()
        return self.cpu_seconds() - self.cpu0


async def warm(apps: list[str], models: tuple[str, ...], pages: tuple[str, ...]) -> float:
    """One visit per model to each app process (the models load, the caches fill)."""
    t0 = time.monotonic()
    for app in apps:
        for model in models:
            s = Session(app)
            await s.open("attention", {"model": model, "text": "the teacher opens the app"})
            for page in pages:
                await s.page(page)
            await s.close()
    return time.monotonic() - t0


# ---- the report -----------------------------------------------------------------------
def stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    a = np.asarray(values)
    return {"n": len(a), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "max": float(a.max())}


def report(profile: Profile, out: Outcome, replicas: int, wall: float, sampler: Sampler,
           baseline_mb: float, server_cpu: float, client_cpu: float, load: dict,
           warm_s: float) -> dict:
    kinds = {k: stats([r.seconds for r in out.records if r.kind == k]) for k in KINDS}
    by_model = {m: {k: stats([r.seconds for r in out.records if r.kind == k and r.model == m])
                    for k in KINDS} for m in profile.models}
    size = {k: float(np.median([r.bytes for r in out.records if r.kind == k] or [0]))
            for k in KINDS}
    peak = max(sampler.samples) if sampler.samples else 0.0
    spread: dict[str, int] = {}
    for rep in out.replicas.values():
        spread[rep or "direct"] = spread.get(rep or "direct", 0) + 1
    return {
        "profile": profile.describe(), "replicas": replicas or "1 process, no nginx",
        "sessions_finished": len(out.finished), "wall_s": wall, "warm_up_s": warm_s,
        "latency_s": kinds, "latency_by_model_s": by_model, "median_bytes": size,
        "errors": out.errors, "foreign_text_seen": out.foreign, "own_view_missing":
        out.mismatches, "rss_mb": {"baseline": baseline_mb, "peak": peak,
                                   "per_session": (peak - baseline_mb) / max(1, profile.sessions),
                                   "peak_per_app_process": sorted(sampler.per_app.values())},
        "cpu_s": {"server": server_cpu, "clients": client_cpu,
                  "server_per_session": server_cpu / max(1, profile.sessions)},
        "sessions_per_replica": spread, "load_average": load,
        "cores": len(os.sched_getaffinity(0)),
    }


def print_report(rep: dict) -> None:
    print(f"\n{rep['profile']}; server: {rep['replicas']}; {rep['cores']} cores")
    print(f"load average (1/5/15 min) before {rep['load_average']['before']}, after "
          f"{rep['load_average']['after']}")
    print(f"{'interaction':<12} {'n':>5} {'p50 s':>7} {'p95 s':>7} {'max s':>7} {'bytes':>9}")
    for kind, s in rep["latency_s"].items():
        if s["n"]:
            print(f"{kind:<12} {s['n']:>5} {s['p50']:>7.2f} {s['p95']:>7.2f} {s['max']:>7.2f} "
                  f"{rep['median_bytes'][kind]:>9,.0f}")
    for model, kinds in rep["latency_by_model_s"].items():
        print(f"  {model}: " + ", ".join(f"{k} p50 {s['p50']:.2f} p95 {s['p95']:.2f}"
                                         for k, s in kinds.items() if s["n"]))
    r, c = rep["rss_mb"], rep["cpu_s"]
    print(f"sessions finished {rep['sessions_finished']}; errors {len(rep['errors'])}; "
          f"another session's text seen {len(rep['foreign_text_seen'])}; own view missing "
          f"{len(rep['own_view_missing'])}")
    for line in (rep["errors"] + rep["foreign_text_seen"] + rep["own_view_missing"])[:10]:
        print(f"  {line}")
    print(f"server RSS: {r['baseline']:.0f} MB warm, peak {r['peak']:.0f} MB, "
          f"{r['per_session']:.1f} MB per session; per app process "
          f"{', '.join(f'{x:.0f}' for x in r['peak_per_app_process'])} MB")
    print(f"CPU: server {c['server']:.0f} s ({c['server_per_session']:.1f} s a session), "
          f"these clients {c['clients']:.0f} s, wall {rep['wall_s']:.0f} s "
          f"(warm-up {rep['warm_up_s']:.0f} s)")
    if len(rep["sessions_per_replica"]) > 1:
        print(f"sessions per replica: {rep['sessions_per_replica']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--head-switches", type=int, default=20)
    ap.add_argument("--text-changes", type=int, default=2)
    ap.add_argument("--pages", default=",".join(PAGES), help="comma list of URL paths")
    ap.add_argument("--models", default="minilm,en-fr", help="session i uses the i-th mod n")
    ap.add_argument("--think", default="1,3", help="min,max seconds between two steps")
    ap.add_argument("--ramp", type=float, default=30.0, help="arrivals over this many seconds")
    ap.add_argument("--replicas", type=int, default=0,
                    help="0: one app process without nginx; N: attention-lab serve --replicas N")
    ap.add_argument("--timeout", type=float, default=600.0, help="longest wait for one step")
    ap.add_argument("--out", help="write the report as JSON to this file")
    args = ap.parse_args(argv)
    lo, hi = (float(x) for x in args.think.split(","))
    profile = Profile(args.sessions, args.head_switches, args.text_changes,
                      tuple(p for p in args.pages.split(",") if p),
                      tuple(m for m in args.models.split(",") if m), (lo, hi), args.ramp)
    print(f"load: {profile.describe()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="attention-lab-load-") as tmp, \
            server(args.replicas, Path(tmp)) as (base, proc, apps):
        warm_s = asyncio.run(warm(apps, profile.models, profile.pages))
        sampler = Sampler(proc.pid)
        time.sleep(1.0)
        baseline = sum(p.memory_info().rss for p in tree(sampler.proc)) / 1e6
        sampler.cpu0 = sampler.cpu_seconds()
        load = {"before": [round(x, 2) for x in os.getloadavg()]}
        me = psutil.Process()
        client0 = sum(me.cpu_times()[:2])
        sampler.start()
        out = Outcome()
        wall = asyncio.run(run_sessions(lambda i: Driver(base, args.timeout), profile, out))
        server_cpu = sampler.stop()
        client_cpu = sum(me.cpu_times()[:2]) - client0
        load["after"] = [round(x, 2) for x in os.getloadavg()]
    rep = report(profile, out, args.replicas, wall, sampler, baseline, server_cpu, client_cpu,
                 load, warm_s)
    print_report(rep)
    if args.out:
        Path(args.out).write_text(json.dumps(rep, indent=1), encoding="utf-8")
    ok = not (rep["errors"] or rep["foreign_text_seen"] or rep["own_view_missing"])
    return 0 if ok and rep["sessions_finished"] == profile.sessions else 1


if __name__ == "__main__":
    sys.exit(main())
