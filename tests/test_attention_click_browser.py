"""A click on a cell of the Attention page's heatmap opens that cell's QK attribution
(issue 23, item 7), in Chromium: the cell's pixel position is read from the drawn Plotly
layout (its axes' d2p), the mouse clicks there, and the page then shows "Why does this head
attend here?" for exactly that query and key, with why/why_q/why_k in the URL.

The shipped decoder-only lm-rope continues its prompt, so the same page also shows the
one-line answer for a click on a generated token (QK attribution runs the prompt alone).
MiniLM (post-norm) answers a click with the notice that its stream is no sum of components.
Screenshots before and after each click go to tests/artifacts/attention-click-*.png.
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

import pytest

from tests.browser_support import ARTIFACTS, CHROMIUM, streamlit_server
from tests.test_browser import open_page, real_errors
from tests.test_overlaps_browser import VIEWPORT, screenshot, settle

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
def server():
    with streamlit_server() as (base, _proc):
        yield base


def _params(page) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
            .items()}


def _click_cell(page, q: int, k: int) -> dict:
    cell = page.evaluate(CELL_CENTRE, [q, k])
    page.wait_for_timeout(300)
    cell = page.evaluate(CELL_CENTRE, [q, k])  # after the scroll settled
    page.mouse.move(cell["x"], cell["y"])
    page.wait_for_timeout(200)
    page.mouse.click(cell["x"], cell["y"])
    return cell


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
    page.wait_for_function("() => { const p = new URL(location.href).searchParams;"
                           " return p.get('why_q') === '4' && p.get('why_k') === '2'"
                           " && p.get('why') === '1'; }", timeout=60_000)
    settle(page)
    text = _main_text(page)
    assert "query 4·cats → key 2·small" in text, text[-2000:]
    assert re.search(r"terms add up to -?\d", text), text[-2000:]
    assert page.locator("[data-testid='stException']").count() == 0
    screenshot(page, ARTIFACTS / "attention-click-lm-rope-after.png")

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
    page.wait_for_function("() => { const p = new URL(location.href).searchParams;"
                           " return p.get('why_q') === '3' && p.get('why_k') === '1'; }",
                           timeout=60_000)
    settle(page)
    text = _main_text(page)
    assert "renormalised" in text and "Which heads matter" in text, text[-2000:]
    assert page.locator("[data-testid='stException']").count() == 0
    screenshot(page, ARTIFACTS / "attention-click-minilm-after.png")
    assert not real_errors(errors), errors
    page.close()
