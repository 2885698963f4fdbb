"""The Head atlas page in a real browser (Debian's chromium + Playwright): a click on the
role map picks that head, and a top-example link opens the Attention page on that head."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

import pytest

from tests.support.browser_support import CHROMIUM, SCRIPT_IDLE, streamlit_server
from tests.support.language import in_chinese
from viz_core.atlas import AtlasConfig, load_atlas, run_atlas
from viz_core.atlas.figures import top_table

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    d = tmp_path_factory.mktemp("atlas_browser")
    (d / "lines.txt").write_text("the red cat\ni do not\nthe dog sees the cat\n")
    run_atlas(AtlasConfig(model="lm", data=str(d / "lines.txt"), out=str(d / "run"),
                          engine="local", probe=4, shard_size=4, threads=1))
    (d / "pairs.csv").write_text("clean,corrupted\nthe red cat,the black cat\n"
                                 "the dog sees the cat,the cat sees the cat\n")
    run_atlas(AtlasConfig(model="lm", data=str(d / "pairs.csv"), out=str(d / "patch"),
                          task="patching", engine="local", threads=1))
    with streamlit_server({"ATTENTION_LAB_ATLAS_DIR": str(d / "home")}) as (base, _proc):
        yield base, d / "run"


def settle(page):
    page.wait_for_selector(".js-plotly-plot", timeout=90_000)
    page.wait_for_timeout(300)
    page.wait_for_selector(SCRIPT_IDLE, timeout=90_000)


def param(page, key: str) -> str | None:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query).get(key, [None])[0]


def test_clicking_a_map_cell_picks_that_head(served, chromium_browser):
    base, run = served
    q = urllib.parse.urlencode({"model": "lm", "atlas": str(run)})
    page = chromium_browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{base}/atlas?{q}")
    settle(page)
    box = page.evaluate("""() => {
        const gd = document.querySelector('.js-plotly-plot');
        const r = gd.querySelector('.nsewdrag').getBoundingClientRect();
        return {x: r.left + gd._fullLayout.xaxis.l2p(3), y: r.top + gd._fullLayout.yaxis.l2p(1)};
    }""")
    page.mouse.click(box["x"], box["y"])
    page.wait_for_function("() => new URL(location.href).searchParams.get('ahead') === '3'"
                           " && new URL(location.href).searchParams.get('alayer') === '1'",
                           timeout=60_000)
    page.close()


def test_a_top_example_link_opens_the_attention_page_on_that_head(served, chromium_browser):
    base, run = served
    table = top_table(load_atlas(run), "decoder.self", 1, 3, "previous")
    link = table["open"][0]
    page = chromium_browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{base}/{link}")  # the page-relative link, as the atlas page is at /atlas
    settle(page)
    assert urllib.parse.urlsplit(page.url).path == "/attention"
    # a decoder-only model's only block kind is the default, which the address leaves out
    assert (param(page, "layer"), param(page, "head"), param(page, "kind")) == ("1", "3", None)
    assert param(page, "text") == table["text"][0]
    assert page.get_by_label("Input text").input_value() == table["text"][0]
    page.close()


def test_clicking_the_patching_map_picks_that_head(served, chromium_browser):
    """A head-patching run (issue 23 item 8) opens as a map of mean effects; a click on a
    cell shows that head's pairs."""
    base, run = served
    q = urllib.parse.urlencode({"model": "lm", "atlas": str(run.parent / "patch")})
    page = chromium_browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{base}/atlas?{q}")
    settle(page)
    assert page.get_by_text("Head patching: mean effect over all pairs").count() >= 1
    box = page.evaluate("""() => {
        const gd = document.querySelector('.js-plotly-plot');
        const r = gd.querySelector('.nsewdrag').getBoundingClientRect();
        return {x: r.left + gd._fullLayout.xaxis.l2p(2), y: r.top + gd._fullLayout.yaxis.l2p(1)};
    }""")
    page.mouse.click(box["x"], box["y"])
    page.wait_for_function("() => new URL(location.href).searchParams.get('ahead') === '2'"
                           " && new URL(location.href).searchParams.get('alayer') === '1'",
                           timeout=60_000)
    page.wait_for_selector(SCRIPT_IDLE, timeout=90_000)
    assert page.get_by_text("over 2 pairs").count() >= 1
    page.close()


