"""The atlas on a Ray cluster started separately (`ray start --head`, token authentication on),
and the one-line messages when a cluster refuses (issue 24, item 6).

The head runs in its own process group with its own temp dir, ports and token file (never
~/.ray/auth_token, which other work on this machine uses), sized to 2 CPUs, and is stopped
in the fixture's teardown (SIGTERM, then SIGKILL of its own process group). The atlas runs
as the command a user types, in a child process whose Ray environment the test sets.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from tests.support.atlas import LINES, assert_same_output, cfg
from viz_core.atlas import AtlasError, run_atlas
from viz_core.atlas.cluster import (
    explain_init_failure,
    split_address,
    token_source,
    version_problem,
)

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).parent / "ray"
AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(home: Path, **extra) -> dict:
    """This process's environment without any Ray authentication setting, HOME elsewhere
    (no ~/.ray/auth_token), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in AUTH_VARS}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), **extra)
    return env


def atlas_cli(args: list[str], env: dict, timeout: float = 420) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "viz_core.atlas", *args, "--quiet"],
                          cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def one_line(res: subprocess.CompletedProcess) -> str:
    """The CLI's message: exit code 2, one 'atlas:' line, no traceback."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr[-2000:])
    assert "Traceback" not in res.stderr
    said = [ln for ln in res.stderr.splitlines() if ln.startswith("atlas: ")]
    assert len(said) == 1, res.stderr[-2000:]
    return said[0]


# ---- fast: addresses and messages -----------------------------------------------------------
@pytest.mark.slow
def test_nothing_listening_says_so_in_one_line(tmp_path):
    (tmp_path / "a.txt").write_text("the cat\n")
    port = free_port()
    res = atlas_cli(["--model", "lm", "--data", str(tmp_path / "a.txt"), "--out",
                     str(tmp_path / "o"), "--address", f"127.0.0.1:{port}"],
                    clean_env(tmp_path), timeout=120)
    msg = one_line(res)
    assert f"Cannot reach a Ray cluster at 127.0.0.1:{port}" in msg
    assert "nothing listens there" in msg and "ray start --head" in msg
    assert not (tmp_path / "o").exists()


def test_bad_address_form():
    with pytest.raises(AtlasError, match="is not host:port"):
        split_address("localhost")


def test_token_source_follows_rays_order(tmp_path):
    (tmp_path / ".ray").mkdir()
    assert token_source({"HOME": str(tmp_path)}) is None
    (tmp_path / ".ray" / "auth_token").write_text("x" * 64)
    assert token_source({"HOME": str(tmp_path)}) == str(tmp_path / ".ray" / "auth_token")
    (tmp_path / "t").write_text("y" * 64)
    assert token_source({"HOME": str(tmp_path), "RAY_AUTH_TOKEN_PATH": str(tmp_path / "t")}
                        ).startswith("$RAY_AUTH_TOKEN_PATH")
    assert token_source({"HOME": str(tmp_path), "RAY_AUTH_TOKEN": "z" * 64,
                         "RAY_AUTH_TOKEN_PATH": str(tmp_path / "t")}) == "$RAY_AUTH_TOKEN"


def test_version_mismatch_names_both_versions():
    import platform

    import ray

    here = {"ray_version": ray.__version__, "python_version": platform.python_version()}
    assert version_problem(here, "h:1") is None
    msg = version_problem({**here, "ray_version": "2.41.0"}, "h:1")
    assert "Ray 2.41.0" in msg and f"Ray {ray.__version__}" in msg
    assert "ray==2.41.0" in msg and "\n" not in msg
    msg = version_problem({**here, "python_version": "3.9.1"}, "h:1")
    assert "Python 3.9.1" in msg and platform.python_version() in msg


def test_init_failures_are_told_by_their_cause(monkeypatch):
    """ray.init wraps the cause in "Failed to connect to Ray cluster at ...": the message
    comes from the cause (the texts Ray 2.60 raises)."""
    for var in AUTH_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")

    def wrapped(inner: Exception) -> Exception:
        try:
            try:
                raise inner
            except Exception as e:
                raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.5:6379") from e
        except ConnectionError as outer:
            return outer

    auth = wrapped(RuntimeError("Failed to connect to GCS. Last connection error: ... "
                                "ray.exceptions.AuthenticationError: RPC error: "
                                "InvalidAuthToken: Authentication token is missing"))
    msg = explain_init_failure("10.0.0.5:6379", auth)
    assert "uses token authentication" in msg and "no token was found" in msg
    assert "ray get-auth-token" in msg and "\n" not in msg
    version = wrapped(RuntimeError("Version mismatch: The cluster was started with:\n"
                                   "    Ray: 2.41.0\n"))
    assert "Version mismatch" in explain_init_failure("10.0.0.5:6379", version)
    other = wrapped(RuntimeError("Failed to connect to GCS.\nsomething else"))
    msg = explain_init_failure("10.0.0.5:6379", other)
    assert msg.startswith("Cannot connect to the Ray cluster at 10.0.0.5:6379") and \
        "\n" not in msg


# ---- slow: a real head node with token authentication -----------------------------------------
@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """`ray start --head` with token authentication, in its own process group."""
    if not RAY.exists():
        pytest.skip("no ray command in this environment")
    d = tmp_path_factory.mktemp("ray_head")
    token = d / "token"
    token.write_text(secrets.token_hex(32))
    port = free_port()
    temp = Path("/tmp") / f"rh{port}"  # short: Ray's socket paths must stay < 108 bytes
    env = clean_env(d, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token),
                    RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0")
    ports = {f"--{name}": str(free_port()) for name in (
        "node-manager-port", "object-manager-port",
        "dashboard-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
        "runtime-env-agent-port", "metrics-export-port")}
    cmd = [str(RAY), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
           "--num-gpus=0", "--include-dashboard=false", "--disable-usage-stats",
           f"--temp-dir={temp}",
           *(f"{k}={v}" for k, v in ports.items())]
    log = open(d / "head.log", "w")  # noqa: SIM115 - closed in the teardown
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in (d / "head.log").read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the head did not start: {(d / 'head.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield {"address": f"127.0.0.1:{port}", "token": token, "dir": d}
    finally:
        stop_group(proc)
        log.close()
        import shutil

        shutil.rmtree(temp, ignore_errors=True)


def stop_group(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM to the head (it stops what it started), then SIGKILL to its process group."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # our own group (start_new_session): its children
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.mark.slow
def test_atlas_on_a_token_cluster_equals_in_process(head, tmp_path):
    """With the token where the user's Ray setup keeps it (here RAY_AUTH_TOKEN_PATH) and
    RAY_AUTH_MODE unset, the CLI reaches the cluster and writes the in-process rows."""
    data = tmp_path / "lines.txt"
    data.write_text("\n".join(LINES) + "\n")
    local = tmp_path / "local"
    run_atlas(cfg(data, local))  # model lm, shards of 5, 6 probes
    res = atlas_cli(["--model", "lm", "--data", str(data), "--out", str(tmp_path / "ray"),
                     "--address", head["address"], "--shard-size", "5", "--probe", "6",
                     "--batch", "4", "--workers", "2", "--threads", "1"],
                    clean_env(tmp_path, RAY_AUTH_TOKEN_PATH=str(head["token"])))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "(ray)" in res.stdout
    import json

    run = json.loads((tmp_path / "ray" / "atlas.json").read_text())["run"]
    assert run["ran_on"] == ["ray"] and run["address"] == head["address"]
    assert_same_output(tmp_path / "ray", local)


@pytest.mark.slow
def test_refusals_name_the_cause_and_the_fix(head, tmp_path):
    (tmp_path / "a.txt").write_text("the cat\n")
    args = ["--model", "lm", "--data", str(tmp_path / "a.txt"), "--address", head["address"]]
    # no token anywhere (HOME without ~/.ray/auth_token, no RAY_AUTH_* variables)
    msg = one_line(atlas_cli([*args, "--out", str(tmp_path / "o1")], clean_env(tmp_path)))
    assert f"The Ray cluster at {head['address']} uses token authentication" in msg
    assert "no token was found" in msg and "ray get-auth-token" in msg
    # a token, but not the cluster's
    wrong = clean_env(tmp_path, RAY_AUTH_TOKEN=secrets.token_hex(32))
    msg = one_line(atlas_cli([*args, "--out", str(tmp_path / "o2")], wrong))
    assert "rejected the token from $RAY_AUTH_TOKEN" in msg
    # token authentication switched off on this side
    off = clean_env(tmp_path, RAY_AUTH_MODE="disabled",
                    RAY_AUTH_TOKEN_PATH=str(head["token"]))
    msg = one_line(atlas_cli([*args, "--out", str(tmp_path / "o3")], off))
    assert "RAY_AUTH_MODE=disabled here" in msg
    for o in ("o1", "o2", "o3"):
        assert not (tmp_path / o).exists()  # stopped before anything was written


@pytest.mark.slow
def test_a_port_that_is_no_ray_head(tmp_path):
    """Something accepts connections but never speaks Ray's protocol."""
    (tmp_path / "a.txt").write_text("the cat\n")
    with closing(socket.socket()) as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        res = atlas_cli(["--model", "lm", "--data", str(tmp_path / "a.txt"), "--out",
                         str(tmp_path / "o"), "--address", f"127.0.0.1:{port}"],
                        clean_env(tmp_path), timeout=180)
    msg = one_line(res)
    assert "no Ray head answered there" in msg and "6379" in msg
