"""Attention Lab as a package: `python -m build` makes a wheel holding every module of
viz_core and attention_lab, the app's files and the shipped checkpoints, and nothing generic at
the top of site-packages; installed into a FRESH virtual environment (the repository not on its path; the
wheel's requirements and nothing else, linked from .venv, and pip finding every one met), it
works from any folder: the
`attention-lab` command's trace equals the library's, `models` lists the shipped models, the
app renders in Chromium, and the quickstart notebook runs on that environment's kernel.

The slow tests share one wheel and one fresh environment (tests/support/package_env.py); the
time each took is written to tests/artifacts/fresh_venv.json.
"""

from __future__ import annotations

import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.support.package_env import TIMINGS, run_in

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("viz_core", "attention_lab")
APP_FILES = ["attention_lab/app/app.py", "attention_lab/app/.streamlit/config.toml",
             "attention_lab/app/assets/icon.png"]


def modules_on_disk() -> list[str]:
    """Every .py file of viz_core and attention_lab, as a path inside the wheel."""
    return sorted(str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
                  if "__pycache__" not in p.parts)


# ---- fast: the layout find_packages relies on ---------------------------------------------
def test_every_folder_with_modules_is_a_package():
    """setup.py finds sub-packages by their __init__.py: a folder without one would be left
    out of the wheel."""
    missing = sorted({str(Path(m).parent) for m in modules_on_disk()
                      if not (ROOT / Path(m).parent / "__init__.py").is_file()})
    assert not missing, f"add an __init__.py to {missing}"


def test_dependencies_come_from_requirements_txt():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert meta["project"]["dynamic"] == ["dependencies"]
    assert meta["tool"]["setuptools"]["dynamic"]["dependencies"]["file"] == ["requirements.txt"]
    assert meta["project"]["scripts"]["attention-lab"] == "attention_lab.cli:main"
    dev = {line.split("==")[0]: line.strip() for line in
           (ROOT / "requirements-dev.txt").read_text(encoding="utf-8").splitlines()
           if "==" in line and not line.startswith("#")}
    for pin in meta["project"]["optional-dependencies"]["notebook"]:
        assert dev[pin.split("==")[0]] == pin  # the extra and the test tools agree


# ---- slow: a built wheel -----------------------------------------------------------------


@pytest.mark.slow
def test_wheel_holds_every_module_and_nothing_generic(dist):
    wheel, sdist = dist
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [m for m in modules_on_disk() if m not in names]
    assert not missing, missing
    pages = sorted(p.name for p in (ROOT / "pages").glob("*.py"))
    assert pages and all(f"attention_lab/app/pages/{p}" in names for p in pages)
    assert all(f in names for f in APP_FILES)
    from viz_core.loading.shipped import CHECKPOINTS, shipped_models

    for model in shipped_models():
        for f in (CHECKPOINTS / model).iterdir():
            assert f"viz_core/checkpoints/{model}/{f.name}" in names
    assert "viz_core/locale/zh_CN/LC_MESSAGES/attention_lab.po" in names  # the zh interface
    tops = {n.split("/")[0] for n in names}
    assert tops == {"viz_core", "attention_lab", wheel.name.split("-py3")[0] + ".dist-info"}
    assert not any(n.startswith("attention_lab/app/") and n.endswith(".py")
                   and "/pages/" not in n and not n.endswith("/app.py") for n in names)
    entry = zipfile.ZipFile(wheel).read(
        f"{wheel.name.split('-py3')[0]}.dist-info/entry_points.txt").decode()
    assert "attention-lab = attention_lab.cli:main" in entry
    meta = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/METADATA")
    pinned = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    for req in pinned:
        assert f"Requires-Dist: {req}" in meta.decode(), req
    with tarfile.open(sdist) as tar:
        assert any(n.endswith("/requirements.txt") for n in tar.getnames())


# ---- slow: a fresh virtual environment ---------------------------------------------------


@pytest.mark.slow
def test_fresh_venv_imports_the_installed_package(fresh):
    venv, _, _ = fresh
    proc = run_in(fresh, str(venv / "bin" / "python"), "-c",
                  "import viz_core, attention_lab.cli, sys; print(viz_core.__file__); "
                  "print(viz_core.shipped_models()); print([p for p in sys.path if 'work/main' "
                  "in p])")
    assert proc.returncode == 0, proc.stderr
    path, models, repo_paths = proc.stdout.splitlines()
    assert Path(path).is_relative_to(venv) and "site-packages" in path
    assert "en-fr" in models and repo_paths == "[]"
    site = Path(path).parents[1]
    assert not (site / "ui").exists() and not (site / "pages").exists()
    # the wheel's requirements and nothing more: every installed distribution's requirements
    # are met, and what only the tests use is not there
    proc = run_in(fresh, str(venv / "bin" / "python"), "-m", "pip", "check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run_in(fresh, str(venv / "bin" / "python"), "-c",
                  "import importlib.util as u; print([m for m in ('pytest', 'playwright', "
                  "'transformer_lens', 'hypothesis', 'xdist') if u.find_spec(m)])")
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


@pytest.mark.slow
def test_fresh_trace_equals_the_repositorys(fresh):
    venv, work, _ = fresh
    t0 = time.monotonic()
    proc = run_in(fresh, str(venv / "bin" / "attention-lab"), "trace", "the red car",
                  "--model", "en-fr", "--out", "x.npz")
    TIMINGS["cli_trace_s"] = round(time.monotonic() - t0, 1)
    assert proc.returncode == 0, proc.stderr
    import viz_core as vc
    from viz_core.capture.export import trace_arrays

    ref = trace_arrays(vc.load("en-fr").trace("the red car"))
    got = np.load(work / "x.npz")
    assert sorted(got.files) == sorted(ref)
    for key, value in ref.items():
        # the same checkpoint and torch build in two processes (their thread counts may
        # differ): float32 rounding at most
        np.testing.assert_allclose(got[key], value, rtol=0, atol=1e-6, err_msg=key)
        if key.endswith("/mask"):
            np.testing.assert_array_equal(got[key], value)


@pytest.mark.slow
def test_fresh_models_lists_the_shipped_models(fresh):
    venv, _, _ = fresh
    proc = run_in(fresh, str(venv / "bin" / "attention-lab"), "models")
    assert proc.returncode == 0, proc.stderr
    from viz_core import shipped_models

    for name in shipped_models():
        assert f"  {name} " in proc.stdout
    assert "minilm" in proc.stdout


@pytest.mark.slow
def test_fresh_notebook_runs_on_the_fresh_kernel(fresh):
    from tests.support.notebook import missing_figures, run_notebook

    venv, work, _ = fresh
    nb_dir = work / "notebook"
    nb_dir.mkdir()
    t0 = time.monotonic()
    # the kernel is the fresh venv's python, without the repository on its path (the
    # notebook's one run in the suite: the wheel holds this clone's code)
    nb = run_notebook(str(venv / "bin" / "python"), nb_dir,
                      env={"VIRTUAL_ENV": str(venv)})
    TIMINGS["notebook_s"] = round(time.monotonic() - t0, 1)
    assert not missing_figures(nb), missing_figures(nb)
    assert len([c for c in nb.cells if "figure" in c.metadata.get("tags", [])]) >= 7
    arrays = np.load(nb_dir / "trace.npz")
    assert arrays["decoder.1.cross/pattern"].ndim == 3
    assert (nb_dir / "grid.html").stat().st_size > 0
