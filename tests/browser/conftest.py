"""The browser tier's shared server: the browser tests run in one process, one after another
(tests/conftest.py), so one Streamlit server, with its loaded models, serves every file that
needs no server settings of its own."""

import pytest


@pytest.fixture(scope="session")
def app_server():
    """The base URL of `streamlit run app.py` on a free local port (tests/support/
    browser_support.py), started once for the session."""
    from tests.support.browser_support import streamlit_server

    with streamlit_server() as (base, _proc):
        yield base
