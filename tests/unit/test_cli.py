"""The `attention-lab` command, run in-process (attention_lab.cli.main) and once as
`python -m attention_lab`: exports equal the library's own, and every bad input is one line
on stderr with a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import viz_core as vc
from attention_lab import cli
from viz_core.backends.families import FAMILIES
from viz_core.capture.export import trace_arrays

ROOT = Path(__file__).resolve().parents[2]
TEXT = "the red car"
FLOW_TEXT = "cat sees the red king cat sees the red"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def reference():
    """The library's own trace of TEXT, as a notebook would take it."""
    return vc.load("en-fr").trace(TEXT)


def test_trace_npz_equals_the_librarys_trace(capsys, tmp_path, reference):
    out = tmp_path / "x.npz"
    code, stdout, err = run(capsys, "trace", TEXT, "--model", "en-fr", "--out", str(out))
    assert code == 0, err
    assert f"wrote {out}" in stdout
    got = np.load(out)
    expected = trace_arrays(reference)  # what the app's "Whole trace (NPZ)" holds
    assert sorted(got.files) == sorted(expected)
    for block in reference.blocks:
        assert f"{block}/pattern" in got.files
    for key, value in expected.items():
        # same model, same kernels, same process: the same numbers bit for bit
        np.testing.assert_array_equal(got[key], np.asarray(value), err_msg=key)


def test_trace_json_holds_tokens_and_patterns(capsys, tmp_path, reference):
    out = tmp_path / "x.json"
    code, _, err = run(capsys, "trace", TEXT, "--model", "en-fr", "--out", str(out))
    assert code == 0, err
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["blocks"] == reference.blocks
    assert data["output_text"] == reference.output_text
    cross = data["block_data"]["decoder.1.cross"]
    assert cross["query_tokens"] == reference["decoder.1.cross"].query_tokens
    np.testing.assert_array_equal(np.asarray(cross["pattern"], dtype=np.float32),
                                  reference["decoder.1.cross"].pattern)


def test_trace_with_a_target_is_teacher_forced(capsys, tmp_path):
    out = tmp_path / "t.npz"
    code, _, err = run(capsys, "trace", TEXT, "--model", "en-fr", "--target", "la voiture",
                       "--out", str(out))
    assert code == 0, err
    ref = vc.load("en-fr").trace(TEXT, "la voiture")
    np.testing.assert_array_equal(np.load(out)["decoder.0.cross/pattern"],
                                  ref["decoder.0.cross"].pattern)


def test_trace_without_out_prints_a_summary(capsys, reference):
    code, out, err = run(capsys, "trace", TEXT, "--model", "en-fr")
    assert code == 0, err
    assert f"output: {reference.output_text}" in out
    assert "decoder.1.cross 4x" in out
    assert " ".join(reference.source_tokens) in out


@pytest.fixture(scope="module")
def flow_reference():
    """The library's own information flow of FLOW_TEXT at position 7, threshold 0.1."""
    return vc.load("induction").information_flow(FLOW_TEXT, position=7, threshold=0.1)


def test_flow_edges_csv_equals_the_librarys_edges(capsys, tmp_path, flow_reference):
    out = tmp_path / "edges.csv"
    code, stdout, err = run(capsys, "flow", FLOW_TEXT, "--model", "induction", "--position",
                            "7", "--threshold", "0.1", "--out", str(out))
    assert code == 0, err
    assert f"wrote {out} ({len(flow_reference.edges):,} edges" in stdout
    # what the Information flow page's "Edges (CSV)" holds; same model and process: same text
    assert out.read_text(encoding="utf-8") == flow_reference.edges.to_csv(index=False)
    got = pd.read_csv(out)
    assert list(got.columns) == list(flow_reference.edges.columns)
    assert "head" in got.columns  # the column: got["head"], as got.head is DataFrame.head


def test_flow_routes_csv_equals_the_librarys_routes(capsys, tmp_path, flow_reference):
    out = tmp_path / "routes.csv"
    code, stdout, err = run(capsys, "flow", FLOW_TEXT, "--model", "induction", "--position",
                            "7", "--threshold", "0.1", "--routes", "--out", str(out))
    assert code == 0, err
    routes = flow_reference.routes()
    assert f"({len(routes):,} route rows" in stdout
    assert out.read_text(encoding="utf-8") == routes.to_csv(index=False)


