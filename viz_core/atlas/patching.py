"""Head patching over a dataset (`python -m viz_core.atlas --task patching --pairs FILE`).

Every (clean, corrupted) pair of the file goes through `model.patch(clean, corrupted,
token=, against=, over="heads")`; the per-head effects (0 = the corrupted run's metric, 1 =
the clean run's) are written per shard and summarised as the mean and spread of each head's
effect over all pairs. It runs on the atlas engine (pairs.py reads the file, engine.py cuts
the shards and runs them in-process or on Ray, with resume and retries), so the worker has
the same interface as the role worker (worker.py) and writes the same two files per shard:

    shards/examples-*.parquet  per pair: texts, token, against, metric, clean / corrupted
                               metric values, tokens, error (a pair the model rejects)
    shards/heads-*.parquet     per (pair, block, head): effect

Summary (streamed shard by shard): patching.parquet (kind, layer, head, n, mean, std, sem,
min, max), patching_top.parquet (the TOP_K pairs with the largest effect per head) and
atlas.json (task "patching", counts, the metric, the first errors).

The machinery is shared with `--task circuit` (circuit.py): a ``PairTask`` names a task's
unit (a head here; an edge there), its value column and its summary files, and a worker
subclass says how one pair is measured (``measure``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from viz_core.i18n import N_

from ..analysis.patching import small_gap
from ..errors import VizError
from .layout import (
    INFO,
    MANIFEST,
    damaged,
    damaged_error,
    done_shards,
    error_data,
    errors_path,
    examples_path,
    heads_path,
    input_path,
    read_info,
    read_json,
    write_atomic,
    write_json,
)

HEAD = ["kind", "layer", "head"]
TOP_K = 5
STATS = ["n", "mean", "std", "sem", "min", "max"]


def _schemas():
    import pyarrow as pa

    pairs = pa.schema([("example", pa.int64()), ("clean", pa.string()),
                       ("corrupted", pa.string()), ("token", pa.string()),
                       ("against", pa.string()), ("metric", pa.string()),
                       ("clean_metric", pa.float64()), ("corrupted_metric", pa.float64()),
                       ("n_tokens", pa.int32()), ("error", pa.string())])
    effects = pa.schema([("example", pa.int64()), ("kind", pa.string()), ("layer", pa.int16()),
                         ("head", pa.int16()), ("effect", pa.float64())])
    return pairs, effects


PAIRS_SCHEMA, EFFECTS_SCHEMA = _schemas()


@dataclass(frozen=True)
class PairTask:
    """A task over (clean, corrupted) pairs: per pair, one value per unit."""

    name: str  # the --task name, kept in the manifest's config
    unit: tuple[str, ...]  # the columns naming a unit: a head, an edge
    value: str  # the column of its value
    schema: object  # pyarrow schema of the per-unit rows: example, *unit, value
    summary: str  # file of the per-unit statistics
    top: str  # file of the TOP_K pairs per unit


PATCHING = PairTask("patching", tuple(HEAD), "effect", EFFECTS_SCHEMA, "patching.parquet",
                    "patching_top.parquet")
TASK, SUMMARY, TOP = PATCHING.name, PATCHING.summary, PATCHING.top


def head_cells(p) -> list[tuple[str, int, int, float]]:
    """(kind, layer, head, effect) of every head in a Patching over heads.

    `p.rows` names the effect's rows by attention block ("decoder.3.self"): kind
    "decoder.self", layer 3, as in the role atlas. Without names (the bare contract: rows =
    layers) the kind is "self". NaN cells (no such head) are left out."""
    effect = np.asarray(p.effect, dtype=np.float64)
    if effect.ndim != 2:
        raise VizError(N_("patch(over='heads') returned an effect of shape {shape}; expected "
                         "[layer, head]."), shape=effect.shape)
    names = list(getattr(p, "rows", None) or [])
    out = []
    for i in range(effect.shape[0]):
        kind, layer = "self", i
        if i < len(names) and names[i].count(".") == 2:
            stack, num, block = names[i].split(".")
            kind, layer = f"{stack}.{block}", int(num)
        for j in range(effect.shape[1]):
            v = float(effect[i, j])
            if not math.isnan(v):
                out.append((kind, layer, j, v))
    return out


class PatchingWorker:
    """Holds one model; `run_shard(i)` patches every pair of input shard i. The same
    interface as worker.AtlasWorker, so the engine runs it in-process or as a Ray actor.
    Subclasses (circuit.CircuitWorker) set ``task`` and ``measure``."""

    task = PATCHING

    def __init__(self, model: str, out: str, batch: int = 8, device: str = "auto",
                 threads: int | None = None, kill_once: str | None = None):
        import torch

        import viz_core as vc

        if threads:
            torch.set_num_threads(threads)
        self.model = vc.load(model, device=device)
        self.out, self.kill_once = Path(out), kill_once

    def __call__(self, batch: dict) -> dict:
        done = [self.run_shard(int(s)) for s in batch["shard"]]
        return {k: np.array([d[k] for d in done]) for k in done[0]}

    def measure(self, row: dict) -> tuple[object, list[tuple]]:
        """(the result: .metric, .clean, .corrupted, .tokens; its (*unit, value) rows)."""
        p = self.model.patch(row["clean"], row["corrupted"], token=row["token"],
                             against=row["against"], over="heads")
        return p, head_cells(p)

    def _maybe_die(self, shard: int) -> None:
        """Test hook (as in AtlasWorker): the first worker past a shard's first pair exits."""
        import os

        if self.kill_once and not os.path.exists(self.kill_once):
            Path(self.kill_once).write_text(f"killed during shard {shard}\n")
            os._exit(1)

    def run_shard(self, shard: int) -> dict:
        import pyarrow as pa
        import pyarrow.parquet as pq

        t0 = time.perf_counter()
        table = pq.read_table(input_path(self.out, shard)).to_pylist()
        schema = self.task.schema
        pairs: dict[str, list] = {f.name: [] for f in PAIRS_SCHEMA}
        eff: dict[str, list] = {f.name: [] for f in schema}
        columns = [f.name for f in schema][1:]  # *unit, value
        kept: dict[str, dict] = {}  # each failed pair's error as data, for translation
        for i, row in enumerate(table):
            if i > 0:
                self._maybe_die(shard)
            for k in ("example", "clean", "corrupted", "token", "against"):
                pairs[k].append(row[k])
            try:
                p, cells = self.measure(row)
            except VizError as err:
                for k in ("metric", "clean_metric", "corrupted_metric", "n_tokens"):
                    pairs[k].append(None)
                pairs["error"].append(str(err)[:500])
                kept[str(row["example"])] = error_data(err)
                continue
            pairs["metric"].append(str(p.metric))
            pairs["clean_metric"].append(float(p.clean))
            pairs["corrupted_metric"].append(float(p.corrupted))
            toks = getattr(p, "tokens", None)
            pairs["n_tokens"].append(len(toks) if toks else None)
            pairs["error"].append(None)
            for cell in cells:
                eff["example"].append(row["example"])
                for name, v in zip(columns, cell):
                    eff[name].append(v)
        write_json(errors_path(self.out, shard), kept)
        write_atomic(examples_path(self.out, shard), pa.table(pairs, schema=PAIRS_SCHEMA))
        # the per-unit file (heads-*.parquet, for edges too) is the shard's "done" mark
        write_atomic(heads_path(self.out, shard), pa.table(eff, schema=schema))
        return {"shard": shard, "examples": len(table), "rows": len(eff[self.task.value]),
                "seconds": time.perf_counter() - t0}


