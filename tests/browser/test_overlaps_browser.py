"""No overlapping text on any page (issue 24, item 3), read from Chromium's own layout.

The browser tier's one streamlit server; for each model (MiniLM, the shipped en-fr
translator, a tiny random Llama, a tiny random T5) one browser tab opens every page of app.py's
navigation in turn at a 1,500 px wide viewport, the first by a page load, the others in-app as
Back and Forward do (tests/support/overlaps.visit: one session, a run per page). On each page,
for every Plotly chart, the rendered SVG text (tick labels, axis and chart titles, subplot
titles, colour-bar ticks and titles, legend entries, annotations, text markers such as the
beam tree's node labels) is read as oriented boxes: the element's getBBox through its
getScreenCTM, so rotated tick labels are boxes at their own angle, not their
axis-aligned hulls. The test fails when

- two text boxes of one chart intersect by more than TOL px (separating-axis test);
- a colour bar (its bar, ticks or title) intersects a tick label that is not its own, or the
  plotting area of a subplot;
- a text sticks out of the chart's own SVG, or a text marker is cut by its subplot's clip;
- a button's label is truncated (its text is wider than the room the button gives it);
- a page raises, or logs a console error or a failed request, or a page that draws its view
  without a click (CHARTED, a decoder's beam, an encoder's pairs) shows no chart (the
  every-page check in a browser, not again in test_browser.py).

en-fr is opened in 简体中文 (?lang=zh, the CJK font of `make system-deps`): the English labels
are MiniLM's, the tiny Llama's and the tiny T5's, the Chinese ones en-fr's.

After en-fr's pages the Attention page is opened once more on the textbook sentence, whose "it follows
the adjective" box is then open: checked the same way, and its screenshot kept in
tests/artifacts/it-follows-the-adjective.png.

Every finding names the page, the chart (its title) and the two texts, so the failure
message is the list of overlaps. Screenshots of pages with findings go to tests/artifacts;
set OVERLAP_SHOTS=DIR to keep a screenshot of every page.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.support.browser_support import ARTIFACTS, CHROMIUM, ROOT, real_errors, watch_errors
from tests.support.overlaps import (
    VIEWPORT,
    page_findings,
    screenshot,
    settle,
    visit,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
TEXT = "The cat sat on the mat because it was tired."
MODELS = {  # name -> (model in the URL (None: the tiny Llama's folder), extra URL state)
    "minilm": ("minilm", {"text": TEXT}),
    # prompt + 20 greedy tokens (the sidebar's "New tokens"): 33 tokens crowd the heatmaps
    "tiny-llama": (None, {"text": TEXT, "new": 20}),
    # every page in 简体中文 (issue 32): Chinese labels have other widths than English ones
    "en-fr-zh": ("en-fr", {"text": "the small black cats eat the cake", "beam": 4, "lang": "zh"}),
    # a Hugging Face encoder-decoder (a tiny random T5: relative position buckets, no
    # position embeddings)
    "tiny-t5": ("t5", {"text": "The quick brown fox jumps."}),
}


# the pages that draw their view with no click (the model's own view on the others: an
# encoder's sentence pairs, a decoder's beam); the rest wait for a click or a file
CHARTED = {"attention", "inside", "block", "positional", "masks", "pretraining", "relative",
           "heads", "flow", "compare"}


def navigation_paths() -> dict[str, str]:
    """page file stem -> URL path ("" for the default page), in the navigation's order: from
    attention_lab.ui.navigation's PAGES when app.py builds its pages there, else from the
    st.Page calls in app.py itself."""
    try:
        from attention_lab.ui.navigation import PAGES
    except ImportError:
        PAGES = None
    if PAGES:
        return {Path(p.path).stem: p.url_path for p in PAGES}
    source = (ROOT / "app.py").read_text(encoding="utf-8")
    paths = {}
    for m in re.finditer(r'st\.Page\(\s*"pages/(\w+)\.py"(.*?)\)', source, re.S):
        url = re.search(r'url_path="([^"]*)"', m.group(2))
        paths[m.group(1)] = "" if "default=True" in m.group(2) else (
            url.group(1) if url else m.group(1))
    return paths


# ---- reading the page --------------------------------------------------------------------


# ---- geometry ----------------------------------------------------------------------------


# ---- the test ----------------------------------------------------------------------------


def seed_box_findings(tab, server, errors, shots: Path) -> list[str]:
    """The Attention page on the tired sentence: the box is open, shows both translations
    (il / elle) and the two bar charts without overlaps; its screenshot goes to shots."""
    from attention_lab.ui.seed_example import PAIR

    query = urllib.parse.urlencode({"model": "en-fr", "text": PAIR[0]})
    tab.goto(f"{server}/{navigation_paths()['attention']}?{query}")
    settle(tab)
    assert not real_errors(errors), errors
    box = tab.locator("[data-testid='stExpander']", has_text="follows the adjective")
    text = box.inner_text()
    assert "parce qu'il était trop fatigué" in text and "parce qu'elle était" in text, text
    chart = box.locator(".js-plotly-plot")  # it can mount after the text: a loaded CI
    chart.first.wait_for(state="attached", timeout=90_000)  # machine counted 0 before it did
    settle(tab)  # and drawn
    assert chart.count() == 1
    box.screenshot(path=str(shots / "it-follows-the-adjective.png"))
    return [f"en-fr / it follows the adjective: {f}" for f in page_findings(tab)]


@pytest.fixture(scope="module")
def server(app_server):
    return app_server


@pytest.mark.parametrize("which", list(MODELS))
def test_no_text_overlaps_on_any_page(server, chromium_browser, tiny_models, which):
    model, state = MODELS[which]
    model = str(tiny_models.path(model or "llama")) if model in (None, "t5") else model
    query = urllib.parse.urlencode({"model": model, **state})
    shots = Path(os.environ.get("OVERLAP_SHOTS") or ARTIFACTS)
    shots.mkdir(parents=True, exist_ok=True)
    tab = chromium_browser.new_page(viewport=VIEWPORT)
    errors = watch_errors(tab)
    problems: list[str] = []
    try:
        for stem, path in navigation_paths().items():
            visit(tab, f"{server}/{path}?{query}")
            if stem in CHARTED or stem == ("pairs" if which == "minilm" else "beam"):
                try:  # a fragment's chart mounts after the page's run: wait for it first
                    tab.wait_for_selector(".js-plotly-plot", state="attached", timeout=90_000)
                except PlaywrightTimeout:
                    assert tab.locator("[data-testid='stException']").count() == 0, (which, stem)
                    pytest.fail(f"{which} / {stem}: no chart after 90 s")
            settle(tab)
            assert tab.locator("[data-testid='stException']").count() == 0, (which, stem)
            assert not real_errors(errors), (which, stem, errors)  # nor a console error
            errors.clear()
            found = page_findings(tab)
            problems += [f"{which} / {stem}: {f}" for f in found]
            if found or os.environ.get("OVERLAP_SHOTS"):
                screenshot(tab, shots / f"overlaps-{which}-{stem}.png")
        if which == "en-fr-zh":  # the "it follows the adjective" box, open on its sentence
            problems += seed_box_findings(tab, server, errors, shots)
    finally:
        tab.close()
    assert not problems, f"{len(problems)} text overlaps:\n" + "\n".join(problems)
