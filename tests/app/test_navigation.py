"""The Home page's tour lists every page of the navigation (issue 24, item 4)."""

from pathlib import Path

import streamlit
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def test_home_tour_names_every_page_in_the_navigation(monkeypatch, tmp_path):
    """Read the pages app.py really hands to st.navigation, then the tour the Home page shows."""
    from viz_core.training.toy import save_toy

    seen = []
    navigation = streamlit.navigation

    def spy(pages, *args, **kwargs):
        seen[:] = list(pages)
        return navigation(pages, *args, **kwargs)

    monkeypatch.setattr(streamlit, "navigation", spy)
    toy = save_toy(tmp_path / "toy", seed=2)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["model"] = str(toy)
    at.query_params["text"] = "the cat"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    titles = [p.title for p in seen]
    assert len(titles) >= 13 and titles[0] == "Home"
    shown = "\n".join(m.value for m in at.markdown)
    missing = [t for t in titles[1:] if f"**{t}**" not in shown]
    assert not missing, f"pages missing from the Home tour: {missing}"


def test_the_page_list_speaks_the_readers_language():
    """The sidebar lists every page of the navigation as a link in the reader's language:
    the first ones above the fold, the rest in an expander whose label is translated too
    (Streamlit's own list folded them under an English "View 6 more"); the expander is open
    when the current page is one of them."""
    from attention_lab.ui.navigation import PAGES, SHOWN_PAGES
    from viz_core import i18n

    zh = i18n.translations("zh")
    for page, opened in (("pages/home.py", False), ("pages/circuits.py", True)):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["lang"] = "zh"
        at.query_params["model"] = "lm"
        at.switch_page(page).run()
        assert not at.exception, [e.message for e in at.exception]
        links = at.sidebar.get("page_link")
        assert [(link.proto.label, link.proto.page) for link in links] == \
            [(zh.gettext(spec.title), spec.url_path) for spec in PAGES]
        more = at.sidebar.get("expander")[0]
        assert more.label == zh.gettext("{n} more pages").format(n=len(PAGES) - SHOWN_PAGES)
        assert more.proto.expanded is opened


def test_a_page_opened_from_a_link_writes_nothing_more():
    """Each page link carries the sidebar's settings (ui/sidebar.link_query: a text typed just
    before the click included), and every page, opened on that address, leaves its own
    settings at their defaults out of it (ui/state.to_url). So the page writes nothing and
    the visit is one history entry: Back returns to the previous page at once (the Chromium
    test in tests/browser/test_browser.py counts the entries). Swept over every page with
    the translator (encoder-decoder) and the toy GPT (decoder-only)."""
    from urllib.parse import parse_qsl

    from attention_lab.ui.address import FIRST
    from attention_lab.ui.navigation import PAGES

    for model in ("en-fr", "lm"):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update(model=model, text="the cat sat on the mat", lang="en")
        at.run()
        at.text_area(key="text").input("the dog sat on the mat").run()  # typed, then a click
        links = at.sidebar.get("page_link")
        carried = [dict(parse_qsl(link.proto.query_string)) for link in links]
        shared = carried[0]
        assert shared == {"model": model, "text": "the dog sat on the mat", "lang": "en",
                          "device": "auto", "dtype": "auto"}, shared
        assert list(shared) == [k for k in FIRST if k in shared]  # the order send_url writes
        assert all(c == shared for c in carried)
        for spec in PAGES:
            at.query_params.clear()
            at.query_params.update(shared)  # the address the link opens
            at.switch_page(spec.path).run()
            assert not at.exception, (model, spec.path, [e.message for e in at.exception])
            assert {k: v[0] if isinstance(v, list) else v
                    for k, v in at.query_params.items()} == shared, (model, spec.path)


def test_a_revisited_page_is_one_history_entry_too():
    """A page this session has shown, with a setting changed there, is opened by a link that
    carries that setting too (address.page_settings via ui/sidebar.link_queries): the page
    shows what the session chose and writes nothing more, so Back is one press on revisits
    as well. Other pages' links do not carry it; the default again leaves every link."""
    from urllib.parse import parse_qsl

    def links(at):
        return {link.proto.page: dict(parse_qsl(link.proto.query_string))
                for link in at.sidebar.get("page_link")}

    def open_link(at, page):
        query = links(at)[page]
        at.query_params.clear()
        at.query_params.update(query)
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, [e.message for e in at.exception]
        return query

    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(model="lm", text="the cat sat on the mat", lang="en")
    at.run()
    open_link(at, "attention")
    assert "head" not in links(at)["attention"]
    at.number_input(key="head").set_value(2).run()
    assert at.query_params["head"] in ("2", ["2"])
    assert links(at)["attention"]["head"] == "2"  # redrawn at the end of the run
    assert "head" not in links(at)["masks"]
    open_link(at, "masks")
    query = open_link(at, "attention")
    assert query["head"] == "2" and at.number_input(key="head").value == 2
    assert {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()} == query
    at.number_input(key="head").set_value(0).run()  # back to the default: out of the links
    assert all("head" not in q for q in links(at).values())
