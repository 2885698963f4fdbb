"""ui.errors.reported: what the server log gets. An operator reads it for failures, so a
user's input error told again with a hint (a VizError raised from another) leaves no
traceback there, while a failure told in short (a VizError raised from an OSError, say) logs
its cause, and anything unexpected its traceback; the user sees one message each time."""

from __future__ import annotations

import logging

import pytest

import viz_core as vc
from attention_lab.ui import errors as E


def _retold(inner: Exception):
    try:
        raise inner
    except Exception as err:
        raise vc.InputError("the clean and corrupted inputs give the same logit") from err


@pytest.fixture
def shown(monkeypatch):
    said = []
    monkeypatch.setattr(E.st, "error", lambda message, **kw: said.append(message))
    monkeypatch.setattr(E, "stop", lambda: None)
    return said


@pytest.mark.parametrize("section", [False, True])
@pytest.mark.parametrize("inner,traceback", [
    (vc.InputError("same logit"), False),  # our own message, retold: the user's business
    (OSError(5, "Input/output error"), True),  # a failure told in short: its cause logged
])
def test_a_retold_input_error_logs_no_traceback(caplog, shown, monkeypatch, inner, traceback,
                                                section):
    """Both ways a page runs a part: reported (the page stops) and contributions.attempt
    (a section of the page; the rest goes on)."""
    from attention_lab.ui import contributions

    monkeypatch.setattr(contributions.st, "error", lambda message, **kw: shown.append(message))
    run = contributions.attempt if section else E.reported
    with caplog.at_level(logging.INFO, logger="attention_lab"):
        with run("edge attribution"):
            _retold(inner)
    assert len(shown) == 1 and "same logit" in shown[0]
    logged = [r for r in caplog.records if r.name == "attention_lab" and r.exc_info]
    assert bool(logged) == traceback, [r.getMessage() for r in caplog.records]


def test_anything_unexpected_logs_its_traceback(caplog, shown):
    with caplog.at_level(logging.INFO, logger="attention_lab"):
        with E.reported("edge attribution"):
            raise KeyError("x")
    assert "Something went wrong" in shown[0]
    assert [r for r in caplog.records if r.exc_info and r.exc_info[0] is KeyError]
