"""Running a benchmark module in its quick profile and checking the rows every benchmark writes."""

from __future__ import annotations

import math


def quick_rows(module: str) -> list[dict]:
    import importlib

    rows = importlib.import_module(f"bench.{module}").run(quick=True)
    assert rows, module
    for r in rows:
        assert r["name"]
        if "skipped" in r:
            continue
        assert r["device"], r["name"]  # every row says where it ran
        if "ratio" in r:
            assert math.isfinite(r["ratio"]) and r["ratio"] > 0, r
        if "ours_min_s" in r:
            assert 0 < r["ours_min_s"] <= r["ours_s"] <= r["ours_max_s"], r
    return [r for r in rows if "skipped" not in r]
