"""bench/load/scenario.py's driver in a real browser: one Playwright context of Debian's
chromium per session (the pytest profile, tests/browser/test_load_browser.py).

A step's time runs from the click or key press to the end of the run it started (the app's
run state back to notRunning, with the address showing the new value), so it includes the
browser's own work; on a shared 2-core machine that work competes with the server's.
"""

from __future__ import annotations

import re
import time
import urllib.parse

from bench.load.scenario import Step

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--disable-quic"]
# Streamlit's own run state on the app root: "notRunning" once the run the browser asked
# for has finished; the status widget is gone once nothing is pending.
SCRIPT_IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
STATUS = "[data-testid='stStatusWidget']"
LABELS = """() => [...document.querySelectorAll(
    '.js-plotly-plot .xtick text, .js-plotly-plot .ytick text')].map(t => t.textContent)"""


class Driver:
    """One session in its own browser context (cookies, storage and websocket of its own)."""

    def __init__(self, browser, base: str, timeout_ms: float = 300_000):
        self.browser, self.base, self.timeout = browser, base.rstrip("/"), timeout_ms
        self.errors: list[str] = []
        self.replica = ""
        self.ctx = self.page_ = None

    async def __aenter__(self):
        self.ctx = await self.browser.new_context(viewport={"width": 1300, "height": 900})
        self.page_ = await self.ctx.new_page()
        self.page_.on("pageerror", lambda e: self.errors.append(f"pageerror {e}"))
        self.page_.on("console", lambda m: self.errors.append(m.text)
                      if m.type == "error" and "Failed to load resource" not in m.text else None)
        return self

    async def __aexit__(self, *exc):
        await self.ctx.close()

    async def _settle(self) -> None:
        await self.page_.wait_for_selector(SCRIPT_IDLE, timeout=self.timeout)
        await self.page_.wait_for_selector(STATUS, state="detached", timeout=self.timeout)

    async def _until_url(self, key: str, value: str, path: str | None = None,
                         default: str | None = None) -> None:
        """Until the server has run with the new value (it writes the view back into the
        address; ``default``: the value the address leaves out), then until that run has
        finished."""
        await self.page_.wait_for_function(
            """([k, v, p, d]) => { const u = new URL(location.href);
                 return (u.searchParams.get(k) ?? d) === v
                        && (!p || u.pathname.endsWith('/' + p)); }""",
            arg=[key, value, path, default], timeout=self.timeout)
        await self._settle()

    async def _step(self, t0: float) -> Step:
        seconds = time.perf_counter() - t0
        page = self.page_
        errors, self.errors = self.errors, []
        if await page.locator("[data-testid='stException']").count():
            errors.append("an exception box is shown")
        if "Something went wrong" in await page.locator("body").inner_text():
            errors.append("'Something went wrong' is shown")
        box = page.get_by_label("Input text")
        text_box = await box.input_value() if await box.count() else None
        query = urllib.parse.urlsplit(page.url).query
        return Step(seconds, errors, await page.evaluate(LABELS), text_box, query)

    async def open(self, path: str, query: dict[str, str]) -> Step:
        t0 = time.perf_counter()
        resp = await self.page_.goto(f"{self.base}/{path}?{urllib.parse.urlencode(query)}",
                                     timeout=self.timeout)
        self.replica = (resp.headers.get("x-attention-lab-replica", "") if resp else "")
        await self.page_.wait_for_selector(".js-plotly-plot >> visible=true", timeout=self.timeout)
        await self._until_url("text", query["text"])
        return await self._step(t0)

    async def set_head(self, head: int) -> Step:
        spin = self.page_.get_by_role("spinbutton", name=re.compile(r"^Head \("))
        t0 = time.perf_counter()
        await spin.fill(str(head))
        await spin.press("Enter")
        await self._until_url("head", str(head), default="0")
        return await self._step(t0)

    async def set_text(self, text: str) -> Step:
        """Type and submit (Ctrl+Enter); typed again if a run still under way redrew the box
        with the old value, as a person would."""
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        t0 = time.perf_counter()
        for attempt in range(5):
            box = self.page_.get_by_label("Input text")
            await box.fill(text)
            await box.press("Control+Enter")
            try:
                await self._until_url("text", text) if attempt == 4 else \
                    await self.page_.wait_for_function(
                        "t => new URL(location.href).searchParams.get('text') === t",
                        arg=text, timeout=20_000)
                break
            except PlaywrightTimeout:
                await self._settle()
        await self._settle()
        return await self._step(t0)

    async def page(self, url_path: str) -> Step:
        text = urllib.parse.parse_qs(urllib.parse.urlsplit(self.page_.url).query)["text"][0]
        # the sidebar's page links (attention_lab/ui/navigation.page_links); the last ones sit
        # in an expander, opened first when the link is in there
        # (each link carries the sidebar's settings: href "masks?model=...")
        nav = self.page_.locator(f"[data-testid='stSidebar'] a[data-testid='stPageLink-NavLink']"
                                 f":is([href='{url_path}'], [href^='{url_path}?'])").first
        t0 = time.perf_counter()
        if not await nav.is_visible():
            await self.page_.locator("[data-testid='stSidebar'] [data-testid='stExpander'] "
                                     "summary").first.click()
        await nav.click()
        await self._until_url("text", text, url_path)
        return await self._step(t0)
