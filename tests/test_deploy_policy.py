"""Models a user can point at: the deployment policy, hostile checkpoints, limits.

- ATTENTION_LAB_* settings (or .streamlit/secrets) restrict names and sizes, checked before
  anything is read or allocated;
- corrupt or hostile checkpoints give a clear message in the app, which keeps working;
- Hugging Face models never run remote code; pickles are never unpickled;
- limits (beam size, max length, URL values) are clamped or refused with a message.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

import viz_core as vc
from tests.hf_tiny import make_tiny_bert
from tests.test_app import APP
from viz_core.backends import native
from viz_core.loading import hf as hf_load
from viz_core.loading.policy import Policy, safetensors_parameters
from viz_core.training.toy import save_toy

ENV = ("ATTENTION_LAB_ALLOWED_MODELS", "ATTENTION_LAB_ALLOW_LOCAL_PATHS",
       "ATTENTION_LAB_ALLOW_HUB", "ATTENTION_LAB_MAX_MODEL_MB", "ATTENTION_LAB_MAX_PARAMETERS")
SHIPPED = vc.shipped_models()[0]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in ENV:
        monkeypatch.delenv(key, raising=False)
    from viz_core.loading.policy import set_default_policy

    set_default_policy(None)
    yield
    set_default_policy(None)


@pytest.fixture
def no_loading(monkeypatch):
    """Fail if anything past the policy check would read a model."""
    def boom(*args, **kwargs):
        raise AssertionError("the model was read although the policy refuses it")

    monkeypatch.setattr(native.NativeModel, "from_dir", classmethod(boom))
    monkeypatch.setattr(hf_load, "load_hf", boom)


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    return save_toy(tmp_path_factory.mktemp("ckpt") / "toy", seed=3)


# ---- parsing ----------------------------------------------------------------------------
def test_policy_from_env_and_overrides():
    p = Policy.from_env({"ATTENTION_LAB_ALLOWED_MODELS": " dates, minilm ,,/srv/m ",
                         "ATTENTION_LAB_ALLOW_LOCAL_PATHS": "0", "ATTENTION_LAB_ALLOW_HUB": "no",
                         "ATTENTION_LAB_MAX_MODEL_MB": "500", "ATTENTION_LAB_MAX_PARAMETERS":
                         "2e8", "UNRELATED": "x"})
    assert p == Policy(("dates", "minilm", "/srv/m"), False, False, 500.0, 2e8)
    assert p.restricted and not Policy().restricted
    q = Policy.from_env({"ATTENTION_LAB_ALLOW_HUB": "0"}, overrides={"allow_hub": True,
                                                                     "max_model_mb": 10})
    assert q.allow_hub and q.max_model_mb == 10
    for bad in ({"ATTENTION_LAB_ALLOW_HUB": "maybe"}, {"ATTENTION_LAB_MAX_MODEL_MB": "lots"},
                {"ATTENTION_LAB_MAX_PARAMETERS": "-5"}):
        with pytest.raises(vc.ModelLoadError, match="ATTENTION_LAB_"):
            Policy.from_env(bad)


# ---- names: refused before anything is read ------------------------------------------------
def test_allow_list_refuses_before_reading(monkeypatch, toy, no_loading):
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_MODELS", "minilm")
    for name in (SHIPPED, str(toy), "bert-base-uncased", "/etc/passwd"):
        with pytest.raises(vc.ModelLoadError, match="not one of the models"):
            vc.load(name)


def test_allow_list_admits_listed_names_and_paths(monkeypatch, toy):
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_MODELS", f"{SHIPPED},{toy}")
    monkeypatch.setenv("ATTENTION_LAB_ALLOW_HUB", "0")
    assert vc.load(SHIPPED).name == SHIPPED
    assert vc.load(str(toy / ".." / "toy")).kind == "encoder-decoder"  # same folder, resolved


def test_local_paths_and_hub_switches(monkeypatch, toy, no_loading):
    monkeypatch.setenv("ATTENTION_LAB_ALLOW_LOCAL_PATHS", "0")
    with pytest.raises(vc.ModelLoadError, match="folders on the server"):
        vc.load(str(toy))
    with pytest.raises(vc.ModelLoadError, match="folders on the server"):
        vc.load("../../etc")
    monkeypatch.setenv("ATTENTION_LAB_ALLOW_LOCAL_PATHS", "1")
    monkeypatch.setenv("ATTENTION_LAB_ALLOW_HUB", "0")
    with pytest.raises(vc.ModelLoadError, match="Hugging Face Hub"):
        vc.load("bert-base-uncased")
    with pytest.raises(vc.ModelLoadError, match="Hugging Face Hub"):
        vc.load("facebook/bart-large")


def test_builtin_models_pass_the_switches(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_ALLOW_LOCAL_PATHS", "0")
    monkeypatch.setenv("ATTENTION_LAB_ALLOW_HUB", "0")
    assert vc.load(SHIPPED).name == SHIPPED


# ---- sizes: refused before allocation ------------------------------------------------------
def test_size_caps_before_allocation(monkeypatch, toy, tmp_path, no_loading):
    monkeypatch.setenv("ATTENTION_LAB_MAX_MODEL_MB", "0.01")  # 10 kB
    with pytest.raises(vc.ModelLoadError, match="MB of weights"):
        vc.load(str(toy))
    with pytest.raises(vc.ModelLoadError, match="MB of weights"):
        vc.load("minilm")
    monkeypatch.delenv("ATTENTION_LAB_MAX_MODEL_MB")
    monkeypatch.setenv("ATTENTION_LAB_MAX_PARAMETERS", "1000")
    with pytest.raises(vc.ModelLoadError, match="parameters"):
        vc.load(str(toy))
    bert = make_tiny_bert(tmp_path / "bert")
    with pytest.raises(vc.ModelLoadError, match="parameters"):
        vc.load(str(bert))


def test_safetensors_header_count_matches_the_model(tmp_path):
    bert = make_tiny_bert(tmp_path / "bert")
    n = safetensors_parameters(bert / "model.safetensors")
    model = vc.load(str(bert))
    assert n == model.n_parameters


def test_caps_admit_models_under_them(monkeypatch, toy):
    monkeypatch.setenv("ATTENTION_LAB_MAX_MODEL_MB", "200")
    monkeypatch.setenv("ATTENTION_LAB_MAX_PARAMETERS", "100e6")
    assert vc.load(str(toy)).trace("the cat").blocks
    assert vc.load("minilm").trace("the cat").blocks


# ---- hostile checkpoints -----------------------------------------------------------------
class Boom:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def hostile_checkpoints(root: Path) -> dict[str, tuple[Path, str]]:
    """name -> (folder, a word the message must contain)."""
    out = {}

    def fresh(name):
        return save_toy(root / name, seed=4)

    p = fresh("truncated")
    data = (p / "model.safetensors").read_bytes()
    (p / "model.safetensors").write_bytes(data[: len(data) // 3])
    out["truncated"] = (p, "safetensors")
    p = fresh("shapes")
    cfg = json.loads((p / "config.json").read_text())
    (p / "config.json").write_text(json.dumps({**cfg, "d_ff": cfg["d_ff"] * 2}))
    out["shapes"] = (p, "shape")
    p = fresh("novocab")
    (p / "vocab.json").unlink()
    out["novocab"] = (p, "config")  # no longer ours: read as a HF folder, which it is not
    p = fresh("noconfig")
    (p / "config.json").unlink()
    out["noconfig"] = (p, "config")
    p = fresh("absurd")
    (p / "config.json").write_text(json.dumps({**cfg, "d_model": 1 << 20, "d_ff": 1 << 24,
                                               "n_layers": 10_000}))
    out["absurd"] = (p, "parameters")
    p = fresh("hugevocab")
    (p / "config.json").write_text(json.dumps({**cfg, "src_vocab_size": 10**12}))
    out["hugevocab"] = (p, "vocab_size")
    p = fresh("pickle")
    (p / "model.safetensors").write_bytes(pickle.dumps({"w": Boom(root / "UNPICKLED")}))
    out["pickle"] = (p, "safetensors")
    p = fresh("torchsave")
    torch.save({"w": Boom(root / "UNPICKLED")}, p / "model.safetensors")
    out["torchsave"] = (p, "safetensors")
    p = fresh("badvocab")
    (p / "vocab.json").write_text(json.dumps({"source": {"tokens": [1, 2]}}))
    out["badvocab"] = (p, "vocab")
    p = root / "hf_pickle_only"  # a HF folder whose weights are only a pickle
    bert = make_tiny_bert(p)
    (bert / "model.safetensors").unlink()
    torch.save({"w": Boom(root / "UNPICKLED")}, bert / "pytorch_model.bin")
    out["hf_pickle_only"] = (bert, "safetensors")
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    return root, hostile_checkpoints(root)


def test_hostile_checkpoints_raise_clear_errors(hostile):
    root, cases = hostile
    for name, (path, word) in cases.items():
        with pytest.raises(vc.VizError) as err:
            vc.load(str(path))
        assert word.lower() in str(err.value).lower(), (name, str(err.value))
    assert not (root / "UNPICKLED").exists()


def test_remote_code_never_runs(tmp_path):
    folder = tmp_path / "remote"
    folder.mkdir()
    marker = tmp_path / "REMOTE_CODE_RAN"
    (folder / "config.json").write_text(json.dumps({
        "model_type": "evil", "architectures": ["EvilModel"],
        "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"}}))
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n"
                                    "from transformers import PretrainedConfig\n"
                                    "class EvilConfig(PretrainedConfig):\n"
                                    "    model_type = 'evil'\n")
    with pytest.raises(vc.ModelLoadError):
        vc.load(str(folder))
    assert not marker.exists()
    # and no from_pretrained call in viz_core can turn it on
    for source in Path(vc.__file__).parent.rglob("*.py"):
        text = source.read_text()
        for call in re.findall(r"from_pretrained\((.*?)\)\n", text, flags=re.S):
            assert "trust_remote_code=False" in call, (source, call)
        assert "trust_remote_code=True" not in text


def test_app_shows_hostile_checkpoints_and_keeps_working(hostile):
    root, cases = hostile
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = SHIPPED
    at.switch_page("pages/attention.py")
    at.run()
    assert not at.exception and at.get("plotly_chart")
    for name, (path, _) in cases.items():
        at.selectbox(key="model_pick").set_value("Other (path or Hub id)…").run()
        at.text_input(key="model_custom").set_value(str(path)).run()
        assert not at.exception, (name, [e.message for e in at.exception])
        assert at.error and at.error[0].value.strip(), name
        assert not any("Something went wrong" in e.value for e in at.error), name
        at.selectbox(key="model_pick").set_value(SHIPPED).run()  # the app still works
        assert not at.exception and not at.error and at.get("plotly_chart"), name
    assert not (root / "UNPICKLED").exists()


# ---- the policy in the app ------------------------------------------------------------------
def open_app(page="attention", secrets=None, **params):
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in (secrets or {}).items():
        at.secrets[key] = value
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(f"pages/{page}.py")
    return at.run()


def test_app_allow_list_limits_the_model_box(monkeypatch, toy):
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_MODELS", SHIPPED)
    at = open_app(model=str(toy))
    assert not at.exception
    options = at.selectbox(key="model_pick").options  # as shown: "name — description"
    assert len(options) == 1 and options[0].startswith(SHIPPED)
    assert any("does not allow" in i.value for i in at.info)
    assert at.get("plotly_chart")  # the allowed model is shown instead


def test_app_secrets_switch_off_local_paths(toy):
    at = open_app(secrets={"attention_lab": {"allow_local_paths": False, "allow_hub": False}},
                  model=str(toy))
    assert not at.exception
    assert not any(o.startswith("Other") for o in at.selectbox(key="model_pick").options)
    assert any("does not allow" in i.value for i in at.info)


def test_app_size_cap_message(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MAX_MODEL_MB", "1")
    at = open_app(model="minilm")
    assert not at.exception
    assert any("MB" in e.value and "allows at most" in e.value for e in at.error)


# ---- limits ----------------------------------------------------------------------------------
def test_beam_limits_are_clamped_with_a_notice():
    gen = next((m for m in vc.shipped_models() if vc.load(m).can_generate), None)
    if gen is None:
        pytest.skip("no shipped generating model")
    at = open_app("beam", model=gen, text="9 may 2018", beam="99", max_len="100000")
    assert not at.exception
    assert at.number_input(key="beam").value == 16 and at.number_input(key="max_len").value == 256
    assert sum("out of range" in i.value for i in at.info) >= 2
    model = vc.load(gen)
    for kwargs in ({"beam_size": 17}, {"max_len": 257}, {"beam_size": 0}):
        with pytest.raises(vc.InputError):
            model.beam_search("9 may 2018", **kwargs)


def test_input_tokens_are_cut_to_the_models_maximum():
    for name in [SHIPPED, "minilm"]:
        model = vc.load(name)
        trace = model.trace("word " * 5000)
        assert any("fit" in w for w in trace.warnings)
        assert len(trace.source_tokens) <= model.max_tokens


def test_compare_has_exactly_two_panes():
    at = open_app("compare", model=SHIPPED, text="9 may 2018", text_b="10 june 2019")
    assert not at.exception
    keys = [c.proto.id for c in at.get("plotly_chart")]
    assert len(keys) in (2, 3)  # left, right (+ their difference)
