"""A click on a cell of the Attention page's heatmap opens that cell's QK attribution
(issue 23, item 7), in Chromium: the cell's pixel position is read from the drawn Plotly
layout (its axes' d2p), the mouse clicks there, and the page then shows "Why does this head
attend here?" for exactly that query and key, with why/why_q/why_k in the URL.

The shipped decoder-only lm-rope continues its prompt, so the same page also shows the
one-line answer for a click on a generated token (QK attribution runs the prompt alone).
MiniLM (post-norm) answers a click with the notice that its stream is no sum of components.
The hover over a cell reads as the heatmap's own; the explained cell is framed (an orange
layout shape, read back from the drawn figure); after the pickers chose another cell, one
click on the earlier clicked cell opens it again (the chart key names the explained cell, so
plotly's toggle-off of an already selected point cannot swallow it).
Screenshots before and after each click go to tests/artifacts/attention-click-*.png.
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.support.browser_support import (
    ARTIFACTS,
    CHROMIUM,
    open_page,
    real_errors,
)
from tests.support.overlaps import VIEWPORT, screenshot, settle

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]

# (query, key) -> the pixel centre of that cell of the page's first heatmap, scrolled into view
CELL_CENTRE = """([q, k]) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => g.data && g.data[0] && g.data[0].type === 'heatmap');
  gd.scrollIntoView({block: 'center'});
  const hm = gd.data[0], fl = gd._fullLayout, xa = fl.xaxis, ya = fl.yaxis;
  const r = gd.getBoundingClientRect();
  return {x: r.left + xa._offset + xa.d2p(hm.x[k]), y: r.top + ya._offset + ya.d2p(hm.y[q]),
          xlabel: hm.x[k], ylabel: hm.y[q], rows: hm.y.length};
}"""


@pytest.fixture(scope="module")
def server(app_server):
    return app_server


# the drawn first heatmap: its hover label (the text of plotly's hover box, if shown), the
# value of cell (q, k) and the (query label, key label) of the cell the outline frames
DRAWN = """([q, k]) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => g.data && g.data[0] && g.data[0].type === 'heatmap');
  const hm = gd._fullData[0];
  const frames = (gd.layout.shapes || []).filter(s => s.name === 'selected cell');
  const hover = [...gd.querySelectorAll('.hoverlayer .hovertext')].map(e => e.textContent);
  return {hover, value: hm.z[q][k], frames: frames.map(s => ({
    query: hm.y[Math.round(s.y0 + 0.5)], key: hm.x[Math.round(s.x0 + 0.5)],
    width: s.x1 - s.x0, height: s.y1 - s.y0, color: s.line.color}))};
}"""
FRAMED = """([query, key]) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => g.data && g.data[0] && g.data[0].type === 'heatmap');
  const hm = gd.data[0];
  return !!gd._fullLayout && (gd.layout.shapes || []).some(s => s.name === 'selected cell'
    && hm.y[Math.round(s.y0 + 0.5)] === query && hm.x[Math.round(s.x0 + 0.5)] === key);
}"""


def _params(page) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
            .items()}


def _click_cell(page, q: int, k: int) -> dict:
    cell = page.evaluate(CELL_CENTRE, [q, k])
    page.wait_for_timeout(300)
    cell = page.evaluate(CELL_CENTRE, [q, k])  # after the scroll settled
    page.mouse.move(cell["x"], cell["y"])
    page.wait_for_timeout(200)
    cell["drawn"] = page.evaluate(DRAWN, [q, k])  # with the hover box of that cell up
    page.mouse.click(cell["x"], cell["y"])
    return cell


def _pick(page, label: str, option: str) -> None:
    """Choose `option` in the selectbox labelled `label` (its list may take a moment, or a
    second click, to open)."""
    box = page.locator("[data-testid='stSelectbox']").filter(has_text=label)
    item = page.get_by_role("option", name=option, exact=True)
    for _ in range(3):
        box.locator("input").click()
        try:
            item.wait_for(state="visible", timeout=5_000)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    item.click()


def _wait_for_cell(page, q: int, k: int) -> None:
    page.wait_for_function("([q, k]) => { const p = new URL(location.href).searchParams;"
                           " return p.get('why_q') === q && p.get('why_k') === k"
                           " && p.get('why') === '1'; }", arg=[str(q), str(k)],
                           timeout=60_000)


def _main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def test_a_click_on_a_cell_opens_its_qk_attribution(server, chromium_browser):
    # lm-rope: "<bos> the small black cats" + generated tokens; layer 1, head 0
    q = urllib.parse.urlencode({"model": "lm-rope", "text": "the small black cats",
                                "layer": 1, "head": 0})
    page, errors, _ = open_page(chromium_browser, f"{server}/attention?{q}")
    page.set_viewport_size(VIEWPORT)
    settle(page)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot(page, ARTIFACTS / "attention-click-lm-rope-before.png")
    assert "why_q" not in _params(page)

    cell = _click_cell(page, 4, 2)  # query 4 "cats" -> key 2 "small" (allowed: 2 <= 4)
    # the hover over the cell (one drawn overlay path per trace) reads as the heatmap's
    drawn = cell["drawn"]
    assert drawn["frames"] == []  # nothing explained yet
    # (the heatmap's hovertemplate "%{y} → %{x}: %{z:.4f}<extra>weight</extra>"; plotly
    # puts the <extra> box's text first in the DOM)
    assert drawn["hover"] == [f"weight4·cats → 2·small: {drawn['value']:.4f}"], drawn
    _wait_for_cell(page, 4, 2)
    settle(page)
    text = _main_text(page)
    assert "query 4·cats → key 2·small" in text, text[-2000:]
    assert re.search(r"terms add up to -?\d", text), text[-2000:]
    assert page.locator("[data-testid='stException']").count() == 0
    # the explained cell is framed in the drawn heatmap: one cell, orange
    frames = page.evaluate(DRAWN, [4, 2])["frames"]
    assert frames == [{"query": "4·cats", "key": "2·small", "width": 1, "height": 1,
                       "color": "#ff8c00"}], frames
    screenshot(page, ARTIFACTS / "attention-click-lm-rope-after.png")

    # the pickers choose another cell (the frame follows); then one click on the cell
    # clicked before opens it again (plotly would have toggled its old selection off)
    _pick(page, "Key (column)", "1·the")
    _wait_for_cell(page, 4, 1)
    page.wait_for_function(FRAMED, arg=["4·cats", "1·the"], timeout=60_000)
    settle(page)
    _click_cell(page, 4, 2)
    _wait_for_cell(page, 4, 2)
    page.wait_for_function(FRAMED, arg=["4·cats", "2·small"], timeout=60_000)
    settle(page)
    assert "query 4·cats → key 2·small" in _main_text(page)

    # a generated token's row: one line, the pickers keep the clicked prompt cell
    generated = cell["rows"] - 1
    assert generated > 4  # lm-rope continues its prompt by default
    _click_cell(page, generated, 1)
    page.wait_for_function("() => document.querySelector(\"[data-testid='stMain']\")"
                           ".innerText.includes('is a generated token')", timeout=60_000)
    settle(page)
    assert (_params(page)["why_q"], _params(page)["why_k"]) == ("4", "2")
    assert page.locator("[data-testid='stException']").count() == 0
    screenshot(page, ARTIFACTS / "attention-click-lm-rope-generated.png")
    assert not real_errors(errors), errors
    page.close()


def test_a_click_on_minilm_says_why_there_is_no_split(server, chromium_browser):
    q = urllib.parse.urlencode({"model": "minilm", "text": "The cat sat on the mat.",
                                "layer": 2, "head": 1})
    page, errors, _ = open_page(chromium_browser, f"{server}/attention?{q}")
    page.set_viewport_size(VIEWPORT)
    settle(page)
    screenshot(page, ARTIFACTS / "attention-click-minilm-before.png")
    _click_cell(page, 3, 1)
    _wait_for_cell(page, 3, 1)
    settle(page)
    labels = page.evaluate(CELL_CENTRE, [3, 1])
    assert page.evaluate(FRAMED, [labels["ylabel"], labels["xlabel"]])
    text = _main_text(page)
    assert "renormalised" in text and "Which heads matter" in text, text[-2000:]
    assert page.locator("[data-testid='stException']").count() == 0
    screenshot(page, ARTIFACTS / "attention-click-minilm-after.png")
    assert not real_errors(errors), errors
    page.close()
