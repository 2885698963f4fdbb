"""The package's built wheel and a FRESH virtual environment with it installed, shared by
tests/unit/test_package.py and tests/browser/test_package.py: session-scoped fixtures
(registered in tests/conftest.py), so one pytest process builds each once. The time each took
is written to tests/artifacts/fresh_venv.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.browser_support import ARTIFACTS

ROOT = Path(__file__).resolve().parents[2]
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="session")
def dist(tmp_path_factory):
    """(wheel, sdist) from `python -m build` (the wheel is built from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=900)
    TIMINGS["build_s"] = round(time.monotonic() - start, 1)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheel = next(out.glob("attention_lab-*.whl"))
    sdist = next(out.glob("attention_lab-*.tar.gz"))
    return wheel, sdist


def clean_env(venv: Path) -> dict:
    """This machine's environment without the repository's venv or source on any path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "JUPYTER_PATH")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT)))])
    env.update(VIRTUAL_ENV=str(venv), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    return env


@pytest.fixture(scope="session")
def fresh(dist, tmp_path_factory):
    """A new venv with the wheel and its notebook extra (pip resolves the pinned requirements
    with this machine's pip settings: the index and the CPU torch wheel); yields
    (venv, working folder outside the repository, environment)."""
    wheel, _ = dist
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = clean_env(venv)
    # --no-compile: imports compile what they use; byte-compiling all of torch + ray + pandas
    # at install time costs minutes on a 2-core machine.
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    # the wheel and its notebook extra (ipykernel + nbformat) in one resolution
    proc = subprocess.run([*pip, f"{wheel}[notebook]"], capture_output=True, text=True, env=env,
                          timeout=1500)
    TIMINGS["fresh_venv_install_s"] = round(time.monotonic() - start, 1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    work = tmp_path_factory.mktemp("elsewhere")
    yield venv, work, env
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "fresh_venv.json").write_text(json.dumps(TIMINGS, indent=1))
    print(f"\nfresh venv timings (s): {TIMINGS}")


def run_in(fresh, *argv, timeout=300) -> subprocess.CompletedProcess:
    venv, work, env = fresh
    return subprocess.run(list(argv), cwd=work, env=env, capture_output=True, text=True,
                          timeout=timeout)