# ---- summary -------------------------------------------------------------------------------
class _Moments:
    """Count, mean and sum of squared deviations per unit, merged shard by shard (Chan et
    al.'s pairwise update: no loss of precision from a running sum of squares). The top pairs
    of a unit are those of the largest value, or of the largest |value| (``by_size``)."""

    def __init__(self, unit=tuple(HEAD), value: str = "effect", by_size: bool = False):
        self.unit, self.value, self.by_size = list(unit), value, by_size
        self.frame: pd.DataFrame | None = None
        self.top: pd.DataFrame | None = None

    def add(self, df: pd.DataFrame) -> None:
        g = df.groupby(self.unit, sort=False)[self.value]
        part = pd.DataFrame({"n": g.count(), "mean": g.mean(), "min": g.min(), "max": g.max()})
        part["m2"] = g.var(ddof=0).fillna(0.0) * part["n"]
        if self.frame is None:
            self.frame = part
        else:
            a, b = self.frame.align(part, join="outer")
            a, b = a.fillna({"n": 0, "mean": 0.0, "m2": 0.0}), b.fillna(
                {"n": 0, "mean": 0.0, "m2": 0.0})
            n = a["n"] + b["n"]
            delta = b["mean"] - a["mean"]
            mean = a["mean"] + delta * (b["n"] / n)
            m2 = a["m2"] + b["m2"] + delta ** 2 * a["n"] * b["n"] / n
            both = pd.concat([a[["min", "max"]], b[["min", "max"]]], axis=1)
            self.frame = pd.DataFrame({"n": n, "mean": mean, "min": both["min"].min(axis=1),
                                       "max": both["max"].max(axis=1), "m2": m2})
        both = df if self.top is None else pd.concat([self.top, df])
        key = both[self.value].abs() if self.by_size else both[self.value]
        both = both.assign(_key=key).sort_values(["_key", "example"], ascending=[False, True],
                                                 kind="stable").drop(columns="_key")
        self.top = both.groupby(self.unit, sort=False).head(TOP_K)

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        unit, value = self.unit, self.value
        if self.frame is None:
            return (pd.DataFrame(columns=[*unit, *STATS]),
                    pd.DataFrame(columns=[*unit, "rank", "example", value]))
        f = self.frame.reset_index()
        f["n"] = f["n"].astype(int)
        f["std"] = np.where(f["n"] > 1, np.sqrt(f["m2"] / (f["n"] - 1).clip(lower=1)), np.nan)
        f["sem"] = f["std"] / np.sqrt(f["n"])
        summary = f[[*unit, *STATS]].sort_values(unit).reset_index(drop=True)
        top = self.top.assign(rank=self.top.groupby(unit).cumcount())
        top = top[[*unit, "rank", "example", value]].sort_values([*unit, "rank"])
        return summary, top.reset_index(drop=True)


