"""Per-head summary of an atlas, streamed shard by shard (memory flat in the examples):

- summary.parquet: kind, layer, head, the mean of every role score, mean distance/entropy,
  the number of examples, and the dominant role;
- top.parquet: for each head and role the top-k examples (score, query position of the peak);
- hist.parquet: for each head and role a histogram of the per-example scores (BINS bins);
- atlas.json: the run's facts (model, counts, cut lines, speed, complete or not).

Induction is measured on the probe examples (repeated random tokens) when the run has them;
every other role on the data examples when there are any. `load_atlas` reads it all back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from viz_core.i18n import N_

from .layout import (
    INFO,
    MANIFEST,
    damaged,
    damaged_error,
    done_shards,
    examples_path,
    heads_path,
    read_info,
    read_json,
    write_json,
)
from .roles import ROLES, dominant_role

KEYS = ["probe", "kind", "layer", "head"]
HEAD = ["kind", "layer", "head"]
MEANS = [*ROLES, "distance", "entropy"]
BINS = 20
TOP_K = 5


def _source(role: str, has_probe: bool, has_data: bool) -> bool:
    """Which examples speak for a role: True = probes, False = data."""
    if role == "induction":
        return has_probe
    return not has_data


class _Accumulator:
    def __init__(self, k: int):
        self.k = k
        self.sums: pd.DataFrame | None = None
        self.counts: pd.DataFrame | None = None
        self.hist: dict[str, pd.Series] = {}
        self.top: dict[str, pd.DataFrame] = {}

    def add(self, df: pd.DataFrame) -> None:
        g = df.groupby(KEYS, sort=False)[MEANS]
        s, c = g.sum(), g.count()
        self.sums = s if self.sums is None else self.sums.add(s, fill_value=0)
        self.counts = c if self.counts is None else self.counts.add(c, fill_value=0)
        for role in ROLES:
            sub = df.loc[df[role].notna(), [*KEYS, "example", role, f"peak_{role}"]]
            bins = np.clip((sub[role].to_numpy() * BINS).astype(int), 0, BINS - 1)
            cnt = sub.assign(bin=bins).groupby([*KEYS, "bin"]).size()
            self.hist[role] = cnt if role not in self.hist else self.hist[role].add(
                cnt, fill_value=0)
            both = sub if role not in self.top else pd.concat([self.top[role], sub])
            both = both.sort_values([role, "example"], ascending=[False, True], kind="stable")
            self.top[role] = both.groupby(KEYS, sort=False).head(self.k)


def summarize(out: Path, complete: bool, run: dict | None = None, k: int = TOP_K) -> dict:
    """Write summary.parquet, top.parquet, hist.parquet and atlas.json from the finished
    shards of `out`; returns the info dict. Safe to call on a partial run."""
    import pyarrow.parquet as pq

    out = Path(out)
    manifest = read_json(out / MANIFEST) or {}
    acc = _Accumulator(k)
    counts = {"examples": 0, "probe_examples": 0, "token_cut": 0, "failed": 0}
    shards = done_shards(out)
    for s in shards:
        ex = pq.read_table(examples_path(out, s), columns=["probe", "token_cut", "error"])
        probe = np.asarray(ex.column("probe").to_pylist(), bool)
        counts["examples"] += int((~probe).sum())
        counts["probe_examples"] += int(probe.sum())
        counts["token_cut"] += sum(bool(v) for v in ex.column("token_cut").to_pylist())
        counts["failed"] += sum(v is not None for v in ex.column("error").to_pylist())
        df = pq.read_table(heads_path(out, s)).to_pandas()
        if len(df):
            acc.add(df)
    has_probe, has_data = counts["probe_examples"] > 0, counts["examples"] > 0
    summary, top, hist = _tables(acc, has_probe, has_data)
    summary.to_parquet(out / "summary.parquet", index=False)
    top.to_parquet(out / "top.parquet", index=False)
    hist.to_parquet(out / "hist.parquet", index=False)
    old = read_json(out / INFO) or {}
    info = {
        "model": manifest.get("config", {}).get("model"),
        "data": manifest.get("config", {}).get("data"),
        "complete": complete and len(shards) == manifest.get("shards"),
        "shards": manifest.get("shards"), "shards_done": len(shards),
        "planned_examples": manifest.get("examples"), **counts,
        "input": manifest.get("input", {}),
        "kinds": sorted(summary["kind"].unique().tolist()) if len(summary) else [],
        "induction_from": "probe" if has_probe else "data",
        "run": run if run is not None else old.get("run", {}),
        "written": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    write_json(out / INFO, info)
    return info


def _tables(acc: _Accumulator, has_probe: bool, has_data: bool):
    if acc.sums is None:
        empty = pd.DataFrame(columns=[*HEAD, *MEANS, "n", "dominant"])
        return empty, pd.DataFrame(columns=[*HEAD, "role", "rank", "example", "score", "peak"]), \
            pd.DataFrame(columns=[*HEAD, "role", "counts"])
    means = (acc.sums / acc.counts.replace(0, np.nan)).reset_index()
    n = acc.counts.max(axis=1).rename("n").reset_index()
    heads = means[HEAD].drop_duplicates().sort_values(HEAD).reset_index(drop=True)
    summary = heads.copy()
    for col in MEANS:
        src = _source(col if col in ROLES else "distance", has_probe, has_data)
        part = means.loc[means["probe"] == src, [*HEAD, col]]
        summary = summary.merge(part, on=HEAD, how="left")
    part = n.loc[n["probe"] == (not has_data)]
    summary = summary.merge(part[[*HEAD, "n"]], on=HEAD, how="left")
    summary["n"] = summary["n"].fillna(0).astype(int)
    summary["dominant"] = [dominant_role(r) for r in summary[list(ROLES)].to_dict("records")]

    tops, hists = [], []
    for role in ROLES:
        src = _source(role, has_probe, has_data)
        t = acc.top.get(role)
        if t is not None and len(t):
            t = t.loc[t["probe"] == src].rename(columns={role: "score", f"peak_{role}": "peak"})
            t = t.assign(role=role, rank=t.groupby(HEAD).cumcount())
            tops.append(t[[*HEAD, "role", "rank", "example", "score", "peak"]])
        h = acc.hist.get(role)
        if h is not None and len(h):
            h = h.reset_index(name="count")
            h = h.loc[h["probe"] == src]
            for key, grp in h.groupby(HEAD):
                counts = np.zeros(BINS, np.int64)
                counts[grp["bin"].to_numpy()] = grp["count"].to_numpy()
                hists.append({"kind": key[0], "layer": key[1], "head": key[2], "role": role,
                              "counts": counts.tolist()})
    top = (pd.concat(tops, ignore_index=True) if tops else
           pd.DataFrame(columns=[*HEAD, "role", "rank", "example", "score", "peak"]))
    top = top.sort_values([*HEAD, "role", "rank"]).reset_index(drop=True)
    hist = pd.DataFrame(hists, columns=[*HEAD, "role", "counts"])
    return summary, top, hist


@dataclass
class Atlas:
    """A finished (or partial) atlas read back from its directory."""

    path: Path
    info: dict
    summary: pd.DataFrame  # one row per (kind, layer, head)
    top: pd.DataFrame  # kind, layer, head, role, rank, example, score, peak
    hist: pd.DataFrame  # kind, layer, head, role, counts (BINS ints over [0, 1])

    def examples(self, ids: list[int]) -> pd.DataFrame:
        """Text, target and tokens of some examples (read shard by shard, filtered)."""
        import pyarrow.parquet as pq

        want, parts = set(int(i) for i in ids), []
        with damaged(self.path):
            for s in done_shards(self.path):
                t = pq.read_table(examples_path(self.path, s),
                                  filters=[("example", "in", list(want))])
                if t.num_rows:
                    parts.append(t.to_pandas())
        found = (pd.concat(parts, ignore_index=True).set_index("example", drop=False) if parts
                 else pd.DataFrame(columns=["example", "text", "target", "tokens",
                                            "target_tokens"]))
        missing = sorted(want - set(int(i) for i in found.index))
        if missing:  # the summary names them: their shard is gone
            raise damaged_error(self.path, f"examples {missing[:3]} not in shards/")
        return found


def is_atlas(path: Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def load_atlas(path: str | Path) -> Atlas:
    """Read an atlas directory; summarises it first when only shards are there."""
    from .inputs import AtlasInputError
    from .patching import run_task

    path = Path(path).expanduser()
    if not is_atlas(path):
        raise AtlasInputError(N_("{path} is not an atlas output directory (no {MANIFEST})."),
                                 path=path, MANIFEST=MANIFEST)
    task = run_task(path)
    if task in ("patching", "circuit"):
        what = N_("a head-patching run") if task == "patching" else N_("a circuit run")
        raise AtlasInputError(N_("{path} holds {what} (--task {task}): read it with "
                                "viz_core.atlas.load_{task}."), path=path, what=what, task=task)
    with damaged(path):
        if not (path / INFO).is_file() or not (path / "summary.parquet").is_file():
            summarize(path, complete=False)
        return Atlas(path, read_info(path), pd.read_parquet(path / "summary.parquet"),
                     pd.read_parquet(path / "top.parquet"),
                     pd.read_parquet(path / "hist.parquet"))
