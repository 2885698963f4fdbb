"""`attention-lab serve` (attention_lab/serve.py): bad input is one clear line and a non-zero
exit before anything starts; the nginx config it writes is complete and nginx accepts it."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from attention_lab import serve
from attention_lab.cli import CommandError

ROOT = Path(serve.__file__).resolve().parents[1]


def run_serve(capsys, *args: str) -> tuple[int, str]:
    """attention-lab serve ARGS in this process: -> (exit code, stderr)."""
    from attention_lab.cli import main

    code = main(["serve", *args])
    return code, capsys.readouterr().err


def one_line(result: tuple[int, str]) -> str:
    code, err = result
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert code != 0
    return lines[0]


def test_zero_replicas_is_one_line(capsys):
    line = one_line(run_serve(capsys, "--replicas", "0", "--port", "0"))
    assert line == "attention-lab: --replicas 0: give at least 1 (one app process a core)"


def test_more_replicas_than_cores_is_one_line(capsys):
    n = serve.cores() + 1
    line = one_line(run_serve(capsys, "--replicas", str(n)))
    assert line.startswith(f"attention-lab: --replicas {n}: this machine has {serve.cores()} core")


def test_port_in_use_is_one_line(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        line = one_line(run_serve(capsys, "--port", str(port), "--address", "127.0.0.1",
                                  "--nginx", sys.executable))  # any executable: not reached
    assert line == (f"attention-lab: port {port} is in use on 127.0.0.1: stop what holds it "
                    "or give another --port")


def test_nginx_missing_is_one_line(capsys, tmp_path):
    line = one_line(run_serve(capsys, "--nginx", str(tmp_path / "nginx")))
    assert line == f"attention-lab: nginx not found at {str(tmp_path / 'nginx')!r}"


@pytest.mark.parametrize("cap", ["nan", "inf", "-5"])
def test_a_size_cap_that_is_no_size_is_one_line(capsys, cap):
    """nan compared false with every size, so it was no cap at all, silently."""
    line = one_line(run_serve(capsys, "--max-model-mb", cap))
    assert line == f"attention-lab: --max-model-mb {cap}: give a size in MB, or 0 for no cap"


def test_a_state_dir_that_cannot_be_made_is_one_line(capsys, tmp_path):
    """A file where the folder should be was 'FileExistsError: [Errno 17] ...'."""
    (tmp_path / "taken").write_text("x")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = one_line(run_serve(capsys, "--state-dir", str(tmp_path / "taken"), "--port",
                              str(port), "--address", "127.0.0.1", "--nginx", sys.executable))
    assert line == (f"attention-lab: --state-dir {str(tmp_path / 'taken')!r}: cannot make the "
                    "folder (File exists)")


def test_nginx_not_installed_names_the_package(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(serve, "NGINX_PLACES", ("/nonexistent/sbin/nginx",))
    with pytest.raises(CommandError, match="nginx is not installed: `sudo apt-get install nginx`"):
        serve.find_nginx()


def test_policy_starts_closed_and_flags_open_it():
    closed = serve.policy_env(False, False, serve.DEFAULT_MAX_MODEL_MB)
    assert closed == {"ATTENTION_LAB_ALLOW_LOCAL_PATHS": "0", "ATTENTION_LAB_ALLOW_HUB": "0",
                      "ATTENTION_LAB_MAX_MODEL_MB": "1000"}
    from viz_core.loading.policy import Policy

    policy = Policy.from_env(closed)
    assert not policy.allow_local_paths and not policy.allow_hub
    assert policy.max_model_mb == 1000
    opened = Policy.from_env(serve.policy_env(True, True, 0))
    assert opened.allow_local_paths and opened.allow_hub and opened.max_model_mb is None
    args = serve_args([])
    assert (args.allow_local_paths, args.allow_hub, args.max_model_mb) == (False, False, 1000)


def serve_args(argv: list[str]):
    from attention_lab.cli import parser

    return parser().parse_args(["serve", *argv])


def config(tmp_path: Path) -> str:
    template = serve.template_path().read_text(encoding="utf-8")
    return serve.nginx_config(template, listen="127.0.0.1:8080",
                              upstreams=["127.0.0.1:9001", "127.0.0.1:9002"],
                              state_dir=tmp_path)


def test_config_has_affinity_websockets_health_and_failover(tmp_path):
    text = "\n".join(line.split("#")[0] for line in config(tmp_path).splitlines())  # directives
    assert "{{" not in text
    assert "hash $replica_key consistent;" in text
    assert "map $cookie_attention_lab_replica $replica_key" in text
    assert "$request_id" in text
    assert "ip_hash" not in text
    assert 'add_header Set-Cookie "attention_lab_replica=$replica_key' in text
    assert "server 127.0.0.1:9001 max_fails=1 fail_timeout=10s;" in text
    assert "server 127.0.0.1:9002 max_fails=1 fail_timeout=10s;" in text
    stream = text[text.index("location /_stcore/stream"):]
    stream = stream[:stream.index("}")]
    assert "proxy_set_header Upgrade $http_upgrade;" in stream
    assert "proxy_set_header Connection $connection_upgrade;" in stream
    assert "proxy_read_timeout 1d;" in stream
    assert "location = /healthz" in text and "/_stcore/health;" in text
    assert "proxy_next_upstream error timeout" in text
    assert f"pid {tmp_path}/nginx.pid;" in text  # nothing under /var or /run
    assert "/var/" not in text and "/run/" not in text
    # no temp files: the unprivileged workers may not reach the state folder
    assert "proxy_max_temp_file_size 0;" in text and "proxy_request_buffering off;" in text
    assert "keepalive" not in text  # a stale pooled connection would count as a failure


def test_replicas_share_the_cores(monkeypatch):
    monkeypatch.setattr(serve, "cores", lambda: 16)
    assert serve.thread_env(4, {}) == {"ATTENTION_LAB_TORCH_THREADS": "3",
                                       "ATTENTION_LAB_MODEL_RUNS": "1"}
    assert serve.thread_env(1, {}) == {"ATTENTION_LAB_TORCH_THREADS": "4",
                                       "ATTENTION_LAB_MODEL_RUNS": "3"}
    monkeypatch.setattr(serve, "cores", lambda: 2)
    assert serve.thread_env(2, {}) == {"ATTENTION_LAB_TORCH_THREADS": "1",
                                       "ATTENTION_LAB_MODEL_RUNS": "1"}
    kept = serve.thread_env(2, {"ATTENTION_LAB_TORCH_THREADS": "2"})
    assert kept["ATTENTION_LAB_TORCH_THREADS"] == "2"  # the teacher's own setting wins


def test_unknown_template_field_is_refused(tmp_path):
    with pytest.raises(CommandError, match=r"unknown field \{\{port\}\}"):
        serve.nginx_config("listen {{port}};", listen="80", upstreams=[], state_dir=tmp_path)


def test_the_command_exits_non_zero_with_one_line():
    """The same through the installed entry point's module, in a process of its own."""
    import os

    result = subprocess.run([sys.executable, "-m", "attention_lab", "serve", "--replicas", "0"],
                            capture_output=True, text=True, timeout=120, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 1
    assert result.stderr.strip() == ("attention-lab: --replicas 0: give at least 1 (one app "
                                     "process a core)")
    assert result.stdout == ""


@pytest.mark.skipif(not Path(serve.NGINX_PLACES[0]).exists() and not shutil.which("nginx"),
                    reason="Debian's nginx is not installed (make test installs it)")
def test_nginx_accepts_the_config(tmp_path):
    conf = tmp_path / "nginx.conf"
    conf.write_text(config(tmp_path), encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    result = subprocess.run([serve.find_nginx(), "-t", "-q", "-p", str(tmp_path), "-c", str(conf),
                             "-e", str(tmp_path / "error.log")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
