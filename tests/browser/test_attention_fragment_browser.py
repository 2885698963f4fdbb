"""The Attention page's pickers rerun only their fragment (issue 34, item 1), in Chromium.

Everything below the page's title, output and faithfulness check is one st.fragment
(pages/attention.py: head_views). What the server sends for each interaction is read from the
websocket (Streamlit's ForwardMsg protobufs): a head, layer or view change must finish as a
fragment run (FINISHED_FRAGMENT_RUN_SUCCESSFULLY) whose every element carries the fragment's
id, with nothing for the sidebar or the title; the address must still follow the pickers
(st.query_params from inside the fragment). A change of text in the sidebar is the control:
a whole run, sidebar included. A click on a heatmap cell (the QK attribution) still opens the
cell, from inside the fragment. Screenshots go to tests/artifacts/attention-fragment-*.png.
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from tests.support.browser_support import (
    ARTIFACTS,
    CHROMIUM,
    SCRIPT_IDLE,
    open_page,
    real_errors,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
SIDEBAR = 1  # delta_path[0] of the sidebar's elements (0: the main area)
TITLE_JS = """() => { const g = [...document.querySelectorAll('.js-plotly-plot')]
  .find(g => g.data && g.data[0] && g.data[0].type === 'heatmap');
  const t = g && g.querySelector('.gtitle'); return t ? t.textContent : ''; }"""


class Wire:
    """The ForwardMsgs the page's websocket received, decoded, split at `mark()`."""

    def __init__(self, page):
        self.messages: list[ForwardMsg] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._received))

    def _received(self, payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            msg = ForwardMsg()
            msg.ParseFromString(bytes(payload))
            self.messages.append(msg)

    def mark(self) -> int:
        return len(self.messages)

    def run_since(self, start: int) -> dict:
        """What the server did since `start`: how its runs finished, the fragment ids of the
        elements it sent, and how many of them went to the sidebar or were the title."""
        msgs = self.messages[start:]
        deltas = [m for m in msgs if m.WhichOneof("type") == "delta"]
        return {
            "finished": [ForwardMsg.ScriptFinishedStatus.Name(m.script_finished)
                         for m in msgs if m.WhichOneof("type") == "script_finished"],
            "fragments": {m.delta.fragment_id for m in deltas},
            "sidebar": sum(1 for m in deltas if m.metadata.delta_path[:1] == [SIDEBAR]),
            "title": sum(1 for m in deltas if m.delta.WhichOneof("type") == "new_element"
                         and m.delta.new_element.WhichOneof("type") == "heading"
                         and "Attention" in m.delta.new_element.heading.body),
            "elements": len(deltas),
        }


@pytest.fixture(scope="module")
def server(app_server):
    return app_server  # the browser tier's one server (tests/browser/conftest.py)


def _params(page) -> dict[str, str]:
    query = urllib.parse.urlsplit(page.url).query
    return {k: v[0] for k, v in urllib.parse.parse_qs(query).items()}


def _idle(page) -> None:
    page.wait_for_timeout(200)
    page.wait_for_selector(SCRIPT_IDLE, timeout=120_000)
    page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=120_000)
    page.wait_for_timeout(300)


def _shows(page, want: str, timeout: float = 60_000) -> None:
    page.wait_for_function(f"(want) => ({TITLE_JS})().includes(want)", arg=want,
                           timeout=timeout)


def _step_up(page, label: str) -> None:
    page.locator("[data-testid='stNumberInput']").filter(has_text=label).locator(
        "[data-testid='stNumberInputStepUp']").click()


def _fragment_only(run: dict) -> None:
    assert run["finished"] == ["FINISHED_FRAGMENT_RUN_SUCCESSFULLY"], run
    assert run["elements"] > 0 and "" not in run["fragments"], run  # every element: fragment's
    assert len(run["fragments"]) == 1, run
    assert run["sidebar"] == 0 and run["title"] == 0, run


