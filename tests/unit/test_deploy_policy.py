"""Models a user can point at: the deployment policy, hostile checkpoints, limits.

- ATTENTION_LAB_* settings (or .streamlit/secrets) restrict names and sizes, checked before
  anything is read or allocated;
- corrupt or hostile checkpoints give a clear message in the app, which keeps working;
- Hugging Face models never run remote code; pickles are never unpickled;
- limits (beam size, max length, URL values) are clamped or refused with a message.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import viz_core as vc
from tests.support.hf_tiny import make_tiny_bert
from tests.support.hostile_checkpoints import hostile_checkpoints, weights_missing
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


def test_weights_missing_from_a_checkpoint_are_said(tmp_path):
    """transformers starts a weight the checkpoint lacks at random and loads on: the model
    says so in its notices (shown under the model picker), with the weight's name."""
    from tests.support.language import speaking
    from viz_core.loading import resilience

    folder, name = weights_missing(tmp_path)
    model = vc.load(str(folder))
    assert len(model.notices) == 1 and name in model.notices[0]
    assert "1 of its weights, which start at random" in model.notices[0]
    with speaking("zh"):
        from attention_lab.ui.errors import translated

        assert "随机值" in translated(model.notices[0])
        assert "CPU" in translated(resilience.OOM_NOTICE)
        assert "内存不足" in translated(resilience.OOM_NOTICE)
    assert vc.load("minilm").notices == []  # a whole checkpoint: nothing to say


def test_weights_that_are_not_numbers_are_said(tmp_path, tiny_models):
    """A checkpoint from a training run that diverged (NaN or infinite weights) loaded and
    drew blank maps without a word; now the model says so under the model picker (zh too),
    and patching says that its metric is not a number, not that the two inputs agree."""
    import shutil

    from safetensors.torch import load_file, save_file

    from tests.support.language import speaking
    from viz_core.training.toy import save_toy

    toy = save_toy(tmp_path / "toy", seed=4)
    bert = tmp_path / "bert"
    shutil.copytree(tiny_models.path("bert", seed=0), bert)
    for folder in (toy, bert):
        assert vc.load(str(folder)).notices == []
        weights = load_file(folder / "model.safetensors")
        name = sorted(k for k, v in weights.items() if v.dim() == 2)[1]
        weights[name][0, 0] = float("inf" if folder is toy else "nan")
        save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
        model = vc.load(str(folder))
        assert len(model.notices) == 1 and name in model.notices[0], model.notices
        assert "1 of this model's weights hold values that are not numbers" in model.notices[0]
    with speaking("zh"):
        from attention_lab.ui.errors import translated

        assert "不是数" in translated(model.notices[0])
    clean, corrupted = "the cat sat on the mat", "the dog sat on the mat"
    assert vc.load(str(save_toy(tmp_path / "fine", seed=4))).patch(clean, corrupted) is not None
    with pytest.raises(vc.InputError, match="is not a number on the clean or the corrupted"):
        vc.load(str(toy)).patch(clean, corrupted)


def test_names_the_file_system_refuses_and_folders_without_a_model(tmp_path, monkeypatch):
    """A 300-character name (longer than a file name can be) was an OSError traceback, in the
    policy's check too; a folder without config.json said transformers' "Unrecognized model
    ... Should have a `model_type` key"."""
    from viz_core.loading.policy import set_default_policy

    cases = [("a" * 300, "Cannot look up"), ("a" * 5000, "5,000 characters long"),
             (str(tmp_path), "holds no config.json")]
    for name, words in cases:
        with pytest.raises(vc.ModelLoadError, match=words):
            vc.load(name)
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_MODELS", SHIPPED)
    set_default_policy(None)
    with pytest.raises(vc.ModelLoadError, match="not one of the models"):
        vc.load("a" * 300)


def test_a_config_without_weights_here_is_sized_from_the_config(tmp_path, monkeypatch):
    """A Hub id not yet downloaded has no safetensors headers to size it: the model its
    config.json describes (built on the meta device) is what must fit, so a config with a
    feed-forward width of 10**9 is refused before transformers allocates 130 billion
    parameters."""
    from tests.support.hf_tiny import make_tiny_bert
    from viz_core.loading import hf as hf_loading

    bert = make_tiny_bert(tmp_path / "bert")
    cfg = json.loads((bert / "config.json").read_text())
    (bert / "config.json").write_text(json.dumps({**cfg, "intermediate_size": 10**9}))
    monkeypatch.setattr(hf_loading, "estimate", lambda *a, **k: None)
    with pytest.raises(vc.ModelLoadError, match="GB of free memory"):
        vc.load(str(bert), device="cpu")
    (bert / "config.json").write_text(json.dumps(cfg))
    assert vc.load(str(bert), device="cpu").trace("the cat").blocks  # sized, and it fits


