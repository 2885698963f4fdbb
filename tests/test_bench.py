"""Every benchmark module runs in its quick mode (small sizes, one repetition), so none can
rot. Only sizes and correctness are asserted here, never wall-clock times."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.__main__ import MODULES
from tests.browser_support import CHROMIUM

pytestmark = pytest.mark.slow


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


def test_every_module_is_in_the_runner():
    here = Path(__file__).resolve().parent.parent / "bench"
    files = sorted(p.stem for p in here.glob("bench_*.py"))
    assert sorted(MODULES) == files


def test_capture():
    rows = quick_rows("bench_capture")
    native = [r for r in rows if r["name"].startswith("native")]
    assert [r["n_tokens"] for r in native] == [64, 64]
    assert native[0]["faithfulness"] is not None and native[0]["faithfulness"] < 1e-4
    hf = [r for r in rows if r["name"].startswith("MiniLM-shaped trace,")]
    assert hf and all(r["same_output"] for r in hf)  # our patterns are eager's
    memory = [r for r in rows if "peak" in r["name"]]
    assert memory and memory[0]["peak_gb"] > 0


def test_peers():
    rows = quick_rows("bench_peers")
    peers = {r["name"].split(" vs ")[1].split(",")[0] for r in rows}
    assert peers == {"eager", "tl"}  # both peers measured on the same model and length
    for r in rows:
        assert r["n_tokens"] == 64 and r["peak_growth_mb"] >= 0 and r["peer_peak_growth_mb"] >= 0


def test_beam():
    rows = quick_rows("bench_beam")
    for r in rows:
        assert r["same_output"], r  # the same hypotheses as HF generate


def test_payload():
    rows = quick_rows("bench_payload")
    assert {r["n_tokens"] for r in rows} == {32}
    for r in rows:
        assert 0 < r["our_bytes"] and 0 < r["bertviz_bytes"]
    together = next(r for r in rows if "all three" in r["name"])
    assert together["our_bytes"] == sum(r["our_bytes"] for r in rows if r is not together)


def test_scaling():
    rows = quick_rows("bench_scaling")
    assert [r["n_tokens"] for r in rows] == [64, 128]
    for r in rows:
        n = r["n_tokens"]
        assert r["shape"] == [4, n, n] and r["rows_sum_to_1"]
        assert r["page_bounded"] and set(r["page_bytes_by_figure"]) == {
            "heatmap", "grid", "head view", "mean", "rollout"}
        # the lazy trace holds q and k: 9 blocks x 2 x n x d_model 128, float32
        assert r["trace_mb"] == pytest.approx(9 * 2 * n * 128 * 4 / 2**20)
        # every pattern and score read: + 9 blocks x 2 x 4 heads x n x n float32 (+ v, z)
        assert r["trace_mb_all_points"] > r["trace_mb"] + 9 * 2 * 4 * n * n * 4 / 2**20
    assert rows[1]["trace_mb"] == pytest.approx(2 * rows[0]["trace_mb"])  # linear in N


@pytest.mark.browser
def test_latency():
    rows = quick_rows("bench_latency")
    names = " | ".join(r["name"] for r in rows)
    server = [r for r in rows if "AppTest" in r.get("how", "")]
    assert len(server) == 2, names
    sentence = next(r for r in server if "sentence" in r["name"])
    assert sentence["heatmap_shows_it"] and sentence["charts"] >= 3
    if Path(CHROMIUM).exists():
        browser = next(r for r in rows if "browser" in r["name"])
        assert browser["sentences"] == 1


def test_atlas():
    assert quick_rows("bench_atlas")


def test_contributions():
    rows = quick_rows("bench_contributions")
    assert [r["name"].split(",")[0] for r in rows] == ["logit_attribution", "logit_lens (k=5)"]
    assert rows[0]["adds_up"]  # the timed attribution adds up to the model's logit
