"""Test-wide settings (never touch the network, keep torch to the machine's cores), the tier
markers and the fixtures shared across files. Tiers are folders: see tests/README.md."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
# The Head atlas page lists the runs under its home (ATTENTION_LAB_ATLAS_DIR, else
# ~/.cache/attention-lab/atlas): the suite's own, empty one, so a developer's runs there (or
# a script's) never show up in a test's page (their paths read as English in the zh sweep).
if "ATTENTION_LAB_ATLAS_DIR" not in os.environ:  # (xdist's workers inherit the controller's)
    import atexit
    import shutil
    import tempfile

    os.environ["ATTENTION_LAB_ATLAS_DIR"] = tempfile.mkdtemp(prefix="attention-lab-atlas-")
    atexit.register(shutil.rmtree, os.environ["ATTENTION_LAB_ATLAS_DIR"], ignore_errors=True)

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


def pytest_itemcollected(item):
    parts = Path(str(item.path)).resolve().relative_to(HERE).parts
    if len(parts) > 1 and parts[0] in TIERS:
        item.add_marker(getattr(pytest.mark, parts[0]))


# ---- pytest-xdist (`make test`: -n auto) ------------------------------------------------------
# A work unit is a file, so its module fixtures are built once, except that the files in
# SPREAD (independent, long tests) are dealt out test by test; the browser tier is two units,
# each run in order on one worker with its own server and Chromium (BROWSER_2: the page
# sweeps and the multi-server tests, about half the tier's time), as the tier waits far more
# than it computes (alone: 10 min 31 s for 5 min 24 s of CPU); both halves of test_package are
# one unit (one wheel and one fresh venv, session fixtures); the files that start Ray
# clusters are one unit, so no two run at once. Units go out longest first: FIRST, then
# collection order.
SPREAD = {"tests/app/test_hostile.py"}
RAY = {"tests/unit/test_atlas.py", "tests/unit/test_atlas_ray.py",
       "tests/unit/test_atlas_cluster.py"}
BROWSER_2 = {"tests/browser/test_overlaps_browser.py", "tests/browser/test_heads_matter_browser.py",
             "tests/browser/test_bench.py", "tests/browser/test_failover.py",
             "tests/browser/test_load_browser.py"}
FIRST = ("browser", "browser-2", "package")


def work_unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path.endswith("/test_package.py"):
        return "package"
    if path in BROWSER_2:
        return "browser-2"
    if path.startswith("tests/browser/"):
        return "browser"
    if path in RAY:
        return "ray"
    return nodeid if path in SPREAD else path


def pytest_collection_modifyitems(config, items):
    if config.getoption("numprocesses", None) or os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {unit: i for i, unit in enumerate(FIRST)}
        items.sort(key=lambda item: rank.get(work_unit(item.nodeid), len(rank)))  # stable


# The browser units are the suite's critical path: a worker drives a server and Chromium, whose
# renderer is one thread, while the other workers' tests (AppTests, Ray, the fresh venv) would
# take the cores from it. So a worker lowers its own priority (nice) before its first test
# outside the browser units: the browser units' processes run first and the rest fill the
# cores it leaves idle (a fresh clone on 28 Nov: 21 min 52 s against 23 min 24 s before,
# with the hostile sweep's trims of the same commit).
# ATTENTION_LAB_TEST_NICE=0 turns this off.
NICE = int(os.environ.get("ATTENTION_LAB_TEST_NICE", "10"))
_niced: list[bool] = []


def pytest_runtest_setup(item):
    if (NICE > 0 and not _niced and os.environ.get("PYTEST_XDIST_WORKER")
            and not work_unit(item.nodeid).startswith("browser")):
        os.nice(NICE)  # (only ever raised: an unprivileged process cannot lower it back)
        _niced.append(True)


def pytest_xdist_make_scheduler(config, log):
    """xdist's load-scope scheduler with the units above (its own `loadgroup` cannot group
    under pytest 9: it renames nodeids through an attribute pytest 9 no longer reads)."""
    if config.getoption("dist") not in ("load", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # keep the order above, not the largest count first
    return TierScheduling(config, log)


# ---- AppTest: one component scan per process, as a server does -----------------------------
# Streamlit's AppTest builds its custom-component registry once per AppTest: it reads the
# metadata of every installed distribution (about 480 in .venv), 0.85 s of a fresh AppTest's
# 1.0 s first run here, and the suite makes hundreds of fresh AppTests. A server builds it once
# per process for all its sessions; so do the suite's AppTests. The registry is Streamlit's
# own, built by its own call: only who holds it changes.
def _share_component_registry() -> None:
    from streamlit.components.v2.component_manager import BidiComponentManager
    from streamlit.testing.v1.app_test import AppTest

    init, shared = AppTest.__init__, []

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        # the attribute AppTest._run reads; fails loudly if a Streamlit upgrade renames it
        assert self._bidi_component_manager is None, "AppTest's registry attribute changed"
        if not shared:
            registry = BidiComponentManager()
            registry.discover_and_register_components(start_file_watching=False)
            shared.append(registry)
        self._bidi_component_manager = shared[0]

    AppTest.__init__ = __init__


_share_component_registry()


# ---- shared fixtures -----------------------------------------------------------------------
@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """The session's cache of tiny random HF models (tests/support/tiny_models.py)."""
    from tests.support.tiny_models import TinyModels

    return TinyModels(tmp_path_factory.mktemp)


@pytest.fixture(scope="module")
def chromium_browser():
    """Debian's chromium through Playwright (tests/support/browser_support.py), one per
    test module (test_load_browser drives its own, through the async API)."""
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
