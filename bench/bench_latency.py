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
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager, nullcontext
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
def browser_support():
    """The browser tests' helpers (tests/support/ since the tests' tier folders)."""
    sys.path.insert(0, str(ROOT))
    try:
        from tests.support import browser_support as sup
    except ImportError:
        from tests import browser_support as sup
    return sup


TICK_JS = """(want) => [...document.querySelectorAll('.js-plotly-plot .xtick')]
    .some(t => t.textContent.trim() === want)"""


def browser_rows(name: str, model, note: str, repeat: int, served=None) -> list[dict]:
    sup = browser_support()
    CHROMIUM, launch_chromium, streamlit_server = (sup.CHROMIUM, sup.launch_chromium,
                                                   sup.streamlit_server)

    if not Path(CHROMIUM).exists():
        return [{"name": "latency: browser", "skipped": f"no chromium at {CHROMIUM}"}]
    import torch
    from playwright.sync_api import sync_playwright

    texts = sentences(model, repeat + 8, seed=2)
    times, found = [], 0
    env = {"OMP_NUM_THREADS": str(torch.get_num_threads())}  # the server runs as we do
    server = nullcontext(served) if served else streamlit_server(env)
    with server as (base, _proc), sync_playwright() as pw:
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


# ---- browser: interactions on the Attention page (issue 34) -----------------------------
# From the click (a real mouse click on the picker's + button or the radio) to the new heatmap
# drawn: the title of the page's first heatmap ("encoder.3.self · head 5 · weights") changes
# when plotly has drawn the new figure. First page: a new browser context (a new session) on
# a warm server with the trace cached, from goto to the heatmap drawn.
INTERACTION_TEXT = "The animal didn't cross the street because it was too tired"
# p50 / p95 in seconds, Chromium + MiniLM + a cached trace on this 2-core machine, measured
# on the code before the Attention page's fragment (commit 6c9533c), with the file watcher of
# `make run` (config.toml had none set) and with --server.fileWatcherType none.
BEFORE = {"head": (0.59, 0.77), "layer": (0.59, 0.77), "view": (0.59, 0.77),
          "first page": (5.0, 8.0)}
TARGETS = {"head": (0.3, 0.6), "layer": (0.3, 0.6), "view": (0.3, 0.6), "first page": (5.0, 10.0)}
TITLE_JS = """() => { const g = [...document.querySelectorAll('.js-plotly-plot')]
  .find(g => g.data && g.data[0] && g.data[0].type === 'heatmap');
  const t = g && g.querySelector('.gtitle'); return t ? t.textContent : ''; }"""
SHOWS_JS = f"(want) => ({TITLE_JS})().includes(want)"
TITLE_RE = re.compile(r"(\w+)\.(\d+)\.(\w+) · head (\d+) · (\w+)")


def p95(times: list[float]) -> float:
    return (statistics.quantiles(times, n=20, method="inclusive")[18] if len(times) > 1
            else times[0])


@contextmanager
def served_app(watcher: str | None = None, timeout: float = 120.0, env: dict | None = None):
    """`streamlit run app.py` as `make run` starts it (.streamlit/config.toml decides the
    file watcher unless `watcher` is given; `env` adds to its environment); yields (base URL,
    server process)."""
    port = browser_support().free_port()
    cmd = [sys.executable, "-m", "attention_lab.server", "run", "app.py", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true"]
    if watcher:
        cmd += ["--server.fileWatcherType", watcher]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", **(env or {})}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("streamlit server did not start")
            time.sleep(0.5)
        yield base, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _cpu(proc) -> float:
    import psutil

    t = psutil.Process(proc.pid).cpu_times()
    return t.user + t.system


def _idle(page) -> None:
    page.wait_for_selector(browser_support().SCRIPT_IDLE, timeout=120_000)
    page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=120_000)


def _title(page) -> tuple[str, int, str, int, str]:
    m = TITLE_RE.search(page.evaluate(TITLE_JS))
    assert m, page.evaluate(TITLE_JS)
    return m[1], int(m[2]), m[3], int(m[4]), m[5]


def _want(stack, layer, att, head, view) -> str:
    return f"{stack}.{layer}.{att} · head {head} · {view}"


