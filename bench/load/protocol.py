"""A light Streamlit client: one browser session over `/_stcore/stream`, without a browser.

Streamlit's browser and server speak protobuf over one websocket: the browser sends
BackMsg.rerun_script (a ClientState: query string, page, every widget's value, the fragment
to rerun, the hashes of the big messages it has cached); the server answers with ForwardMsgs
(new_session, navigation, deltas of elements, page_info_changed for the address bar, ...,
script_finished). This client sends what the browser's frontend sends, message for message
(checked against Chromium's frames, see bench/load/__init__.py), keeps the widget values and
the address the way the frontend does, and reads the elements it gets back: so a load of
30 sessions costs the server what 30 browsers cost it, and this process a few percent of a
core instead of 30 renderers.

What it does not do: draw. A latency here runs from the message sent to the run's last
message received (script_finished); the browser's drawing comes on top, on the student's
own machine.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

SIDEBAR = 1  # delta_path[0] of the sidebar's elements (0 is the main area)
FINISHED = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}
MAX_MESSAGE = 256 * 2**20


class RunError(Exception):
    """The server closed the session or a run did not finish."""


@dataclass
class Widget:
    id: str
    kind: str  # selectbox, number_input, ...
    key: str  # the user key at the end of the id ("$$ID-<hash>-<key>"), or ""
    label: str
    fragment_id: str
    in_sidebar: bool
    value: object = None  # what the frontend would send back (None: it sends nothing)


@dataclass
class Run:
    """What one interaction brought back."""

    seconds: float = 0.0
    bytes: int = 0
    messages: int = 0
    elements: dict[str, int] = field(default_factory=dict)  # element kind -> count
    errors: list[str] = field(default_factory=list)  # exceptions, st.error boxes
    charts: list[str] = field(default_factory=list)  # plotly specs (JSON text)
    texts: list[str] = field(default_factory=list)  # markdown, code, captions, alerts


def widget_key(widget_id: str) -> str:
    """'$$ID-<hash>-text' -> 'text' (widgets with a key); '' for ids without one."""
    if widget_id.startswith("$$ID-"):
        parts = widget_id.split("-", 2)
        return parts[2] if len(parts) == 3 and parts[2] != "None" else ""
    return ""


def initial_value(kind: str, el):
    """The value the frontend holds for a widget element it has just received: the server's
    value where it set one (set_value), else the widget's default."""
    if kind in ("selectbox", "radio"):
        if el.set_value or el.raw_value:
            return el.raw_value
        return el.options[el.default] if 0 <= el.default < len(el.options) else None
    if kind == "number_input":
        number = el.value if el.set_value else el.default
        return int(number) if el.data_type == el.INT else float(number)
    if kind in ("text_area", "text_input"):
        return el.value if el.set_value else el.default
    if kind == "checkbox":
        return el.value if el.set_value else el.default
    if kind == "multiselect":
        if el.set_value:
            return list(el.raw_values)
        return [el.options[i] for i in el.default if 0 <= i < len(el.options)]
    if kind == "slider" and not el.options:
        return list(el.value) if el.set_value else list(el.default)
    return None  # buttons (triggers), charts' selections, ...: nothing until used


def put_value(state, widget: Widget) -> None:
    """widget.value into a WidgetState proto, in the field the frontend uses for its kind."""
    state.id = widget.id
    v = widget.value
    if widget.kind in ("selectbox", "radio", "text_area", "text_input"):
        state.string_value = v
    elif widget.kind == "number_input":
        if isinstance(v, int):
            state.int_value = v
        else:
            state.double_value = v
    elif widget.kind == "checkbox":
        state.bool_value = bool(v)
    elif widget.kind == "multiselect":
        state.string_array_value.data.extend(v)
    elif widget.kind == "slider":
        state.double_array_value.data.extend(v)
    elif widget.kind == "tabs":  # st.tabs(on_change="rerun"): the open tab's label
        state.string_value = v