def test_a_file_uploaded_in_chinese_runs_the_atlas(served, chromium_browser):
    """The "A file" source end to end in 简体中文: Streamlit draws the uploader's own words
    ("Upload", "200MB per file • TXT, …") in English only, so file_box's style rule must show
    them translated and the English not at all; a file set on it runs a small atlas, whose
    progress bar speaks Chinese too, and the result opens. A file of another type gets our
    message in Chinese naming it (Streamlit's own names a MIME type, in English)."""
    zh = {s: in_chinese(s) for s in ("A file (.txt, .csv, .parquet)", "Upload",
                                     "Run the atlas", "Done.")}
    zh["limit"] = in_chinese("Up to {mb} MB per file • {types}", mb=200,
                             types="TXT, CSV, TSV, PARQUET")
    assert zh["Upload"] != "Upload"  # the catalogue has it
    base, _run = served
    page = chromium_browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{base}/atlas?model=lm&lang=zh")
    page.wait_for_selector("h1", timeout=90_000)
    page.wait_for_selector(SCRIPT_IDLE, timeout=90_000)
    page.get_by_text(zh["A file (.txt, .csv, .parquet)"]).click()
    page.wait_for_selector(".st-key-atlas_upload [data-testid='stFileUploaderDropzone']",
                           timeout=60_000)
    page.wait_for_selector(SCRIPT_IDLE, timeout=90_000)
    page.wait_for_function("() => getComputedStyle(document.querySelector('.st-key-atlas_upload "
                           "[data-testid=stFileUploaderDropzoneInstructions] span'), '::after')"
                           ".content !== 'none'", timeout=30_000)  # the style is drawn
    shown = page.evaluate("""() => {
        const box = document.querySelector('.st-key-atlas_upload');
        const read = (el) => ({size: getComputedStyle(el).fontSize,
                               after: getComputedStyle(el, '::after').content,
                               afterSize: getComputedStyle(el, '::after').fontSize,
                               text: el.textContent});
        return {button: read(box.querySelector('button [data-testid=stMarkdownContainer] p')),
                limit: read(box.querySelector(
                    '[data-testid=stFileUploaderDropzoneInstructions] span'))};
    }""")
    for part, words in (("button", zh["Upload"]),
                        ("limit", zh["limit"])):
        assert shown[part]["after"] == f'"{words}"', shown  # the translation is drawn
        assert shown[part]["afterSize"] == "14px"  # at the size of Streamlit's own text
        assert shown[part]["size"] == "0px", shown  # and Streamlit's English is not
    assert shown["button"]["text"] == "Upload"  # (what the rule hides)
    run = page.get_by_role("button", name=zh["Run the atlas"])

    def upload(name: str, text: str) -> None:
        page.set_input_files(".st-key-atlas_upload input[type=file]",
                             files=[{"name": name, "mimeType": "text/plain",
                                     "buffer": text.encode()}])
        page.wait_for_selector(f".st-key-atlas_upload [data-testid='stFileChipName'][title='{name}']",
                               timeout=60_000)
        page.wait_for_selector(SCRIPT_IDLE, timeout=90_000)

    # a file of a type the box does not read: one message in Chinese, naming the file
    upload("table.xlsx", "not a table")
    wrong = page.locator("[data-testid='stAlertContentError']")
    wrong.wait_for(timeout=60_000)
    assert wrong.inner_text().strip() == in_chinese(
        "{name} is not one of the files this box reads ({types}). Choose a file whose name "
        "ends in one of them.", name="table.xlsx", types="TXT, CSV, TSV, PARQUET")
    # a file the run refuses: the message in Chinese, naming the file as the user knows it
    # (not the server's saved copy), and no progress bar left standing
    upload("notes.csv", "a,b\n1,2\n")
    # the rerun the new file starts takes the xlsx refusal away; under load the chip can show
    # before that rerun has begun, so wait for the refusal itself to go
    page.wait_for_function("() => ![...document.querySelectorAll("
                           "'[data-testid=stAlertContentError]')].some("
                           "e => e.innerText.includes('table.xlsx'))", timeout=90_000)
    page.wait_for_selector(SCRIPT_IDLE, timeout=90_000)
    run.click()
    alert = page.locator("[data-testid='stAlertContentError']")
    alert.wait_for(timeout=120_000)
    said = alert.inner_text()
    assert "notes.csv" in said and "data.csv" not in said, said
    assert re.search(r"[\u4e00-\u9fff]", said), said
    assert page.locator("[data-testid='stProgress']").count() == 0
    upload("lines.txt", "the red cat\ni do not\nthe dog sees the cat\n")
    run.click()
    page.wait_for_function("t => [...document.querySelectorAll('[data-testid=stProgress]')]"
                           ".some(e => e.innerText.includes(t))", arg=zh["Done."],
                           timeout=180_000)
    settle(page)  # the run's charts
    assert page.locator("[data-testid='stException']").count() == 0
    page.close()
