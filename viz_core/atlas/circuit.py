"""Edge attribution over a dataset (`python -m viz_core.atlas --task circuit --pairs FILE`).

Every (clean, corrupted) pair of the file goes through `model.edge_attribution(clean,
corrupted, token=, against=, method=, steps=)` (viz_core.analysis.edges: EAP, EAP-IG or
exact edge patching); each edge's score (its share of the clean - corrupted metric) is
written per shard and summarised as the mean and spread of the edge's score over all pairs.
It is patching.py's machinery with edges for heads: the same pairs file, shards, resume,
retries and Ray actors, and the same two files per shard:

    shards/examples-*.parquet  per pair: texts, token, against, metric, metric values, error
    shards/heads-*.parquet     per (pair, edge): sender, receiver, input, score

Summary: circuit.parquet (sender, receiver, input, n, mean, std, sem, min, max),
circuit_top.parquet (the TOP_K pairs of the largest |score| per edge) and atlas.json (task
"circuit", the method, counts, the first errors). The Head atlas page draws the mean
circuit. A pair of the model's whole graph writes every edge (32,491 for a GPT-2-small
shape), so datasets of thousands of pairs on big models make large shards; the mean needs
them all, so none are dropped.
"""

from __future__ import annotations

from pathlib import Path

from ..model.choices import EdgeMethod, choose
from .layout import MANIFEST, read_json
from .patching import (
    PairTask,
    PatchingAtlas,
    PatchingWorker,
    load_pairs,
    run_task,
    summarize_pairs,
)


def _schema():
    import pyarrow as pa

    return pa.schema([("example", pa.int64()), ("sender", pa.string()),
                      ("receiver", pa.string()), ("input", pa.string()),
                      ("score", pa.float64())])


CIRCUIT = PairTask("circuit", ("sender", "receiver", "input"), "score", _schema(),
                   "circuit.parquet", "circuit_top.parquet")
EDGE = list(CIRCUIT.unit)


class CircuitWorker(PatchingWorker):
    """Holds one model; `run_shard(i)` scores every edge on every pair of input shard i."""

    task = CIRCUIT

    def __init__(self, model: str, out: str, batch: int = 8, device: str = "auto",
                 threads: int | None = None, kill_once: str | None = None,
                 method: str = "eap-ig", steps: int = 5):
        self.method = choose(method, EdgeMethod, "method")
        self.steps = int(steps)
        super().__init__(model, out, batch, device, threads, kill_once)

    def measure(self, row: dict) -> tuple[object, list[tuple]]:
        a = self.model.edge_attribution(row["clean"], row["corrupted"], token=row["token"],
                                        against=row["against"], method=self.method,
                                        steps=self.steps)
        cells = a.edges[[*EDGE, "score"]].itertuples(index=False, name=None)
        return a, [(s, r, i or "", float(v)) for s, r, i, v in cells]


def summarize_circuit(out: Path, complete: bool, run: dict | None = None) -> dict:
    """circuit.parquet, circuit_top.parquet and atlas.json (with the method and steps)."""
    cfg = (read_json(Path(out) / MANIFEST) or {}).get("config", {})
    return summarize_pairs(CIRCUIT, out, complete, run, method=cfg.get("method"),
                           steps=cfg.get("steps"))


def is_circuit(path: str | Path) -> bool:
    return run_task(path) == CIRCUIT.name


def load_circuit(path: str | Path) -> PatchingAtlas:
    """A circuit run read back: ``.summary`` per edge (sender, receiver, input, n, mean, std,
    sem, min, max), ``.top`` the pairs of the largest |score| per edge, ``.pairs()``."""
    return load_pairs(CIRCUIT, path, summarize_circuit)


def mean_edges(summary):
    """The summary as an edge frame (sender, receiver, input, score = the mean), for
    viz_core.figures.circuit."""
    return summary[[*EDGE]].assign(score=summary["mean"].to_numpy())

