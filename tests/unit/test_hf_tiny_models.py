"""HF backend on tiny random-weight models of every family, saved and loaded like a user would.

Each model is built by tests/support/hf_tiny.py, saved to a temporary folder and loaded through
``viz_core.load(path)``. References: a second copy loaded directly with transformers (eager).
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may be downloaded (also belongs in conftest)
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import copy  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import viz_core as vc  # noqa: E402
from tests.support.hf_tiny import BUILDERS, MAX_POSITIONS  # noqa: E402

FAMILIES = list(BUILDERS)  # bert distilbert roberta gpt2 bart t5 marian
ENC_DEC = ("bart", "t5", "marian")
SCORED = ("bert", "distilbert", "roberta", "gpt2")
TEXT, TARGET = "the cat sat on the mat", "the lazy dog"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """family -> (our loaded model, reference transformers model, reference tokenizer)."""
    from transformers import (
        AutoModel,
        AutoModelForCausalLM,
        AutoModelForSeq2SeqLM,
        AutoTokenizer,
    )

    cache = {}

    def get(family):
        if family not in cache:
            path = BUILDERS[family](tmp_path_factory.mktemp(family))
            ours = vc.load(str(path), dtype="float32")
            auto = {"encoder-only": AutoModel, "decoder-only": AutoModelForCausalLM,
                    "encoder-decoder": AutoModelForSeq2SeqLM}[ours.kind]
            ref = auto.from_pretrained(path, attn_implementation="eager").eval()
            cache[family] = (ours, ref, AutoTokenizer.from_pretrained(path), path)
        return cache[family]

    return get


def reference_run(family, ref, tok, text=TEXT, target=TARGET):
    """(input ids, decoder ids or None, transformers output) for the teacher-forced run."""
    ids = tok(text)["input_ids"]
    with torch.no_grad():
        if family in ENC_DEC:
            t = tok(text_target=target)["input_ids"]
            dec = [ref.config.decoder_start_token_id] + t[:-1]  # drop the final eos
            out = ref(input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([dec]),
                      output_attentions=True)
            return ids, dec, out
        if family == "gpt2":
            ids = ids + tok(target, add_special_tokens=False)["input_ids"]
        return ids, None, ref(input_ids=torch.tensor([ids]), output_attentions=True)


def shown(tok, ids):
    return [t.replace("Ġ", "▁") for t in tok.convert_ids_to_tokens(ids)]


def masked_softmax(scores, mask):
    s = torch.from_numpy(scores).masked_fill(torch.from_numpy(mask), float("-inf"))
    return torch.softmax(s, dim=-1).nan_to_num(0.0).numpy()


@pytest.mark.parametrize("family", FAMILIES)
def test_blocks_match_transformers(tiny, family):
    ours, ref, tok, _ = tiny(family)
    trace = ours.trace(TEXT, target=TARGET if ours.kind != "encoder-only" else None)
    ids, dec, out = reference_run(family, ref, tok)
    H = 4
    if ours.kind == "encoder-only":
        assert trace.blocks == ["encoder.0.self", "encoder.1.self"]
        pairs = [(f"encoder.{i}.self", a) for i, a in enumerate(out.attentions)]
        assert trace.source_tokens == shown(tok, ids)
    elif ours.kind == "decoder-only":
        assert trace.blocks == ["decoder.0.self", "decoder.1.self"]
        pairs = [(f"decoder.{i}.self", a) for i, a in enumerate(out.attentions)]
        assert trace.target_tokens == shown(tok, ids)
    else:
        assert trace.blocks == ["encoder.0.self", "encoder.1.self", "decoder.0.self",
                                "decoder.0.cross", "decoder.1.self", "decoder.1.cross"]
        pairs = [(f"encoder.{i}.self", a) for i, a in enumerate(out.encoder_attentions)]
        pairs += [(f"decoder.{i}.self", a) for i, a in enumerate(out.decoder_attentions)]
        pairs += [(f"decoder.{i}.cross", a) for i, a in enumerate(out.cross_attentions)]
        assert trace.source_tokens == shown(tok, ids)
        assert trace.target_tokens == shown(tok, dec)
        assert len(trace.output_tokens) == len(dec) and trace.output_text
        c = trace["decoder.0.cross"]
        assert c.query_tokens == trace.target_tokens and c.key_tokens == trace.source_tokens
    for name, a in pairs:
        b = trace[name]
        assert b.pattern.dtype == np.float32 and b.pattern.shape == a[0].shape
        assert b.pattern.shape[0] == H and b.mask.shape == b.pattern.shape[1:]
        # our SDPA-path capture vs HF eager's output_attentions: two float32 softmax kernels
        np.testing.assert_allclose(b.pattern, a[0].numpy(), atol=1e-5)
        np.testing.assert_allclose(b.pattern.sum(-1), 1.0, atol=1e-5)
        if name.endswith(".self") and name.startswith("decoder"):
            causal = np.triu(np.ones(b.mask.shape, dtype=bool), k=1)
            np.testing.assert_array_equal(b.mask, causal)
            assert (b.pattern[:, causal] == 0).all()  # exactly zero, not just small
        else:
            assert not b.mask.any()
    # every family has scores now: the attention interface hands over q and k
    assert trace["encoder.0.self" if ours.kind != "decoder-only" else "decoder.0.self"
                 ].scores is not None


@pytest.mark.parametrize("family", FAMILIES)
def test_scores_reproduce_pattern(tiny, family):
    ours, *_ = tiny(family)
    traces = [ours.trace("the quick brown fox jumps")]
    targets = ["dog", "the cat sat"] if ours.kind == "encoder-decoder" else None
    traces += ours.trace_batch(["the cat", "the quick brown fox jumps over the lazy dog"],
                               targets, capture=("pattern", "scores", "v", "z"))
    for trace in traces:
        for name in trace.blocks:
            b = trace[name]
            assert b.scores.shape == b.pattern.shape
            np.testing.assert_allclose(masked_softmax(b.scores, b.mask), b.pattern, atol=1e-5)
            np.testing.assert_allclose(b.z, b.pattern @ b.v, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_padding_gets_exactly_zero_attention(tiny, family):
    ours, *_ = tiny(family)
    texts = ["the cat", "where is the train station? i would like a cup of coffee."]
    targets = ["dog", "the quick brown fox jumps"] if ours.kind != "encoder-only" else None
    short_b, long_b = ours.trace_batch(texts, targets)
    short = ours.trace(texts[0], target=targets[0] if targets else None)
    for name in short_b.blocks:
        b, s = short_b[name], short[name]
        assert b.pattern.shape == long_b[name].pattern.shape
        nq, nk = s.pattern.shape[1:]
        pad_cols = np.zeros(b.mask.shape[1], dtype=bool)
        pad_cols[nk:] = True
        assert pad_cols.any()  # the short input really was padded
        assert b.mask[:, pad_cols].all()
        assert (b.pattern[:, :, pad_cols] == 0).all()
        np.testing.assert_allclose(b.pattern[:, :nq, :nk], s.pattern, atol=1e-5)
        np.testing.assert_array_equal(b.mask[:nq, :nk], s.mask)


@pytest.mark.parametrize("family", ["bert", "distilbert", "roberta", "gpt2", "bart"])
def test_learned_positions_equal_checkpoint(tiny, family):
    from safetensors.torch import load_file

    ours, ref, tok, path = tiny(family)
    weights = load_file(str(path / "model.safetensors"))
    key = {"gpt2": "transformer.wpe.weight", "bart": "model.encoder.embed_positions.weight"
           }.get(family, "embeddings.position_embeddings.weight")
    start = {"roberta": ref.config.pad_token_id + 1, "bart": 2}.get(family, 0)
    trace = ours.trace(TEXT, target=TARGET if family == "bart" else None)
    n = trace.positional.shape[0]
    assert n == max(len(trace.source_tokens), len(trace.target_tokens))
    assert trace.positional_kind == "learned"
    np.testing.assert_array_equal(trace.positional, weights[key][start:start + n].numpy())
    if family == "roberta":  # the rows RoBERTa really adds: its own position ids
        ids = torch.tensor([tok(TEXT)["input_ids"]])
        pos = ref.embeddings.create_position_ids_from_input_ids(ids, ref.config.pad_token_id)
        np.testing.assert_array_equal(
            trace.positional, ref.embeddings.position_embeddings(pos)[0].detach().numpy())


def test_marian_sinusoidal_and_t5_relative(tiny):
    ours, ref, *_ = tiny("marian")
    trace = ours.trace(TEXT, target=TARGET)
    n, d = trace.positional.shape
    assert trace.positional_kind == "sinusoidal"
    pos = np.arange(n)[:, None]
    freq = 1.0 / np.power(10000, 2 * np.arange(d // 2) / d)
    expected = np.concatenate([np.sin(pos * freq), np.cos(pos * freq)], axis=1)  # not interleaved
    np.testing.assert_allclose(trace.positional, expected, atol=1e-5)
    np.testing.assert_array_equal(
        trace.positional, ref.model.encoder.embed_positions.weight[:n].detach().numpy())
    t5 = tiny("t5")[0].trace(TEXT, target=TARGET)
    assert t5.positional is None and t5.positional_kind == "relative"
    assert "relative position bias" in t5.positional_note


@pytest.mark.parametrize("family", ["gpt2", "bart", "t5", "marian"])
def test_greedy_output_matches_generate(tiny, family):
    ours, ref, tok, _ = tiny(family)
    ids = torch.tensor([tok(TEXT)["input_ids"]])
    with torch.no_grad():
        gen = ref.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                           num_beams=1, max_new_tokens=8, pad_token_id=ref.config.pad_token_id)
    gen = gen[0].tolist()
    trace = ours.trace(TEXT, max_new=8)
    eos = tok.eos_token_id
    if family == "gpt2":
        cont = gen[ids.shape[1]:]
        cont = cont[:cont.index(eos)] if eos in cont else cont
        prompt = ids[0].tolist()
        assert trace.source_tokens == shown(tok, prompt)
        assert trace.target_tokens[:len(prompt)] == trace.source_tokens
        assert len(trace.target_tokens) == len(prompt) + len(cont)
        assert trace.output_text == tok.decode(cont, skip_special_tokens=True)
    else:
        dec = gen[:gen.index(eos, 1)] if eos in gen[1:] else gen
        assert trace.target_tokens == shown(tok, dec)
        assert trace.output_text == tok.decode(dec[1:], skip_special_tokens=True)


@pytest.mark.parametrize("family", ["gpt2", "bart"])
def test_ablation_equals_zeroed_output_projection(tiny, family):
    ours, ref, tok, _ = tiny(family)
    heads, dh = [0, 2], 8
    model = copy.deepcopy(ref)
    with torch.no_grad():
        if family == "gpt2":  # Conv1D: weight (in, out); rows are the heads' outputs
            block = "decoder.0.self"
            for h in heads:
                model.transformer.h[0].attn.c_proj.weight[h * dh:(h + 1) * dh] = 0
        else:  # nn.Linear: weight (out, in); columns are the heads' outputs
            block = "decoder.0.cross"
            for h in heads:
                model.model.decoder.layers[0].encoder_attn.out_proj.weight[:, h * dh:(h + 1) * dh] = 0
    ids, dec, out = reference_run(family, model, tok)
    trace = ours.trace(TEXT, target=TARGET, ablate={block: heads})
    names = [n for n in trace.blocks if n.startswith("decoder") and n.endswith("self")]
    for i, name in enumerate(names):
        np.testing.assert_allclose(trace[name].pattern, out.decoder_attentions[i][0].numpy()
                                   if family == "bart" else out.attentions[i][0].numpy(),
                                   atol=1e-5)
    plain = ours.trace(TEXT, target=TARGET)
    assert not np.allclose(plain["decoder.1.self"].pattern, trace["decoder.1.self"].pattern)


@pytest.mark.parametrize("family", ["gpt2", "bart"])
def test_concurrent_traces_equal_serial(tiny, family):
    ours, *_ = tiny(family)
    block = "decoder.0.self"
    words = ["the cat sat", "hello world", "a quick brown fox", "le chat est assis",
             "the lazy dog", "walking talking", "where is the train", "i would like coffee"]
    jobs = [(w, {block: [i % 4]} if i % 2 else None) for i, w in enumerate(words)]
    run = lambda job: ours.trace(job[0], ablate=job[1], max_new=6)
    serial = [run(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=8) as pool:
        parallel = list(pool.map(run, jobs))
    for s, p in zip(serial, parallel):
        assert s.target_tokens == p.target_tokens and s.output_text == p.output_text
        for name in s.blocks:
            np.testing.assert_array_equal(s[name].pattern, p[name].pattern)
            if s[name].scores is not None:
                np.testing.assert_array_equal(s[name].scores, p[name].scores)


@pytest.mark.parametrize("family", ["bert", "gpt2", "bart"])
def test_long_input_is_truncated_with_warning(tiny, family):
    ours, *_ = tiny(family)
    trace = ours.trace("the cat sat on the mat " * 40, capture=("pattern",), max_new=4)
    assert len(trace.source_tokens) <= MAX_POSITIONS
    assert trace.warnings and str(MAX_POSITIONS) in trace.warnings[0]
    for name in trace.blocks:
        assert trace[name].pattern.shape[-1] <= MAX_POSITIONS


def test_tokens_are_readable(tiny):
    gpt2 = tiny("gpt2")[0].trace("the cat, sat", target=" sat")
    assert gpt2.source_tokens[:2] == ["the", "▁cat"]
    bert = tiny("bert")[0].trace("the talks")
    assert bert.source_tokens == ["[CLS]", "the", "talk", "##s", "[SEP]"]
    t5 = tiny("t5")[0].trace("the cat", target="dog")
    assert t5.source_tokens[:2] == ["▁the", "▁cat"]
