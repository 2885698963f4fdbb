"""The Head atlas page (AppTest): opens a finished atlas; its links carry the Attention
page's URL state; bad directories give a message, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.language import in_chinese
from viz_core.atlas import AtlasConfig, run_atlas
from viz_core.atlas.inputs import AtlasInputError

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TIMEOUT = 90


def open_page(monkeypatch, tmp_path, **params) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_ATLAS_DIR", str(tmp_path / "home"))  # no recent runs
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = str(value)
    at.switch_page("pages/atlas.py")
    return at.run()


def no_errors(at) -> None:
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_page_opens_a_finished_atlas_and_links_open_the_attention_page(
        atlas_dir, monkeypatch, tmp_path):
    at = open_page(monkeypatch, tmp_path, model="lm", atlas=atlas_dir, alayer=1, ahead=2,
                   arole="previous")
    no_errors(at)
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    role_map = specs[0]
    assert role_map["data"][0]["type"] == "heatmap"
    assert role_map["data"][0]["z"]["shape"].replace(" ", "") == "2,4"  # layers x heads
    table = at.dataframe[0].value
    assert 1 <= len(table) <= 5
    for link in table["open"]:
        url = urlsplit(link)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        assert url.path == "attention"
        assert q["model"] == "lm" and q["kind"] == "decoder.self"
        assert q["layer"] == "1" and q["head"] == "2"
        assert q["text"] in ("the red cat", "i do not", "the dog sees the cat")
    assert table["text"].tolist()[0] in ("the red cat", "i do not", "the dog sees the cat")
    assert at.query_params["alayer"] in ("1", ["1"])
    # another head: the table follows
    at.number_input(key="atlas_head").set_value(0).run()
    no_errors(at)
    q = parse_qs(urlsplit(at.dataframe[0].value["open"][0]).query)
    assert q["head"] == ["0"]


def test_page_explains_a_folder_that_is_no_atlas(monkeypatch, tmp_path):
    at = open_page(monkeypatch, tmp_path, model="lm", atlas=tmp_path)
    assert not at.exception
    assert any("not an atlas directory" in e.value for e in at.error)


def test_page_without_an_atlas_says_how_to_make_one(monkeypatch, tmp_path):
    at = open_page(monkeypatch, tmp_path, model="lm")
    no_errors(at)
    assert any("python -m viz_core.atlas" in i.value for i in at.info)


def test_page_runs_a_small_atlas_and_shows_it(monkeypatch, tmp_path):
    at = open_page(monkeypatch, tmp_path, model="lm")
    at.text_area(key="atlas_lines").input("the red cat\nthe dog sees the cat")
    at.selectbox(key="atlas_engine").set_value("local")
    at.number_input(key="atlas_probe").set_value(4)
    at.button(key="atlas_run").click().run()
    no_errors(at)
    runs = list((tmp_path / "home").iterdir())
    assert len(runs) == 1 and (runs[0] / "atlas.json").is_file()
    assert at.text_input(key="atlas_dir").value == str(runs[0])
    info = json.loads((runs[0] / "atlas.json").read_text())
    assert info["complete"] and info["examples"] == 2 and info["probe_examples"] == 4
    assert at.get("plotly_chart") and len(at.dataframe[0].value) >= 1


def test_encoder_decoder_atlas_has_a_map_per_block_kind_and_links_carry_the_target(
        monkeypatch, tmp_path):
    import viz_core as vc

    d = tmp_path / "dates"
    d.mkdir()
    (d / "lines.txt").write_text("9 may 2018\n2018-05-09\n")
    run_atlas(AtlasConfig(model="dates", data=str(d / "lines.txt"), out=str(d / "run"),
                          engine="local", probe=2, shard_size=4, threads=1))
    at = open_page(monkeypatch, tmp_path, model="dates", atlas=d / "run", akind="decoder.cross",
                   arole="first")
    no_errors(at)
    kinds = at.selectbox(key="atlas_kind")
    assert kinds.value == "decoder.cross" and len(kinds.options) == 3
    table = at.dataframe[0].value
    greedy = {t: vc.load("dates").trace(t).output_text for t in ("9 may 2018", "2018-05-09")}
    assert len(table)
    for link in table["open"]:
        q = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
        assert q["kind"] == "decoder.cross" and q["model"] == "dates"
        assert q["target"] == greedy[q["text"]]  # what the Attention page shows by itself


def test_a_translator_runs_on_its_examples_without_the_probe_set(monkeypatch, tmp_path):
    """en-fr reads English and writes French: only 'a' and 'long' are one token on both
    sides, too few for the probe set (fed to both stacks). A run on typed lines leaves the
    probes out and says so, instead of failing; the probe set alone fails in one line."""
    at = open_page(monkeypatch, tmp_path, model="en-fr")
    at.text_area(key="atlas_lines").input("the red car\nthe small cat sees the dog")
    at.selectbox(key="atlas_engine").set_value("local")
    at.button(key="atlas_run").click().run()  # the default 32 probe examples asked for
    no_errors(at)
    (run,) = list((tmp_path / "home").iterdir())
    info = json.loads((run / "atlas.json").read_text())
    assert info["complete"] and info["examples"] == 2 and info["probe_examples"] == 0
    assert info["input"]["probes_left_out"] == 32 and info["induction_from"] == "data"
    assert any("probe set was left out" in i.value for i in at.info)
    assert at.get("plotly_chart")
    with pytest.raises(AtlasInputError) as err:
        run_atlas(AtlasConfig(model="en-fr", data="probe", out=str(tmp_path / "p"),
                              engine="local", threads=1))
    assert "found 2" in str(err.value) and "\n" not in str(err.value)


def test_a_failed_run_says_why_in_the_readers_language(monkeypatch, tmp_path):
    """The run is a subprocess, which speaks English; it keeps its message as data
    (error.json: template and values) and the page shows it translated. en-fr's probe set
    alone, in 简体中文."""
    from viz_core.atlas.layout import read_error

    at = open_page(monkeypatch, tmp_path, model="en-fr", lang="zh")
    at.radio(key="atlas_source").set_value("Only the built-in probe set")
    at.selectbox(key="atlas_engine").set_value("local")
    at.button(key="atlas_run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    (run,) = list((tmp_path / "home").iterdir())
    kept = read_error(run)
    assert kept is not None and "found 2" in str(kept)  # the CLI's message, kept whole
    chinese = in_chinese(kept.msgid, **kept.values)
    assert chinese != str(kept) and "2" in chinese
    assert [e.value for e in at.error] == [chinese]


def test_run_the_atlas_defaults_to_auto_and_typed_lines_run_in_process(monkeypatch, tmp_path):
    """Issue 24 item 5: a few lines typed here never start Ray."""
    at = open_page(monkeypatch, tmp_path, model="lm")
    assert at.selectbox(key="atlas_engine").value == "auto"
    at.text_area(key="atlas_lines").input("the red cat\ni do not")
    at.number_input(key="atlas_probe").set_value(2)
    at.button(key="atlas_run").click().run()
    no_errors(at)
    (run,) = list((tmp_path / "home").iterdir())
    info = json.loads((run / "atlas.json").read_text())
    assert info["complete"] and info["run"]["engine"] == "auto"
    assert info["run"]["ran_on"] == ["local"] and info["run"]["auto"]["engine"] == "local"


@pytest.fixture(scope="module")
def patching_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("atlas_patching_page")
    (d / "pairs.csv").write_text("clean,corrupted,token,against\n"
                                 "the red cat,the black cat,,\n"
                                 "the dog sees the cat,the cat sees the cat,,\n"
                                 "i do not,i do the,,\n"
                                 "the red cat,the cat,,\n")
    out = d / "run"
    run_atlas(AtlasConfig(model="lm", data=str(d / "pairs.csv"), out=str(out),
                          task="patching", engine="local", shard_size=2, threads=1))
    return out


def test_page_opens_a_patching_run(patching_dir, monkeypatch, tmp_path):
    import numpy as np

    from viz_core.atlas import load_patching

    summary = load_patching(patching_dir).summary
    at = open_page(monkeypatch, tmp_path, model="lm", atlas=patching_dir, alayer=1, ahead=3)
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    # the unequal pair is reported, not hidden
    assert any("1 pair could not be patched" in w.value and "3 tokens" in w.value
               for w in at.warning)
    # two of the three (red / black cat, dog / cat sees) barely move their metric
    assert any("In 2 of 3 pairs the corruption barely moves the metric" in w.value
               for w in at.warning), [w.value for w in at.warning]
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    heat = specs[0]["data"][0]
    assert heat["type"] == "heatmap"
    z = np.asarray(heat["z"], np.float32) if isinstance(heat["z"], list) else _decode(heat["z"])
    want = np.full((2, 4), np.nan, np.float32)
    for r in summary.itertuples():
        want[r.layer, r.head] = r.mean
    np.testing.assert_array_equal(z.reshape(2, 4), want)  # the same float32 numbers
    assert specs[1]["data"][0]["type"] == "bar"  # ranking with error bars (spread)
    assert specs[1]["data"][0]["error_x"]["type"] == "data"
    table = at.dataframe[0].value
    assert 1 <= len(table) <= 3 and set(table["clean"]) <= {
        "the red cat", "the dog sees the cat", "i do not"}
    assert any("over 3 pairs" in m.value for m in at.markdown)
    assert at.query_params["ahead"] in ("3", ["3"])


def test_a_pairs_error_reads_in_the_readers_language(patching_dir, monkeypatch, tmp_path):
    """A pair that could not be patched: its error is kept as data beside its shard
    (shards/errors-*.json), so in 简体中文 the warning quotes it in Chinese, not the
    English text of the shard's error column."""
    from viz_core.atlas.layout import error_of

    first = json.loads((patching_dir / "atlas.json").read_text())["errors"][0]
    kept = error_of(first["data"])
    assert str(kept) == first["error"] and "3 tokens" in first["error"]
    chinese = in_chinese(kept.msgid, **kept.values)
    assert chinese != first["error"]
    at = open_page(monkeypatch, tmp_path, model="lm", atlas=patching_dir, lang="zh")
    assert not at.exception, [e.message for e in at.exception]
    said = [w.value for w in at.warning if chinese in w.value]
    assert said and first["error"] not in said[0], [w.value for w in at.warning]


