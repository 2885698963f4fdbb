"""Replicas behind nginx survive losing one (issue 34, item 3).

`attention-lab serve --replicas 2` on loopback; 6 sessions (`make load`: 12) through nginx,
each a Playwright context of one Chromium with its own text and view in the URL (block kind,
layer, head, weights or scores; the en-fr model, light enough for 12 first pages on 2 cores). One replica
is killed (SIGKILL). Every session that was on it reconnects (to the other replica, through
nginx) within 10 s of the kill, still showing the same view: Streamlit's client (1.67) keeps
what it shows and reruns on the next interaction, so each moved session then switches head,
and the new replica, which never saw it, redraws the same view one head on from its URL and
widgets. The sessions on the other replica see no error and no reconnection; every session's
settings are equal before and after. A screenshot of a moved session is left in
tests/artifacts.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import psutil
import pytest

from bench.load.scenario import session_text
from tests.support.browser_support import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_FLAGS,
    ROOT,
    SCRIPT_IDLE,
    free_port,
    real_errors,
)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                 reason="Debian's chromium is not installed")]
# make test: 6 sessions (each replica gets some); make load: 12, the classroom's share of one
# server's 30 on two replicas
SESSIONS = int(os.environ.get("ATTENTION_LAB_FAILOVER_SESSIONS", "6"))
MODEL = "en-fr"
KINDS = ("encoder.self", "decoder.self", "decoder.cross")
FAILOVER_S = 10.0  # the bound, from the kill to the same view on the other replica
SETUP_MS = 400_000  # first pages on a busy 2-core machine
# Each context is a student's own foreground tab: no background-tab timer throttling.
FLAGS = [*CHROMIUM_FLAGS, "--disable-background-timer-throttling",
         "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"]
VIEW = ("text", "model", "kind", "layer", "head", "view")
# what the Attention page shows for a setting the address leaves out (ui/state.to_url): en-fr's
# first block kind, layer 0, head 0, the weights
SHOWN_WHEN_LEFT_OUT = {"kind": "encoder.self", "layer": "0", "head": "0", "view": "weights"}
READ_VIEW = """() => {
  const value = l => { const e = document.querySelector(`input[aria-label^="${l}"]`);
                       return e ? e.value : null; };
  const radio = [...document.querySelectorAll('[data-testid="stRadio"] input:checked')]
                  .map(e => e.closest('label').innerText.trim());
  const box = document.querySelector('textarea[aria-label="Input text"]');
  const ticks = [...document.querySelectorAll('.js-plotly-plot .ytick text')]
                  .map(t => t.textContent);
  return {layer: value('Layer'), head: value('Head'), radios: radio,
          text: box ? box.value : null, ticks: ticks,
          titles: [...document.querySelectorAll('.js-plotly-plot .gtitle')]
                    .map(t => t.textContent),
          kind: [...document.querySelectorAll('[data-testid="stSelectbox"]')]
                  .map(e => e.innerText).find(t => t.includes('attention')) || null};
}"""


def view_of(i: int) -> dict[str, str]:
    return {"model": MODEL, "text": session_text(i, 0), "kind": KINDS[i % 3],
            "layer": str(i % 2), "head": str((i // 2) % 4), "view": ("weights", "scores")[i % 2]}


def nginx_or_skip() -> None:
    from attention_lab.cli import CommandError
    from attention_lab.serve import cores, find_nginx

    try:
        find_nginx()
    except CommandError as err:
        pytest.skip(f"{err} (make test installs Debian's nginx where apt-get is usable)")
    if cores() < 2:
        pytest.skip("2 replicas need 2 cores (serve allows one replica a core)")


@pytest.fixture
def served(tmp_path):
    """`attention-lab serve --replicas 2` on a free loopback port -> (base, {addr: pid})."""
    nginx_or_skip()
    port = free_port()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log_path = ARTIFACTS / "failover-serve.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "attention_lab", "serve", "--replicas", "2", "--port", str(port),
         "--address", "127.0.0.1", "--state-dir", str(tmp_path / "serve")],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 240
        while "Ctrl-C stops everything" not in log_path.read_text():
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.3)
        pids = {addr: int(pid) for addr, pid in re.findall(
            r"replica \d+: http://(127\.0\.0\.1:\d+) \(pid (\d+)\)", log_path.read_text())}
        assert len(pids) == 2, log_path.read_text()
        asyncio.run(warm(list(pids)))
        yield f"http://127.0.0.1:{port}", pids
    finally:
        children = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGTERM)  # as Ctrl-C: nginx and both replicas stop
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    _, alive = psutil.wait_procs(children, timeout=5)  # nothing left behind
    assert not alive, [p.cmdline() for p in alive]
    with socket.socket() as s:  # nginx let go of the port
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


async def warm(replicas: list[str]) -> None:
    """One visit to each replica straight (the teacher's): the app's modules and the model
    load before the class arrives, as in bench/load."""
    from bench.load.protocol import Session

    async def visit(addr: str) -> None:
        s = Session(f"http://{addr}", timeout=SETUP_MS / 1000)
        run = await s.open("attention", {"model": MODEL, "text": "the teacher sees the class"})
        await s.close()
        assert not run.errors, run.errors

    await asyncio.gather(*(visit(a) for a in replicas))


class Tab:
    """One student's session: its page, what its websockets did, what it logged."""

    def __init__(self, i: int, page):
        self.i, self.page, self.view = i, page, view_of(i)
        self.errors: list[str] = []
        self.opened: list[float] = []  # websocket opens (monotonic)
        self.closed: list[float] = []
        self.finished: list[float] = []  # script_finished frames (a run drawn in full)
        self.replicas: list[tuple[float, str]] = []  # (when, replica) of /_stcore/health
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror {e}"))
        page.on("websocket", self._websocket)
        page.on("response", self._response)
        self.pings: list[tuple[float, str]] = []  # health/host-config requests and answers
        page.on("request", lambda r: self.pings.append((time.monotonic(), "ask"))
                if r.url.endswith("/_stcore/health") else None)

    def _websocket(self, ws) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        def frame(payload) -> None:
            if isinstance(payload, bytes):
                msg = ForwardMsg()
                msg.ParseFromString(payload)
                if msg.WhichOneof("type") == "script_finished" and msg.script_finished in (
                        ForwardMsg.FINISHED_SUCCESSFULLY,
                        ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY):
                    self.finished.append(time.monotonic())

        self.opened.append(time.monotonic())
        ws.on("framereceived", frame)
        ws.on("close", lambda _ws: self.closed.append(time.monotonic()))

    def timeline(self, since: float) -> str:
        """What this tab did after `since` (a failure message)."""
        events = [(t, "ws closed") for t in self.closed] + [(t, "ws opened") for t in self.opened]
        events += [(t, "run finished") for t in self.finished] + [
            (t, f"health {what}") for t, what in self.pings]
        return ", ".join(f"{what} {t - since:+.1f}s" for t, what in sorted(events) if t > since)

    def _response(self, resp) -> None:
        if resp.url.endswith("/_stcore/health"):
            self.pings.append((time.monotonic(), f"answered {resp.status}"))
        if resp.url.endswith("/_stcore/health") and resp.status == 200:
            replica = resp.headers.get("x-attention-lab-replica", "").split(",")[-1].strip()
            self.replicas.append((time.monotonic(), replica))

    def replica(self, before: float = float("inf")) -> str:
        return [r for t, r in self.replicas if t < before][-1]

    async def open(self, base: str) -> None:
        await self.page.goto(f"{base}/attention?{urllib.parse.urlencode(self.view)}",
                             timeout=SETUP_MS)
        await self.page.wait_for_selector(".js-plotly-plot >> visible=true", timeout=SETUP_MS)
        await self.idle(SETUP_MS)

    async def idle(self, timeout_ms: float) -> None:
        await self.page.wait_for_selector(SCRIPT_IDLE, timeout=timeout_ms)
        await self.page.wait_for_selector("[data-testid='stStatusWidget']", state="detached",
                                          timeout=timeout_ms)

    async def shown(self) -> dict:
        """The view as the page shows it: the address's settings and the widgets' values."""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.page.url).query)
        dom = await self.page.evaluate(READ_VIEW)
        return {"url": {k: query.get(k, [SHOWN_WHEN_LEFT_OUT.get(k)])[0] for k in VIEW},
                "dom": dom}

    async def problems(self) -> list[str]:
        out = real_errors(self.errors)
        if await self.page.locator("[data-testid='stException']").count():
            out.append("an exception box is shown")
        if "Something went wrong" in await self.page.locator("body").inner_text():
            out.append("'Something went wrong' is shown")
        return out


