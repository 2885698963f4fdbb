"""Every benchmark module runs in its quick mode (small sizes, one repetition), so none can
rot. Only sizes and correctness are asserted here, never wall-clock times."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.bench_rows import quick_rows
from tests.support.browser_support import CHROMIUM

pytestmark = pytest.mark.slow


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
    # server CPU per interaction over Streamlit's protocol: every kind ran, none failed
    cpu = {r["name"].split(" per ")[1].split(" (")[0]: r for r in rows if "server CPU" in r["name"]}
    assert set(cpu) == {"first page", "head switch", "head again", "layer switch", "view radio",
                        "heads matter tab"}, names
    assert all(r["after_errors"] == 0 and r["n"] >= 1 and r["after_cpu_s"] >= 0
               for r in cpu.values()), cpu