@pytest.fixture(scope="module")
def circuit_dir(patching_dir):
    out = patching_dir.parent / "circuit"
    run_atlas(AtlasConfig(model="lm", data=str(patching_dir.parent / "pairs.csv"),
                          out=str(out), task="circuit", method="eap", engine="local",
                          shard_size=2, threads=1))
    return out


def test_page_opens_a_circuit_run(circuit_dir, monkeypatch, tmp_path):
    """A --task circuit run: the mean circuit with the kept edges (circ_top in the URL) and
    their table, the largest |mean| first; the unequal pair reported."""
    from viz_core.atlas import load_circuit

    summary = load_circuit(circuit_dir).summary
    at = open_page(monkeypatch, tmp_path, model="lm", atlas=circuit_dir, circ_top=4)
    no_errors(at)
    assert any("1 pair could not be scored" in w.value and "3 tokens" in w.value
               for w in at.warning)
    assert any("**Circuit**" in m.value and "3 of 4 pairs" in m.value for m in at.markdown)
    table = at.dataframe[0].value
    want = summary.reindex(summary["mean"].abs().sort_values(ascending=False,
                                                             kind="stable").index).head(4)
    assert table["mean"].tolist() == want["mean"].tolist()  # (headed "mean score")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    drawn = [t for t in spec["data"] if t.get("name") == "edge"]
    assert len(drawn) == 4
    assert at.query_params["circ_top"] in ("4", ["4"])


