"""Reading a rendered page's Plotly text as oriented boxes and finding overlaps (the
overlaps browser test and the Which heads matter browser test); settling and screenshotting a page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.support.browser_support import SCRIPT_IDLE

VIEWPORT = {"width": 1500, "height": 1000}


TOL = 1.0  # px: boxes must overlap by more than this along every axis to count


COLLECT = r"""() => {
  const out = [];
  const quad = (el) => {
    const b = el.getBBox(), m = el.getScreenCTM();
    if (!m || b.width <= 0 || b.height <= 0) return null;
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height],
            [b.x, b.y + b.height]].map(([x, y]) => [m.a * x + m.c * y + m.e,
                                                    m.b * x + m.d * y + m.f]);
  };
  const kindOf = (el) => {
    for (let n = el; n && !n.classList.contains('js-plotly-plot'); n = n.parentElement) {
      const c = n.classList;
      if (c.contains('hoverlayer')) return 'hover';
      if (c.contains('colorbar')) return 'colorbar';
      if ([...c].some(k => /^[xy]\d*tick$/.test(k))) return 'tick';
      if (c.contains('annotation')) return 'annotation';
      if (c.contains('legend')) return 'legend';
      if (c.contains('textpoint')) return 'marker-text';
      if (c.contains('g-gtitle')) return 'title';
      if ([...c].some(k => /^g-[xy]\d*title$/.test(k))) return 'axis-title';
    }
    return 'text';
  };
  const subplotOf = (el) => {
    const g = el.closest('g.subplot');
    return g ? [...g.classList].find(k => k !== 'subplot') : null;
  };
  document.querySelectorAll('.js-plotly-plot').forEach((gd, ci) => {
    const svg = gd.querySelector('svg.main-svg');
    if (!svg || !gd._fullLayout) return;
    const sr = svg.getBoundingClientRect();
    if (sr.width <= 0 || sr.height <= 0 || !gd.checkVisibility()) return;
    const fl = gd._fullLayout;
    const t = fl.title && fl.title.text;
    const areas = {};
    for (const [id, p] of Object.entries(fl._plots || {})) {
      if (!p.xaxis || !p.yaxis) continue;
      areas[id] = [sr.left + p.xaxis._offset, sr.top + p.yaxis._offset,
                   p.xaxis._length, p.yaxis._length];
    }
    const texts = [];
    gd.querySelectorAll('svg text').forEach((el) => {
      const s = (el.textContent || '').trim();
      if (!s || !el.checkVisibility({opacityProperty: true, visibilityProperty: true})) return;
      const kind = kindOf(el);
      if (kind === 'hover') return;
      const q = quad(el);
      if (!q) return;
      const cb = el.closest('g.colorbar');
      const tg = el.closest('g.trace'), cd = tg && tg.__data__;  // d3's calcdata of the trace
      const clipped = !(cd && cd[0] && cd[0].trace && cd[0].trace.cliponaxis === false);
      texts.push({text: s, kind, quad: q, subplot: subplotOf(el), clipped,
                  colorbar: cb ? [...gd.querySelectorAll('g.colorbar')].indexOf(cb) : -1});
    });
    const colorbars = [...gd.querySelectorAll('g.colorbar')].map((g) => {
      const r = g.getBoundingClientRect();
      const bar = g.querySelector('rect.cbbg') || g.querySelector('.cbfills');
      const br = bar ? bar.getBoundingClientRect() : r;
      return {box: [r.left, r.top, r.width, r.height], bar: [br.left, br.top, br.width, br.height]};
    }).filter(c => c.box[2] > 0 && c.box[3] > 0);
    out.push({index: ci, title: t || '', svg: [sr.left, sr.top, sr.width, sr.height],
              texts, colorbars, areas});
  });
  return out;
}"""


TRUNCATED_BUTTONS = r"""() => [...document.querySelectorAll('[data-testid="stMain"] button')]
  .filter(b => b.checkVisibility() && b.getBoundingClientRect().width > 0)
  .filter(b => [b, ...b.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1
               && getComputedStyle(e).overflowX !== 'visible'))
  .map(b => b.innerText.trim())"""


def rect_quad(x: float, y: float, w: float, h: float) -> np.ndarray:
    return np.array([[x, y], [x + w, y], [x + w, y + h], [x, y + h]], dtype=float)


def overlap_depth(a: np.ndarray, b: np.ndarray) -> float:
    """Least overlap of two convex quads over the separating axes (their edge normals):
    <= 0 when they are apart, else how deep (px) they intersect along the thinnest axis."""
    depth = np.inf
    for poly in (a, b):
        for i in range(len(poly)):
            edge = poly[(i + 1) % len(poly)] - poly[i]
            norm = float(np.hypot(*edge))
            if norm < 1e-9:
                continue
            axis = np.array([-edge[1], edge[0]]) / norm
            pa, pb = a @ axis, b @ axis
            depth = min(depth, min(pa.max(), pb.max()) - max(pa.min(), pb.min()))
            if depth <= 0:
                return depth
    return float(depth)


def hull(q: np.ndarray) -> np.ndarray:
    return np.array([*q.min(0), *q.max(0)])  # x0, y0, x1, y1


def overlapping_pairs(quads: list[np.ndarray], tol: float = TOL) -> list[tuple[int, int]]:
    """Index pairs of quads intersecting deeper than tol (axis-aligned hulls filter first)."""
    if len(quads) < 2:
        return []
    h = np.array([hull(q) for q in quads])
    ox = np.minimum(h[:, None, 2], h[None, :, 2]) - np.maximum(h[:, None, 0], h[None, :, 0])
    oy = np.minimum(h[:, None, 3], h[None, :, 3]) - np.maximum(h[:, None, 1], h[None, :, 1])
    cand = np.argwhere(np.triu((ox > tol) & (oy > tol), k=1))
    return [(int(i), int(j)) for i, j in cand if overlap_depth(quads[i], quads[j]) > tol]


def inside(q: np.ndarray, box, tol: float = TOL) -> bool:
    x, y, w, h = box
    x0, y0, x1, y1 = hull(q)
    return x0 >= x - tol and y0 >= y - tol and x1 <= x + w + tol and y1 <= y + h + tol


def describe(t: dict) -> str:
    where = f" [{t['subplot']}]" if t.get("subplot") else ""
    return f"{t['kind']}{where} {t['text'][:40]!r}"


def chart_findings(chart: dict) -> list[str]:
    """What is wrong with one chart's text (see the module docstring)."""
    name = f"chart {chart['index']} {re.sub('<[^>]+>', '', chart['title'])[:60]!r}"
    texts = chart["texts"]
    quads = [np.array(t["quad"], dtype=float) for t in texts]
    found = [f"{name}: {describe(texts[i])} overlaps {describe(texts[j])} by "
             f"{overlap_depth(quads[i], quads[j]):.1f} px" for i, j in overlapping_pairs(quads)]
    for k, cb in enumerate(chart["colorbars"]):
        box = rect_quad(*cb["box"])
        for t, q in zip(texts, quads, strict=True):
            depth = overlap_depth(box, q)
            if t["kind"] == "tick" and t["colorbar"] != k and depth > TOL:
                found.append(f"{name}: colour bar {k} overlaps {describe(t)} by {depth:.1f} px")
        for sub, area in chart["areas"].items():
            depth = overlap_depth(rect_quad(*cb["bar"]), rect_quad(*area))
            if depth > TOL:
                found.append(f"{name}: colour bar {k} lies over the plotting area of {sub} "
                             f"by {depth:.1f} px")
    for t, q in zip(texts, quads, strict=True):
        if not inside(q, chart["svg"]):
            found.append(f"{name}: {describe(t)} is cut off by the chart's edge")
        area = (chart["areas"].get(t["subplot"]) if t["kind"] == "marker-text"
                and t["clipped"] else None)
        if area is not None and overlap_depth(q, rect_quad(*area)) > TOL and not inside(q, area):
            found.append(f"{name}: {describe(t)} is cut off by its subplot's edge")
    return found