class Session:
    """One browser tab: open(url), then set(key, value), page(url_path); each returns a Run."""

    def __init__(self, base: str, *, timeout: float = 600.0):
        self.base = base.rstrip("/")
        self.timeout = timeout
        self.cookies = http.cookiejar.CookieJar()
        self.ws = None
        self.widgets: dict[str, Widget] = {}
        self.seen: set[str] = set()  # widget ids drawn in the run under way
        # the frontend's message cache: hash -> [message, run count when last used, fragment]
        self.cache: dict[str, list] = {}
        self.runs = 0  # finished script runs (the cache's clock)
        self.max_age = 2  # runs a cached message survives unused (new_session's config)
        self.query = ""
        self.pages: dict[str, str] = {}  # url path -> page script hash
        self.links: dict[str, str] = {}  # url path -> the query its sidebar link carries
        self.page_hash = ""
        self.replica = ""  # X-Attention-Lab-Replica of the page's answer (behind nginx)
        self.session_id = ""

    # ---- connecting -------------------------------------------------------------------
    def _get(self, path: str) -> tuple[int, dict]:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))
        with opener.open(self.base + path, timeout=60) as resp:
            resp.read()
            return resp.status, dict(resp.headers)

    async def open(self, path: str, query: dict[str, str]) -> Run:
        """What a browser does for a new tab: the page (cookies: nginx's replica, XSRF), the
        health and host-config checks, the websocket, then the first run."""
        from websockets.asyncio.client import connect

        self.query = urllib.parse.urlencode(query)
        t0 = time.perf_counter()
        _, headers = await asyncio.to_thread(self._get, f"/{path}?{self.query}")
        self.replica = headers.get("X-Attention-Lab-Replica", "")
        await asyncio.to_thread(self._get, "/_stcore/health")
        await asyncio.to_thread(self._get, "/_stcore/host-config")
        cookie = "; ".join(f"{c.name}={c.value}" for c in self.cookies)
        host = urllib.parse.urlsplit(self.base).netloc
        self.ws = await connect(self.base.replace("http", "ws", 1) + "/_stcore/stream",
                                origin=f"http://{host}", subprotocols=["streamlit"],
                                additional_headers={"Cookie": cookie} if cookie else None,
                                max_size=MAX_MESSAGE, open_timeout=60, ping_interval=None)
        run = await self._rerun(page_name=path)
        run.seconds = time.perf_counter() - t0  # from the page's request, as a browser
        return run

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    # ---- interactions -----------------------------------------------------------------
    def widget(self, key: str) -> Widget:
        found = [w for w in self.widgets.values() if w.key == key]
        if not found:
            raise KeyError(f"no widget with key {key!r} on this page "
                           f"({sorted(w.key for w in self.widgets.values() if w.key)})")
        return found[0]

    async def set(self, key: str, value) -> Run:
        """Change one widget (as a user would) and wait for the run it triggers: a fragment
        run where the widget sits in an st.fragment, as the frontend does."""
        w = self.widget(key)
        w.value = value
        return await self._rerun(fragment_id=w.fragment_id)

    async def page(self, url_path: str) -> Run:
        """Click a page's sidebar link: the frontend drops the main area's widgets and sends
        the page's script hash with the link's query (the sidebar's settings and the page's
        own: attention_lab/ui/sidebar.link_queries)."""
        self.widgets = {i: w for i, w in self.widgets.items() if w.in_sidebar}
        self.query = self.links.get(url_path, "")
        return await self._rerun(page_hash=self.pages[url_path])

    # ---- the protocol -----------------------------------------------------------------
    def _back_msg(self, *, page_name: str = "", page_hash: str = "",
                  fragment_id: str = "") -> bytes:
        msg = BackMsg()
        cs = msg.rerun_script
        cs.query_string = self.query
        cs.page_name = page_name
        cs.page_script_hash = "" if page_name else (page_hash or self.page_hash)
        cs.fragment_id = fragment_id
        for w in self.widgets.values():
            if w.value is not None:
                put_value(cs.widget_states.widgets.add(), w)
        cs.cached_message_hashes.extend(self.cache.keys())
        ctx = cs.context_info
        ctx.timezone, ctx.locale, ctx.color_scheme = "UTC", "en-US", "light"
        ctx.url = f"{self.base}/{page_name}"
        return msg.SerializeToString()

    async def _rerun(self, **how) -> Run:
        run = Run()
        fragment = how.get("fragment_id", "")
        self.seen = set()
        t0 = time.perf_counter()
        await self.ws.send(self._back_msg(**how))
        deadline = t0 + self.timeout
        while True:
            try:
                data = await asyncio.wait_for(self.ws.recv(),
                                              max(0.1, deadline - time.perf_counter()))
            except TimeoutError:
                raise RunError(f"no script_finished within {self.timeout:.0f} s") from None
            except Exception as err:  # websockets' ConnectionClosed and friends
                raise RunError(f"websocket closed: {err}") from None
            run.bytes += len(data)
            run.messages += 1
            msg = ForwardMsg()
            msg.ParseFromString(data)
            status = self._take(msg, run)
            if status is None:
                continue
            if status in FINISHED:
                if not fragment:  # the frontend forgets widgets a full run did not draw
                    self.widgets = {i: w for i, w in self.widgets.items() if i in self.seen}
                self._age_cache(fragment)
                run.seconds = time.perf_counter() - t0
                return run
            if status == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                run.errors.append("script compile error")
                run.seconds = time.perf_counter() - t0
                return run
            # FINISHED_EARLY_FOR_RERUN: st.navigation or a widget asked for another run

    def _age_cache(self, fragment: str) -> None:
        """As the frontend's ForwardMsgCache.incrementRunCount after a run: a message unused
        for more than max_age runs is dropped (a fragment run ages only its own messages)."""
        self.runs += 1
        for h, (_, used, frag) in list(self.cache.items()):
            if fragment and frag != fragment:
                continue
            if self.runs - used > self.max_age:
                del self.cache[h]

    def _take(self, msg: ForwardMsg, run: Run):
        """Read one ForwardMsg; -> its script_finished status, or None."""
        kind = msg.WhichOneof("type")
        if kind == "ref_hash":
            entry = self.cache.get(msg.ref_hash)
            if entry is None:
                run.errors.append(f"message {msg.ref_hash} referenced but not cached")
                return None
            entry[1] = self.runs
            body = ForwardMsg()
            body.CopyFrom(entry[0])
            body.metadata.CopyFrom(msg.metadata)
            msg, kind = body, "delta"
        elif msg.metadata.cacheable and msg.hash and msg.hash not in self.cache:
            self.cache[msg.hash] = [msg, self.runs, msg.delta.fragment_id]
        if kind == "script_finished":
            return msg.script_finished
        if kind == "new_session":
            self.session_id = msg.new_session.initialize.session_id or self.session_id
            self.max_age = msg.new_session.config.max_cached_message_age or self.max_age
            self.page_hash = msg.new_session.page_script_hash or self.page_hash
        elif kind == "navigation":
            self.pages = {p.url_pathname: p.page_script_hash for p in msg.navigation.app_pages}
            self.page_hash = msg.navigation.page_script_hash or self.page_hash
        elif kind == "page_info_changed":
            self.query = msg.page_info_changed.query_string
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            self._element(msg, run)
        elif kind == "delta" and msg.delta.WhichOneof("type") == "add_block":
            self._tabs(msg)
        return None

    def _tabs(self, msg: ForwardMsg) -> None:
        """st.tabs(key=..., on_change="rerun") is a widget whose value is the open tab's
        label; the frontend sends it only once a tab was clicked (set("tab", label))."""
        block = msg.delta.add_block
        if block.WhichOneof("type") != "tab_container" or not block.tab_container.id:
            return
        widget_id = block.tab_container.id
        self.seen.add(widget_id)
        old = self.widgets.get(widget_id)
        path = list(msg.metadata.delta_path)
        self.widgets[widget_id] = Widget(widget_id, "tabs", widget_key(widget_id), "tabs",
                                         msg.delta.fragment_id,
                                         bool(path) and path[0] == SIDEBAR,
                                         old.value if old is not None else None)

    def _element(self, msg: ForwardMsg, run: Run) -> None:
        el = msg.delta.new_element
        kind = el.WhichOneof("type")
        run.elements[kind] = run.elements.get(kind, 0) + 1
        body = getattr(el, kind)
        if kind == "exception":
            run.errors.append(f"exception: {body.type}: {body.message}"[:300])
        elif kind == "alert":
            run.texts.append(body.body)
            if body.format == body.ERROR:
                run.errors.append(f"st.error: {body.body}"[:300])
        elif kind == "plotly_chart":
            run.charts.append(body.spec)
        elif kind == "page_link":
            self.links[body.page] = body.query_string
        elif kind in ("markdown", "code", "text", "heading"):
            run.texts.append(getattr(body, "body", "") or getattr(body, "code_text", ""))
        widget_id = getattr(body, "id", "") if kind != "plotly_chart" else ""
        if not widget_id or not hasattr(body, "label"):
            return
        self.seen.add(widget_id)
        path = list(msg.metadata.delta_path)
        old = self.widgets.get(widget_id)
        value = initial_value(kind, body)
        if old is not None and not getattr(body, "set_value", False):
            value = old.value  # the frontend keeps what the user chose
        self.widgets[widget_id] = Widget(widget_id, kind, widget_key(widget_id), body.label,
                                         msg.delta.fragment_id,
                                         bool(path) and path[0] == SIDEBAR, value)


