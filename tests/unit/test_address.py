"""ui/address.send_url, the one place a run's address changes leave for the browser: it sends
the whole query in one message, the sidebar's keys first, and nothing when the run leaves the
address as it was. (Streamlit's browser side pushes a query message's address at once onto
the path it shows, but switches the path only after drawing the new page: a message from the
run of a page opened by its link, which carries the whole address, arrived first on a busy
machine and added a second history entry, "/masks?<Attention's address>".)"""

from __future__ import annotations

import pytest

from attention_lab.ui import address


class FakeQuery:
    def __init__(self, items: dict[str, str]):
        self.items, self.sent = dict(items), []

    def to_dict(self) -> dict[str, str]:
        return dict(self.items)

    def get(self, key):
        return self.items.get(key)

    def from_dict(self, query: dict[str, str]) -> None:
        self.sent.append(list(query.items()))
        self.items = dict(query)


class FakeSt:
    def __init__(self, query: dict[str, str], pending: dict[str, str]):
        self.query_params = FakeQuery(query)
        self.session_state = {address.PENDING: pending}


@pytest.fixture
def fake(monkeypatch):
    def make(query, pending):
        st = FakeSt(query, pending)
        monkeypatch.setattr(address, "st", st)
        address.send_url()
        return st.query_params.sent
    return make


LINKED = {"model": "toy", "text": "the cat", "head": "2"}  # as a page link carries it


def test_an_unchanged_address_sends_nothing(fake):
    assert fake(LINKED, {"model": "toy", "head": "2"}) == []
    assert fake(LINKED, {"layer": ""}) == []  # removing a key that is not there
    assert fake(LINKED, {}) == []


def test_a_change_sends_the_whole_query_once_sidebar_keys_first(fake):
    assert fake(LINKED, {"head": "3"}) == [[("model", "toy"), ("text", "the cat"),
                                           ("head", "3")]]
    assert fake(LINKED, {"head": ""}) == [[("model", "toy"), ("text", "the cat")]]
    # the same keys and values in another order: the address reads differently, so it goes
    assert fake({"head": "2", "model": "toy"}, {"model": "toy"}) == [[("model", "toy"),
                                                                     ("head", "2")]]
    assert fake({"head": "2"}, {"lang": "zh"}) == [[("lang", "zh"), ("head", "2")]]

