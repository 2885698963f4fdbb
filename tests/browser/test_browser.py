"""The app in a real browser: Debian's chromium driven by Playwright."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

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
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


@pytest.fixture(scope="module")
def app_url(app_server, tmp_path_factory):
    from viz_core.training.toy import save_toy

    toy = save_toy(tmp_path_factory.mktemp("ckpt") / "toy", seed=5)
    return app_server, str(toy)


def wait_chart(page):
    page.wait_for_selector(".js-plotly-plot", timeout=60_000)
    page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=60_000)


def test_attention_page_renders_and_updates(app_url, chromium_browser):
    base, toy = app_url
    q = urllib.parse.urlencode({"model": toy, "text": "the cat sat on the mat"})
    page, errors, _ = open_page(chromium_browser, f"{base}/attention?{q}")
    wait_chart(page)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "attention.png"), full_page=True)
    ticks = page.locator(".js-plotly-plot .xtick").all_text_contents()
    assert "mat" in " ".join(ticks)
    box = page.get_by_label("Input text")
    box.fill("the big dog saw a red house")
    box.press("Control+Enter")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot .xtick')]"
        ".some(t => t.textContent.includes('house'))", timeout=60_000)
    assert not real_errors(errors), errors


# True once history.length has not changed for 2 s (polled every animation frame).
HISTORY_STILL = """() => {
  const n = history.length, now = performance.now();
  if (window.__length !== n) { window.__length = n; window.__since = now; }
  return now - window.__since > 2000;
}"""

# Every history entry a page makes from here on (push or replace, with its address), for an
# assertion's message.
LOG_HISTORY = """() => {
  window.__history = [];
  for (const kind of ['pushState', 'replaceState']) {
    const original = history[kind].bind(history);
    history[kind] = (state, title, url) => {
      window.__history.push([kind, String(url), performance.now() | 0]);
      return original(state, title, url);
    };
  }
}"""


def test_back_goes_back_a_view_not_a_setting_at_a_time(app_url, chromium_browser):
    """A run's address changes are one history entry (ui/address.send_url), and opening a
    page from the sidebar is one: its link carries the sidebar's settings and the page's own
    settings at their defaults stay out of the address, so the page writes nothing more and
    one Back returns to the previous page. One changed setting is one entry, and Back undoes
    it. A revisit of a page whose setting was changed there is one entry too (its link
    carries that setting). Before, every setting a run wrote was an entry of its own (6-10
    per page), then a visit was two (Back seemed to do nothing the first time), and so was
    a revisit with a changed setting until 27 Nov. Each part in a tab of its own:
    Back leaves forward entries that a new entry replaces, which would blur the count."""
    base, toy = app_url
    q = urllib.parse.urlencode({"model": toy, "text": "the cat sat on the mat"})
    title = "() => (document.querySelector('h1') || {textContent: ''}).textContent.trim()"
    params = "() => Object.fromEntries(new URLSearchParams(location.search))"
    page, errors, _ = open_page(chromium_browser, f"{base}/attention?{q}")
    wait_chart(page)
    settle(page)  # the first run's address is written before the count starts
    before = page.evaluate("history.length")
    page.get_by_role("link", name="Masks").click()
    page.wait_for_function(f"({title})() === 'Masks'", timeout=60_000)
    wait_chart(page)
    settle(page)
    assert page.evaluate("history.length") == before + 1
    assert page.evaluate(params) == {"model": toy, "text": "the cat sat on the mat",
                                     "lang": "en", "device": "auto", "dtype": "auto"}
    page.evaluate("history.back()")
    page.wait_for_function(f"({title})() === 'Attention'", timeout=60_000)
    assert not real_errors(errors), errors
    page.close()

    page, errors, _ = open_page(chromium_browser, f"{base}/attention?{q}")
    wait_chart(page)
    settle(page)
    head = page.evaluate(params).get("head")
    before = page.evaluate("history.length")
    page.get_by_label("Head (0–3)").fill("2")
    page.get_by_label("Head (0–3)").press("Enter")
    page.wait_for_function(f"({params})().head === '2'", timeout=60_000)
    wait_chart(page)
    settle(page)
    assert page.evaluate("history.length") == before + 1
    # Back shows the view it returned to, and the run it starts leaves that address alone
    # (before 28 Nov the session's head won: the run wrote head=2 back ~0.1 s after Back)
    box = "() => document.querySelector('input[aria-label=\"Head (0–3)\"]').value"
    for step, shown in (("back", head or "0"), ("forward", "2")):
        page.evaluate(f"history.{step}()")
        page.wait_for_function(f"({box})() === {json.dumps(shown)}", timeout=60_000)
        settle(page)
        assert page.evaluate(params).get("head") == (head if step == "back" else "2"), step
        assert page.get_by_label("Head (0–3)").input_value() == shown, step
    assert not real_errors(errors), errors
    page.close()

    # a revisit: the page's link carries the setting changed there (address.page_settings)
    page, errors, _ = open_page(chromium_browser, f"{base}/attention?{q}")
    wait_chart(page)
    page.get_by_label("Head (0–3)").fill("2")
    page.get_by_label("Head (0–3)").press("Enter")
    page.wait_for_function(f"({params})().head === '2'", timeout=60_000)
    wait_chart(page)
    settle(page)  # a click while a run is still out can carry its address onto the next page
    page.evaluate(LOG_HISTORY)
    page.get_by_role("link", name="Masks").click()
    page.wait_for_function(f"({title})() === 'Masks'", timeout=60_000)
    wait_chart(page)
    settle(page)
    assert "head" not in page.evaluate(params)
    page.wait_for_function(HISTORY_STILL, timeout=60_000)
    before = page.evaluate("history.length")
    # A busy browser (its CPU throttled 6x): Streamlit's frontend pushes a query message's
    # address at once onto the path it shows, and switches the path only once it has drawn
    # the new page. Each run used to resend the whole view, so the Attention run's message
    # came first and pushed "/masks?<Attention's address>" too (ui/address.send_url; seen in
    # fresh-clone runs on 1 and 2 Dec, and every time with the throttle).
    cdp = page.context.new_cdp_session(page)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": 6})
    page.get_by_role("link", name="Attention", exact=True).click()
    page.wait_for_function(f"({title})() === 'Attention'", timeout=120_000)
    wait_chart(page)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": 1})
    assert page.evaluate(params)["head"] == "2"
    assert page.get_by_label("Head (0–3)").input_value() == "2"
    settle(page)
    if page.evaluate("history.length") != before + 1:
        log = page.evaluate("window.__history")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "back-history.json").write_text(json.dumps(log, indent=1))
        pytest.fail(f"history {before} -> {page.evaluate('history.length')}, entries since "
                    f"the Masks click (also in tests/artifacts/back-history.json):\n"
                    + "\n".join(map(str, log)))
    page.evaluate("history.back()")
    page.wait_for_function(f"({title})() === 'Masks'", timeout=60_000)
    assert not real_errors(errors), errors
    page.close()


def test_script_in_text_never_runs(app_url, chromium_browser):
    base, toy = app_url
    q = urllib.parse.urlencode({"model": toy, "text": HOSTILE})
    page, _errors, dialogs = open_page(chromium_browser, f"{base}/attention?{q}")
    wait_chart(page)
    page.wait_for_timeout(500)
    assert page.evaluate("() => window.__pwned") is None
    assert not dialogs
    assert page.locator("img[src='x']").count() == 0
    assert HOSTILE in page.get_by_label("Input text").input_value()


def test_a_model_that_cannot_load_is_told_where_the_page_would_be(app_url, chromium_browser):
    """A failed load is told in the sidebar and in the main area (else empty), and its
    "Loading ..." spinner ends first: the run stops after the message, and a stopped run
    sends nothing more, so a spinner ended after it stayed on screen."""
    base, _toy = app_url
    page, errors, _ = open_page(chromium_browser, f"{base}/attention?model=/nonexistent/model")
    main = page.locator("[data-testid=stMain] [data-testid=stAlert]")
    main.first.wait_for(timeout=60_000)
    settle(page)
    assert "not found" in main.first.inner_text()
    assert page.locator("[data-testid=stSidebar] [data-testid=stAlert]").count() == 1
    assert page.locator("[data-testid=stSpinner]").count() == 0
    assert not real_errors(errors), errors
    page.close()


def settle(page):
    """Wait until Streamlit has finished running the script."""
    page.wait_for_timeout(300)
    page.wait_for_selector(SCRIPT_IDLE, timeout=90_000)
    page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=90_000)


def click_point(page, chart_index: int, trace_name: str, customdata):
    """Click the first marker of the named scatter trace (in the chart_index-th chart) whose
    customdata equals `customdata` (None: the first marker)."""
    box = page.evaluate(
        """([ci, name, want]) => {
            const gd = document.querySelectorAll('.js-plotly-plot')[ci];
            const scatter = [...gd.data.keys()].filter(i => gd.data[i].type === 'scatter');
            const idx = gd.data.findIndex(t => (t.name || '').startsWith(name));
            const cd = gd.data[idx].customdata || [];
            const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
            const pi = want === null ? 0 : [...cd].findIndex(c => same(
                Array.isArray(c) || ArrayBuffer.isView(c) ? [...c] : c, want));
            const layer = gd.querySelectorAll('.scatterlayer .trace')[scatter.indexOf(idx)];
            const r = layer.querySelectorAll('path.point')[pi].getBoundingClientRect();
            return {x: r.x + r.width / 2, y: r.y + r.height / 2};
        }""", [chart_index, trace_name, customdata])
    page.mouse.click(box["x"], box["y"])


def test_clicking_a_grid_cell_opens_that_head(app_url, chromium_browser):
    base, toy = app_url
    q = urllib.parse.urlencode({"model": toy, "text": "the cat saw the dog"})
    page, errors, _ = open_page(chromium_browser, f"{base}/attention?{q}")
    wait_chart(page)
    settle(page)
    click_point(page, 1, "cells", [1, 2])
    page.wait_for_function("() => new URL(location.href).searchParams.get('head') === '2'"
                           " && new URL(location.href).searchParams.get('layer') === '1'",
                           timeout=60_000)
    assert not real_errors(errors), errors


def test_clicking_a_beam_node_shows_its_attention(app_url, chromium_browser):
    base, toy = app_url
    q = urllib.parse.urlencode({"model": toy, "text": "the cat saw the dog", "beam": 3,
                                "max_len": 5})
    page, errors, _ = open_page(chromium_browser, f"{base}/beam?{q}")
    wait_chart(page)
    settle(page)
    assert page.get_by_text("Click a kept or finished node").count() == 1
    click_point(page, 0, "nodes: kept", None)
    page.wait_for_selector("text=What the model looked at", timeout=30_000)
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 2",
                           timeout=60_000)
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "beam-node.png"), full_page=True)
    assert page.get_by_text("Click a kept or finished node").count() == 0
    assert not real_errors(errors), errors


@pytest.mark.parametrize("which", ["lm-rope", "tiny-llama"])
def test_positional_page_draws_rope_for_rotary_models(app_url, chromium_browser, which,
                                                      tiny_models):
    """The Positional page of a rotary model (our lm-rope, a tiny Llama) in a real browser:
    the RoPE formula and caption, and its charts (frequencies, angles, the rotated pair)."""
    base, _ = app_url
    model = "lm-rope" if which == "lm-rope" else str(tiny_models.path("llama"))
    q = urllib.parse.urlencode({"model": model, "text": "the red car"})
    page, errors, _ = open_page(chromium_browser, f"{base}/positional?{q}")
    wait_chart(page)
    settle(page)
    assert page.locator("[data-testid='stException']").count() == 0
    body = page.locator("[data-testid='stMain']").inner_text()
    assert "Rotary position embeddings" in body and "base = 10000" in body
    assert page.locator(".js-plotly-plot").count() >= 3
    page.screenshot(path=str(ARTIFACTS / f"positional-{which}.png"), full_page=True)
    assert not real_errors(errors), errors
    page.close()
