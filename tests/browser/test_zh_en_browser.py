"""zh-en in Chromium (issue 31 item 2): the Attention page on the seed sentence, its alignment
against the grammar's reference opened, with Chinese glyphs drawn (not empty boxes: the
fonts-noto-cjk of `make system-deps`), no exception, no console error and no text overlap."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.support.browser_support import (
    ARTIFACTS,
    CHROMIUM,
    SCRIPT_IDLE,
    real_errors,
    watch_errors,
)
from tests.support.language import in_chinese
from tests.support.overlaps import VIEWPORT, page_findings, settle
from viz_core.loading.entry import CHECKPOINTS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
SEED = "动物没有过马路，因为它太累了"
# Each character drawn on a canvas in the page's font, compared with the drawing of a code
# point no font has (U+10FFFD, a private-use character): equal pixels = an empty box (tofu).
TOFU = """(chars) => {
  const c = document.createElement('canvas'); c.width = 48; c.height = 48;
  const g = c.getContext('2d');
  const font = '32px ' + getComputedStyle(document.body).fontFamily;
  const draw = (s) => { g.clearRect(0, 0, 48, 48); g.font = font; g.fillText(s, 4, 36);
                        return Array.from(g.getImageData(0, 0, 48, 48).data).join(','); };
  const box = draw('\\u{10FFFD}'), blank = draw(' ');
  return chars.map(ch => { const d = draw(ch); return d === box || d === blank; });
}"""


def test_attention_page_draws_chinese_and_its_alignment(app_server, chromium_browser):
    best = json.loads((CHECKPOINTS / "zh-en" / "card.json").read_text())["metrics"][
        "alignment"]["best"]
    query = urllib.parse.urlencode({"model": "zh-en", "text": SEED, "kind": "decoder.cross",
                                    "layer": best["block"].split(".")[1], "head": best["head"]})
    tab = chromium_browser.new_page(viewport=VIEWPORT)
    errors = watch_errors(tab)
    try:
        tab.goto(f"{app_server}/attention?{query}")
        settle(tab)
        tab.get_by_text("Alignment: argmax source per target").click()
        settle(tab)
        assert tab.locator("[data-testid='stException']").count() == 0
        assert not real_errors(errors), errors
        body = tab.locator("[data-testid='stMain']").inner_text()
        assert "the animal did not cross the street because it was too tired" in body
        assert "word alignment" in body and "This head:" in body
        # the heatmap's key labels are the source's words
        labels = tab.evaluate("() => [...document.querySelectorAll('.xtick text')]"
                              ".map(t => t.textContent)")
        assert {"动物", "没有", "过", "马路", "因为", "它"} <= set(labels)
        tofu = tab.evaluate(TOFU, list("动物没有过马路因为它太累了"))
        assert not any(tofu), tofu
        assert tab.evaluate(TOFU, ["\U000F0000"]) == [True]  # the check can fail
        assert page_findings(tab) == []
    finally:
        tab.close()


def test_the_page_list_is_chinese_and_keeps_the_input(app_server, chromium_browser):
    """The sidebar's page list in 简体中文, its folded pages under a Chinese label (no English
    "View N more"): opening 电路 (Circuits) from it keeps the model, the text and the language,
    and the Circuits page starts on the textbook pair (累 → 宽). Plotly's own toolbar on the
    Attention page speaks Chinese too."""
    query = urllib.parse.urlencode({"model": "zh-en", "text": SEED, "lang": "zh"})
    tab = chromium_browser.new_page(viewport=VIEWPORT)
    errors = watch_errors(tab)
    try:
        tab.goto(f"{app_server}/attention?{query}")
        settle(tab)
        # Plotly's own toolbar speaks Chinese too (the chart config's locale)
        tab.locator(".js-plotly-plot").first.hover()  # the toolbar is drawn on a hover
        tab.wait_for_selector(".js-plotly-plot .modebar-btn", timeout=30_000)
        titles = tab.evaluate("() => [...document.querySelectorAll('.js-plotly-plot "
                              ".modebar-btn')].map(e => e.getAttribute('data-title'))")
        assert in_chinese("Download plot as a PNG") in titles, titles
        assert "Download plot as a PNG" not in titles and "Reset axes" not in titles, titles
        links = "[data-testid='stSidebar'] a[data-testid='stPageLink-NavLink']"
        tab.wait_for_function(f"() => document.querySelectorAll(\"{links}\").length === 16",
                              timeout=60_000)
        names = tab.locator(links).all_text_contents()
        assert "注意力头内部" in " ".join(names) and "电路" in " ".join(names), names
        folded = tab.locator("[data-testid='stSidebar'] [data-testid='stExpander'] summary")
        assert "另外 6 个页面" in folded.inner_text()
        assert tab.locator("[data-testid='stSidebarNav']").count() == 0  # no "View 6 more"
        folded.click()
        link = tab.get_by_role("link", name="电路")
        link.wait_for(state="visible")
        arrived = ("() => (document.querySelector('h1') || {}).textContent === '电路'"
                   " && location.pathname.endsWith('/circuits')")
        # Streamlit ignores a click on a page link while its widgets are disabled (PageLink's
        # onClick; the native page list's links too): click when the app is idle, and again
        # after a few seconds if nothing happened, as a user would
        for attempt in range(3):
            tab.wait_for_selector(SCRIPT_IDLE, timeout=60_000)
            link.click()
            try:
                tab.wait_for_function(arrived, timeout=30_000 if attempt == 2 else 6_000)
                break
            except PlaywrightTimeout:
                if attempt == 2:
                    raise
        settle(tab)
        params = urllib.parse.parse_qs(urllib.parse.urlparse(tab.url).query)
        assert (params["model"], params["lang"], params["text"]) == (["zh-en"], ["zh"], [SEED])
        boxes = [tab.locator("textarea").nth(i).input_value() for i in range(3)]
        assert SEED in boxes and SEED.replace("累", "宽") in boxes, boxes
        assert not real_errors(errors), errors
    except Exception:
        ARTIFACTS.mkdir(exist_ok=True)  # what the sidebar showed, for the failure's reader
        tab.screenshot(path=str(ARTIFACTS / "zh-page-list-failed.png"))
        raise
    finally:
        tab.close()
