"""Head atlas on Ray Data: the same rows as in-process, resume, and a killed worker retried."""

from __future__ import annotations

import pytest

from tests.support.atlas import LINES, assert_same_output, cfg
from viz_core.atlas import AtlasStopped, load_atlas, run_atlas
from viz_core.atlas.engine import KILL_ENV
from viz_core.atlas.layout import done_shards

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One small local Ray for the module (explicit num_cpus: 2-core machines)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("atlas_ray_data")
    (d / "lines.txt").write_text("\n".join(LINES * 2) + "\n")
    return d / "lines.txt"


@pytest.fixture(scope="module")
def in_process(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("atlas_ray") / "local"
    run_atlas(cfg(data, out))
    return out


def test_ray_with_two_workers_equals_in_process_row_for_row(data, in_process, tmp_path):
    info = run_atlas(cfg(data, tmp_path / "ray", engine="ray", workers=2))
    assert info["complete"] and info["run"]["engine"] == "ray" and info["run"]["workers"] == 2
    assert_same_output(tmp_path / "ray", in_process)


def test_killed_worker_is_retried_and_output_identical(data, in_process, tmp_path,
                                                        monkeypatch):
    flag = tmp_path / "killed"
    monkeypatch.setenv(KILL_ENV, str(flag))
    info = run_atlas(cfg(data, tmp_path / "ray", engine="ray", workers=2))
    assert flag.read_text().startswith("killed during shard")  # a worker really died
    assert info["complete"]
    assert_same_output(tmp_path / "ray", in_process)


def test_ray_resume_after_a_stop(data, tmp_path):
    # One example per shard (22 shards): the stop is asynchronous, and Ray's actor ran all 5
    # shards of the default split before the driver stopped it once, on a loaded machine.
    reference = tmp_path / "local"
    run_atlas(cfg(data, reference, shard_size=1))
    shards = len(done_shards(reference))
    out = tmp_path / "ray"
    with pytest.raises(AtlasStopped):
        run_atlas(cfg(data, out, engine="ray", workers=1, shard_size=1), stop_after=1)
    assert 1 <= len(done_shards(out)) < shards
    assert load_atlas(out).info["complete"] is False
    info = run_atlas(cfg(data, out, engine="ray", workers=1, shard_size=1, resume=True))
    assert info["complete"] and info["run"]["resumed_shards"] >= 1
    assert_same_output(out, reference)


@pytest.mark.slow
def test_auto_moves_the_rest_to_ray_when_it_pays_off(data, in_process, tmp_path):
    """Issue 24 item 5: "auto" runs shards in-process until the rest would take longer than
    Ray's start-up; with that threshold at 0 s, the second shard on goes to Ray. The rows
    are the in-process run's."""
    info = run_atlas(cfg(data, tmp_path / "auto", engine="auto", workers=2, ray_after_s=0))
    run = info["run"]
    assert run["ran_on"] == ["local", "ray"] and run["shards_by_engine"]["local"] == 1
    assert run["auto"]["engine"] == "ray" and run["auto"]["rest_examples"] > 0
    assert_same_output(tmp_path / "auto", in_process)


@pytest.mark.slow


@pytest.mark.parametrize("task", ["patching", "circuit"])
def test_pair_task_on_ray_with_a_killed_worker_equals_in_process(task, tmp_path, monkeypatch):
    """Issue 23 item 8 (head patching) and issue 30 item 3 (edge attribution) over pairs on
    the Ray engine, one worker killed and its shard retried: the in-process rows and summary."""
    import pandas as pd

    from tests.support.atlas import PAIRS, ccfg, pcfg, write_pairs

    make = pcfg if task == "patching" else ccfg
    pairs = write_pairs(tmp_path / "pairs.csv", PAIRS)
    local = run_atlas(make(pairs, tmp_path / "local"))
    flag = tmp_path / "killed"
    monkeypatch.setenv(KILL_ENV, str(flag))
    info = run_atlas(make(pairs, tmp_path / "ray", engine="ray", workers=2))
    assert flag.read_text().startswith("killed during shard")
    assert info["complete"] and info["run"]["ran_on"] == ["ray"] and info["task"] == task
    assert (info["patched"], info["failed"]) == (local["patched"], local["failed"])
    for name in (f"{task}.parquet", f"{task}_top.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "ray" / name),
                                      pd.read_parquet(tmp_path / "local" / name), obj=name)
    for s in range(3):
        for kind in ("heads", "examples"):
            f = f"shards/{kind}-{s:05d}.parquet"
            pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "ray" / f),
                                          pd.read_parquet(tmp_path / "local" / f), obj=f)