def chart_labels(spec: str) -> list[str]:
    """Every tick label and category of a plotly figure's JSON (its axes' ticktext, the x/y
    of its traces where they are strings)."""
    try:
        fig = json.loads(spec)
    except ValueError:
        return []
    labels: list[str] = []
    for trace in fig.get("data", []):
        for axis in ("x", "y"):
            values = trace.get(axis)
            if isinstance(values, list):
                labels += [v for v in values if isinstance(v, str)]
    for name, axis in fig.get("layout", {}).items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            labels += [str(t) for t in axis.get("ticktext", []) or []]
    return labels


class Driver:
    """bench/load/scenario.py's driver over a Session (async context manager)."""

    def __init__(self, base: str, timeout: float = 600.0):
        self.session = Session(base, timeout=timeout)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.session.close()

    @property
    def replica(self) -> str:
        return self.session.replica

    def _step(self, run: Run):
        from bench.load.scenario import Step

        box = next((w.value for w in self.session.widgets.values() if w.key == "text"), None)
        labels = [label for spec in run.charts for label in chart_labels(spec)]
        return Step(run.seconds, run.errors, labels, box, self.session.query, run.bytes)

    async def open(self, path: str, query: dict[str, str]):
        return self._step(await self.session.open(path, query))

    async def set_head(self, head: int):
        return self._step(await self.session.set("head", head))

    async def set_text(self, text: str):
        return self._step(await self.session.set("text", text))

    async def page(self, url_path: str):
        return self._step(await self.session.page(url_path))
