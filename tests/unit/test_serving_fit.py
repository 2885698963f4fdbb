"""One server for a class (issue 34, item 2): model runs queue for a bounded number of slots,
torch threads are capped per process, every cache is bounded, the served app has no file
watcher and releases disconnected sessions. Counts and settings, never wall-clock limits."""

from __future__ import annotations

import ast
import os
import sys
import threading
import tomllib
from pathlib import Path

import pytest
import torch

from attention_lab import cli
from attention_lab.ui import runs
from attention_lab.ui.runs import ModelSlots, TraceRequest

ROOT = Path(__file__).resolve().parents[2]


def run_at_once(slots: ModelSlots, n: int) -> tuple[int, int, bool]:
    """n threads each hold a slot until released: (most inside at once, finished, whether
    busy() said so while the slots were full)."""
    inside, most, done = [0], [0], [0]
    lock, release = threading.Lock(), threading.Event()
    full = threading.Event()

    def work():
        with slots.hold():
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                if inside[0] == slots.size:
                    full.set()
            release.wait(30)
            with lock:
                inside[0] -= 1
                done[0] += 1

    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads:
        t.start()
    assert full.wait(30)
    busy = slots.busy()
    with lock:  # the others are waiting for a slot, not inside
        assert inside[0] == slots.size
    release.set()
    for t in threads:
        t.join(30)
    return most[0], done[0], busy


@pytest.mark.parametrize("size", [1, 2, 3])
def test_slots_bound_how_many_runs_at_once(size):
    slots = ModelSlots(size)
    most, done, busy = run_at_once(slots, 8)
    assert (most, done, busy) == (size, 8, True)
    assert not slots.busy()  # every slot given back


def test_a_run_inside_a_run_does_not_wait_for_itself():
    slots = ModelSlots(1)
    finished = threading.Event()

    def nested():
        with slots.hold(), slots.hold():  # e.g. an analysis that traces
            finished.set()

    t = threading.Thread(target=nested)
    t.start()
    t.join(30)
    assert finished.is_set() and not slots.busy()


def test_a_slot_is_given_back_when_the_run_fails():
    slots = ModelSlots(1)
    with pytest.raises(ValueError), slots.hold():
        raise ValueError("the model failed")
    assert not slots.busy()
    with slots.hold():  # and the next run gets it
        assert slots.busy()


class FakeModel:
    def __init__(self):
        self.busy_while_tracing: list[bool] = []

    def trace(self, text, target=None, **options):
        self.busy_while_tracing.append(runs.SLOTS.busy())
        return text


def test_a_traced_run_holds_one_of_the_servers_slots(monkeypatch):
    model = FakeModel()
    monkeypatch.setattr(runs, "SLOTS", ModelSlots(1))
    monkeypatch.setattr(runs, "get_model", lambda name, device: model)
    runs.get_trace.clear()
    try:
        assert runs.get_trace(TraceRequest("fake", "cpu", "held")) == "held"
    finally:
        runs.get_trace.clear()
    assert model.busy_while_tracing == [True] and not runs.SLOTS.busy()


def test_slots_and_threads_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MODEL_RUNS", "3")
    assert runs._env_int("ATTENTION_LAB_MODEL_RUNS", 1) == 3
    for bad in ("0", "-2", "many", ""):
        monkeypatch.setenv("ATTENTION_LAB_MODEL_RUNS", bad)
        assert runs._env_int("ATTENTION_LAB_MODEL_RUNS", 1) == 1
    # the defaults fit the cores: runs x threads <= cores - 1 (at least one of each)
    assert runs.MODEL_RUNS >= 1 and runs.TORCH_THREADS >= 1
    if "ATTENTION_LAB_MODEL_RUNS" not in os.environ and runs.CORES > 1:
        assert runs.MODEL_RUNS * runs.TORCH_THREADS <= runs.CORES - 1


def test_torch_threads_are_capped_outside_apptest():
    before = torch.get_num_threads()
    try:
        assert runs.cap_torch_threads(1) == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


CACHE_DECORATORS = {"cache_data", "cache_resource"}


def unbounded_caches(path: Path) -> list[str]:
    """`@st.cache_data` / `@st.cache_resource` decorators without max_entries or ttl."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in node.decorator_list:
            call = dec if isinstance(dec, ast.Call) else None
            target = call.func if call else dec
            if isinstance(target, ast.Attribute) and target.attr in CACHE_DECORATORS:
                keywords = {k.arg for k in call.keywords} if call else set()
                if not keywords & {"max_entries", "ttl"}:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    return found


def test_every_cache_of_the_app_is_bounded():
    files = [ROOT / "app.py", *(ROOT / "pages").glob("*.py"),
             *(ROOT / "attention_lab").rglob("*.py")]
    assert not [f for path in files for f in unbounded_caches(path)]


def test_the_served_app_has_no_file_watcher_and_releases_left_sessions():
    from streamlit import config

    settings = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert settings["fileWatcherType"] == "none"
    assert 0 < settings["disconnectedSessionTTL"] <= 120  # Streamlit's default is 120 s
    for name in ("fileWatcherType", "disconnectedSessionTTL"):  # names this Streamlit knows
        assert f"server.{name}" in config._config_options_template


def test_attention_lab_app_runs_without_the_file_watcher(monkeypatch):
    seen = {}
    monkeypatch.setattr(os, "chdir", lambda path: None)
    monkeypatch.setattr(os, "execve", lambda exe, argv, env: seen.update(argv=argv))
    cli.main(["app", "--port", "8613"])
    argv = seen["argv"]
    assert argv[:5] == [sys.executable, "-m", "attention_lab.server", "run", "app.py"]
    assert argv[argv.index("--server.fileWatcherType") + 1] == "none"
    makefile = (ROOT / "Makefile").read_text()
    run = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "--server.fileWatcherType none" in run