def summarize_pairs(task: PairTask, out: Path, complete: bool, run: dict | None = None,
                    **extra) -> dict:
    """Write the task's summary and top files and atlas.json from the finished shards of
    `out`; returns the info dict (``extra`` added to it). Safe on a partial run."""
    import pyarrow.parquet as pq

    out = Path(out)
    manifest = read_json(out / MANIFEST) or {}
    moments = _Moments(task.unit, task.value, by_size=task is not PATCHING)
    counts = {"examples": 0, "failed": 0, "small_gap": 0}
    metrics: dict[str, int] = {}
    errors: list[dict] = []
    shards = done_shards(out)
    for s in shards:
        ex = pq.read_table(examples_path(out, s), columns=[
            "example", "metric", "error", "clean_metric", "corrupted_metric"]).to_pylist()
        counts["examples"] += len(ex)
        kept = None
        for r in ex:
            if r["error"] is not None:
                counts["failed"] += 1
                if len(errors) < 5:  # the text, and its template and values where kept
                    kept = (read_json(errors_path(out, s)) or {}) if kept is None else kept
                    data = kept.get(str(r["example"])) if isinstance(kept, dict) else None
                    errors.append({"example": r["example"], "error": r["error"],
                                   **({"data": data} if isinstance(data, dict) else {})})
            elif r["metric"]:  # the first 20 kinds of metric, then "other"
                key = r["metric"] if r["metric"] in metrics or len(metrics) < 20 else "other"
                metrics[key] = metrics.get(key, 0) + 1
                # a pair whose corruption barely moves its metric: its shares are noise
                counts["small_gap"] += small_gap(r["clean_metric"], r["corrupted_metric"])
        df = pq.read_table(heads_path(out, s)).to_pandas()
        if len(df):
            moments.add(df)
    summary, top = moments.tables()
    summary.to_parquet(out / task.summary, index=False)
    top.to_parquet(out / task.top, index=False)
    old = read_json(out / INFO) or {}
    cfg = manifest.get("config", {})
    info = {
        "task": task.name, "model": cfg.get("model"), "data": cfg.get("data"),
        "complete": complete and len(shards) == manifest.get("shards"),
        "shards": manifest.get("shards"), "shards_done": len(shards),
        "planned_examples": manifest.get("examples"), **counts,
        "patched": counts["examples"] - counts["failed"], "probe_examples": 0,
        "token_cut": 0, "input": manifest.get("input", {}), "metrics": metrics,
        "errors": errors, **extra,
        "run": run if run is not None else old.get("run", {}),
        "written": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    write_json(out / INFO, info)
    return info


def summarize_patching(out: Path, complete: bool, run: dict | None = None) -> dict:
    """patching.parquet, patching_top.parquet and atlas.json (with the kinds of head)."""
    info = summarize_pairs(PATCHING, out, complete, run)
    summary = pd.read_parquet(Path(out) / SUMMARY)
    info["kinds"] = sorted(summary["kind"].unique().tolist()) if len(summary) else []
    write_json(Path(out) / INFO, info)
    return info


@dataclass
class PatchingAtlas:
    """A finished (or partial) pair-task run read back from its directory (patching; a
    circuit run is read as this too, its units edges)."""

    path: Path
    info: dict
    summary: pd.DataFrame  # *unit (kind, layer, head), n, mean, std, sem, min, max
    top: pd.DataFrame  # *unit, rank, example, value (effect)

    def pairs(self, ids: list[int] | None = None) -> pd.DataFrame:
        """The pairs (texts, token, metric values, error), all or some, shard by shard."""
        import pyarrow.parquet as pq

        parts = []
        with damaged(self.path):
            for s in done_shards(self.path):
                filters = None if ids is None else [("example", "in", [int(i) for i in ids])]
                t = pq.read_table(examples_path(self.path, s), filters=filters)
                if t.num_rows:
                    parts.append(t.to_pandas())
        if ids is not None:  # the summary names them: their shard is gone
            got = {int(i) for p in parts for i in p["example"]}
            missing = sorted({int(i) for i in ids} - got)
            if missing:
                raise damaged_error(self.path, f"pairs {missing[:3]} not in shards/")
        if not parts:
            return PAIRS_SCHEMA.empty_table().to_pandas()
        df = pd.concat(parts, ignore_index=True)
        for col in ("clean", "corrupted", "token", "against", "metric", "error"):
            df[col] = df[col].astype(object).where(df[col].notna(), None)
        return df.set_index("example", drop=False)


def run_task(path: str | Path) -> str | None:
    """The --task of the atlas run in ``path`` (None: no manifest there)."""
    info = read_json(Path(path) / MANIFEST)
    if info is None:
        return None
    task = (info.get("config") if isinstance(info.get("config"), dict) else {}).get("task")
    return task if isinstance(task, str) else "roles"


def is_patching(path: str | Path) -> bool:
    return run_task(path) == TASK


def load_pairs(task: PairTask, path: str | Path, summarise) -> PatchingAtlas:
    """A ``task`` run read back (``summarise(path, complete=False)`` first if it was never
    summarised, e.g. a run stopped early)."""
    from .inputs import AtlasInputError

    path = Path(path).expanduser()
    if run_task(path) != task.name:
        raise AtlasInputError(N_("{path} is not the output of an atlas --task {name} run."),
                                 path=path, name=task.name)
    with damaged(path):
        if not (path / INFO).is_file() or not (path / task.summary).is_file():
            summarise(path, complete=False)
        return PatchingAtlas(path, read_info(path),
                             pd.read_parquet(path / task.summary),
                             pd.read_parquet(path / task.top))


def load_patching(path: str | Path) -> PatchingAtlas:
    return load_pairs(PATCHING, path, summarize_patching)
