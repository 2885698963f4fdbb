"""Edge attribution over a dataset (`python -m viz_core.atlas --task circuit --pairs FILE`),
in-process: each edge's mean and spread equal numpy's over `model.edge_attribution` run pair
by pair; the unequal pair is kept with its message; the top pairs of an edge are those of the
largest |score|; settings that differ refuse to resume. The Ray side (a killed worker) is in
test_atlas_ray.py; the page in tests/app/test_atlas_page.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import viz_core as vc
from tests.support.atlas import CIRCUIT_METHOD as METHOD
from tests.support.atlas import CIRCUIT_STEPS as STEPS
from tests.support.atlas import PAIRS, ccfg, write_pairs
from viz_core.atlas import AtlasError, load_atlas, load_circuit, run_atlas
from viz_core.atlas.__main__ import main as cli
from viz_core.atlas.circuit import EDGE, mean_edges


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    return write_pairs(tmp_path_factory.mktemp("circuit_pairs") / "pairs.csv", PAIRS)


@pytest.fixture(scope="module")
def finished(pairs_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("circuit_run") / "run"
    return out, run_atlas(ccfg(pairs_file, out))


@pytest.fixture(scope="module")
def reference():
    """model.edge_attribution pair by pair (the API the task calls): one frame per pair."""
    model = vc.load("lm", "cpu", dtype="float32")
    frames = []
    for clean, corrupted, token, against in PAIRS[:-1]:
        a = model.edge_attribution(clean, corrupted, token=token or None,
                                   against=against or None, method=METHOD, steps=STEPS)
        frames.append((a, a.edges.assign(input=a.edges["input"].fillna(""))))
    return frames


def test_mean_and_spread_equal_numpy_over_each_pair(finished, reference):
    out, info = finished
    assert info["task"] == "circuit" and info["method"] == METHOD and info["steps"] == STEPS
    assert (info["examples"], info["patched"], info["failed"]) == (len(PAIRS), 5, 1)
    scores = np.stack([f["score"].to_numpy() for _a, f in reference])  # [pair, edge]
    run = load_circuit(out)
    first = reference[0][1]
    assert len(run.summary) == len(first)  # every edge of the model's graph
    got = run.summary.set_index(EDGE).loc[pd.MultiIndex.from_frame(first[EDGE])]
    np.testing.assert_allclose(got["mean"], scores.mean(0), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["std"], scores.std(0, ddof=1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["sem"], scores.std(0, ddof=1) / np.sqrt(5), rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_array_equal(got["min"], scores.min(0))
    np.testing.assert_array_equal(got["max"], scores.max(0))
    assert (got["n"] == 5).all()
    edges = mean_edges(run.summary)
    assert list(edges.columns) == [*EDGE, "score"]


def test_each_pair_keeps_its_metric_and_the_bad_pair_its_message(finished, reference):
    out, info = finished
    pairs = load_circuit(out).pairs()
    for (a, _f), (_i, row) in zip(reference, pairs.iloc[:5].iterrows()):
        assert row["metric"] == a.metric
        assert row["clean_metric"] == pytest.approx(a.clean, abs=1e-9)
        assert row["corrupted_metric"] == pytest.approx(a.corrupted, abs=1e-9)
    bad = pairs.loc[5, "error"]
    assert "3" in bad and "2" in bad  # both token counts, as edge_attribution says them
    (first,) = info["errors"]  # with its template and values, to show it translated
    assert (first["example"], first["error"], first["data"]["message"]) == (5, bad, bad)
    assert first["data"]["values"]["n_clean_ids"] == 3


def test_top_pairs_of_an_edge_are_those_of_the_largest_size(finished, reference):
    out, _ = finished
    top = load_circuit(out).top
    first = reference[0][1]
    edge = first.iloc[int(np.argmax(np.abs(first["score"].to_numpy())))]
    scores = np.array([f.loc[edge.name, "score"] for _a, f in reference])
    part = top[(top["sender"] == edge["sender"]) & (top["receiver"] == edge["receiver"]) &
               (top["input"] == edge["input"])].sort_values("rank")
    assert part["example"].tolist() == list(np.argsort(-np.abs(scores), kind="stable"))


def test_other_settings_refuse_to_resume_and_the_role_reader_says_what_it_is(
        pairs_file, finished, tmp_path):
    out, _ = finished
    with pytest.raises(AtlasError, match="method"):
        run_atlas(ccfg(pairs_file, out, method="eap", resume=True))
    with pytest.raises(Exception, match="circuit run .*load_circuit"):
        load_atlas(out)


def test_cli_circuit_run_and_its_errors(pairs_file, tmp_path, capsys):
    code = cli(["--task", "circuit", "--method", "eap", "--model", "lm", "--pairs",
                str(pairs_file), "--out", str(tmp_path / "cli"), "--engine", "local",
                "--device", "cpu", "--quiet"])
    said = capsys.readouterr()
    assert code == 0 and "scored (eap) 5 of 6 pairs" in said.out, said
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    code = cli(["--task", "circuit", "--model", "lm", "--pairs", str(empty), "--out",
                str(tmp_path / "e"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("atlas: "), err
    with pytest.raises(SystemExit):
        cli(["--task", "roles", "--method", "eap", "--model", "lm", "--data", "probe",
             "--out", str(tmp_path / "r")])
    assert "--method goes with --task circuit" in capsys.readouterr().err
    code = cli(["--task", "circuit", "--steps", "0", "--model", "lm", "--pairs",
                str(pairs_file), "--out", str(tmp_path / "s"), "--quiet"])
    assert code == 2 and "--steps" in capsys.readouterr().err