class Wire:
    """The page's websocket as the browser receives it: bytes, and when the heatmap titled
    `want` arrived, to split a latency into the server's part (click -> that element
    received, network included) and the browser's (-> drawn)."""

    def __init__(self, page):
        self.bytes, self.want, self.arrived_at = 0, "", 0.0
        page.on("websocket", lambda ws: ws.on("framereceived", self._received))

    def expect(self, want: str) -> None:
        self.want, self.arrived_at = json.dumps(want)[1:-1], 0.0  # as plotly escapes it

    def _received(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        now = time.perf_counter()
        self.bytes += len(payload)
        if not (self.want and isinstance(payload, (bytes, bytearray))):
            return
        msg = ForwardMsg()
        msg.ParseFromString(bytes(payload))
        if (msg.WhichOneof("type") == "delta"
                and msg.delta.new_element.WhichOneof("type") == "plotly_chart"
                and self.want in msg.delta.new_element.plotly_chart.spec):
            self.arrived_at, self.want = now, ""


class Interactions:
    """Per kind of interaction: seconds to the new heatmap drawn, seconds to its element
    received from the server, the server's CPU seconds and the bytes received."""

    def __init__(self, page, proc):
        self.page, self.proc, self.wire = page, proc, Wire(page)
        self.seen: dict[str, dict[str, list[float]]] = {}

    def click(self, kind: str | None, target, want: str) -> None:
        """Mouse click on `target`'s centre, then wait for the heatmap titled `want` and
        for the run's end; kind None: not recorded (a warm-up)."""
        page = self.page
        target.scroll_into_view_if_needed()
        box = target.bounding_box()
        page.wait_for_timeout(100)
        cpu0, bytes0 = _cpu(self.proc), self.wire.bytes
        self.wire.expect(want)
        t0 = time.perf_counter()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_function(SHOWS_JS, arg=want, timeout=60_000, polling="raf")
        drawn = time.perf_counter() - t0
        _idle(page)
        page.wait_for_timeout(150)
        if kind is None:
            return
        row = self.seen.setdefault(kind, {"drawn": [], "server": [], "cpu": [], "bytes": []})
        row["drawn"].append(drawn)
        # the heatmap's element came back (a message the browser already holds comes back
        # as a reference to it, without the title: then the whole latency is counted)
        row["server"].append(self.wire.arrived_at - t0 if self.wire.arrived_at else drawn)
        row["cpu"].append(_cpu(self.proc) - cpu0)
        row["bytes"].append(self.wire.bytes - bytes0)


def _first_page(browser, url: str, proc) -> dict:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    wire = Wire(page)
    cpu0, t0 = _cpu(proc), time.perf_counter()
    page.goto(url)
    page.wait_for_function(SHOWS_JS, arg="· head 0 ·", timeout=120_000, polling="raf")
    drawn = time.perf_counter() - t0
    page.wait_for_timeout(300)
    _idle(page)
    done = time.perf_counter() - t0
    time.sleep(0.5)
    out = {"drawn": drawn, "done": done, "cpu": _cpu(proc) - cpu0, "bytes": wire.bytes}
    ctx.close()
    return out


def interaction_rows(name: str, note: str, quick: bool, served=None) -> list[dict]:
    """p50/p95 of head switch, layer switch, view radio and first page, against BEFORE."""
    from playwright.sync_api import sync_playwright
    sup = browser_support()
    CHROMIUM, launch_chromium = sup.CHROMIUM, sup.launch_chromium
    if not Path(CHROMIUM).exists():
        return [{"name": "latency: browser interactions", "skipped": f"no chromium at {CHROMIUM}"}]
    n_first, n_head, n_layer, n_view = (1, 2, 1, 2) if quick else (5, 20, 10, 10)
    if os.environ.get("BENCH_LATENCY_N"):  # "first,head,layer,view": a shorter run
        n_first, n_head, n_layer, n_view = map(int, os.environ["BENCH_LATENCY_N"].split(","))
    watcher = os.environ.get("BENCH_WATCHER") or None  # e.g. "auto": the watcher's cost
    server = nullcontext(served) if served else served_app(watcher)
    with server as (base, proc), sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            url = f"{base}/attention?" + urllib.parse.urlencode({"model": name,
                                                                 "text": INTERACTION_TEXT})
            _first_page(browser, url, proc)  # loads the model, caches the trace: not timed
            first = [_first_page(browser, url, proc) for _ in range(n_first)]
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            run = Interactions(page, proc)
            page.goto(url)
            page.wait_for_function(SHOWS_JS, arg="· head 0 ·", timeout=120_000)
            _idle(page)

            def number(label: str, up: bool):
                box = page.locator("[data-testid='stNumberInput']").filter(has_text=label)
                return box.locator("[data-testid='stNumberInputStep%s']" % ("Up" if up
                                                                            else "Down"))

            def bounds(label: str) -> int:
                text = page.locator("[data-testid='stNumberInput']").filter(
                    has_text=label).locator("label").inner_text()
                return int(re.search(r"–(\d+)", text)[1])

            n_heads, n_layers = bounds("Head (") + 1, bounds("Layer (") + 1
            step = 1
            for _ in range(n_head):  # heads not shown before: each figure is built
                stack, layer, att, head, view = _title(page)
                if not 0 <= head + step < n_heads:
                    step = -step
                run.click("head", number("Head (", step > 0),
                          _want(stack, layer, att, head + step, view))
            step = 1
            for _ in range(n_layer):
                stack, layer, att, head, view = _title(page)
                if not 0 <= layer + step < n_layers:
                    step = -step
                run.click("layer", number("Layer (", step > 0),
                          _want(stack, layer + step, att, head, view))
            radio = page.locator("[data-testid='stRadio']").filter(has_text="Show")
            for i in range(n_view + 2):  # the first round trip runs the model for the scores
                stack, layer, att, head, view = _title(page)
                other = "scores" if view == "weights" else "weights"
                run.click("view" if i >= 2 else None, radio.get_by_text(other, exact=True),
                          _want(stack, layer, att, head, other))
        finally:
            browser.close()
    rows = []
    for kind, label in (("head", "head switch"), ("layer", "layer switch"),
                        ("view", "view radio")):
        seen = run.seen[kind]
        rows.append(_interaction_row(
            kind, f"latency: browser, {label} -> new heatmap drawn ({note})", seen["drawn"],
            note, watcher, server_s=statistics.median(seen["server"]),
            server_cpu_s=statistics.median(seen["cpu"]),
            ws_kb=statistics.median(seen["bytes"]) / 1024))
    rows.append(_interaction_row(
        "first page", f"latency: browser, first page -> heatmap drawn ({note})",
        [f["drawn"] for f in first], note, watcher,
        page_done_s=statistics.median(f["done"] for f in first),
        server_cpu_s=statistics.median(f["cpu"] for f in first),
        ws_kb=statistics.median(f["bytes"] for f in first) / 1024))
    return rows


def _interaction_row(kind: str, name: str, times: list[float], note: str, watcher, **extra):
    before, target = BEFORE[kind], TARGETS[kind]
    row = budget_row(name, summary(times), target[0], "cpu", model=note,
                     how="Playwright + chromium, streamlit run app.py (as make run)",
                     p95_s=p95(times), target_p95_s=target[1], before_p50_s=before[0],
                     before_p95_s=before[1], file_watcher=watcher or "config.toml", **extra)
    row["meets_target"] = bool(row["ours_s"] <= target[0] and row["p95_s"] <= target[1])
    return row


# ---- server CPU per interaction (issue 34) ------------------------------------------------
# Process CPU seconds (user + system, psutil: robust on a shared machine, unlike wall clock)
# of the app server per interaction, over Streamlit's own protocol (bench/load/protocol.py:
# the messages Chromium's frontend sends, no browser), MiniLM and a cached trace. Two servers
# in the same run: "before" collects the whole heap after every script run, as Streamlit
# does by default (runner.postScriptGC; ATTENTION_LAB_GC_SECONDS=0 restores it), "after" as
# shipped (attention_lab/server.py: at most once every 30 s). Each figure is the kind's CPU
# summed over its interactions / their number (a tick of process CPU time is 10 ms).
GC_POLICIES = (("before", {"ATTENTION_LAB_GC_SECONDS": "0"}), ("after", {}))
HEADS_MATTER_TABS = ("Logit lens", "Composition", "Head entropy", "Logit attribution")


async def _cpu_session(base: str, proc, name: str, counts: dict[str, int]) -> dict:
    """{kind: [CPU s, wall s, KB, errors] summed} for each kind of interaction."""
    import asyncio

    from bench.load.protocol import Session

    seen: dict[str, list] = {}
    settle = 0.25  # the run's end (its garbage collection included) is inside the window

    async def timed(kind: str, step) -> None:
        await asyncio.sleep(0.1)
        cpu0 = _cpu(proc)
        run = await step()
        await asyncio.sleep(settle)
        row = seen.setdefault(kind, [0.0, 0.0, 0.0, 0, 0])
        row[0] += _cpu(proc) - cpu0
        row[1] += run.seconds
        row[2] += run.bytes / 1024
        row[3] += len(run.errors)
        row[4] += 1

    query = {"model": name, "text": INTERACTION_TEXT}
    warm = Session(base)  # loads the model, caches the trace and the first figures
    await warm.open("attention", query)
    await warm.close()
    s = Session(base)
    try:
        await timed("first page", lambda: s.open("attention", query))
        layer_box = next(w for w in s.widgets.values() if w.key == "layer")
        head_box = next(w for w in s.widgets.values() if w.key == "head")
        n_layers = int(re.search(r"–(\d+)", layer_box.label)[1]) + 1
        n_heads = int(re.search(r"–(\d+)", head_box.label)[1]) + 1
        for i in range(1, counts["head"] + 1):  # heads not shown before: figures built
            await timed("head switch", lambda h=i % n_heads: s.set("head", h))
        for i in range(1, counts["head"] + 1):  # the same heads again: cached figures
            await timed("head again", lambda h=i % n_heads: s.set("head", h))
        for i in range(1, counts["layer"] + 1):
            await timed("layer switch", lambda la=i % n_layers: s.set("layer", la))
        await s.set("view", "scores")  # the scores' own trace runs the model: not timed
        for i in range(counts["view"]):
            await timed("view radio", lambda v=("weights", "scores")[i % 2]: s.set("view", v))
        await s.page("heads_matter")
        for label in HEADS_MATTER_TABS[:counts["tabs"]]:  # each tab's analysis runs once
            await s.set("tab", label)
        for i in range(2 * counts["tabs"]):
            label = HEADS_MATTER_TABS[i % counts["tabs"]]
            await timed("heads matter tab", lambda la=label: s.set("tab", la))
    finally:
        await s.close()
    return seen


def cpu_rows(name: str, note: str, quick: bool, served=None) -> list[dict]:
    """Server CPU per interaction, before and after the garbage policy, same run."""
    import asyncio

    counts = ({"head": 2, "layer": 1, "view": 2, "tabs": 1} if quick else
              {"head": 12, "layer": 6, "view": 6, "tabs": 4})
    policies = GC_POLICIES[1:] if quick else GC_POLICIES  # quick: the shipped policy only
    found: dict[str, dict] = {}
    for policy, env in policies:
        with (nullcontext(served) if served else served_app(env=env)) as (base, proc):
            found[policy] = asyncio.run(_cpu_session(base, proc, name, counts))
    rows = []
    for kind in found[policies[-1][0]]:
        row = {"name": f"latency: server CPU per {kind} ({note})", "model": note, "device": "cpu",
               "how": "Streamlit protocol client (bench/load), process CPU of streamlit run "
                      "app.py, per interaction"}
        for policy, _ in policies:
            cpu_s, wall_s, kb, errors, n = found[policy][kind]
            row.update({f"{policy}_cpu_s": cpu_s / n, f"{policy}_wall_s": wall_s / n,
                        f"{policy}_errors": errors, "n": n, "ws_kb": kb / n})
        if "before_cpu_s" in row and row["after_cpu_s"] > 0:
            row["cpu_ratio"] = row["before_cpu_s"] / row["after_cpu_s"]
        rows.append(row)
    return rows


def run(quick: bool = False) -> list[dict]:
    repeat = 1 if quick else 7
    with tempfile.TemporaryDirectory() as tmp:
        name, model, note = pick_model(quick, Path(tmp))
        rows = server_rows(name, model, note, repeat)
        # quick (the tests' code-path run): one server for the three browser-side parts,
        # with the shipped garbage policy (the full run starts each its own)
        with (served_app(env=dict(GC_POLICIES[-1][1])) if quick else nullcontext()) as served:
            try:
                rows += browser_rows(name, model, note, 1 if quick else 5, served)
                rows += interaction_rows(name if quick else "minilm",
                                         note if quick else "minilm", quick, served)
            except ImportError as err:
                rows.append({"name": "latency: browser",
                             "skipped": f"playwright missing ({err})"})
            rows += cpu_rows(name if quick else "minilm", note if quick else "minilm", quick,
                             served)
    return rows


if __name__ == "__main__":
    import sys

    quick = "--quick" in sys.argv
    if "--cpu" in sys.argv:  # only the server CPU per interaction, before / after
        with tempfile.TemporaryDirectory() as tmp:
            name, _model, note = (pick_model(True, Path(tmp)) if quick
                                  else ("minilm", None, "minilm"))
            rows = cpu_rows(name, note, quick)
    else:
        rows = run(quick=quick)
    for row in rows:
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
