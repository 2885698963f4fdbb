"""Regenerate the README screenshots from the real app: `.venv/bin/python docs/make_screenshots.py`."""

from __future__ import annotations

import sys
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.browser_support import launch_chromium, streamlit_server  # noqa: E402

SHOTS = {
    "attention.png": ("attention", {"model": "en-fr", "text": "the small black cats eat the cake",
                                    "kind": "decoder.cross", "layer": 1, "head": 0}),
    "beam.png": ("beam", {"model": "en-fr", "text": "she does not want a green apple",
                          "beam": 3, "max_len": 12}),
    "circuits.png": ("circuits", {"model": "induction"}),
    "attention-zh.png": ("attention", {"model": "zh-en", "lang": "zh"}),
}


def main() -> None:
    from playwright.sync_api import sync_playwright

    with streamlit_server() as (base, _), sync_playwright() as pw:
        browser = launch_chromium(pw)
        for file, (page_name, params) in SHOTS.items():
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.goto(f"{base}/{page_name}?{urllib.parse.urlencode(params)}")
            page.wait_for_selector(".js-plotly-plot >> visible=true", timeout=120_000)
            page.wait_for_timeout(500)
            page.wait_for_selector("[data-testid='stStatusWidget']", state="detached",
                                   timeout=120_000)
            page.wait_for_timeout(1500)
            page.screenshot(path=str(ROOT / "docs" / file))
            page.close()
        browser.close()


if __name__ == "__main__":
    main()
