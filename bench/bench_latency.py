"""Interaction latency of the Attention page, on the server (AppTest) and in a browser.

Server side (streamlit.testing AppTest: the whole script, sidebar + page, in this process):
- changing the head on a cached trace (budget 100 ms median on 2 CPU cores);
- a new 12-word sentence: model run + every figure the page shows (budget 400 ms).
Browser (Playwright + Debian's chromium against `streamlit run app.py`): from pressing
Ctrl+Enter in the input box to the heatmap showing the new sentence (budget 1.5 s).

The model is the shipped en-fr translator when it loads, else the shipped "dates" model, else
a random toy checkpoint (each row names the model used). Quick mode (the test suite): a toy
checkpoint, one repetition, and only correctness is asserted by the tests.
"""

from __future__ import annotations

import html
import json
import random
import tempfile
import time
from pathlib import Path

from .common import budget_row, summary

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
BUDGETS = {"head": 0.100, "sentence": 0.400, "browser": 1.5}


def pick_model(quick: bool, tmp: Path) -> tuple[str, object, str]:
    """(name or path for the app, loaded model, note for the rows)."""
    import viz_core as vc
    from viz_core.training.toy import save_toy

    if not quick:
        for name, note in (("en-fr", "en-fr"), ("dates", "dates (en-fr not available)")):
            try:
                return name, vc.load(name, "cpu"), note
            except Exception:  # not trained / not shipped here: try the next one
                continue
    path = str(save_toy(tmp / "toy", seed=3))
    return path, vc.load(path, "cpu"), "toy checkpoint" + ("" if quick else
                                                           " (en-fr and dates unavailable)")


def sentences(model, count: int, n_words: int = 12, seed: int = 0) -> list[str]:
    """`count` different sentences of n_words words from the model's own examples' words."""
    words = sorted({w for ex in model.examples() for w in ex.split()}) or ["the", "cat"]
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        s = " ".join(rng.choice(words) for _ in range(n_words))
        if s not in out:
            out.append(s)
    return out


def shown_tokens(model, text: str) -> list[str]:
    """The source tokens the heatmap's axes show (native models)."""
    vocab = model.src_vocab or model.tgt_vocab
    _ids, shown, _unk = vocab.encode(text)
    return [vocab.display(t) for t in shown]


def marker(model, text: str, previous: str | None) -> str | None:
    """A token of `text` that `previous` lacks: when the page shows it, the new run is in."""
    before = set(shown_tokens(model, previous)) if previous else set()
    for tok in shown_tokens(model, text):
        if tok not in before and tok.strip() and len(tok) <= 10:
            return tok
    return None


def heatmap_ticks(at) -> list[str]:
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    # as shown: the figure escapes "&" and "<" for plotly, which turns them back
    return [html.unescape(str(t)) for t in fig["layout"]["xaxis"].get("ticktext", [])]


# ---- server side ------------------------------------------------------------------------
def server_rows(name: str, model, note: str, repeat: int) -> list[dict]:
    from streamlit.testing.v1 import AppTest

    texts = sentences(model, repeat + 2, seed=1)
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["model"] = name
    at.query_params["text"] = texts[0]
    at.switch_page("pages/attention.py")
    at.run()
    _check(at)
    n_layers = int(at.number_input(key="layer").max) + 1
    n_heads = int(at.number_input(key="head").max) + 1
    # (layer, head) pairs not shown yet, so no figure comes from the figure cache
    pairs = [(lay, h) for h in range(n_heads) for lay in range(n_layers)][1:]

    head_times = []
    for i in range(repeat + 1):  # the first change warms up Streamlit's code paths
        lay, h = pairs[i % len(pairs)]
        at.number_input(key="layer").set_value(lay)
        at.number_input(key="head").set_value(h)
        t0 = time.perf_counter()
        at.run()
        if i:
            head_times.append(time.perf_counter() - t0)
        _check(at)
    at.number_input(key="layer").set_value(0)
    at.number_input(key="head").set_value(0)
    at.run()

    sentence_times, shown_ok = [], True
    for text in texts[1:]:
        at.text_area(key="text").input(text)
        t0 = time.perf_counter()
        at.run()
        sentence_times.append(time.perf_counter() - t0)
        _check(at)
        shown_ok &= heatmap_ticks(at)[:3] == shown_tokens(model, text)[:3]
    charts = len(at.get("plotly_chart"))
    sentence_times = sentence_times[1:] if len(sentence_times) > 1 else sentence_times
    return [
        budget_row(f"latency: change layer/head on a cached trace ({note})", summary(head_times),
                   BUDGETS["head"], "cpu", model=note, how="AppTest, whole script"),
        budget_row(f"latency: new 12-word sentence -> Attention page ({note})",
                   summary(sentence_times), BUDGETS["sentence"], "cpu", model=note,
                   how="AppTest, whole script", charts=charts, heatmap_shows_it=shown_ok),
    ]


def _check(at) -> None:
    if at.exception:
        raise RuntimeError(f"the Attention page failed: {at.exception[0].message}")


# ---- browser ----------------------------------------------------------------------------
TICK_JS = """(want) => [...document.querySelectorAll('.js-plotly-plot .xtick')]
    .some(t => t.textContent.trim() === want)"""


def browser_rows(name: str, model, note: str, repeat: int) -> list[dict]:
    import sys
    import urllib.parse

    sys.path.insert(0, str(ROOT))
    from tests.browser_support import CHROMIUM, launch_chromium, streamlit_server

    if not Path(CHROMIUM).exists():
        return [{"name": "latency: browser", "skipped": f"no chromium at {CHROMIUM}"}]
    import torch
    from playwright.sync_api import sync_playwright

    texts = sentences(model, repeat + 8, seed=2)
    times, found = [], 0
    env = {"OMP_NUM_THREADS": str(torch.get_num_threads())}  # the server runs as we do
    with streamlit_server(env) as (base, _proc), sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            q = urllib.parse.urlencode({"model": name, "text": texts[0]})
            page.goto(f"{base}/attention?{q}")
            page.wait_for_selector(".js-plotly-plot", timeout=120_000)
            page.wait_for_selector("[data-testid='stStatusWidget']", state="detached",
                                   timeout=120_000)
            previous = texts[0]
            for text in texts[1:]:
                want = marker(model, text, previous)
                if want is None:
                    continue
                box = page.get_by_label("Input text")
                box.fill(text)
                t0 = time.perf_counter()
                box.press("Control+Enter")
                page.wait_for_function(TICK_JS, arg=want, timeout=60_000)
                times.append(time.perf_counter() - t0)
                found += 1
                previous = text
                page.wait_for_selector("[data-testid='stStatusWidget']", state="detached",
                                       timeout=60_000)
                if found >= repeat:
                    break
        finally:
            browser.close()
    return [budget_row(f"latency: browser, Ctrl+Enter -> heatmap shows it ({note})",
                       summary(times), BUDGETS["browser"], "cpu", model=note,
                       how="Playwright + chromium, streamlit run app.py", sentences=found)]


def run(quick: bool = False) -> list[dict]:
    repeat = 1 if quick else 7
    with tempfile.TemporaryDirectory() as tmp:
        name, model, note = pick_model(quick, Path(tmp))
        rows = server_rows(name, model, note, repeat)
        try:
            rows += browser_rows(name, model, note, 1 if quick else 5)
        except ImportError as err:
            rows.append({"name": "latency: browser", "skipped": f"playwright missing ({err})"})
    return rows


if __name__ == "__main__":
    import sys

    for row in run(quick="--quick" in sys.argv):
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
