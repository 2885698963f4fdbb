"""The model holder: turns one input shard into its two output shards.

The same class runs in-process (engine "local") and as a Ray Data actor (engine "ray"), so
both engines give the same rows. An output shard is written to a temporary name and renamed
when complete: a killed worker leaves no half shard, and a retried shard overwrites nothing
but an identical file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from ..errors import VizError
from .layout import examples_path, heads_path, input_path, write_atomic
from .roles import ROLES, block_roles

FLOAT_COLUMNS = (*ROLES, "distance", "entropy")
# The attention patterns one forward pass may keep: --batch is a most, and a batch of long
# inputs runs in parts below this (MiniLM at 512 tokens keeps ~75 MB of patterns per input:
# --batch 2000 asked for 150 GB, and the allocator's refusal was a traceback).
PATTERN_BYTES = 1 << 30
PEAK_COLUMNS = tuple(f"peak_{r}" for r in ROLES)


def _stack_valid(trace) -> dict[str, np.ndarray]:
    """Per stack ("encoder"/"decoder"): False at padding positions (all-blocked key columns)."""
    valid: dict[str, np.ndarray] = {}
    for name in trace.blocks:
        stack, _, kind = name.split(".")
        if kind == "self" and stack not in valid:
            valid[stack] = ~trace[name].mask.all(axis=0)
    return valid


def trace_rows(trace) -> tuple[dict[str, list], dict]:
    """Role scores of every (block, head) of one trace -> column lists, and token facts."""
    valid = _stack_valid(trace)
    cols: dict[str, list] = {k: [] for k in ("kind", "layer", "head", "n_q", *FLOAT_COLUMNS,
                                             *PEAK_COLUMNS)}
    for name in trace.blocks:
        b = trace[name]
        stack, layer, kind = name.split(".")
        self_attn = kind == "self"
        k_valid = ~b.mask.all(axis=0)
        q_valid = valid.get("decoder", k_valid) if not self_attn else k_valid
        q_valid = q_valid[: b.mask.shape[0]]
        scores = block_roles(b.pattern, b.mask, b.query_tokens, b.key_tokens, q_valid, k_valid,
                             self_attn)
        n = b.pattern.shape[0]
        cols["kind"] += [f"{stack}.{kind}"] * n
        cols["layer"] += [int(layer)] * n
        cols["head"] += list(range(n))
        cols["n_q"] += [int(q_valid.sum())] * n
        for k, v in scores.items():
            cols[k] += v.tolist()
    facts = {}
    for stack, key in (("encoder", "tokens"), ("decoder", "target_tokens")):
        if stack in valid:
            name = next(n for n in trace.blocks if n.startswith(stack + "."))
            toks = trace[name].key_tokens
            facts[key] = [t for t, ok in zip(toks, valid[stack]) if ok]
    if "tokens" not in facts:  # decoder-only: its prompt is the decoder input
        facts["tokens"], facts["target_tokens"] = facts.get("target_tokens", []), []
    facts.setdefault("target_tokens", [])
    facts["token_cut"] = any("was cut" in w for w in trace.warnings)
    return cols, facts


def forward_slices(model, texts: list[str], batch: int, budget: int | None = None
                   ) -> list[slice]:
    """``texts`` in runs of at most ``batch`` whose kept patterns (every block's heads x n x
    n float32, n the run's longest input) stay within ``budget`` bytes (PATTERN_BYTES); a
    single input always runs."""
    budget = PATTERN_BYTES if budget is None else budget
    heads = sum(model.block_heads.values()) or 1
    most = max(1, int(model.max_tokens or 1))

    def length(text: str) -> int:
        try:
            return min(model.count_tokens(text) + 2, most)  # + specials
        except VizError:  # the trace says what is wrong with it
            return 1

    out, start, longest = [], 0, 0
    for i, text in enumerate(texts):
        m = length(text)  # one tokenizer call per input
        n = max(longest, m)
        if i > start and ((i - start) >= batch or 4 * heads * n * n * (i - start + 1) > budget):
            out.append(slice(start, i))
            start, n = i, m
        longest = n
    if texts:
        out.append(slice(start, len(texts)))
    return out


class AtlasWorker:
    """Holds one model; `run_shard(i)` analyses input shard i. Called by Ray Data with a
    batch {"shard": [i, ...]} and returns one small row per shard."""

    def __init__(self, model: str, out: str, batch: int = 8, device: str = "auto",
                 threads: int | None = None, kill_once: str | None = None):
        import torch

        import viz_core as vc

        if threads:
            torch.set_num_threads(threads)
        self.model = vc.load(model, device=device)
        self.out, self.batch, self.kill_once = Path(out), max(1, batch), kill_once

    def __call__(self, batch: dict) -> dict:
        done = [self.run_shard(int(s)) for s in batch["shard"]]
        return {k: np.array([d[k] for d in done]) for k in done[0]}

    def _targets(self, texts: list[str], probe: list[bool]) -> list[str] | None:
        """Decoder inputs of an encoder-decoder model: each input's greedy output (what the
        Attention page shows for that text), the probe text itself for probes."""
        if self.model.kind != "encoder-decoder":
            return None
        return [t if p else self.model.trace(t).output_text for t, p in zip(texts, probe)]

    def _traces(self, texts, targets) -> list:
        """One batch; on a model error, example by example so one bad input costs one row."""
        try:
            return self.model.trace_batch(texts, targets, capture=("pattern",))
        except VizError:
            out = []
            for i, t in enumerate(texts):
                try:
                    tg = None if targets is None else [targets[i]]
                    out.append(self.model.trace_batch([t], tg, capture=("pattern",))[0])
                except VizError as err:
                    out.append(err)
            return out

    def _maybe_die(self, shard: int) -> None:
        """Test hook: the first time any worker reaches the middle of a shard, it exits."""
        if self.kill_once and not os.path.exists(self.kill_once):
            Path(self.kill_once).write_text(f"killed during shard {shard}\n")
            os._exit(1)

    def run_shard(self, shard: int) -> dict:
        import pyarrow as pa
        import pyarrow.parquet as pq

        t0 = time.perf_counter()
        table = pq.read_table(input_path(self.out, shard))
        ids = table.column("example").to_pylist()
        texts = table.column("text").to_pylist()
        probe = table.column("probe").to_pylist()
        heads: dict[str, list] = {}
        ex: dict[str, list] = {k: [] for k in ("example", "text", "target", "probe", "tokens",
                                               "target_tokens", "n_tokens", "token_cut",
                                               "error")}
        for sl in forward_slices(self.model, texts, self.batch):
            start = sl.start
            targets = self._targets(texts[sl], probe[sl])
            traces = self._traces(texts[sl], targets)
            if start > 0:
                self._maybe_die(shard)
            for j, tr in enumerate(traces):
                i = start + j
                ex["example"].append(ids[i])
                ex["text"].append(texts[i])
                ex["target"].append(None if targets is None else targets[j])
                ex["probe"].append(bool(probe[i]))
                if isinstance(tr, Exception):
                    ex["tokens"].append([]), ex["target_tokens"].append([])
                    ex["n_tokens"].append(0), ex["token_cut"].append(False)
                    ex["error"].append(str(tr)[:500])
                    continue
                cols, facts = trace_rows(tr)
                for k, v in cols.items():
                    heads.setdefault(k, []).extend(v)
                n_rows = len(cols["head"])
                heads.setdefault("example", []).extend([ids[i]] * n_rows)
                heads.setdefault("probe", []).extend([bool(probe[i])] * n_rows)
                ex["tokens"].append(facts["tokens"])
                ex["target_tokens"].append(facts["target_tokens"])
                ex["n_tokens"].append(len(facts["tokens"]))
                ex["token_cut"].append(facts["token_cut"])
                ex["error"].append(None)
        write_atomic(examples_path(self.out, shard), pa.table(ex, schema=EXAMPLES_SCHEMA))
        # the heads file is the shard's "done" mark: written last
        write_atomic(heads_path(self.out, shard), heads_table(heads))
        return {"shard": shard, "examples": len(ids), "rows": len(heads.get("head", [])),
                "seconds": time.perf_counter() - t0}


def _schemas():
    import pyarrow as pa

    examples = pa.schema([("example", pa.int64()), ("text", pa.string()),
                          ("target", pa.string()), ("probe", pa.bool_()),
                          ("tokens", pa.list_(pa.string())),
                          ("target_tokens", pa.list_(pa.string())), ("n_tokens", pa.int32()),
                          ("token_cut", pa.bool_()), ("error", pa.string())])
    heads = pa.schema([("example", pa.int64()), ("probe", pa.bool_()), ("kind", pa.string()),
                       ("layer", pa.int16()), ("head", pa.int16()), ("n_q", pa.int32()),
                       *((c, pa.float32()) for c in FLOAT_COLUMNS),
                       *((c, pa.int16()) for c in PEAK_COLUMNS)])
    return examples, heads


EXAMPLES_SCHEMA, HEADS_SCHEMA = _schemas()


def heads_table(cols: dict[str, list]):
    import pyarrow as pa

    if not cols:
        return HEADS_SCHEMA.empty_table()
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in HEADS_SCHEMA},
                    schema=HEADS_SCHEMA)
