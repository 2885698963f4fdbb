"""Test-wide settings: never touch the network, keep torch to the machine's cores."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")

import torch  # noqa: E402

# One thread: the models under test are small, and browser tests run a server process
# beside pytest on a 2-core machine; more threads only contend.
torch.set_num_threads(1)


# ---- test tiers -------------------------------------------------------------------------
# `make test` runs everything; `make test-fast` deselects the markers below (registered in
# pyproject.toml). browser and slow are written on the tests; app is given here to every
# test that drives the Streamlit app through AppTest, directly or through a helper such as
# tests.test_app.open_app, so a new page test lands in the right tier by itself.
import importlib  # noqa: E402

import pytest  # noqa: E402


def _drives_the_app(func, depth: int = 2) -> bool:
    """Whether func's code names AppTest, or calls a function (depth levels down) that does:
    a module-level helper, or one imported inside the test (`from tests.test_app import ...`)."""
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    if "AppTest" in code.co_names:
        return True
    if depth == 0:
        return False
    scopes = [getattr(func, "__globals__", {})]
    scopes += [vars(importlib.import_module(n)) for n in code.co_names if n.startswith("tests.")]
    return any(_drives_the_app(scope.get(name), depth - 1)
               for scope in scopes for name in code.co_names)


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        defs = fixtures.name2fixturedefs.values() if fixtures else []
        funcs = [getattr(item, "function", None), *(d[-1].func for d in defs if d)]
        if any(_drives_the_app(f) for f in funcs):  # the test or one of its fixtures
            item.add_marker(pytest.mark.app)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """The session's cache of tiny random HF models (tests/tiny_models.py)."""
    from tests.tiny_models import TinyModels

    return TinyModels(tmp_path_factory.mktemp)


@pytest.fixture(scope="module")
def chromium_browser():
    """Debian's chromium through Playwright (tests/browser_support.py), one per test module."""
    from playwright.sync_api import sync_playwright

    from tests.browser_support import launch_chromium

    with sync_playwright() as pw:
        b = launch_chromium(pw)
        yield b
        b.close()


@pytest.fixture(autouse=True)
def _no_policy_leaks():
    """The app's sidebar sets the process's default deployment policy from the environment;
    a test that changes the environment must not leave its policy to the tests after it."""
    yield
    from viz_core.loading.policy import set_default_policy

    set_default_policy(None)
