"""Soak: reruns with different inputs in one session; memory growth after the warm-up stays under
100 MB (the model and trace caches are bounded, nothing accumulates per rerun). `make test`
runs 100 reruns; `make soak` the long profile, 300 (ATTENTION_LAB_SOAK_RERUNS)."""

from __future__ import annotations

import gc
import os
import time

import psutil
from streamlit.testing.v1 import AppTest

import viz_core as vc
from tests.support.apptest import APP

RERUNS = int(os.environ.get("ATTENTION_LAB_SOAK_RERUNS", "100"))
LIMIT_MB = 100
WARM_UP = 40  # > the trace cache's 32 entries, so the caches are full before the baseline


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 1e6


def sentence(i: int) -> str:
    return f"{1 + i % 28} {['may', 'june', 'july', 'mars', 'mai'][i % 5]} {1950 + i % 97}"


def test_reruns_memory_growth_under_100_mb():
    model = vc.shipped_models()[0]
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = model
    at.query_params["text"] = sentence(0)
    at.switch_page("pages/attention.py")
    at.run()
    start, samples = time.monotonic(), []
    for i in range(1, RERUNS + 1):
        at.text_area(key="text").set_value(f"{sentence(i)} #{i}").run()
        assert not at.exception, (i, [e.message for e in at.exception][:1])
        if i == WARM_UP:
            gc.collect()
            baseline = rss_mb()
        if i % 20 == 0:
            samples.append(rss_mb())
    gc.collect()
    end = rss_mb()
    growth = end - baseline
    print(f"\nsoak: {RERUNS} reruns in {time.monotonic() - start:.0f}s; RSS after warm-up "
          f"{baseline:.0f} MB, at the end {end:.0f} MB, growth {growth:+.1f} MB, "
          f"peak {max(samples):.0f} MB")
    assert growth < LIMIT_MB
