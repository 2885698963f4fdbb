"""The "Which heads matter" page in Chromium (Debian's chromium + Playwright) with MiniLM and
a tiny GPT-2: every tab renders without an exception or a console error and with no
overlapping chart text (the checks of tests/browser/test_overlaps_browser.py); a click on a head
search row opens that head on the Attention page; a change inside a tab reruns that tab
alone (each tab is an st.fragment)."""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from tests.support.browser_support import (
    ARTIFACTS,
    CHROMIUM,
    open_page,
    real_errors,
)
from tests.support.overlaps import VIEWPORT, page_findings, screenshot, settle, visit

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
TEXT = "The animal didn't cross the street because it was too tired"
TABS = ["attribution", "lens", "patching", "composition", "search", "qk", "entropy"]
# charts each tab draws at least (MiniLM: no logit, no lens, no QK split: a notice instead)
CHARTS = {"minilm": {"patching": 3, "composition": 1, "search": 1, "entropy": 1},
          "tiny-gpt2": {"attribution": 2, "lens": 1, "patching": 3, "composition": 1,
                        "search": 1, "qk": 1, "entropy": 1}}


@pytest.fixture(scope="module")
def server(app_server):
    return app_server  # the browser tier's one server (tests/browser/conftest.py)


def _url(base: str, model: str, **extra) -> str:
    return f"{base}/heads_matter?" + urllib.parse.urlencode({"model": model, "text": TEXT,
                                                              **extra})


@pytest.mark.parametrize("which", ["minilm", "tiny-gpt2"])
def test_every_tab_renders_without_overlaps(server, chromium_browser, tiny_models, which):
    model = "minilm" if which == "minilm" else str(tiny_models.path("gpt2", seed=1))
    shots = Path(os.environ.get("OVERLAP_SHOTS") or ARTIFACTS)
    shots.mkdir(parents=True, exist_ok=True)
    problems = []
    page, errors, dialogs = open_page(chromium_browser, _url(server, model, tab=TABS[0]))
    page.set_viewport_size(VIEWPORT)
    for tab in TABS:
        if tab != TABS[0]:  # the others in-app, as Back and Forward do
            visit(page, _url(server, model, tab=tab))
        want = CHARTS[which].get(tab, 0)
        if want:  # mounted and drawn, so the overlap checks below read them
            page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot')"
                                   f".length >= {want}", timeout=120_000)
        settle(page)
        assert page.locator("[data-testid='stException']").count() == 0, (which, tab)
        assert page.locator(".js-plotly-plot").count() >= want, (which, tab)
        found = page_findings(page)
        problems += [f"{which} / {tab}: {f}" for f in found]
        if found or os.environ.get("OVERLAP_SHOTS"):
            screenshot(page, shots / f"heads-matter-{which}-{tab}.png")
        assert not real_errors(errors), (which, tab, errors)
        errors.clear()
        assert not dialogs
    page.close()
    assert not problems, "\n".join(problems)


def test_a_head_search_row_opens_that_head(server, chromium_browser):
    """MiniLM, 'it' (query 10) -> 'animal' (key 2): the first row is the strongest head; a
    click on it opens the Attention page on that layer and head."""
    page, errors, _ = open_page(chromium_browser, _url(server, "minilm", tab="search",
                                                       hs_q=10, hs_k=2))
    page.set_viewport_size(VIEWPORT)
    settle(page)
    grid = page.locator("[data-testid='stDataFrame']").first
    box = grid.bounding_box()
    # the row-selection column is at the left edge; the first data row under the header
    page.mouse.click(box["x"] + 12, box["y"] + 35 + 17)
    page.wait_for_function("() => location.pathname.endsWith('/attention')", timeout=60_000)
    settle(page)
    params = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    import viz_core as vc
    from viz_core.analysis.head_search import search_pair

    trace = vc.load("minilm").trace(TEXT, capture=("pattern",))
    best = search_pair(trace, 10, 2).frame.iloc[0]
    assert (params["layer"][0], params["head"][0]) == (str(best["layer"]), str(best["head"]))
    assert not real_errors(errors), errors
    page.close()


class _Wire:
    """The ForwardMsgs (Streamlit's protobufs) the page's websocket received, decoded."""

    def __init__(self, page):
        self.messages: list[ForwardMsg] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._received))

    def _received(self, payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            msg = ForwardMsg()
            msg.ParseFromString(bytes(payload))
            self.messages.append(msg)

    def since(self, start: int) -> tuple[list[str], list]:
        """(how the runs since `start` finished, the elements they sent)."""
        msgs = self.messages[start:]
        return ([ForwardMsg.ScriptFinishedStatus.Name(m.script_finished)
                 for m in msgs if m.WhichOneof("type") == "script_finished"],
                [m.delta for m in msgs if m.WhichOneof("type") == "delta"])


def test_a_change_inside_a_tab_reruns_that_tab_alone(server, chromium_browser):
    """The Patching tab's radio reruns the tab's fragment only: the server sends the tab's
    new elements (the layer chart), each carrying the fragment's id, and nothing of the page
    around it (the "What to explain" header) nor of another tab. The position, outside the
    tabs, is the control: a whole run, header included."""
    page = chromium_browser.new_page(viewport=VIEWPORT)
    wire = _Wire(page)
    page.goto(_url(server, "minilm", tab="patching"))
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 3",
                           timeout=180_000)
    settle(page)

    start = len(wire.messages)
    page.locator("[data-testid='stRadio']").filter(has_text="positions").get_by_text(
        "layers", exact=True).click()
    page.wait_for_function("() => location.search.includes('over=layers')", timeout=60_000)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length == 1",
                           timeout=180_000)
    settle(page)
    finished, elements = wire.since(start)
    assert finished == ["FINISHED_FRAGMENT_RUN_SUCCESSFULLY"], finished
    assert elements and len({e.fragment_id for e in elements} - {""}) == 1
    assert all(e.fragment_id for e in elements)  # nothing outside the fragment
    sent = " ".join(str(e) for e in elements)
    assert "Patching the stream entering each layer" in sent
    assert "What to explain" not in sent and "Composition" not in sent

    start = len(wire.messages)
    page.locator("[data-testid='stSelectbox']").filter(has_text="Position").first.click()
    page.get_by_role("option").nth(3).click()
    page.wait_for_function("() => location.search.includes('pos=3')", timeout=60_000)
    settle(page)
    finished, elements = wire.since(start)
    assert finished == ["FINISHED_SUCCESSFULLY"], finished
    assert "What to explain" in " ".join(str(e) for e in elements)
    page.close()
