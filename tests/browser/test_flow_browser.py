"""The Information flow page in Chromium (Debian's chromium + Playwright): with MiniLM, a tiny
GPT-2 and a tiny T5 it renders without an exception or a console error and with no
overlapping chart text (the checks of tests/browser/test_overlaps_browser.py); a click on the
induction head's edge opens that head's "Why this score?" on Which heads matter. The Circuits
page (its sibling: which edges between components carry the answer) in the same browser: the
graph and the faithfulness curve draw without overlaps or console errors, and a click on a
head's node opens that head on Which heads matter."""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

import pytest

from tests.support.browser_support import ARTIFACTS, CHROMIUM, open_page, real_errors
from tests.support.overlaps import VIEWPORT, page_findings, screenshot, settle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
TEXT = "The quick brown fox jumps over the lazy dog because it was tired"
INDUCTION = "cat sees the red king cat sees the red king"
# the screen position of the middle of one attention edge, read from plotly's own data
EDGE_AT = """([block, source, target]) => {
    const gd = document.querySelector('.js-plotly-plot');
    const t = gd._fullData.find(d => d.name === 'edges');
    const k = t.customdata.findIndex(c => c[0] === block && c[2] === source && c[3] === target);
    if (k < 0) return null;
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
    return {x: box.left + xa._offset + xa.c2p(t.x[k]), y: box.top + ya._offset + ya.c2p(t.y[k])};
}"""


def _url(base: str, **query) -> str:
    return f"{base}/flow?" + urllib.parse.urlencode(query)


@pytest.mark.parametrize("which", ["minilm", "gpt2", "t5"])
def test_renders_without_overlaps(app_server, chromium_browser, tiny_models, which):
    model = "minilm" if which == "minilm" else str(tiny_models.path(which, seed=1))
    page, errors, dialogs = open_page(chromium_browser, _url(
        app_server, model=model, text=TEXT, target="le chat" if which == "t5" else ""))
    page.set_viewport_size(VIEWPORT)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 2",
                           timeout=180_000)
    settle(page)
    assert page.locator("[data-testid='stException']").count() == 0
    problems = page_findings(page)
    shots = Path(os.environ.get("OVERLAP_SHOTS") or ARTIFACTS)
    shots.mkdir(parents=True, exist_ok=True)
    screenshot(page, shots / f"flow-{which}.png")
    assert not problems, "\n".join(problems)
    assert not real_errors(errors), errors
    assert not dialogs
    page.close()


def test_a_click_on_a_head_edge_opens_that_head(app_server, chromium_browser):
    """"the" at 8 repeats position 3: the induction edge runs from 4 ("red") into 8; a click
    on its middle opens Why this score? for that block, head, query and key."""
    page, errors, _ = open_page(chromium_browser, _url(app_server, model="induction",
                                                       text=INDUCTION, flow_pos=8))
    page.set_viewport_size(VIEWPORT)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 2",
                           timeout=180_000)
    settle(page)
    at = page.evaluate(EDGE_AT, ["decoder.1.self", 4, 8])
    assert at is not None
    page.mouse.click(at["x"], at["y"])
    page.wait_for_function("() => location.pathname.endsWith('/heads_matter')", timeout=60_000)
    settle(page)
    params = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    # settings at their defaults leave the address (ui/state.to_url): the last block, head 0,
    # the query's strongest key
    shown = {**{"qk_block": ["decoder.1.self"], "qk_head": ["0"], "qk_k": ["4"]}, **params}
    assert shown["tab"] == ["qk"] and shown["qk_block"] == ["decoder.1.self"]
    assert (shown["qk_q"], shown["qk_k"], shown["pos"]) == (["8"], ["4"], ["8"])
    assert shown["qk_head"][0] in ("0", "1")
    assert page.locator("[data-testid='stException']").count() == 0
    assert not real_errors(errors), errors
    page.close()


CIRCUIT_CLEAN = "cat sees the red king cat sees the red"
CIRCUIT_CORRUPTED = "cat sees the blue king cat sees the red"
# the screen position of one node of the circuit graph, read from plotly's own data
NODE_AT = """(name) => {
    const gd = document.querySelector('.js-plotly-plot');
    const t = gd._fullData.find(d => d.name === 'nodes');
    const k = t.customdata.findIndex(c => c[0] === name);
    if (k < 0) return null;
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
    return {x: box.left + xa._offset + xa.c2p(t.x[k]), y: box.top + ya._offset + ya.c2p(t.y[k])};
}"""


def test_circuits_page_draws_and_a_head_click_opens_it(app_server, chromium_browser):
    query = urllib.parse.urlencode({"model": "induction", "circ_clean": CIRCUIT_CLEAN,
                                    "circ_corrupt": CIRCUIT_CORRUPTED, "circ_method": "eap-ig",
                                    "circ_top": 8})
    page, errors, dialogs = open_page(chromium_browser, f"{app_server}/circuits?{query}")
    page.set_viewport_size(VIEWPORT)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 2",
                           timeout=180_000)
    settle(page)
    assert page.locator("[data-testid='stException']").count() == 0
    problems = page_findings(page)
    shots = Path(os.environ.get("OVERLAP_SHOTS") or ARTIFACTS)
    shots.mkdir(parents=True, exist_ok=True)
    screenshot(page, shots / "circuits-induction.png")
    assert not problems, "\n".join(problems)
    # the table of the 8 kept edges shows every row (a fixed 280 px hid the 8th)
    # and an MLP's or the logits' input as an empty cell (it read a grey "None")
    table = page.evaluate("""() => { const d = document.querySelector(
        "[data-testid='stDataFrame']"); const s = d.querySelector('.dvn-scroller');
        return {scroll: s && [s.scrollHeight, s.clientHeight], cells: [...d.querySelectorAll(
        'td, [role=gridcell]')].map(c => c.textContent)}; }""")
    scroll, cells = table["scroll"], table["cells"]
    assert scroll is not None and scroll[0] <= scroll[1] + 1, scroll
    assert len(cells) == 8 * 4 and "None" not in cells and "" in cells[2::4], cells
    assert not real_errors(errors), errors
    assert not dialogs
    at = page.evaluate(NODE_AT, "decoder.1.self.h0")
    assert at is not None
    page.mouse.click(at["x"], at["y"])
    page.wait_for_function("() => location.pathname.endsWith('/heads_matter')", timeout=60_000)
    settle(page)
    params = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    shown = {**{"qk_block": ["decoder.1.self"], "qk_head": ["0"]}, **params}  # (as above)
    assert shown["tab"] == ["qk"] and shown["qk_block"] == ["decoder.1.self"]
    assert shown["qk_head"] == ["0"]
    assert params["text"] == [CIRCUIT_CLEAN]  # the circuit's clean text, not the sidebar's
    assert page.locator("[data-testid='stException']").count() == 0
    assert not real_errors(errors), errors
    page.close()
