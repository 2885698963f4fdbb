"""attention_lab.server's garbage policy (issue 34): Streamlit's full collection after every
script run (0.25 s of CPU with torch and transformers loaded) is off, and a run's end collects
at most once every ATTENTION_LAB_GC_SECONDS for the whole process."""

from __future__ import annotations

import gc
import weakref

from streamlit import config
from streamlit.runtime.scriptrunner.script_runner import ScriptRunner

from attention_lab import server


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Node:
    """An object in a reference cycle: only a collection frees it."""

    def __init__(self):
        self.me = self


def test_a_full_collection_at_most_once_per_interval():
    clock = Clock()
    policy = server.GarbagePolicy(30.0, clock)
    cycle = Node()
    alive = weakref.ref(cycle)
    del cycle
    gc.disable()  # only the policy may collect here
    try:
        clock.now += 29.0
        assert not policy.after_run() and alive() is not None  # too soon: nothing collected
        clock.now += 1.0
        assert policy.after_run() and alive() is None  # due: the cycle is freed
        assert not policy.after_run()  # the next run, at once: none
        clock.now += 30.0
        assert policy.after_run() and policy.collections == 2
    finally:
        gc.enable()


def test_interval_zero_collects_after_every_run():
    policy = server.GarbagePolicy(0.0, Clock())
    assert all(policy.after_run() for _ in range(3)) and policy.collections == 3


def test_install_turns_streamlits_collection_off_and_wraps_the_run_end_once(monkeypatch):
    ends, collected = [], []
    monkeypatch.setattr(ScriptRunner, "_on_script_finished",
                        lambda self, *a, **k: ends.append(a))
    monkeypatch.setattr(server, "collect_garbage", lambda: collected.append(1))
    before = config.get_option("runner.postScriptGC")
    config.set_option("runner.postScriptGC", True)
    try:
        server.install()
        server.install()
        assert config.get_option("runner.postScriptGC") is False
        ScriptRunner._on_script_finished(None, "ctx")
        assert ends == [("ctx",)] and collected == [1]  # Streamlit's end, then ours, once
    finally:
        config.set_option("runner.postScriptGC", before)


def test_the_interval_comes_from_the_environment(monkeypatch):
    for value, want in (("5", 5.0), ("0", 0.0), ("-3", 0.0), ("soon", 30.0)):
        monkeypatch.setenv("ATTENTION_LAB_GC_SECONDS", value)
        assert server._gc_seconds() == want
    monkeypatch.delenv("ATTENTION_LAB_GC_SECONDS")
    assert server._gc_seconds() == 30.0


def test_streamlits_run_end_collects_only_under_the_option_we_turn_off():
    """The option is what gates Streamlit's collection (a Streamlit upgrade that collects
    otherwise fails here). AppTest's runner never collects, so the served app's CPU per
    interaction is measured by bench_latency --cpu against a real server instead."""
    import inspect

    original = ScriptRunner._on_script_finished
    while getattr(original, server._GC_MARK, False):  # ours wraps Streamlit's
        original = original.__closure__[0].cell_contents
    source = inspect.getsource(original)
    assert source.count("gc.collect(") == 1
    gate = source.index('config.get_option("runner.postScriptGC")')
    assert gate < source.index("gc.collect(")


def test_the_shipped_config_turns_streamlits_collection_off():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    settings = tomllib.loads((root / ".streamlit" / "config.toml").read_text())["runner"]
    assert settings["postScriptGC"] is False
    assert "runner.postScriptGC" in config._config_options_template  # a name it knows


def test_the_server_starts_without_a_config_warning_and_the_option_holds(tmp_path):
    """The option was set before Streamlit's command line parsed the config, so the server
    read it twice and warned at every start: "An update to the [server] config option
    section was detected ... please restart streamlit". Now it is set after each parse. Run
    where no .streamlit/config.toml is (the option's default is on): it still ends off."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("from attention_lab import server; server.install()\n"
            "from streamlit import config\n"
            "config.get_config_options(force_reparse=True,\n"
            "                          options_from_flags={'server.port': 8765})\n"
            "print(config.get_option('runner.postScriptGC'))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env={**__import__("os").environ,
                                                      "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
    assert "An update to the [server] config option section" not in out.stderr + out.stdout
