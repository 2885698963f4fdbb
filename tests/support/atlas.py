"""A small atlas: its input lines, its config and an exact comparison of two runs' output."""

from __future__ import annotations

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
