"""attention_lab.server: a fragment rerun asked of a process that never ran the session (a
restarted server, or the replica a session moved to) becomes a full run of the page; other
requests pass as they are. The browser test of it: tests/browser/test_failover.py."""

from __future__ import annotations

from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime.app_session import AppSession

from attention_lab import server


class Storage:
    def __init__(self, registered: int):
        self.registered = registered

    def registration_sequence(self) -> int:
        return self.registered


class Session:
    """What fresh_session_rerun reads of an AppSession."""

    def __init__(self, fragments=(), registered=0):
        self.fragments, self._fragment_storage = set(fragments), Storage(registered)

    def has_fragment(self, fragment_id: str) -> bool:
        return fragment_id in self.fragments


def state(fragment_id: str = "") -> ClientState:
    cs = ClientState(query_string="model=en-fr&head=2", page_name="attention",
                     fragment_id=fragment_id)
    cs.widget_states.widgets.add(id="head", int_value=2)
    return cs


def test_a_fragment_request_on_a_fresh_session_runs_the_page():
    asked = state("frag-1")
    got = server.fresh_session_rerun(Session(), asked)
    assert got.fragment_id == "" and asked.fragment_id == "frag-1"  # a copy: the original kept
    got.fragment_id = asked.fragment_id
    assert got == asked  # the URL and widget values travel unchanged


def test_other_requests_pass_as_they_are():
    for session, asked in ((Session(["frag-1"], 1), state("frag-1")),  # a fragment it holds
                           (Session([], 3), state("frag-1")),  # ran before: Streamlit's call
                           (Session(), state("")),  # a full run already
                           (Session(), None)):  # a rerun with the previous client state
        assert server.fresh_session_rerun(session, asked) is asked


def test_install_wraps_request_rerun_once(monkeypatch):
    seen = []
    monkeypatch.setattr(AppSession, "request_rerun", lambda self, cs: seen.append(cs))
    server.install()
    server.install()
    AppSession.request_rerun(Session(), state("frag-1"))
    assert len(seen) == 1 and seen[0].fragment_id == ""
    assert getattr(AppSession.request_rerun, server._MARK)