def test_flow_without_out_prints_the_prediction_and_routes(capsys, flow_reference):
    code, out, err = run(capsys, "flow", FLOW_TEXT, "--model", "induction", "--position", "7",
                         "--threshold", "0.1", "--top", "3")
    assert code == 0, err
    assert f"position 7 ('sees') -> predicts {flow_reference.prediction!r}" in out
    rows = [line for line in out.splitlines() if line.startswith("  ")]
    heaviest = flow_reference.routes().weight.nlargest(3)
    assert [float(r.split()[0]) for r in rows] == [round(w, 3) for w in heaviest]


def test_models_lists_shipped_builtin_and_families(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0
    shipped = vc.shipped_models()
    assert {"en-fr", "dates", "lm"} <= set(shipped)
    for name in shipped:
        assert f"  {name} " in out
    assert "minilm" in out
    for model_type in FAMILIES:
        assert model_type in out


def test_check_prints_the_faithfulness_figure(capsys):
    code, out, err = run(capsys, "check", "--model", "en-fr", "--text", TEXT, "--device", "cpu")
    assert code == 0, err
    line = next(s for s in out.splitlines() if s.startswith("faithfulness:"))
    value = float(line.split("=")[1].split()[0])
    # traced (eager softmax) vs the model's own SDPA run, float32: a few 1e-6 on this CPU
    assert 0 <= value < 1e-4
    assert "output: la voiture rouge" in out


def test_a_models_notices_go_to_stderr(capsys, tmp_path):
    """A checkpoint with an infinite weight: the app says so under the model picker, and the
    command on stderr (its check went on with 'nan' and not a word)."""
    from safetensors.torch import load_file, save_file

    from viz_core.training.toy import save_toy

    toy = save_toy(tmp_path / "toy", seed=4)
    code, out, err = run(capsys, "check", "--model", str(toy), "--text", "the cat")
    assert code == 0 and err == "", err
    weights = load_file(toy / "model.safetensors")
    weights["generator.weight"][0, 0] = float("inf")
    save_file(weights, toy / "model.safetensors", metadata={"format": "pt"})
    code, out, err = run(capsys, "check", "--model", str(toy), "--text", "the cat")
    assert code == 0
    assert err.startswith("attention-lab: warning: 1 of this model's weights hold values that "
                          "are not numbers (NaN or infinity: generator.weight)"), err


@pytest.mark.parametrize("argv", [
    ["trace", TEXT, "--model", "no-such-model"],
    ["trace", "", "--model", "en-fr"],
    ["trace", "   ", "--model", "en-fr"],
    ["trace", TEXT, "--model", "en-fr", "--out", "/no/such/folder/x.npz"],
    ["trace", TEXT, "--model", "en-fr", "--out", "{tmp}"],  # a folder
    ["trace", TEXT, "--model", "en-fr", "--out", "{tmp}/x.txt"],  # an unknown format
    ["trace", TEXT, "--model", "{tmp}/nothing-here"],
    ["check", "--model", "no-such-model"],
    ["check", "--model", "en-fr", "--text", ""],
    ["check", "--model", ""],
    ["atlas", "--model", "no-such-model", "--data", "probe", "--out", "{tmp}/atlas",
     "--engine", "local", "--quiet"],
    ["flow", "", "--model", "induction", "--out", "{tmp}/x.csv"],
    ["flow", FLOW_TEXT, "--model", "induction", "--threshold", "1.5", "--out", "{tmp}/x.csv"],
    ["flow", FLOW_TEXT, "--model", "induction", "--threshold", "nan"],
    ["flow", FLOW_TEXT, "--model", "induction", "--position", "99", "--out", "{tmp}/x.csv"],
    ["flow", FLOW_TEXT, "--model", "induction", "--out", "{tmp}/x.npz"],
    ["flow", FLOW_TEXT, "--model", "induction", "--out", "/no/such/folder/x.csv"],
    ["flow", FLOW_TEXT, "--model", "no-such-model", "--out", "{tmp}/x.csv"],
], ids=["trace-unknown-model", "trace-empty", "trace-blank", "trace-out-no-folder",
        "trace-out-folder", "trace-out-format", "trace-missing-path", "check-unknown-model",
        "check-empty-text", "check-empty-model", "atlas-unknown-model", "flow-empty",
        "flow-threshold-above-1", "flow-threshold-nan", "flow-position-out-of-range",
        "flow-out-format", "flow-out-no-folder", "flow-unknown-model"])
def test_bad_input_is_one_line(capsys, tmp_path, argv):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].split(":")[0] in ("attention-lab", "atlas")
    assert not list(tmp_path.glob("x.*"))


