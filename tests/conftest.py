"""Test-wide settings (never touch the network, keep torch to the machine's cores), the tier
markers and the fixtures shared across files. Tiers are folders: see tests/README.md."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

# The wheel and the fresh venv of test_package (unit and browser halves share them).
from tests.support.package_env import dist, fresh  # noqa: E402, F401

# One thread: the models under test are small, and browser tests run a server process
# beside pytest on a 2-core machine; more threads only contend.
torch.set_num_threads(1)

# ---- tiers: a test's marker is its folder (registered in pyproject.toml) -------------------
TIERS = ("unit", "app", "browser")
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.path)).resolve().relative_to(HERE).parts
        if len(parts) > 1 and parts[0] in TIERS:
            item.add_marker(getattr(pytest.mark, parts[0]))


# ---- shared fixtures -----------------------------------------------------------------------
@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """The session's cache of tiny random HF models (tests/support/tiny_models.py)."""
    from tests.support.tiny_models import TinyModels

    return TinyModels(tmp_path_factory.mktemp)


@pytest.fixture(scope="module")
def chromium_browser():
    """Debian's chromium through Playwright (tests/support/browser_support.py), one per
    test module."""
    from playwright.sync_api import sync_playwright

    from tests.support.browser_support import launch_chromium

    with sync_playwright() as pw:
        b = launch_chromium(pw)
        yield b
        b.close()


@pytest.fixture(scope="session")
def atlas_dir(tmp_path_factory):
    """A finished small atlas of the shipped `lm` (the Head atlas page's tests)."""
    from viz_core.atlas import AtlasConfig, run_atlas

    d = tmp_path_factory.mktemp("atlas_page")
    (d / "lines.txt").write_text("the red cat\ni do not\nthe dog sees the cat\n")
    out = d / "run"
    run_atlas(AtlasConfig(model="lm", data=str(d / "lines.txt"), out=str(out), engine="local",
                          probe=4, shard_size=4, threads=1))
    return out


@pytest.fixture(autouse=True)
def _no_policy_leaks():
    """The app's sidebar sets the process's default deployment policy from the environment;
    a test that changes the environment must not leave its policy to the tests after it."""
    yield
    from viz_core.loading.policy import set_default_policy

    set_default_policy(None)
