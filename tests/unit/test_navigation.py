"""The Home page's tour lists every page of the navigation (issue 24, item 4)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
