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
"""

from __future__ import annotations

import sys

_MARK = "_attention_lab_fresh_session_rerun"


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
    """Wrap ``AppSession.request_rerun`` once per process (idempotent)."""
    from streamlit.runtime.app_session import AppSession

    original = AppSession.request_rerun
    if getattr(original, _MARK, False):
        return

    def request_rerun(self, client_state):
        return original(self, fresh_session_rerun(self, client_state))

    setattr(request_rerun, _MARK, True)
    request_rerun.__doc__ = original.__doc__
    AppSession.request_rerun = request_rerun


def main() -> None:
    install()
    from streamlit.web.cli import main as streamlit_main

    sys.argv[0] = "streamlit"
    streamlit_main()


if __name__ == "__main__":
    main()