def test_unwritable_out_is_one_line(capsys, tmp_path, monkeypatch):
    """A file that cannot be written (here: a read-only folder, as root sees one: an OSError
    from the write itself) is one line too."""
    target = tmp_path / "x.npz"

    def refuse(self, data):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_bytes", refuse)
    code, _, err = run(capsys, "trace", TEXT, "--model", "en-fr", "--out", str(target))
    assert code == 1
    assert err.strip() == f"attention-lab: cannot write {str(target)!r}: Permission denied"


@pytest.mark.parametrize("argv", [
    ["trace", TEXT, "--model", "en-fr", "--bogus"],
    ["trace", "--model", "en-fr"],  # no TEXT
    ["trace", TEXT],  # no --model
    ["models", "--bogus"],
    ["check"],
    ["app", "--port", "not-a-port"],
    ["atlas", "--bogus"],
    ["bogus-command"],
    ["flow", "--model", "induction"],  # no TEXT
    ["flow", TEXT, "--model", "induction", "--threshold", "high"],
    ["flow", TEXT, "--model", "induction", "--top", "-3"],  # was: every row but the last 3
])
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["app", "trace", "models", "check", "atlas", "flow"])
def test_help_on_each_command(capsys, command):
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out
    assert f"usage: attention-lab {command}" in out  # the name the user typed
    if command == "atlas":  # the atlas's own parser, under the command's name
        assert "--data" in out


def test_app_runs_streamlit_on_the_apps_folder(monkeypatch):
    """`attention-lab app` becomes `python -m attention_lab.server run app.py` (Streamlit's
    `run` after attention_lab.server.install) in the folder holding app.py, pages/ and
    .streamlit/config.toml (the clone's root here), like `make run`."""
    seen = {}
    monkeypatch.setattr(os, "chdir", lambda path: seen.setdefault("cwd", Path(path)))
    monkeypatch.setattr(os, "execve", lambda exe, argv, env: seen.update(argv=argv, env=env))
    cli.main(["app", "--port", "8612"])
    assert seen["cwd"] == ROOT
    assert seen["argv"][:5] == [sys.executable, "-m", "attention_lab.server", "run", "app.py"]
    assert seen["argv"][5:7] == ["--server.port", "8612"]
    assert (seen["cwd"] / ".streamlit" / "config.toml").is_file()
    assert seen["env"]["HF_HUB_OFFLINE"] == os.environ.get("HF_HUB_OFFLINE", "1")
    seen.clear()
    cli.main([])  # no command: the app on the default port
    assert seen["argv"][5:7] == ["--server.port", "8501"]


def test_a_port_out_of_range_is_a_usage_error(capsys, monkeypatch):
    """Streamlit's own refusal of --port 99999 was an OverflowError traceback."""
    monkeypatch.setattr(os, "chdir", lambda path: None)
    monkeypatch.setattr(os, "execve", lambda *a: pytest.fail("Streamlit was started"))
    for port in ("99999", "0", "-1"):
        with pytest.raises(SystemExit) as exc:
            cli.main(["app", "--port", port])
        assert exc.value.code == 2
        assert "give a port from 1 to 65535" in capsys.readouterr().err


def test_python_dash_m_attention_lab():
    proc = subprocess.run([sys.executable, "-m", "attention_lab", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for command in ("app", "trace", "atlas", "models", "check"):
        assert command in proc.stdout


def test_export_of_a_long_input_is_refused_as_in_the_app(capsys, tmp_path, monkeypatch):
    """Whole-matrix downloads stop at the app's exact limit (1,024 tokens; lowered to 3 here
    so a shipped model reaches it): one line, nothing written."""
    from viz_core.figures import heatmap

    monkeypatch.setattr(heatmap, "EXACT_MAX_TOKENS", 3)
    code, _, err = run(capsys, "trace", TEXT, "--model", "en-fr", "--out", str(tmp_path / "x.npz"))
    assert code == 1
    assert err.strip() == ("attention-lab: exports of whole attention matrices go up to 3 "
                           "tokens; this input has 4")
    assert not (tmp_path / "x.npz").exists()


@pytest.mark.slow
def test_a_hugging_face_model_leaves_stderr_clean():
    """MiniLM in a fresh process (transformers' loading bars are set at its import): a
    successful check writes nothing to stderr, so a failure's line is the only one there."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
    proc = subprocess.run([sys.executable, "-m", "attention_lab", "check", "--model", "minilm",
                           "--text", "the cat sat on the mat"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "faithfulness:" in proc.stdout
