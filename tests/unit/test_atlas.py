"""Head atlas without Ray: inputs and their errors, the in-process run, resume, the summary."""

from __future__ import annotations

import shutil

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.atlas import LINES, assert_same_output, cfg, shards_of
from viz_core.atlas import (
    AtlasConfig,
    AtlasError,
    AtlasInputError,
    AtlasStopped,
    load_atlas,
    run_atlas,
)
from viz_core.atlas.__main__ import main as cli
from viz_core.atlas.engine import MAX_PARALLEL, MAX_PROBES, MAX_SHARD
from viz_core.atlas.inputs import MAX_CHARS, probe_texts
from viz_core.atlas.layout import (
    done_shards,
    examples_path,
    heads_path,
    read_error,
    write_error,
)
from viz_core.errors import InputError
from viz_core.i18n import N_


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("atlas_data")
    (d / "lines.txt").write_text("\n".join(LINES * 3) + "\n\n")
    return d


@pytest.fixture(scope="module")
def finished(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("atlas_run") / "run"
    info = run_atlas(cfg(data / "lines.txt", out))
    return out, info


def test_run_writes_shards_summary_and_counts(finished):
    out, info = finished
    assert info["complete"] and info["examples"] == 24 and info["probe_examples"] == 6
    assert info["input"]["blank"] == 1 and info["token_cut"] == 0
    assert done_shards(out) == list(range(7))  # 24 data in shards of 5, then 6 probes
    heads = pd.concat(pd.read_parquet(heads_path(out, s)) for s in done_shards(out))
    assert len(heads) == 30 * 2 * 4  # examples x layers x heads
    assert sorted(heads["example"].unique()) == list(range(30))
    atlas = load_atlas(out)
    assert len(atlas.summary) == 8 and set(atlas.summary["kind"]) == {"decoder.self"}
    assert atlas.summary["dominant"].notna().all()
    assert (atlas.summary["n"] == 24).all()
    top = atlas.top[atlas.top["role"] == "induction"]
    assert set(top["example"]) <= set(range(24, 30))  # induction comes from the probes
    assert (top.groupby(["kind", "layer", "head"]).size() <= 5).all()
    assert set(atlas.hist["role"]) >= {"previous", "first", "broad"}
    ex = atlas.examples([0, 25])
    assert ex.loc[0, "text"] == LINES[0] and bool(ex.loc[25, "probe"])


def test_summary_means_match_the_rows(finished):
    out, _ = finished
    heads = pd.concat(pd.read_parquet(heads_path(out, s)) for s in done_shards(out))
    data_rows = heads[~heads["probe"]]
    want = data_rows.groupby(["kind", "layer", "head"])["previous"].mean()
    got = load_atlas(out).summary.set_index(["kind", "layer", "head"])["previous"]
    pd.testing.assert_series_equal(got, want.astype(got.dtype), check_names=False,
                                   atol=1e-6, rtol=0)


def test_resume_after_a_stop_equals_one_uninterrupted_run(data, finished, tmp_path):
    out = tmp_path / "stopped"
    with pytest.raises(AtlasStopped):
        run_atlas(cfg(data / "lines.txt", out), stop_after=2)
    assert done_shards(out) == [0, 1]
    partial = load_atlas(out)  # what finished is readable
    assert not partial.info["complete"] and partial.info["shards_done"] == 2
    # a half-written shard from the stop: a temporary file that resume must ignore
    (out / "shards" / ".heads-00002.parquet.999.tmp").write_bytes(b"half")
    with pytest.raises(AtlasError, match="--resume"):
        run_atlas(cfg(data / "lines.txt", out))
    info = run_atlas(cfg(data / "lines.txt", out, resume=True))
    assert info["complete"] and info["run"]["resumed_shards"] == 2
    assert_same_output(out, finished[0])


def test_resume_with_other_settings_is_refused(data, finished, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(finished[0], out)
    with pytest.raises(AtlasError, match="batch"):
        run_atlas(cfg(data / "lines.txt", out, resume=True, batch=2))


def test_resume_of_a_finished_run_runs_nothing(data, finished, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(finished[0], out)
    before = {p: p.stat().st_mtime_ns for p in (out / "shards").iterdir()}
    info = run_atlas(cfg(data / "lines.txt", out, resume=True))
    assert info["complete"] and info["run"]["resumed_shards"] == 7
    assert {p: p.stat().st_mtime_ns for p in (out / "shards").iterdir()} == before


# ---- bad input: a clear message each ------------------------------------------------------
def test_empty_file(tmp_path):
    (tmp_path / "e.txt").write_text("")
    with pytest.raises(AtlasInputError, match="is empty"):
        run_atlas(cfg(tmp_path / "e.txt", tmp_path / "o"))


def test_only_blank_lines(tmp_path):
    (tmp_path / "b.txt").write_text("\n  \n\n")
    with pytest.raises(AtlasInputError, match="only blank lines"):
        run_atlas(cfg(tmp_path / "b.txt", tmp_path / "o"))


def test_binary_file(tmp_path):
    (tmp_path / "x.bin").write_bytes(bytes(range(256)) * 8)
    with pytest.raises(AtlasInputError, match="binary"):
        run_atlas(cfg(tmp_path / "x.bin", tmp_path / "o"))


def test_not_utf8_text(tmp_path):
    (tmp_path / "l.txt").write_bytes(b"the cat\nle caf\xe9\n")
    with pytest.raises(AtlasInputError, match="line 2 is not UTF-8"):
        run_atlas(cfg(tmp_path / "l.txt", tmp_path / "o"))


def test_csv_without_text_column(tmp_path):
    (tmp_path / "t.csv").write_text("sentence,label\nthe cat,1\n")
    with pytest.raises(AtlasInputError, match="no 'text' column.*'sentence', 'label'"):
        run_atlas(cfg(tmp_path / "t.csv", tmp_path / "o"))


def test_parquet_without_text_column(tmp_path):
    pq.write_table(pa.table({"body": ["the cat"]}), tmp_path / "t.parquet")
    with pytest.raises(AtlasInputError, match="no 'text' column"):
        run_atlas(cfg(tmp_path / "t.parquet", tmp_path / "o"))


def test_missing_file(tmp_path):
    with pytest.raises(AtlasInputError, match="No such data file"):
        run_atlas(cfg(tmp_path / "nope.txt", tmp_path / "o"))


def test_csv_and_parquet_inputs_with_text(tmp_path):
    pd.DataFrame({"id": [1, 2, 3], "text": ["the cat", None, "i do not"]}).to_csv(
        tmp_path / "d.csv", index=False)
    info = run_atlas(cfg(tmp_path / "d.csv", tmp_path / "o1", probe=0))
    assert info["examples"] == 2 and info["input"]["blank"] == 1
    pq.write_table(pa.table({"text": ["the cat", "the dog", ""]}), tmp_path / "d.parquet")
    info = run_atlas(cfg(tmp_path / "d.parquet", tmp_path / "o2", probe=0, limit=1))
    assert info["examples"] == 1


def test_long_lines_are_cut_and_counted(tmp_path):
    words = " ".join(["the cat"] * 40)  # 80 words: longer than the lm's 32 tokens
    huge = "the " * (MAX_CHARS // 4 + 10)  # longer than the character limit too
    (tmp_path / "long.txt").write_text(f"the cat\n{words}\n{huge}\n")
    out = tmp_path / "o"
    info = run_atlas(cfg(tmp_path / "long.txt", out, probe=0))
    assert info["token_cut"] == 2 and info["input"]["chars_cut"] == 1
    ex = pd.read_parquet(examples_path(out, 0))
    assert ex["token_cut"].tolist() == [False, True, True]
    assert ex["n_tokens"].max() <= 32 and len(ex.loc[2, "text"]) == MAX_CHARS


def test_unreachable_address_fails_fast(tmp_path):
    (tmp_path / "a.txt").write_text("the cat\n")
    with pytest.raises(AtlasError, match="Cannot reach a Ray cluster at 127.0.0.1:9"):
        run_atlas(cfg(tmp_path / "a.txt", tmp_path / "o", engine="ray",
                      address="127.0.0.1:9"))
    assert not (tmp_path / "o").exists()  # nothing written


def test_cli_reports_bad_input_with_exit_code_2(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    (tmp_path / "o").mkdir()  # as the page makes it
    code = cli(["--model", "lm", "--data", str(tmp_path / "t.csv"), "--out",
                str(tmp_path / "o"), "--engine", "local"])
    said = capsys.readouterr().err
    assert code == 2 and "no 'text' column" in said
    kept = read_error(tmp_path / "o")  # the same message as data, for the page to translate
    assert f"atlas: {kept}\n" in said and kept.msgid != str(kept) and kept.values


BIG = "100000000000"


@pytest.mark.parametrize("option,value", [("--workers", "-2"), ("--threads", "-1"),
                                          ("--threads", "0"), ("--probe", "-5"),
                                          ("--threads", BIG), ("--workers", BIG),
                                          ("--probe", BIG), ("--limit", BIG),
                                          ("--shard-size", BIG)])
def test_an_out_of_range_count_is_one_line_before_anything_starts(tmp_path, capsys, option,
                                                                  value):
    """--workers -2 was Ray's ValueError after Ray had started, --threads -1 torch's
    RuntimeError, --probe -5 silently none; --threads 10**11 torch's "Overflow when
    unpacking long", and --probe 10**11 (or --limit with --data probe) built the probe set
    in memory until the machine ran out of it (23 GB seen before it was stopped);
    --shard-size had no most (a shard's texts are read at once)."""
    code = cli(["--model", "lm", "--data", "probe", "--out", str(tmp_path / "o"),
                "--engine", "ray", option, value])
    said = capsys.readouterr().err.strip().splitlines()
    if option in ("--probe", "--limit"):
        most = ("--probe (and --limit with --data probe) must be from 0 to "
                f"{MAX_PROBES:,}, not {value}: the probe set is a fixed kind of example, "
                "and more of them add nothing.")
    elif option == "--shard-size":
        most = (f"--shard-size must be from 1 to {MAX_SHARD:,}, not {value}: a shard's texts "
                "are read at once, and a shard is the unit a stopped run resumes from.")
    else:
        most = f"{option} must be from 1 to {MAX_PARALLEL:,}, not {value}."
    assert code == 2 and said == [f"atlas: {most}"], said
    assert not (tmp_path / "o").exists()  # nothing written


def test_an_out_that_cannot_be_made_is_one_line(tmp_path, capsys):
    """--out under a file (or /proc) was a FileNotFoundError traceback."""
    (tmp_path / "f").write_text("mine")
    code = cli(["--model", "lm", "--data", "probe", "--limit", "2", "--out",
                str(tmp_path / "f" / "o"), "--engine", "local"])
    said = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and said == [f"atlas: Cannot make the --out folder {tmp_path / 'f' / 'o'}: "
                                  "Not a directory."], said


def test_a_file_error_during_the_run_is_one_line(tmp_path, capsys, monkeypatch):
    """The disk filling up while shards are written: one line that says what and how to go
    on, not a traceback."""
    from viz_core import atlas

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", str(tmp_path / "o" / "shard-3.parquet"))

    monkeypatch.setattr(atlas, "run_atlas", full)
    code = cli(["--model", "lm", "--data", "probe", "--out", str(tmp_path / "o"),
                "--engine", "local"])
    said = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and said == [
        f"atlas: cannot read or write a file ({tmp_path / 'o' / 'shard-3.parquet'}): No space "
        f"left on device. Finished shards are kept: continue with --resume --out "
        f"{tmp_path / 'o'}"], said


def test_cli_local_run(data, tmp_path, capsys):
    (tmp_path / "o").mkdir()
    write_error(tmp_path / "o", InputError("an earlier run's"))
    assert read_error(tmp_path / "o") is not None
    code = cli(["--model", "lm", "--data", str(data / "lines.txt"), "--out",
                str(tmp_path / "o"), "--engine", "local", "--limit", "4", "--probe", "0"])
    assert code == 0 and "4 examples" in capsys.readouterr().out
    assert read_error(tmp_path / "o") is None  # a run in that folder drops it


@pytest.mark.parametrize("task", ["roles", "patching"])
def test_an_out_that_is_a_file_is_one_line(tmp_path, capsys, task):
    """--out naming a file: one line that says so (it was a FileExistsError traceback), the
    file untouched and no error.json written into it."""
    (tmp_path / "out.txt").write_text("mine")
    (tmp_path / "pairs.csv").write_text("clean,corrupted\nthe red cat,the big cat\n")
    data = ["--data", "probe"] if task == "roles" else ["--pairs", str(tmp_path / "pairs.csv")]
    code = cli(["--model", "lm", "--task", task, *data, "--out", str(tmp_path / "out.txt"),
                "--engine", "local"])
    said = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and said[-1].startswith("atlas: --out ") and "is a file" in said[-1]
    assert (tmp_path / "out.txt").read_text() == "mine"


def test_a_kept_error_reads_back_or_not_at_all(tmp_path):
    write_error(tmp_path / "missing", InputError("x"))  # no folder: nothing made
    assert not (tmp_path / "missing").exists()
    write_error(tmp_path, InputError(N_("{path} has {n} lines"), path=tmp_path / "a b", n=3))
    kept = read_error(tmp_path)
    assert str(kept) == f"{tmp_path / 'a b'} has 3 lines" and kept.values["n"] == 3
    (tmp_path / "error.json").write_text("{not json")
    assert read_error(tmp_path) is None
    (tmp_path / "error.json").write_text('{"msgid": "{gone} here", "values": {}, '
                                         '"message": "the text"}')
    assert str(read_error(tmp_path)) == "the text"  # a template its values do not fill


# ---- the probe set --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["lm", "dates"])
def test_probe_texts_repeat_a_random_run(name):
    import viz_core as vc

    m = vc.load(name)
    texts = probe_texts(m, 4, seed=1)
    assert len(set(texts)) == 4
    targets = texts if m.kind == "encoder-decoder" else None
    for tr in m.trace_batch(texts, targets, capture=("pattern",)):
        b = tr[tr.blocks[0]]
        toks = [t for t, pad in zip(b.key_tokens, b.mask.all(axis=0))
                if not pad and not t.startswith("<")]
        half = len(toks) // 2
        assert len(toks) == 2 * half and toks[:half] == toks[half:]
        assert len(set(toks[:half])) == half  # distinct tokens in a run


def test_probe_only_run_on_an_encoder_decoder_model(tmp_path):
    info = run_atlas(AtlasConfig(model="dates", data="probe", out=str(tmp_path / "o"),
                                 engine="local", limit=6, shard_size=3, threads=1))
    atlas = load_atlas(tmp_path / "o")
    assert info["probe_examples"] == 6 and info["examples"] == 0
    assert set(atlas.summary["kind"]) == {"encoder.self", "decoder.self", "decoder.cross"}
    cross = atlas.summary[atlas.summary["kind"] == "decoder.cross"]
    assert cross["previous"].isna().all() and cross["broad"].notna().all()


def test_a_model_that_cannot_load(tmp_path):
    from viz_core.errors import ModelLoadError

    (tmp_path / "a.txt").write_text("the cat\n")
    with pytest.raises(ModelLoadError, match="not found"):
        run_atlas(cfg(tmp_path / "a.txt", tmp_path / "o", model=str(tmp_path / "nope")))


# ---- the "auto" engine (issue 24, item 5) ----------------------------------------------------
def test_cli_defaults_to_auto_and_a_small_file_stays_in_process(data, tmp_path, capsys):
    import json

    code = cli(["--model", "lm", "--data", str(data / "lines.txt"), "--out",
                str(tmp_path / "o"), "--limit", "6", "--probe", "2", "--shard-size", "4"])
    assert code == 0 and "(local)" in capsys.readouterr().out
    run = json.loads((tmp_path / "o" / "atlas.json").read_text())["run"]
    assert run["engine"] == "auto" and run["ran_on"] == ["local"]
    assert run["auto"]["engine"] == "local" and run["auto"]["ray_after_s"] == 60.0


def test_choose_engine_rule():
    from viz_core.atlas import choose_engine
    from viz_core.atlas.engine import RAY_PAYOFF_S

    assert choose_engine(100, 0.1, workers=2)["engine"] == "local"  # 10 s of work left
    assert choose_engine(1000, 0.1, workers=2)["engine"] == "ray"  # 100 s
    assert choose_engine(1000, 0.1, workers=1)["engine"] == "local"  # one worker: no gain
    assert choose_engine(0, 10.0, workers=2)["engine"] == "local"  # nothing left
    edge = RAY_PAYOFF_S / 0.5
    assert choose_engine(int(edge), 0.5, workers=2)["engine"] == "local"
    assert choose_engine(int(edge) + 1, 0.5, workers=2)["engine"] == "ray"
    assert choose_engine(10, 0.1, workers=2, ray_after_s=0.5)["engine"] == "ray"


def test_the_threshold_is_the_documented_one():
    from pathlib import Path

    from viz_core.atlas.engine import RAY_PAYOFF_S

    doc = (Path(__file__).resolve().parents[2] / "docs" / "ATLAS.md").read_text()
    assert f"exceeds **{RAY_PAYOFF_S:.0f} seconds**" in doc


def test_forward_slices_keep_the_batch_and_the_memory_bound():
    """--batch is a most: a run of long inputs is cut so that its kept patterns fit
    PATTERN_BYTES (MiniLM at 512 tokens keeps ~75 MB per input; --batch 2000 on long lines
    was the allocator's traceback)."""
    import viz_core as vc
    from viz_core.atlas.worker import forward_slices

    model = vc.load("lm", "cpu")
    texts = [" ".join(["the cat"] * k) for k in (1, 12, 2, 2, 14, 1, 3, 9, 1, 1)]
    heads = sum(model.block_heads.values())
    n = [min(model.count_tokens(t) + 2, model.max_tokens) for t in texts]
    for batch, budget in ((4, 10**12), (100, 4 * heads * 20 * 20 * 3), (100, 1)):
        cut = forward_slices(model, texts, batch, budget)
        assert [i for s in cut for i in range(s.start, s.stop)] == list(range(len(texts)))
        for s in cut:
            size = s.stop - s.start
            assert size <= batch
            assert size == 1 or 4 * heads * max(n[s]) ** 2 * size <= budget, (s, budget)
    assert len(forward_slices(model, texts, 4, 10**12)) == 3  # only the batch cuts


def test_a_run_cut_by_memory_gives_the_same_atlas(data, finished, tmp_path, monkeypatch):
    from viz_core.atlas import worker

    monkeypatch.setattr(worker, "PATTERN_BYTES", 1)  # one input per forward pass
    out = tmp_path / "cut"
    run_atlas(cfg(data / "lines.txt", out))
    a, b = shards_of(out), shards_of(finished[0])
    assert a.keys() == b.keys() and a
    for name in a:  # the same computation in other batches: rounding may differ a little
        pd.testing.assert_frame_equal(a[name], b[name], rtol=1e-5, obj=name)
