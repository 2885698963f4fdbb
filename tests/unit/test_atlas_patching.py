"""Head patching over a dataset (`python -m viz_core.atlas --task patching --pairs FILE`),
in-process: the mean and spread of every head's effect equal numpy's over `model.patch` run
pair by pair; bad pair files stop with a message; resume gives one uninterrupted run's rows.
The Ray side is in test_atlas_ray.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import viz_core as vc
from tests.support.atlas import PAIRS, pcfg, write_pairs
from viz_core.atlas import AtlasInputError, AtlasStopped, run_atlas
from viz_core.atlas.__main__ import main as cli
from viz_core.atlas.patching import is_patching, load_patching


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    return write_pairs(tmp_path_factory.mktemp("patch_pairs") / "pairs.csv", PAIRS)


@pytest.fixture(scope="module")
def finished(pairs_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("patch_run") / "run"
    return out, run_atlas(pcfg(pairs_file, out))


@pytest.fixture(scope="module")
def reference():
    """model.patch pair by pair (the API the task calls), stacked: [pair, layer, head]."""
    model = vc.load("lm", "cpu")
    effects, metrics = [], []
    for clean, corrupted, token, against in PAIRS[:-1]:
        p = model.patch(clean, corrupted, token=token or None, against=against or None,
                        over="heads")
        effects.append(p.effect)
        metrics.append((p.clean, p.corrupted, p.metric))
    return np.stack(effects), metrics


def test_mean_and_spread_equal_numpy_over_each_pair(finished, reference):
    out, info = finished
    effects, _ = reference
    assert info["task"] == "patching" and info["complete"]
    assert info["examples"] == 6 and info["patched"] == 5 and info["failed"] == 1
    atlas = load_patching(out)
    s = atlas.summary.set_index(["layer", "head"])
    assert set(atlas.summary["kind"]) == {"decoder.self"} and len(s) == 2 * 4
    for layer in range(2):
        for head in range(4):
            row = s.loc[(layer, head)]
            v = effects[:, layer, head]
            # same float64 numbers, summed in another order (shard by shard)
            assert row["mean"] == pytest.approx(v.mean(), abs=1e-12)
            assert row["std"] == pytest.approx(v.std(ddof=1), abs=1e-12)
            assert row["sem"] == pytest.approx(v.std(ddof=1) / np.sqrt(5), abs=1e-12)
            assert (row["min"], row["max"], row["n"]) == (v.min(), v.max(), 5)


def test_each_pair_keeps_its_metric_and_the_bad_pair_its_message(finished, reference):
    out, info = finished
    _, metrics = reference
    pairs = load_patching(out).pairs()
    assert pairs["example"].tolist() == list(range(6))
    for i, (clean, corrupted, metric) in enumerate(metrics):
        r = pairs.loc[i]
        assert (r["clean_metric"], r["corrupted_metric"], r["metric"]) == (
            clean, corrupted, metric)
        assert r["error"] is None
    assert pairs.loc[3, "token"] == "eat" and pairs.loc[3, "against"] == "sees"
    assert pairs.loc[3, "metric"].startswith("logit diff 'eat' - 'sees'")
    bad = pairs.loc[5, "error"]
    assert "3 tokens" in bad and "2" in bad  # both counts, as model.patch says them
    (first,) = info["errors"]  # with its template and values, to show it translated
    assert (first["example"], first["error"], first["data"]["message"]) == (5, bad, bad)
    assert first["data"]["values"]["n_clean_ids"] == 3
    # pairs whose corruption moves the metric by under 1% of its size (at least 1): 3 here
    small = [abs(c - k) < 0.01 * max(1.0, abs(c), abs(k)) for c, k, _ in metrics]
    assert info["small_gap"] == sum(small) == 3


def test_top_pairs_per_head_are_the_largest_effects(finished, reference):
    out, _ = finished
    effects, _ = reference
    top = load_patching(out).top
    part = top[(top["layer"] == 1) & (top["head"] == 3)].sort_values("rank")
    assert part["example"].tolist() == list(np.argsort(-effects[:, 1, 3], kind="stable"))
    assert part["effect"].tolist() == sorted(effects[:, 1, 3], reverse=True)


def test_patching_resume_equals_one_uninterrupted_run(pairs_file, finished, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(AtlasStopped):
        run_atlas(pcfg(pairs_file, out), stop_after=1)
    assert load_patching(out).info["complete"] is False
    info = run_atlas(pcfg(pairs_file, out, resume=True))
    assert info["complete"] and info["run"]["resumed_shards"] == 1
    for name in ("patching.parquet", "patching_top.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(out / name),
                                      pd.read_parquet(finished[0] / name), obj=name)


def test_cli_patching_run(pairs_file, tmp_path, capsys):
    code = cli(["--task", "patching", "--model", "lm", "--pairs", str(pairs_file), "--out",
                str(tmp_path / "o"), "--limit", "2", "--shard-size", "2", "--device", "cpu"])
    said = capsys.readouterr()
    assert code == 0 and "patched 2 of 2 pairs" in said.out and "(local)" in said.out
    assert "in 2 of 2 pairs the corruption barely moves the metric" in said.out  # both small
    assert is_patching(tmp_path / "o")


# ---- bad pair files: a clear message before any model runs ----------------------------------
def cli_error(capsys, pairs, tmp_path) -> str:
    code = cli(["--task", "patching", "--model", "lm", "--pairs", str(pairs), "--out",
                str(tmp_path / "o"), "--engine", "local", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("atlas: ")]
    assert len(lines) == 1, err
    return lines[0]


def test_missing_column_lists_the_columns(tmp_path, capsys):
    bad = write_pairs(tmp_path / "p.csv", [("a", "b")], header=("clean", "broken"))
    msg = cli_error(capsys, bad, tmp_path)
    assert "no 'corrupted' column" in msg and "'clean', 'broken'" in msg
    assert "clean,corrupted,token,against" in msg


def test_empty_file_and_header_only(tmp_path, capsys):
    (tmp_path / "e.csv").write_text("")
    assert "is empty" in cli_error(capsys, tmp_path / "e.csv", tmp_path)
    (tmp_path / "h.csv").write_text("clean,corrupted\n")
    assert "no rows" in cli_error(capsys, tmp_path / "h.csv", tmp_path)


def test_a_header_that_is_not_utf8_is_one_line(tmp_path, capsys):
    """A Latin-1 header ("café"): pyarrow decodes the column names lazily, so it was a
    UnicodeDecodeError traceback after the file had been opened."""
    (tmp_path / "l.csv").write_bytes("clean,corrupted,caf\xe9\nthe cat,the dog,x\n".encode("latin-1"))
    assert "is not a readable CSV file" in cli_error(capsys, tmp_path / "l.csv", tmp_path)


def test_nothing_to_read_is_said_in_chinese(tmp_path):
    """The words filled into "… has {what}" are catalogue entries: they were English in zh."""
    from attention_lab.ui.errors import translated
    from tests.support.language import speaking
    from viz_core.atlas.inputs import InputStats, read_examples
    from viz_core.atlas.pairs import PairStats, read_pairs

    (tmp_path / "h.csv").write_text("clean,corrupted\n")
    (tmp_path / "b.txt").write_text("\n \n")
    for read, stats, path in ((read_pairs, PairStats, "h.csv"), (read_examples, InputStats,
                                                                 "b.txt")):
        with pytest.raises(AtlasInputError) as err:
            list(read(str(tmp_path / path), stats()))
        with speaking("zh"):
            shown = translated(err.value)
        assert "rows" not in shown and "blank" not in shown and "lines" not in shown, shown


def test_only_blank_cells(tmp_path, capsys):
    bad = write_pairs(tmp_path / "b.csv", [("", "the cat", "", ""), ("the cat", " ", "", "")])
    assert "blank clean or corrupted" in cli_error(capsys, bad, tmp_path)


def test_every_pair_with_unequal_token_counts(tmp_path, capsys):
    bad = write_pairs(tmp_path / "u.csv", [("the red cat", "the cat", "", "")])
    msg = cli_error(capsys, bad, tmp_path)
    assert "none of the 1 pairs could be patched" in msg
    assert "3 tokens" in msg and "2" in msg and "'red'" in msg


def test_not_a_table_and_no_pairs_flag(tmp_path, capsys):
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(AtlasInputError, match="a pairs file is a .csv"):
        run_atlas(pcfg(tmp_path / "x.json", tmp_path / "o"))
    with pytest.raises(SystemExit):
        cli(["--task", "patching", "--model", "lm", "--out", str(tmp_path / "o2")])
    assert "--task patching needs --pairs" in capsys.readouterr().err


def test_hostile_texts_in_pairs_are_run_or_reported(tmp_path):
    from tests.support.hostile_inputs import CORPUS

    picks = [t for cat, t in CORPUS if cat in ("emoji", "control", "html", "rtl")][:8]
    rows = [(t, t, "", "") for t in picks] + [("the red cat", "the black cat", "<b>", "")]
    pairs = write_pairs(tmp_path / "h.csv", [[c.replace("\x00", "") for c in r]
                                             for r in rows])
    info = run_atlas(pcfg(pairs, tmp_path / "o", shard_size=16))
    assert info["complete"] and info["examples"] == len(rows)
    got = load_patching(tmp_path / "o").pairs()
    # each pair either patched or recorded with the model's message (identical clean and
    # corrupted texts: nothing to restore; an unknown token: said so)
    for r in got.itertuples():
        assert (r.error is None) != (r.metric is None), r


def test_the_role_reader_points_a_patching_run_to_its_own(finished):
    from viz_core.atlas import load_atlas

    with pytest.raises(AtlasInputError, match="load_patching"):
        load_atlas(finished[0])


@pytest.mark.parametrize("reader", ["pairs", "texts"])
@pytest.mark.parametrize("rows, message", [(0, " is not a readable CSV file ("),
                                           (600_000, ": CSV error (")])  # past the 1 MiB block
def test_a_malformed_csv_row_is_one_line_in_both_readers(tmp_path, reader, rows, message):
    """The atlas's text reader and pairs reader share one CSV reader: a row with more cells
    than the header, in the first block or further in, is one AtlasInputError naming the
    file."""
    from viz_core.atlas.inputs import InputStats, read_examples
    from viz_core.atlas.pairs import PairStats, read_pairs

    header = "clean,corrupted" if reader == "pairs" else "text"
    good = "a,b" if reader == "pairs" else "a"
    path = tmp_path / "bad.csv"
    path.write_text(header + "\n" + (good + "\n") * rows + "x,y,z,w,v\n")
    with pytest.raises(AtlasInputError) as err:
        if reader == "pairs":
            list(read_pairs(str(path), PairStats()))
        else:
            list(read_examples(str(path), InputStats()))
    assert str(path) + message in str(err.value) and "\n" not in str(err.value)