def _decode(z: dict):
    """Plotly's typed-array form of a numpy array in a figure spec."""
    import base64

    import numpy as np

    dtypes = {"f4": np.float32, "f8": np.float64}
    arr = np.frombuffer(base64.b64decode(z["bdata"]), dtype=dtypes[z["dtype"]])
    return arr.reshape([int(v) for v in str(z["shape"]).split(",")])


@pytest.mark.parametrize("task", ["roles", "patching", "circuit"])
def test_a_finished_atlas_reads_in_chinese(task, atlas_dir, patching_dir, circuit_dir,
                                           monkeypatch, tmp_path):
    """A finished atlas of each task in 简体中文: the zh page test's detectors over every
    shown text, option and chart text, and over the hover text each map writes per cell
    (role names, "layer 1, head 2", mean distance, effects); the role names were English in
    the pickers, the maps' titles, legends, colour bars and hovers."""
    from tests.support.chinese_text import (
        english_runs,
        english_words,
        figure_texts,
        hover_texts,
        option_texts,
        option_words,
        shown_texts,
        user_words,
    )

    folder = {"roles": atlas_dir, "patching": patching_dir, "circuit": circuit_dir}[task]
    at = open_page(monkeypatch, tmp_path, model="lm", atlas=folder, lang="zh")
    assert not at.exception, [e.message for e in at.exception]
    assert at.get("plotly_chart"), "no chart: the run did not open"
    words = user_words(at) | {"atlas"}  # the address's own folder name
    left = [(kind, run) for kind, text in shown_texts(at) for run in english_runs(text, words)]
    left += [(part, text) for part, text in figure_texts(at) if english_words(text, words)]
    left += [(part, text) for part, text in option_texts(at) if option_words(text, words)]
    left += [("hover text", text) for text in hover_texts(at) if english_words(text, words)]
    assert left == [], left[:8]


DAMAGE = {"atlas.json": "a list", "summary": "garbage", "shards": "deleted"}


@pytest.mark.parametrize("task,damage", [(t, d) for t in ("roles", "patching", "circuit")
                                         for d in DAMAGE if (t, d) != ("circuit", "shards")])
def test_a_damaged_run_is_said_in_one_line(task, damage, atlas_dir, patching_dir, circuit_dir,
                                           monkeypatch, tmp_path):
    """A run folder damaged after the fact (a copy cut short, a disk that filled up, a file
    of another shape): an atlas.json that is a list, a summary that is not Parquet, shard
    files deleted. Each gave a redacted exception ('This app has encountered an error') or
    'Something went wrong (ArrowInvalid)'; now one message naming the folder."""
    import shutil

    folder = tmp_path / "run"
    shutil.copytree({"roles": atlas_dir, "patching": patching_dir, "circuit": circuit_dir}[task],
                    folder)
    if damage == "atlas.json":
        (folder / "atlas.json").write_text("[1, 2]")
    elif damage == "summary":
        name = {"roles": "summary", "patching": "patching", "circuit": "circuit"}[task]
        (folder / f"{name}.parquet").write_bytes(b"not parquet")
    else:
        for shard in (folder / "shards").iterdir():
            shard.unlink()
    at = open_page(monkeypatch, tmp_path, model="lm", atlas=folder)
    assert not at.exception, [e.message for e in at.exception]
    errors = [e.value for e in at.error]
    assert any("damaged atlas directory" in e and "resume" in e for e in errors), errors
    assert not any("went wrong" in e for e in errors), errors