# Counts the runs that ended (every change away from "running" of the app's script state,
# each one a mutation record even when two arrive in one batch), from its first call on; and
# the changes to the main area's content (elements added or removed, text changed), with the
# time of the last one. -> [runs, changes]
RUN_COUNTER = """() => {
  if (window.__runs === undefined) {
    window.__runs = 0;
    window.__changes = 0;
    window.__changedAt = performance.now();
    new MutationObserver((records) => {
      window.__runs += records.filter(r => r.oldValue === 'running').length;
    }).observe(document.documentElement, {attributes: true, subtree: true,
                                          attributeOldValue: true,
                                          attributeFilter: ['data-test-script-state']});
    new MutationObserver((records) => {
      if (records.some(r => r.target.closest?.('[data-testid=stMain]') ||
                            r.target.parentElement?.closest('[data-testid=stMain]'))) {
        window.__changes += 1;
        window.__changedAt = performance.now();
      }
    }).observe(document.documentElement, {childList: true, characterData: true,
                                          subtree: true});
  }
  return [window.__runs, window.__changes];
}"""

# A visit's run has ended: the counter saw it end, or (when the browser drew the whole run
# at once, so the script state never read "running": once in a fresh-clone run on 1 Dec the
# page showed the new address's view, idle, with the counter unmoved) the main area changed
# after the popstate and has been still for QUIET_MS since; either way the script is idle.
QUIET_MS = 1500
RUN_ENDED = """([runs, changes, quiet, idle]) =>
  document.querySelector(idle) !== null && (window.__runs > runs ||
    (window.__changes > changes && performance.now() - window.__changedAt > quiet))"""


