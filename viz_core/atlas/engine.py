"""Run an atlas: prepare input shards, run the pending ones on Ray Data (or in-process),
then summarise. `run_atlas(AtlasConfig(...))` is what the CLI and the page call.

Flow:
1. prepare: the driver streams the input once (never holding it all) into input shards of
   `shard_size` examples, plus the built-in probe set; the split is fixed by the manifest,
   so a resumed run sees the same shards.
2. run: every pending shard (no finished output file) goes to a model-holding worker: in
   Ray Data, a dataset of shard ids mapped by an actor pool of AtlasWorker; each actor
   writes its shard's Parquet files itself as it finishes. A killed actor is restarted and
   its shard retried (the output is written atomically, so a retry is identical).
3. summarise: stream the output shards into the per-head summary (summary.py).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from viz_core.i18n import N_

from ..errors import VizError
from ..model.choices import AtlasEngine, AtlasTask, EdgeMethod, choose, options
from .inputs import PROBE, AtlasError, AtlasInputError, InputStats, probe_texts, read_examples
from .layout import MANIFEST, PROGRESS, input_path, read_json, shard_done, write_atomic, write_json
from .worker import AtlasWorker

RAY_PAYOFF_S = 60.0  # auto: Ray pays off above this many in-process seconds (docs/ATLAS.md)
TASKS = options(AtlasTask)
PAIR_TASKS = ("patching", "circuit")  # tasks over (clean, corrupted) pairs
ENGINES = options(AtlasEngine)
MAX_PARALLEL = 1024  # --workers and --threads: more is a typo, not a machine
MAX_PROBES = 100_000  # probe examples (--probe; --limit with --data probe)
MAX_SHARD = 100_000  # examples per shard (--shard-size): a shard's texts are read at once

KILL_ENV = "ATTENTION_LAB_ATLAS_KILL_ONCE"  # test hook: a flag file; one worker exits once
ROOT = Path(__file__).resolve().parents[2]


class AtlasStopped(RuntimeError):
    """Raised by the `stop_after` test hook, like an interrupted run."""


@dataclass
class AtlasConfig:
    model: str
    data: str  # a .txt/.csv/.parquet file, "probe" (roles), or the pairs file (patching)
    out: str
    address: str | None = None  # a Ray cluster ("host:port", "ray://host:port", "auto")
    limit: int | None = None  # first N examples of the data (probe examples: N in total)
    batch: int = 8  # examples per forward pass
    resume: bool = False
    engine: AtlasEngine = "auto"  # "auto": see choose_engine
    workers: int | None = None  # model actors; default: one per GPU, else min(2, CPUs)
    shard_size: int = 64  # examples per output shard (the unit of progress and resume)
    probe: int = 32  # repeated-random-token examples added to the data (induction)
    device: str = "auto"
    threads: int | None = None  # torch threads per worker (default: CPUs / workers)
    seed: int = 0
    task: AtlasTask = "roles"  # "patching", "circuit": data = a CSV of clean/corrupted pairs
    method: EdgeMethod = "eap-ig"  # circuit: edge attribution's method and its IG steps
    steps: int = 5
    ray_after_s: float | None = None  # auto: Ray once the rest would take longer in-process
    # than this many seconds (default RAY_PAYOFF_S); not in the identity: both engines write
    # the same rows

    def identity(self) -> dict:
        """What must match for --resume to continue a run."""
        data = Path(self.data).expanduser()
        stat = data.stat() if data.is_file() else None
        ident = {"model": self.model, "data": str(data.resolve()) if stat else self.data,
                 "data_bytes": stat.st_size if stat else None,
                 "data_mtime_ns": stat.st_mtime_ns if stat else None, "limit": self.limit,
                 "batch": self.batch, "shard_size": self.shard_size, "probe": self.probe,
                 "seed": self.seed}
        if self.task != "roles":  # (a roles run keeps the identity of older versions)
            ident["task"] = self.task
        if self.task == "circuit":
            ident.update(method=self.method, steps=self.steps)
        return ident


# ---- 1. prepare ----------------------------------------------------------------------------
def _write_input_shard(out: Path, shard: int, ids: list[int], texts: list,
                       probe: bool) -> None:
    import pyarrow as pa

    if texts and isinstance(texts[0], dict):  # patching pairs
        write_atomic(input_path(out, shard), pa.table({
            "example": pa.array(ids, pa.int64()),
            **{k: pa.array([t[k] for t in texts], pa.string())
               for k in ("clean", "corrupted", "token", "against")}}))
        return
    write_atomic(input_path(out, shard), pa.table({
        "example": pa.array(ids, pa.int64()), "text": pa.array(texts, pa.string()),
        "probe": pa.array([probe] * len(ids), pa.bool_())}))


def prepare(cfg: AtlasConfig, out: Path, model_for_probes: Callable[[], object]) -> dict:
    """Input shards + manifest; reused as they are when resuming a prepared run."""
    if out.exists() and not out.is_dir():
        raise AtlasError(N_("--out {out} is a file; the atlas writes a folder of files there. "
                            "Choose a new folder's name."), out=out)
    old = read_json(out / MANIFEST)
    ident = cfg.identity()
    if old is not None:
        if not cfg.resume:
            raise AtlasError(N_("{out} already holds an atlas run; pass --resume to continue it "
                               "or choose another --out directory."), out=out)
        if old.get("identity") != ident:
            was = old.get("identity") or {}
            diff = sorted(k for k in {*ident, *was} if was.get(k) != ident.get(k))
            raise AtlasError(N_("{out} holds a run with other settings ({join}); resume it with "
                               "the same ones, or choose another --out."), out=out, join=', '.join(diff))
        if old.get("prepared"):
            return old
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise AtlasError(N_("Cannot make the --out folder {out}: {reason}."), out=out,
                         reason=err.strerror or err) from None
    stats = InputStats()
    shard, ids, texts, next_id = 0, [], [], 0

    def flush(probe: bool) -> None:
        nonlocal shard, ids, texts
        if ids:
            _write_input_shard(out, shard, ids, texts, probe)
            shard, ids, texts = shard + 1, [], []

    n_probe = cfg.probe
    if cfg.task in PAIR_TASKS:
        from .pairs import PairStats, read_pairs

        stats, n_probe = PairStats(), 0
        source = read_pairs(cfg.data, stats, cfg.limit)
    elif cfg.data != PROBE:
        source = read_examples(cfg.data, stats, cfg.limit)
    if cfg.task in PAIR_TASKS or cfg.data != PROBE:
        for text in source:
            ids.append(next_id)
            texts.append(text)
            next_id += 1
            if len(ids) == cfg.shard_size:
                flush(False)
        flush(False)
    else:
        n_probe = cfg.limit if cfg.limit is not None else 64
    if n_probe > 0:
        data_words = []  # the data's own words help a word-level vocabulary find its tokens
        if cfg.data != PROBE and shard > 0:
            import pyarrow.parquet as pq

            first = pq.read_table(input_path(out, 0)).column("text").to_pylist()
            data_words = [w for t in first[:64] for w in t.split()][:400]
        try:
            probes = probe_texts(model_for_probes(), n_probe, cfg.seed, data_words)
        except AtlasInputError:
            if cfg.data == PROBE:  # nothing else to run on
                raise
            # too few words are one token on each stack (a translator's two vocabularies):
            # the data's own examples carry the induction roles, and the run says so
            probes, stats.probes_left_out = [], n_probe
        for text in probes:
            ids.append(next_id)
            texts.append(text)
            next_id += 1
            stats.probes += 1
            if len(ids) == cfg.shard_size:
                flush(True)
        flush(True)
    manifest = {"identity": ident, "prepared": True, "shards": shard, "examples": next_id,
                "input": asdict(stats), "config": asdict(cfg)}
    write_json(out / MANIFEST, manifest)
    return manifest


# ---- 2. run ----------------------------------------------------------------------------------
def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _gpus(device: str) -> int:
    if device == "cpu":
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def check_address(address: str, timeout: float = 5.0) -> None:
    """Fail fast, with a clear message, when nothing listens at a cluster address
    (ray.init would otherwise retry for a minute or more)."""
    from .cluster import check_listening

    if address not in ("auto", "local"):
        check_listening(address, timeout)


def _ray_init(cfg: AtlasConfig, workers: int) -> bool:
    """Connect to (or start) Ray; True when this call started it (and must shut it down)."""
    import ray

    if ray.is_initialized():
        return False
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}}
    if cfg.address:  # run_atlas has checked it (prepare_connection) before any work
        from .cluster import explain_init_failure

        try:
            ray.init(address=cfg.address, runtime_env=env, log_to_driver=False)
        except Exception as err:  # noqa: BLE001 - Ray wraps the cause: say it in one line
            raise AtlasError(explain_init_failure(cfg.address, err)) from None
    else:  # a local Ray sized to this machine (explicit num_cpus: see docs/ARCHITECTURE.md)
        ray.init(num_cpus=max(_cpus(), workers), runtime_env=env, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    return True


def choose_engine(rest_examples: int, seconds_per_example: float, workers: int,
                  ray_after_s: float | None = None) -> dict:
    """The "auto" engine's rule, asked after each shard run in-process: go on in-process
    unless the rest would take longer than RAY_PAYOFF_S there (estimated from the shards just
    run) and Ray has at least two workers to run it with (one worker cannot beat this
    process). RAY_PAYOFF_S is where Ray's start-up (starting Ray, loading the model in every
    worker, shutting down) is paid back by its workers running in parallel, measured with
    bench/bench_atlas.py (docs/ATLAS.md, "Which engine")."""
    limit = RAY_PAYOFF_S if ray_after_s is None else float(ray_after_s)
    estimate = rest_examples * seconds_per_example
    go = workers >= 2 and rest_examples > 0 and estimate > limit
    return {"engine": "ray" if go else "local", "rest_examples": rest_examples,
            "estimated_local_s": round(estimate, 2), "ray_after_s": limit,
            "workers": workers}


def _run_ray(cfg: AtlasConfig, out: Path, pending: list[int], workers: int, threads: int,
             on_shard: Callable[[dict], None], check_stop: Callable[[], None],
             kill_once: str | None, worker_cls: type = AtlasWorker,
             extra: dict | None = None) -> None:
    import ray

    extra = extra or {}
    import ray.data

    owns = _ray_init(cfg, workers)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False  # our own bar counts examples, not blocks
        ctx.print_on_execution_start = False
        gpus = 1 if _gpus(cfg.device) and cfg.device != "cpu" else 0
        ds = ray.data.from_items([{"shard": s} for s in pending],
                                 override_num_blocks=len(pending))
        with warnings.catch_warnings():
            # Ray Data's own default is to restart and retry forever; 3 tries stop a shard
            # that crashes its worker every time. There is no named parameter for these yet.
            warnings.filterwarnings("ignore", "`ray_remote_args` is deprecated")
            ds = ds.map_batches(
                worker_cls, batch_size=1, compute=ray.data.ActorPoolStrategy(size=workers),
                fn_constructor_kwargs={"model": cfg.model, "out": str(out),
                                       "batch": cfg.batch, "device": cfg.device,
                                       "threads": threads, "kill_once": kill_once, **extra},
                num_cpus=0 if gpus else threads, num_gpus=gpus,
                max_restarts=3, max_task_retries=3)  # a killed actor: restarted, shard retried
        # Progress from the shard files themselves: Ray Data hands results to the driver in
        # bursts, while each actor writes its shard the moment it is done.
        sizes = {s: _examples_in(out, [s]) for s in pending}
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(0.25):
                for s in pending:
                    if shard_done(out, s):
                        on_shard({"shard": s, "examples": sizes[s]})

        watcher = threading.Thread(target=watch, name="atlas-progress", daemon=True)
        watcher.start()
        try:
            for row in ds.iter_rows():
                on_shard({"shard": int(row["shard"]), "examples": int(row["examples"])})
                check_stop()
        except (AtlasStopped, VizError):
            raise
        except Exception as err:  # noqa: BLE001 - Ray wraps a worker's error: say it in short
            cause = getattr(err, "cause", None) or err
            first = (str(cause).strip().splitlines() or [""])[-1][:300]
            raise AtlasError(N_("The Ray run stopped: {name}: {first} (finished shards are kept; "
                               "fix the cause and rerun with --resume)"),
                                 name=type(cause).__name__, first=first) from err
        finally:
            stop.set()
            watcher.join()
    finally:
        if owns:
            ray.shutdown()


def run_atlas(cfg: AtlasConfig, progress: Callable[[dict], None] | None = None,
              stop_after: int | None = None) -> dict:
    """Run (or resume) an atlas into cfg.out; returns the run info (also in atlas.json).

    progress: called with {"done", "total", "shards_done", "shards", "rate"} as shards finish.
    stop_after: test hook; stop (AtlasStopped) after that many shards, as if interrupted.
    """
    from .summary import summarize

    if cfg.engine not in ENGINES:
        raise AtlasError(N_("Unknown engine {engine!r}: 'auto', 'ray' or 'local'."), engine=cfg.engine)
    if cfg.task not in TASKS:
        raise AtlasError(N_("Unknown task {task!r}: 'roles', 'patching' or 'circuit'."), task=cfg.task)
    extra = {}  # the worker's own settings, beside the common ones
    if cfg.task == "circuit":
        extra = {"method": choose(cfg.method, EdgeMethod, "method")}
        if isinstance(cfg.steps, bool) or not isinstance(cfg.steps, int) or \
                not 1 <= cfg.steps <= 1000:
            raise AtlasError(N_("--steps must be a whole number from 1 to 1000, not {steps!r}."),
                                steps=cfg.steps)
        extra["steps"] = cfg.steps
    if cfg.batch < 1 or cfg.shard_size < 1 or (cfg.limit is not None and cfg.limit < 1):
        raise AtlasError(N_("--batch, --limit and the shard size must be at least 1."))
    for option, value in (("--workers", cfg.workers), ("--threads", cfg.threads)):
        # (Ray's or torch's own refusal: an exception; torch's for 10**11 threads
        # "Overflow when unpacking long")
        if value is not None and not 1 <= value <= MAX_PARALLEL:
            raise AtlasError(N_("{option} must be from 1 to {most:,}, not {value}."),
                             option=option, most=MAX_PARALLEL, value=value)
    if cfg.shard_size > MAX_SHARD:
        raise AtlasError(N_("--shard-size must be from 1 to {most:,}, not {value}: a shard's "
                            "texts are read at once, and a shard is the unit a stopped run "
                            "resumes from."), most=MAX_SHARD, value=cfg.shard_size)
    probes = [cfg.probe]
    if cfg.data == PROBE and cfg.task not in PAIR_TASKS and cfg.limit is not None:
        probes.append(cfg.limit)  # --data probe: --limit is the number of probe examples
    for value in probes:  # the probe set is built in memory at once
        if 0 <= value <= MAX_PROBES:
            continue
        raise AtlasError(N_("--probe (and --limit with --data probe) must be from 0 to "
                            "{most:,}, not {value}: the probe set is a fixed kind of example, "
                            "and more of them add nothing."), most=MAX_PROBES, value=value)
    if cfg.address and cfg.engine != "local":  # before anything is read or written
        from .cluster import prepare_connection

        prepare_connection(cfg.address)  # token mode on when the cluster needs it
    out = Path(cfg.out).expanduser()
    gpus = _gpus(cfg.device)
    workers = cfg.workers or (gpus if gpus else min(2, _cpus()))
    threads = cfg.threads or max(1, _cpus() // workers)
    kill_once = os.environ.get(KILL_ENV) or None
    worker_cls = AtlasWorker
    summarise = summarize
    if cfg.task == "patching":
        from .patching import PatchingWorker, summarize_patching

        worker_cls, summarise = PatchingWorker, summarize_patching
    elif cfg.task == "circuit":
        from .circuit import CircuitWorker, summarize_circuit

        worker_cls, summarise = CircuitWorker, summarize_circuit
    local: list = []

    def local_worker():
        if not local:
            local.append(worker_cls(cfg.model, str(out), cfg.batch, cfg.device, cfg.threads,
                                    kill_once=None, **extra))
        return local[0]

    manifest = prepare(cfg, out, lambda: local_worker().model)
    total, n_shards = manifest["examples"], manifest["shards"]
    pending = [s for s in range(n_shards) if not shard_done(out, s)]
    state = {"done": total - _examples_in(out, pending), "shards_done": n_shards - len(pending),
             "t0": time.perf_counter(), "new": 0}

    reported: set[int] = set()
    lock = threading.Lock()

    def on_shard(r: dict) -> None:
        """Count a finished shard once (the Ray path hears of it twice) and report."""
        with lock:
            if r["shard"] in reported:
                return
            reported.add(r["shard"])
            state["done"] += int(r["examples"])
            state["new"] += int(r["examples"])
            state["shards_done"] += 1
            elapsed = time.perf_counter() - state["t0"]
            report = {"state": "running", "done": state["done"], "total": total,
                      "shards_done": state["shards_done"], "shards": n_shards,
                      "rate": state["new"] / elapsed if elapsed > 0 else 0.0}
            write_json(out / PROGRESS, report)
            if progress:
                progress(report)

    def check_stop() -> None:
        if stop_after is not None and len(reported) >= stop_after:
            raise AtlasStopped(f"stopped after {stop_after} shards (test hook)")

    write_json(out / PROGRESS, {"state": "running", "done": state["done"], "total": total,
                                "shards_done": state["shards_done"], "shards": n_shards,
                                "rate": 0.0})
    ran: dict[str, int] = {}  # engine -> shards it ran
    decision: dict = {}
    try:
        todo = list(pending)
        use_ray = cfg.engine == "ray" or (cfg.engine == "auto" and cfg.address)
        if cfg.engine == "auto" and not cfg.address:
            # in-process, shard by shard, until the rest would take long enough for Ray's
            # start-up to pay off (choose_engine; measured in docs/ATLAS.md)
            w = local_worker()
            while todo and not use_ray:
                t = time.perf_counter()
                r = w.run_shard(todo[0])
                per_example = (time.perf_counter() - t) / max(1, int(r["examples"]))
                on_shard(r)
                ran["local"] = ran.get("local", 0) + 1
                todo = todo[1:]
                check_stop()
                rest = _examples_in(out, todo) if todo else 0
                decision = choose_engine(rest, per_example, workers, cfg.ray_after_s)
                use_ray = decision["engine"] == "ray"
            if use_ray:
                local.clear()  # the driver's model is not needed while Ray's workers run
        if todo and not use_ray:
            w = local_worker()
            for s in todo:
                on_shard(w.run_shard(s))
                ran["local"] = ran.get("local", 0) + 1
                check_stop()
        elif todo:
            _run_ray(cfg, out, todo, workers, threads, on_shard, check_stop, kill_once,
                     worker_cls, extra)
            ran["ray"] = len(todo)
    except BaseException as err:
        write_json(out / PROGRESS, {**(read_json(out / PROGRESS) or {}), "state": "stopped",
                                    "message": str(err)[:500]})
        summarise(out, complete=False)  # what finished stays readable
        raise
    seconds = time.perf_counter() - state["t0"]
    info = summarise(out, complete=True, run={
        "engine": cfg.engine, "ran_on": sorted(ran), "shards_by_engine": ran,
        "auto": decision or None,
        "workers": workers if "ray" in ran else 1,
        "threads": threads, "address": cfg.address, "seconds": seconds,
        "examples_per_s": state["new"] / seconds if seconds > 0 and state["new"] else None,
        "resumed_shards": n_shards - len(pending)})
    write_json(out / PROGRESS, {"state": "done", "done": total, "total": total,
                                "shards_done": n_shards, "shards": n_shards,
                                "rate": info["run"].get("examples_per_s") or 0.0})
    return info


def _examples_in(out: Path, shards: list[int]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(input_path(out, s)).metadata.num_rows for s in shards)
