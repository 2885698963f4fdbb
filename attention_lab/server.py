"""The app's Streamlit server: ``python -m attention_lab.server run app.py ...`` is
``streamlit run app.py ...`` with one change, for sessions that come back to a process that
never saw them.

When a server process restarts, or a replica behind nginx dies and its sessions reconnect to
another (``attention-lab serve``), Streamlit's browser client (1.67) keeps the page it shows
and reconnects; it does not rerun. Its next interaction inside an ``st.fragment`` (a head,
layer or view switch: most of them here) asks for a rerun of that fragment only, and the new
process, which holds no fragment of that session, drops the request (``AppSession.
request_rerun``: "The fragment ... does not exist anymore"). The student clicks and nothing
happens, again and again.

``install()`` turns such a request into a full run of the page when the session has never
registered a fragment (a session that has run the page once has: every page with a fragment
registers it on its first run). The full run rebuilds the view from the URL and the widget
values the client sends with the request, so the click lands. A fragment request that races a
full run in a session that has run before is left to Streamlit, as before.

``install()`` also makes a run's end cheap (issue 34). Streamlit collects garbage after every
script run (``runner.postScriptGC``: ``gc.collect(2)``), and with torch and transformers loaded
a full collection walks ~480,000 objects: 0.25 s of CPU, holding the GIL, after each head
switch that itself costs ~0.05 s, so one process saturated a core at 30 students. Here a run's
end collects the whole heap at most once every ``ATTENTION_LAB_GC_SECONDS`` (default 30) for
the whole process (``collect_garbage``); Python's own generational collector still frees young
cycles as it always does, and refcounting frees the rest (caches' evicted traces included).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time

_MARK = "_attention_lab_fresh_session_rerun"
_GC_MARK = "_attention_lab_throttled_gc"


def _gc_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get("ATTENTION_LAB_GC_SECONDS", "30")))
    except ValueError:
        return 30.0


class GarbagePolicy:
    """A full collection at most once every `every` seconds (0: after every run, Streamlit's
    own policy), whichever session's run ends; `clock` for tests."""

    def __init__(self, every: float, clock=time.monotonic):
        self.every, self.clock = every, clock
        self.last = clock()
        self.collections = 0
        self._lock = threading.Lock()

    def after_run(self) -> bool:
        """Called as a script run ends; -> whether it collected."""
        with self._lock:
            now = self.clock()
            if now - self.last < self.every:
                return False
            self.last = now
        gc.collect(2)
        self.collections += 1
        return True


GARBAGE = GarbagePolicy(_gc_seconds())


def collect_garbage() -> bool:
    """GARBAGE.after_run(): the process's throttled full collection after a run."""
    return GARBAGE.after_run()


def fresh_session_rerun(session, client_state):
    """The client state to run for ``session``: ``client_state`` itself, or a copy that asks
    for the full page when it names a fragment that a never-run session cannot hold."""
    if client_state is None or not client_state.fragment_id:
        return client_state
    if session.has_fragment(client_state.fragment_id):
        return client_state
    if session._fragment_storage.registration_sequence() != 0:  # this session has run
        return client_state
    full = type(client_state)()
    full.CopyFrom(client_state)
    full.fragment_id = ""
    return full


def install() -> None:
    """Wrap ``AppSession.request_rerun`` and the end of a script run once per process
    (idempotent)."""
    _install_garbage_policy()
    from streamlit.runtime.app_session import AppSession

    original = AppSession.request_rerun
    if getattr(original, _MARK, False):
        return

    def request_rerun(self, client_state):
        return original(self, fresh_session_rerun(self, client_state))

    setattr(request_rerun, _MARK, True)
    request_rerun.__doc__ = original.__doc__
    AppSession.request_rerun = request_rerun


def _install_garbage_policy() -> None:
    """Streamlit's collection after every run off (the option is set here, so it holds
    wherever the config is), and ours (collect_garbage) after each run instead."""
    from streamlit import config
    from streamlit.runtime.scriptrunner.script_runner import ScriptRunner

    # after every parse of the config (the command line's own parse included: setting it
    # before that parse made Streamlit read the config twice and warn "An update to the
    # [server] config option section was detected ... please restart streamlit" at start)
    config.on_config_parsed(
        lambda: config.set_option("runner.postScriptGC", False, "attention_lab.server"))
    original = ScriptRunner._on_script_finished
    if getattr(original, _GC_MARK, False):
        return

    def _on_script_finished(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        finally:
            collect_garbage()

    setattr(_on_script_finished, _GC_MARK, True)
    _on_script_finished.__doc__ = original.__doc__
    ScriptRunner._on_script_finished = _on_script_finished


def main() -> None:
    install()
    from streamlit.web.cli import main as streamlit_main

    sys.argv[0] = "streamlit"
    streamlit_main()


if __name__ == "__main__":
    main()