@pytest.mark.parametrize("model", ["minilm", "toy"])
def test_pickers_rerun_only_their_fragment_and_keep_the_url(server, chromium_browser, model,
                                                            tmp_path):
    if model == "toy":
        from viz_core.training.toy import save_toy

        model = str(save_toy(tmp_path / "toy", seed=5))
        text = "the cat sat on the mat"
    else:
        text = "The animal didn't cross the street because it was too tired"
    q = urllib.parse.urlencode({"model": model, "text": text})
    page, errors, _ = open_page(chromium_browser, "about:blank")
    wire = Wire(page)
    page.goto(f"{server}/attention?{q}")
    _shows(page, "· head 0 · weights", timeout=240_000)  # the model loads
    _idle(page)
    m = re.search(r"(\w+)\.0\.(\w+) · head 0", page.evaluate(TITLE_JS))
    stack, att = m[1], m[2]

    start = wire.mark()  # the head picker
    _step_up(page, "Head (")
    _shows(page, f"{stack}.0.{att} · head 1 · weights")
    _idle(page)
    _fragment_only(wire.run_since(start))
    fragment = wire.run_since(start)["fragments"]
    assert _params(page)["head"] == "1"

    start = wire.mark()  # the layer picker
    _step_up(page, "Layer (")
    _shows(page, f"{stack}.1.{att} · head 1 · weights")
    _idle(page)
    _fragment_only(wire.run_since(start))
    assert wire.run_since(start)["fragments"] == fragment  # the same fragment each time
    assert (_params(page)["layer"], _params(page)["head"]) == ("1", "1")

    start = wire.mark()  # the view radio (a trace with the scores: a model run)
    page.locator("[data-testid='stRadio']").filter(has_text="Show").get_by_text(
        "scores", exact=True).click()
    _shows(page, f"{stack}.1.{att} · head 1 · scores")
    _idle(page)
    _fragment_only(wire.run_since(start))
    assert _params(page)["view"] == "scores"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    name = "minilm" if model == "minilm" else "toy"
    page.screenshot(path=str(ARTIFACTS / f"attention-fragment-{name}.png"), full_page=True)

    # the control: a new text in the sidebar is a whole run, sidebar and title included
    start = wire.mark()
    box = page.get_by_label("Input text")
    box.fill(text + " again")
    box.press("Control+Enter")
    page.wait_for_function("(t) => new URL(location.href).searchParams.get('text') === t",
                           arg=text + " again", timeout=60_000)
    _idle(page)
    whole = wire.run_since(start)
    assert "FINISHED_SUCCESSFULLY" in whole["finished"], whole
    assert whole["sidebar"] > 0 and whole["title"] > 0 and "" in whole["fragments"], whole
    # the pickers kept their values through the whole run
    assert _params(page)["layer"] == "1" and _params(page)["head"] == "1"
    assert page.locator("[data-testid='stException']").count() == 0
    assert not real_errors(errors), errors
    page.close()


def test_a_cell_click_still_opens_its_attribution_from_the_fragment(server, chromium_browser):
    q = urllib.parse.urlencode({"model": "lm-rope", "text": "the small black cats",
                                "layer": 1, "head": 0})
    page, errors, _ = open_page(chromium_browser, "about:blank")
    wire = Wire(page)
    page.goto(f"{server}/attention?{q}")
    _shows(page, "· head 0 ·", timeout=240_000)
    _idle(page)
    start = wire.mark()
    _step_up(page, "Head (")  # a head switch first, then a click on that head's map
    _shows(page, "decoder.1.self · head 1")
    _idle(page)
    _fragment_only(wire.run_since(start))
    cell = page.evaluate("""([q, k]) => {
      const gd = [...document.querySelectorAll('.js-plotly-plot')]
        .find(g => g.data && g.data[0] && g.data[0].type === 'heatmap');
      gd.scrollIntoView({block: 'center'});
      const hm = gd.data[0], xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
      const r = gd.getBoundingClientRect();
      return {x: r.left + xa._offset + xa.d2p(hm.x[k]),
              y: r.top + ya._offset + ya.d2p(hm.y[q])};
    }""", [4, 2])
    page.wait_for_timeout(300)
    start = wire.mark()
    page.mouse.move(cell["x"], cell["y"])
    page.wait_for_timeout(200)
    page.mouse.click(cell["x"], cell["y"])
    page.wait_for_function("() => { const p = new URL(location.href).searchParams;"
                           " return p.get('why') === '1' && p.get('why_q') === '4'"
                           " && p.get('why_k') === '2'; }", timeout=60_000)
    _idle(page)
    _fragment_only(wire.run_since(start))
    text = page.locator("[data-testid='stMain']").inner_text()
    assert "query 4·cats → key 2·small" in text, text[-2000:]
    assert _params(page)["head"] == "1"
    assert not real_errors(errors), errors
    page.close()


def test_a_fragment_rerun_speaks_its_sessions_language(server, chromium_browser):
    """A fragment rerun runs without the page's top code: it still sets its session's language
    (ui.lang.fragment). Two sessions on one server, one in 简体中文 and one in English: a head
    switch in each stays in that session's language."""
    pages = {}
    for lang in ("zh", "en"):
        q = urllib.parse.urlencode({"model": "en-fr", "text": "the red car", "lang": lang})
        page, errors, _ = open_page(chromium_browser, "about:blank")
        pages[lang] = (page, errors, Wire(page))
        page.goto(f"{server}/attention?{q}")
    heads = {"zh": ("注意力头 (", "· 注意力头 {} · 权重"), "en": ("Head (", "· head {} · weights")}
    for lang, (page, _errors, _wire) in pages.items():
        page.bring_to_front()
        _shows(page, heads[lang][1].format(0), timeout=240_000)
        _idle(page)
    for lang in ("zh", "en", "zh"):  # interleaved: one session's language never leaks
        page, errors, wire = pages[lang]
        page.bring_to_front()  # a background tab does not animate: clicks wait for it
        before = int(_params(page).get("head", 0))  # head 0, the default: not in the address
        start = wire.mark()  # typed: a narrow number input hides its +/- buttons
        box = page.locator("[data-testid='stNumberInput']").filter(has_text=heads[lang][0])
        box.locator("input").fill(str(before + 1))
        box.locator("input").press("Enter")
        _shows(page, heads[lang][1].format(before + 1))
        _idle(page)
        _fragment_only(wire.run_since(start))
        assert not real_errors(errors), errors
    page = pages["zh"][0]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "attention-fragment-zh.png"), full_page=True)
    for page, _errors, _wire in pages.values():
        page.close()
