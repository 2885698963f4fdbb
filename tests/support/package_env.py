"""The package's built wheel and a FRESH virtual environment with it installed, shared by
tests/unit/test_package.py and tests/browser/test_package.py: session-scoped fixtures
(registered in tests/conftest.py), so one pytest process builds each once. The time each took
is written to tests/artifacts/fresh_venv.json.

The fresh environment holds the wheel's requirements and nothing else: the distributions its
Requires-Dist names (with the notebook extra), transitively, linked from this environment
(link_requirements), so pip installs the wheel alone and finds every requirement met. Copying
them (pip unpacking torch, ray, pandas, ... from its cache) took 134-334 s of a 2-core
machine's make test; linking takes about a second. What the wheel needs and does not declare
is missing there as it would be after `pip install attention-lab`."""

from __future__ import annotations

import email.parser
import json
import os
import subprocess
import sys
import time
import zipfile
from importlib import metadata
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


def link_requirements(wheel: Path, site: Path, extras: tuple[str, ...] = ("notebook",)) -> list[str]:
    """Link into ``site`` (a fresh venv's site-packages) every distribution the wheel requires
    with ``extras``, and theirs, transitively (markers evaluated for this interpreter and the
    extras asked for), as installed in this environment: each distribution's top-level files
    (its packages, modules, .pth files and dist-info), read from its RECORD. -> the names linked.
    A requirement this environment does not meet raises, naming it."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        requires = email.parser.Parser().parsestr(zf.read(meta).decode()).get_all("Requires-Dist")
    queue = [(Requirement(r), ("", *extras)) for r in requires or ()]
    done: set[tuple[str, frozenset]] = set()
    linked: list[str] = []
    while queue:
        req, active = queue.pop()
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in active):
            continue
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in done:
            continue
        done.add(key)
        dist = metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), (str(req), dist.version)
        queue += [(Requirement(r), ("", *req.extras)) for r in dist.requires or ()]
        if key[0] in linked:
            continue
        linked.append(key[0])
        assert dist.files is not None, f"{req.name}: no RECORD to link from"
        root = Path(dist.locate_file(""))
        for top in {f.parts[0] for f in dist.files if f.parts[0] not in ("..", "__pycache__")}:
            if not (site / top).exists() and (root / top).exists():
                (site / top).symlink_to(root / top)
    return linked


@pytest.fixture(scope="session")
def fresh(dist, tmp_path_factory):
    """A new venv with the wheel and its notebook extra (its requirements linked in, pip
    installing the wheel alone with no index: it must find every requirement met); yields
    (venv, working folder outside the repository, environment)."""
    wheel, _ = dist
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = clean_env(venv)
    site = Path(subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, env=env, check=True).stdout.strip())
    TIMINGS["linked_requirements"] = len(link_requirements(wheel, site))
    # --no-index: every requirement is met by what was linked, or the install fails
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile",
           "--no-index"]
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
