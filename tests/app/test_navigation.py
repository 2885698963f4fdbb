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
