"""A small atlas: its input lines, its config and an exact comparison of two runs' output;
the pair tasks' (patching, circuit) pairs, pair file and configs."""

from __future__ import annotations

import csv

import pandas as pd

from viz_core.atlas import (
    AtlasConfig,
)

LINES = ["the red cat", "i do not", "the small black cats", "the dog sees the cat",
         "a cat and a dog", "the cat sat on the mat", "i see the red dog", "the black cat"]


def shards_of(out) -> dict[str, pd.DataFrame]:
    """Every output shard, by file name, as read back."""
    return {p.name: pd.read_parquet(p) for p in sorted((out / "shards").glob("*.parquet"))}


def assert_same_output(a, b) -> None:
    sa, sb = shards_of(a), shards_of(b)
    assert sa.keys() == sb.keys() and sa
    for name in sa:
        pd.testing.assert_frame_equal(sa[name], sb[name], check_exact=True, obj=name)
    for f in ("summary.parquet", "top.parquet", "hist.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(a / f), pd.read_parquet(b / f), obj=f)


def cfg(data_file, out, **kw) -> AtlasConfig:
    base = dict(model="lm", data=str(data_file), out=str(out), engine="local", shard_size=5,
                probe=6, batch=4, threads=1)
    return AtlasConfig(**{**base, **kw})


# (clean, corrupted, token, against): same token counts except the last pair
PAIRS = [
    ("the red cat", "the black cat", "", ""),
    ("the dog sees the cat", "the cat sees the cat", "", ""),
    ("i do not", "i do the", "", ""),
    ("the small black cats", "the small red cats", "eat", "sees"),
    ("a cat and a dog", "a dog and a cat", "", ""),
    ("the red cat", "the cat", "", ""),  # 3 tokens against 2: recorded, left out
]
CIRCUIT_METHOD = "eap-ig"
CIRCUIT_STEPS = 3


def write_pairs(path, rows, header=("clean", "corrupted", "token", "against")):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def pcfg(pairs, out, **kw) -> AtlasConfig:
    """The head patching task's config over a pair file."""
    base = dict(model="lm", data=str(pairs), out=str(out), task="patching", engine="local",
                shard_size=2, threads=1, device="cpu")
    return AtlasConfig(**{**base, **kw})


def ccfg(pairs, out, **kw) -> AtlasConfig:
    """The circuit task's config over a pair file."""
    return pcfg(pairs, out, **{"task": "circuit", "method": CIRCUIT_METHOD,
                               "steps": CIRCUIT_STEPS, **kw})