def visit(tab, url: str) -> None:
    """Open ``url`` (the app's origin) in ``tab``: a page load the first time; after that
    in-app, as the browser's Back and Forward do (pushState, then popstate, which Streamlit
    answers with a run of that page on that address, in the same session: the address's
    settings win, app.py's follow_history), waiting for that run to end. A fifth quicker
    than a page load, which reloads Streamlit's scripts and opens a new session."""
    if not tab.evaluate("() => !!document.querySelector(\"[data-testid='stApp']\")"):
        tab.goto(url)
        return
    runs, changes = tab.evaluate(RUN_COUNTER)
    tab.evaluate("(u) => { history.pushState({}, '', u); "
                 "window.dispatchEvent(new PopStateEvent('popstate')); }", url)
    try:
        tab.wait_for_function(RUN_ENDED, arg=[runs, changes, QUIET_MS, SCRIPT_IDLE],
                              timeout=IN_APP_MS)
    except PlaywrightTimeout:
        # Twice in one fresh-clone run (1 Dec, a loaded machine; both passed alone) no run
        # ended within 180 s of the popstate. What these sweeps check is each page's text,
        # not the in-app navigation (tests/browser/test_browser.py tests Back and Forward):
        # record the page's state for diagnosis, then load the address as a page.
        _record_stuck_visit(tab, url, runs)
        tab.goto(url)


IN_APP_MS = 120_000
STUCK_STATE = """() => ({href: location.href, runs: window.__runs,
  changes: window.__changes,
  script: document.querySelector("[data-testid='stApp']")?.getAttribute('data-test-script-state'),
  status: document.querySelector("[data-testid='stStatusWidget']")?.innerText ?? null,
  dialog: document.querySelector("[role='dialog']")?.innerText ?? null})"""


def _record_stuck_visit(tab, url: str, runs: int) -> None:
    """A visit whose in-app run did not end: the page's state as JSON and a screenshot in
    tests/artifacts, and a warning in the run's summary."""
    import warnings

    from tests.support.browser_support import ARTIFACTS

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    n = len(list(ARTIFACTS.glob("visit-stuck-*.json")))
    state = {"url": url, "runs_before": runs, **tab.evaluate(STUCK_STATE)}
    (ARTIFACTS / f"visit-stuck-{n}.json").write_text(json.dumps(state, indent=1))
    try:
        tab.screenshot(path=str(ARTIFACTS / f"visit-stuck-{n}.png"))
    except PlaywrightTimeout:
        pass
    warnings.warn(f"in-app visit of {url} did not end within {IN_APP_MS // 1000} s "
                  f"({state}); loaded as a page instead", stacklevel=3)


def settle(page):
    page.wait_for_selector("[data-testid='stMain'] h1", timeout=180_000)  # the page ran
    page.wait_for_timeout(300)
    page.wait_for_selector(SCRIPT_IDLE, timeout=180_000)
    page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=180_000)
    page.wait_for_function(  # every chart drawn (streamlit mounts plotly after the run)
        "() => [...document.querySelectorAll('.js-plotly-plot')].every(g => g._fullLayout)",
        timeout=60_000)
    page.wait_for_timeout(700)  # plotly's automargin and resize redraws


def page_findings(page) -> list[str]:
    found = [f for chart in page.evaluate(COLLECT) for f in chart_findings(chart)]
    found += [f"button label truncated: {label!r}" for label in page.evaluate(TRUNCATED_BUTTONS)]
    return found


def screenshot(page, path: Path) -> None:
    """The whole page (streamlit scrolls inside stMain, so a full-page shot of the document
    would show only the first screen): grow the viewport to the content for the shot."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]')"
                           ".scrollHeight")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": min(int(height), 8000)})
    page.wait_for_timeout(500)
    page.screenshot(path=str(path))
    page.set_viewport_size(VIEWPORT)