async def failover(base: str, pids: dict[str, int]) -> dict:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        tabs = []
        for i in range(SESSIONS):
            ctx = await browser.new_context(viewport={"width": 1300, "height": 900})
            tabs.append(Tab(i, await ctx.new_page()))
        await asyncio.gather(*(t.open(base) for t in tabs))
        before = {t.i: await t.shown() for t in tabs}
        for t in tabs:  # the URL holds the view the session asked for
            assert before[t.i]["url"] == t.view, (t.i, before[t.i]["url"])
            assert any(f"· head {t.view['head']} ·" in x for x in before[t.i]["dom"]["titles"]), (
                t.i, before[t.i]["dom"]["titles"])
            assert not await t.problems(), (t.i, t.errors)
        on = {t.i: t.replica() for t in tabs}
        counts = {a: sum(r == a for r in on.values()) for a in pids}
        victim = max(counts, key=counts.get)  # the replica with the most sessions
        moved = [t for t in tabs if on[t.i] == victim]
        stayed = [t for t in tabs if on[t.i] != victim]

        killed = time.monotonic()
        os.kill(pids[victim], signal.SIGKILL)

        async def back(t: Tab) -> float:
            """Until the tab has a new websocket (to the other replica, through nginx) and is
            idle. Streamlit's client keeps the page it shows and reruns on the next
            interaction, now on the new replica (checked below)."""
            deadline = killed + FAILOVER_S
            while not (t.closed and t.opened and t.opened[-1] > killed):
                assert time.monotonic() < deadline, (
                    f"session {t.i} not back within {FAILOVER_S:.0f} s of the kill: "
                    f"{t.timeline(killed)}; load average {os.getloadavg()[0]:.1f}")
                await asyncio.sleep(0.05)
            await t.idle(max(1.0, deadline - time.monotonic()) * 1000)
            return time.monotonic() - killed

        recovery = await asyncio.gather(*(back(t) for t in moved))
        # where each came back (nginx keeps a failed replica out for 10 s: serve restarts the
        # killed one on its address meanwhile, and later reconnections may go back to it)
        landed = {t.i: t.replica() for t in moved}
        await asyncio.sleep(1.0)  # anything the others would show comes now
        after = {t.i: await t.shown() for t in tabs}
        report = {"victim": victim, "counts": counts, "recovery_s": recovery,
                  "moved": [t.i for t in moved], "before": before, "after": after,
                  "problems": {t.i: await t.problems() for t in stayed},
                  "stayed_reconnected": [t.i for t in stayed if t.closed or len(t.opened) > 1]}

        async def switch_head(t: Tab) -> dict:
            """Head switches on the new replica. Its session starts from nothing: the first
            interaction runs the whole page there (attention_lab/server.py), which rebuilds
            the view from the URL (the URL wins over the browser's widget values in a new
            session, so that click is not applied); the next one switches the head."""
            spin = t.page.get_by_role("spinbutton", name=re.compile(r"^Head \("))
            head = str((int(t.view["head"]) + 1) % 4)
            rebuilt = None
            for _ in range(2):
                runs = len(t.finished)
                await spin.fill(head)
                await spin.press("Enter")
                deadline = time.monotonic() + SETUP_MS / 1000
                while len(t.finished) == runs:  # a click the new replica dropped hangs here
                    assert time.monotonic() < deadline, f"session {t.i}: the click never ran"
                    await asyncio.sleep(0.1)
                await t.idle(SETUP_MS)
                if (await t.shown())["url"]["head"] == head:
                    break
                rebuilt = await t.shown()
            return {"shown": await t.shown(), "problems": await t.problems(), "head": head,
                    "rebuilt": rebuilt}

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        report["switched"] = dict(zip([t.i for t in moved],
                                      await asyncio.gather(*(switch_head(t) for t in moved))))
        report["new_replica"] = landed
        await moved[0].page.screenshot(path=str(ARTIFACTS / "failover-after.png"))
        await browser.close()
    return report