@pytest.mark.parametrize("family,key,value", [
    ("albert", "num_hidden_groups", 0),  # ZeroDivisionError at the first run
    ("mistral", "sliding_window", 0),  # a size mismatch in the mask
    ("gemma2", "sliding_window", None),  # its every other layer is windowed: TypeError
    ("gemma2", "query_pre_attn_scalar", -1),  # scores / sqrt(-1): a complex number
    ("roberta", "pad_token_id", None),  # its positions count from the padding token
])
def test_hf_config_values_that_fail_at_the_first_run_are_refused_at_load(
        family, key, value, tiny_models, tmp_path):
    """Found by setting each integer of 17 families' tiny config.json to 0, -1, 10**12,
    None and "x": these loaded and then failed at the first trace ("Something went
    wrong"); now one line at load that names the field."""
    import shutil

    folder = tmp_path / family
    shutil.copytree(tiny_models.path(family, seed=0), folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, key: value}))
    with pytest.raises(vc.ModelLoadError, match=key):
        vc.load(str(folder), device="cpu")
    if family == "mistral":  # None is no window at all: a Mistral that loads and runs
        (folder / "config.json").write_text(json.dumps({**cfg, key: None}))
        assert vc.load(str(folder), device="cpu").trace("the cat sat").blocks


DELETE = object()


@pytest.mark.parametrize("family,file,key,value,word", [
    # found by setting each field of the files beside the weights to wrong values: each
    # loaded and then failed at the first trace or beam search ("Something went wrong")
    ("gpt2", "generation_config.json", "eos_token_id", "x", "eos_token_id"),  # TypeError
    ("t5", "generation_config.json", "decoder_start_token_id", -1, "decoder_start"),  # IndexError
    ("t5", "generation_config.json", "decoder_start_token_id", DELETE, "no decoder_start"),
    ("bart", "generation_config.json", "forced_eos_token_id", True, "forced_eos_token_id"),
    ("gpt2", "generation_config.json", "output_hidden_states", "x", "true or false"),
    ("gpt2", "generation_config.json", "repetition_penalty", 0, "penalty"),  # in generate()
    ("gpt2", "generation_config.json", "min_new_tokens", "x", "decoding settings"),
    ("bart", "generation_config.json", "exponential_decay_length_penalty", 1.5,
     "decoding settings"),  # fails in the beam search's logits processors
    ("gpt2", "tokenizer_config.json", "model_max_length", "x", "model_max_length"),
    ("marian", "vocab.json", "<unk>", 1.5, "the id 1.5"),  # a float id at the first unknown word
    ("marian", "vocab.json", "o", None, "vocabulary"),  # Marian reads vocab.json as it is
    ("marian", "tokenizer_config.json", "eos_token", None, "token ids None"),  # eos not found
    ("gpt2", "config.json", "embd_pdrop", float("nan"), "first forward pass"),  # RuntimeError
])
def test_tokenizer_and_generation_files_that_fail_at_the_first_run_are_refused_at_load(
        family, file, key, value, word, tiny_models, tmp_path):
    """A tokenizer or generation config the model loads with, then fails on at the first
    run, is refused at load in one line that names the file or the field."""
    import shutil

    folder = tmp_path / family
    shutil.copytree(tiny_models.path(family, seed=0), folder)
    data = json.loads((folder / file).read_text())
    if value is DELETE:
        data.pop(key)
    else:
        data[key] = value
    (folder / file).write_text(json.dumps(data))
    with pytest.raises(vc.ModelLoadError, match=word):
        vc.load(str(folder), device="cpu")


def test_a_tokenizer_that_fails_on_a_text_says_so(tiny_models, tmp_path):
    """A WordPiece tokenizer without its [UNK] token loads (every word of a plain sentence
    is in its vocabulary) and fails on the first unknown word: an InputError, not the
    tokenizer's bare Exception."""
    import shutil

    folder = tmp_path / "bert"
    shutil.copytree(tiny_models.path("bert", seed=0), folder)
    data = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**data, "unk_token": None}))
    model = vc.load(str(folder), device="cpu")
    assert model.trace("the cat sat").blocks
    with pytest.raises(vc.InputError, match="tokenizer cannot read the text"):
        model.trace("the 猫 sat")


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


# ---- the policy in the app ------------------------------------------------------------------


# ---- limits ----------------------------------------------------------------------------------


def test_input_tokens_are_cut_to_the_models_maximum(tiny_models, capfd):
    for name in [SHIPPED, "minilm", str(tiny_models.path("gpt2", seed=0))]:
        model = vc.load(name)
        capfd.readouterr()
        trace = model.trace("word " * 5000)
        assert any("fit" in w for w in trace.warnings)
        assert len(trace.source_tokens) <= model.max_tokens
        # the cut is ours, with its notice: transformers' "Token indices sequence length is
        # longer than the specified maximum ... will result in indexing errors" is not
        # written to the server's log
        assert "longer than the specified maximum" not in capfd.readouterr().err, name
    for analysis in ("logit_attribution", "patch"):  # a long text in a token box
        model = vc.load(str(tiny_models.path("gpt2", seed=0)))  # its tokenizer not yet warned
        capfd.readouterr()
        with pytest.raises(vc.InputError):
            getattr(model, analysis)("the cat sat on the mat", "the dog sat on the mat",
                                     token="the cat " * 60) if analysis == "patch" else \
                model.logit_attribution("the cat sat on the mat", token="the cat " * 60)
        assert "longer than the specified maximum" not in capfd.readouterr().err, analysis
