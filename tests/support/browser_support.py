"""A streamlit server on a free local port and Debian's chromium driven by Playwright."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--disable-quic"]
ARTIFACTS = ROOT / "tests" / "artifacts"
# Streamlit's own run state on the app root: "running" / "rerunRequested" while the server
# works on a run the browser asked for, "notRunning" once that run has finished.
SCRIPT_IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(extra_env: dict | None = None, timeout: float = 90.0):
    """Start `streamlit run app.py` on 127.0.0.1:<free port>; yield its base URL."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", **(extra_env or {})}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = open(ARTIFACTS / f"server-{port}.log", "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [sys.executable, "-m", "attention_lab.server", "run", str(ROOT / "app.py"),
         "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("streamlit server did not start")
            time.sleep(0.5)
        yield base, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS,
                                      headless=True)


def is_base_path_probe(url: str) -> bool:
    """Streamlit's frontend looks for its server under the page's path first
    (/attention/_stcore/health) and falls back to the root: an expected 404."""
    return "/_stcore/health" in url or "/_stcore/host-config" in url


def real_errors(errors: list[str]) -> list[str]:
    http = [e for e in errors if e.startswith("HTTP ")]
    # "Failed to load resource" console lines carry no URL; they count only when some
    # failed response was not one of the expected probes.
    return [e for e in errors if not (e.startswith("Failed to load resource") and not http)]


def watch_errors(page) -> list[str]:
    """The list the page's console errors, uncaught exceptions, failed requests and HTTP
    errors (but the expected probes) are appended to from now on (filter it with real_errors)."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: errors.append(f"HTTP {r.status} {r.url}")
            if r.status >= 400 and not is_base_path_probe(r.url) else None)
    page.on("requestfailed", lambda r: errors.append(f"FAILED {r.url} {r.failure}"))
    return errors


def open_page(browser, url):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors, dialogs = watch_errors(page), []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url)
    return page, errors, dialogs
