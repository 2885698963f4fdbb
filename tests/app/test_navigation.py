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
