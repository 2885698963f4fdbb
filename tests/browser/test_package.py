"""Attention Lab as a package: `python -m build` makes a wheel holding every module of
viz_core and attention_lab, the app's files and the shipped checkpoints, and nothing generic at
the top of site-packages; installed into a FRESH virtual environment (the repository not on its path; the
wheel's requirements and nothing else, linked from .venv, and pip finding every one met), it
works from any folder: the
`attention-lab` command's trace equals the library's, `models` lists the shipped models, the
app renders in Chromium, and the quickstart notebook runs on that environment's kernel.

The slow tests share one wheel and one fresh environment (tests/support/package_env.py); the
time each took is written to tests/artifacts/fresh_venv.json.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.browser_support import ARTIFACTS, CHROMIUM, SCRIPT_IDLE, free_port
from tests.support.package_env import TIMINGS

ROOT = Path(__file__).resolve().parents[2]


# ---- fast: the layout find_packages relies on ---------------------------------------------


# ---- slow: a built wheel -----------------------------------------------------------------


# ---- slow: a fresh virtual environment ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_fresh_app_renders_in_chromium(fresh, chromium_browser):
    venv, work, env = fresh
    port = free_port()
    log = open(work / "app.log", "w")  # noqa: SIM115 - closed in finally
    t0 = time.monotonic()
    proc = subprocess.Popen([str(venv / "bin" / "attention-lab"), "app", "--port", str(port),
                             "--address", "127.0.0.1"], cwd=work, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (work / "app.log").read_text()
            assert time.monotonic() < deadline, "the installed app did not start"
            time.sleep(0.5)
        page = chromium_browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/attention?model=en-fr&text=the+red+car")
        page.wait_for_selector(".js-plotly-plot", timeout=120_000)
        page.wait_for_selector(SCRIPT_IDLE, timeout=120_000)
        TIMINGS["app_first_chart_s"] = round(time.monotonic() - t0, 1)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "installed_app.png"))
        assert page.title() == "Attention Lab"
        assert page.locator("h1").first.inner_text().strip() == "Attention"
        assert page.locator("[data-testid='stException']").count() == 0
        assert "la voiture rouge" in page.content()  # the shipped checkpoint ran
        assert not errors, errors
        page.close()
    finally:
        proc.terminate()  # the server itself: attention-lab exec'd streamlit
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
