"""Driving the app headless through Streamlit's AppTest: open a page with URL state, read its
heatmap, check it raised nothing; type (hostile) text and check the page answered."""

import base64
import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from tests.support.hostile_inputs import sendable

TIMEOUT = 60


APP = str(Path(__file__).resolve().parents[2] / "app.py")


def open_app(page: str, **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = str(value)
    at.switch_page(f"pages/{page}.py")
    return at.run()


def heatmap_z(at):
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    return fig["data"][0]["z"], fig


def no_errors(at):
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


PAGES = ["home", "attention", "inside", "positional", "masks", "beam", "heads", "compare",
         "pretraining", "pairs", "relative", "atlas", "flow", "circuits"]


def type_text(at: AppTest, text: str) -> AppTest:
    """What a (hostile) client can send. set_value, not input(): a client may ignore the
    box's max_chars, which the server then enforces. Lone surrogates cannot travel in the
    UTF-8 protobuf or URL a browser sends (they arrive as U+FFFD, see `sendable`); raw ones
    are tested at the boundary (ui.state.clean_text) and on the models directly below."""
    return at.text_area(key="text").set_value(sendable(text)).run()


def assert_answered(at: AppTest, page: str, model: str, category: str, text: str) -> None:
    where = f"{page}/{model}/{category}: {text[:40]!r}"
    assert not at.exception, (where, [e.message for e in at.exception][:1])
    messages = [m.value for m in (*at.error, *at.warning, *at.info)]
    assert all(isinstance(m, str) and m.strip() for m in messages), where
    assert not any("Traceback" in m or "Something went wrong" in m for m in messages), \
        (where, messages)
    # the page's own view (its title) or, when the run was stopped, a message saying why
    assert at.title or at.error or at.warning or at.info, where


def z_of(trace: dict, key: str = "z") -> np.ndarray:
    """A plotly heatmap's z (or a trace's ``key``: a bar's x), whether a list or a typed
    array."""
    z = trace[key]
    if isinstance(z, dict):
        dtype = {"u1": np.uint8, "f4": np.float32, "f8": np.float64, "i1": np.int8,
                 "i4": np.int32}[z["dtype"]]
        a = np.frombuffer(base64.b64decode(z["bdata"]), dtype=dtype)
        if "shape" in z:  # plotly writes "11, 11"
            a = a.reshape([int(x) for x in str(z["shape"]).split(",")])
        return a
    return np.asarray(z)