def test_sessions_on_a_killed_replica_come_back_with_the_same_view(served):
    base, pids = served
    report = asyncio.run(failover(base, pids))
    survivor = next(a for a in pids if a != report["victim"])
    print(f"\nfailover: sessions per replica {report['counts']}; killed {report['victim']}; "
          f"{len(report['moved'])} sessions back on {survivor} after "
          + ", ".join(f"{s:.1f}" for s in sorted(report["recovery_s"])) + " s")
    assert report["moved"], report["counts"]
    assert max(report["recovery_s"]) <= FAILOVER_S
    assert report["before"] == report["after"]  # every setting, every session
    assert not report["stayed_reconnected"]
    assert not any(report["problems"].values()), report["problems"]
    for i, done in report["switched"].items():  # on the new replica, the same view one head on
        # the survivor, or the killed one's address once serve has restarted it there (a new
        # process: the session starts from nothing all the same). Seen once on a slow run:
        # recovery took 6.7-8.1 s and session 0's last health check was answered by the
        # restarted replica.
        assert report["new_replica"][i] in pids, (i, report["new_replica"][i])
        if done["rebuilt"] is not None:  # a first click that ran the page: the same view
            assert done["rebuilt"] == report["before"][i], (i, done["rebuilt"])
        assert not done["problems"], (i, done["problems"])
        want = {**report["before"][i]["url"], "head": done["head"]}
        assert done["shown"]["url"] == want, (i, done["shown"]["url"], want)
        dom, was = done["shown"]["dom"], report["before"][i]["dom"]
        assert any(f"· head {done['head']} ·" in t for t in dom["titles"]), (i, dom["titles"])
        assert (dom["text"], dom["radios"], dom["kind"]) == (
            was["text"], was["radios"], was["kind"]), (i, dom, was)
