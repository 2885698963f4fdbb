"""The Home page's tour lists every page of the navigation (issue 24, item 4)."""

from pathlib import Path

import streamlit
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def test_the_page_list_covers_every_page_script_once():
    from attention_lab.ui.navigation import PAGES, tour_markdown

    scripts = sorted(f"pages/{p.name}" for p in (ROOT / "pages").glob("*.py"))
    assert sorted(p.path for p in PAGES) == scripts  # every page script is in the list, once
    assert len({p.title for p in PAGES}) == len({p.url_path for p in PAGES}) == len(PAGES)
    assert [p.url_path for p in PAGES].count("") == 1 and PAGES[0].url_path == ""  # Home
    tour = tour_markdown()
    for p in PAGES:
        assert p.blurb.strip() and "\n" not in p.blurb, p.title  # one line each
        if p.url_path:
            assert f"**{p.title}** — {p.blurb}" in tour


def test_a_page_added_to_the_list_appears_in_the_tour():
    from attention_lab.ui.navigation import PAGES, PageSpec, tour_markdown

    extra = PageSpec("pages/new.py", "A new view", ":material/star:", "new", "Something new.")
    assert "**A new view** — Something new." in tour_markdown([*PAGES, extra])


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
