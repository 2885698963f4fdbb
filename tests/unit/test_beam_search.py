"""Beam search (viz_core.decoding): parity with Hugging Face generate, exactness on a tiny
vocabulary, tree invariants, greedy equivalence, prefix forcing, validation."""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from viz_core.backends.hf import stepper_for
from viz_core.capture.recorder import register_with_transformers
from viz_core.decoding import attention_key_labels, beam_search, search_with
from viz_core.decoding.beam_tree import NODE_STATUSES, BeamTree
from viz_core.errors import InputError
from viz_core.training.toy import toy_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
EOS = 2  # eos id of the tiny HF models below


# ---- tiny random-weight HF models, built in memory -----------------------------------
def tiny_bart(seed: int, eos_bias: float = 0.0):
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = BartConfig(vocab_size=40, d_model=16, encoder_layers=2, decoder_layers=2,
                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                     decoder_ffn_dim=32, max_position_embeddings=64, bos_token_id=0,
                     pad_token_id=1, eos_token_id=EOS, decoder_start_token_id=EOS,
                     forced_eos_token_id=EOS, attn_implementation=register_with_transformers())
    torch.manual_seed(seed)
    model = BartForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        model.final_logits_bias[0, EOS] += eos_bias  # makes hypotheses end at various lengths
    return model


def tiny_gpt2(seed: int, eos_bias: float = 0.0):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=40, n_embd=16, n_layer=2, n_head=2, n_positions=64,
                     bos_token_id=0, eos_token_id=EOS, pad_token_id=1,
                     attn_implementation=register_with_transformers())
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # an untied head with a bias, to push the EOS logit up
        head = torch.nn.Linear(16, 40, bias=True)
        head.weight.copy_(model.transformer.wte.weight)
        head.bias.zero_()
        head.bias[EOS] = eos_bias
        model.lm_head = head
    return model


BART_SRC = torch.tensor([[0, 5, 6, 7, 8, 9, 2]])
GPT2_PROMPT = torch.tensor([[5, 6, 7]])


def hf_reference(model, ids, k, n, lp, es):
    return model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=k,
                          num_return_sequences=k, max_new_tokens=n, length_penalty=lp,
                          early_stopping=es, do_sample=False, output_scores=True,
                          return_dict_in_generate=True)


def our_search(model, ids, k, n, lp, es, num_return=None):
    st = stepper_for(model, ids, max_new=n, beams=k, length_penalty=lp, early_stopping=es)
    settings = dict(beam_size=k, max_len=n, length_penalty=lp, early_stopping=es,
                    num_return=num_return or k)
    return st, search_with(st, settings)


def generated_ids(tree: BeamTree, node_id: int) -> list[int]:
    return [n.token_id for n in tree.path(node_id)]


def assert_matches_hf(tree: BeamTree, out, prompt_len: int, fill: int):
    assert len(tree.hypotheses) == out.sequences.shape[0]
    for h, seq, score in zip(tree.hypotheses, out.sequences, out.sequences_scores):
        ours = generated_ids(tree, h.node_id)
        theirs = seq[prompt_len:].tolist()
        # HF pads a hypothesis shorter than the longest with the fill token
        assert theirs[:len(ours)] == ours
        assert all(t == fill for t in theirs[len(ours):])
        assert h.score == pytest.approx(float(score), rel=1e-5, abs=1e-6)


# A fixed, varied slice of the grid (seed, eos bias, beams, length penalty, early stopping);
# the whole grid (324 cases) was run once by hand with no mismatch.
GRID = [
    (0, 0.0, 2, 1.0, False), (1, 3.0, 3, 0.5, True), (2, 3.0, 4, 2.0, False),
    (0, 4.0, 5, 1.0, True), (1, 2.5, 2, 2.0, "never"), (3, 3.5, 4, 0.5, False),
]


@pytest.mark.parametrize("seed,eos_bias,k,lp,es", GRID)
def test_parity_with_hf_encoder_decoder(seed, eos_bias, k, lp, es):
    model = tiny_bart(seed, eos_bias)
    out = hf_reference(model, BART_SRC, k, 9, lp, es)
    _, tree = our_search(model, BART_SRC, k, 9, lp, es)
    assert_matches_hf(tree, out, prompt_len=1, fill=1)
    check_invariants(tree)


@pytest.mark.parametrize("seed,eos_bias,k,lp,es", GRID)
def test_parity_with_hf_decoder_only(seed, eos_bias, k, lp, es):
    model = tiny_gpt2(seed, eos_bias)
    out = hf_reference(model, GPT2_PROMPT, k, 9, lp, es)
    _, tree = our_search(model, GPT2_PROMPT, k, 9, lp, es)
    assert_matches_hf(tree, out, prompt_len=GPT2_PROMPT.shape[1], fill=1)
    check_invariants(tree)


def test_parity_cases_do_finish_at_different_lengths():
    """The EOS bias must make the grid exercise finishing before max_len (else it is moot)."""
    lengths = set()
    for seed, eos_bias, k, lp, es in GRID:
        if eos_bias:
            _, tree = our_search(tiny_bart(seed, eos_bias), BART_SRC, k, 9, lp, es)
            lengths |= {len(tree.path(h.node_id)) for h in tree.hypotheses}
    assert len(lengths) >= 3 and min(lengths) < 9


def test_hf_num_return_and_attention_shapes():
    model = tiny_bart(1, 3.0)
    _, tree = our_search(model, BART_SRC, 4, 8, 1.0, False, num_return=2)
    assert len(tree.hypotheses) == 2
    assert tree.attention_kind == "cross"
    for n in tree.nodes:
        if n.status in ("kept", "finished"):
            assert n.attention.shape == (2, 2, BART_SRC.shape[1])  # layers, heads, source
            assert np.allclose(n.attention.sum(-1), 1.0, atol=1e-5)
    _, tree = our_search(tiny_gpt2(0), GPT2_PROMPT, 3, 5, 1.0, False)
    assert tree.attention_kind == "self"
    for n in tree.nodes:  # keys: the prompt, then the path before this token
        if n.attention is not None:
            assert n.attention.shape == (2, 2, GPT2_PROMPT.shape[1] + n.step - 1)


def test_hf_beam_1_is_greedy():
    for make, ids, plen in ((tiny_bart, BART_SRC, 1), (tiny_gpt2, GPT2_PROMPT, 3)):
        model = make(3, 3.0)
        ref = model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=1,
                             do_sample=False, max_new_tokens=10)
        _, tree = our_search(model, ids, 1, 10, 1.0, False)
        ours = generated_ids(tree, tree.hypotheses[0].node_id)
        assert ref[0, plen:].tolist()[:len(ours)] == ours


# ---- native models ----------------------------------------------------------------------
def exhaustive_best(model, source: str, max_new: int, lp: float):
    """Best (ids, score) over every possible output: all sequences ending in EOS of at most
    max_new tokens, and all of exactly max_new tokens, scored by teacher forcing."""
    cfg = model.cfg
    V = cfg.tgt_vocab_size
    ids, _, _ = model.src_vocab.encode(source)
    src = torch.tensor([ids + [cfg.eos_id]])
    best = (None, -math.inf)
    with torch.no_grad():
        memory = model.model.encode(src)
        for length in range(1, max_new + 1):
            bodies = list(itertools.product([t for t in range(V) if t != cfg.eos_id],
                                            repeat=length - 1))
            ends = range(V) if length == max_new else [cfg.eos_id]
            seqs = torch.tensor([[*b, e] for b in bodies for e in ends])  # (N, length)
            dec_in = torch.cat([torch.full((len(seqs), 1), cfg.bos_id), seqs[:, :-1]], dim=1)
            logits = model.model.decode(dec_in, memory.expand(len(seqs), -1, -1),
                                        src.expand(len(seqs), -1))
            lps = torch.log_softmax(logits.float(), -1).gather(-1, seqs[..., None])[..., 0]
            scores = lps.double().sum(-1) / length ** lp
            i = int(scores.argmax())
            if float(scores[i]) > best[1]:
                best = (seqs[i].tolist(), float(scores[i]))
    return best


@pytest.mark.parametrize("words,max_new,lp", [(("a", "b"), 3, 1.0), (("a", "b", "c"), 2, 0.5),
                                              (("a", "b"), 3, 2.0)])
def test_wide_beam_finds_the_exhaustive_optimum(words, max_new, lp):
    """With beam >= the number of real candidates at every step and early_stopping="never"
    (an exact stopping bound), beam search is exhaustive search."""
    model = toy_model("encoder-decoder", seed=len(words) + max_new, words=words)
    with torch.no_grad():  # pad/bos/unk effectively impossible, as for a trained model
        bias = model.model.generator.bias
        for t in (model.cfg.pad_id, model.cfg.bos_id, 3):
            bias[t] = -1e4
        bias[model.cfg.eos_id] += 1.0  # EOS competes with words
    tree = beam_search(model, "a b", beam_size=16, max_len=max_new, length_penalty=lp,
                       early_stopping="never")
    ids, score = exhaustive_best(model, "a b", max_new, lp)
    best = tree.hypotheses[0]
    assert generated_ids(tree, best.node_id) == ids
    assert best.score == pytest.approx(score, rel=1e-5)


def check_invariants(tree: BeamTree):
    s = tree.settings
    k, max_new = s["beam_size"], s["max_new"]
    nodes = tree.nodes
    assert nodes[0].status == "root" and nodes[0].parent is None and nodes[0].step == 0
    eos = set(s["eos_ids"])
    for n in nodes[1:]:
        assert n.status in NODE_STATUSES and n.status != "root"
        parent = nodes[n.parent]
        assert parent.id < n.id and parent.step == n.step - 1
        assert parent.status in ("root", "kept")  # only live beams are expanded
        assert n.cum_logprob == parent.cum_logprob + n.logprob  # exactly
        assert n.logprob <= 0.0
        assert n.score == pytest.approx(n.cum_logprob / n.step ** s["length_penalty"],
                                        rel=1e-5, abs=1e-6)
        assert (n.attention is not None) == (n.status in ("kept", "finished"))
        if n.status == "finished":  # ends in EOS or at max_len
            assert n.token_id in eos or n.step == max_new
        if n.status == "kept":
            assert n.token_id not in eos and n.step < max_new
    # every step keeps exactly beam_size live hypotheses (while the search runs)
    steps = max(n.step for n in nodes)
    for step in range(1 + s["forced_steps"], steps + 1):
        kept = [n for n in nodes if n.step == step and n.status == "kept"]
        if step < max_new:
            assert len(kept) == k, (step, len(kept))
        else:
            assert not kept
        cands = [n for n in nodes if n.step == step]
        # all top-2k candidates, less those a logits processor made impossible (-inf)
        assert len(cands) <= s["candidates_per_step"]
        if not s["logits_processors"]:
            assert len(cands) == s["candidates_per_step"]
    # hypotheses: best first, finished nodes, scores of their nodes
    scores = [h.score for h in tree.hypotheses]
    assert scores == sorted(scores, reverse=True)
    for h in tree.hypotheses:
        assert nodes[h.node_id].status == "finished"
        assert nodes[h.node_id].score == h.score
    # lossless JSON
    back = BeamTree.from_json(tree.to_json())
    assert back.hypotheses == tree.hypotheses and back.settings == tree.settings
    for a, b in zip(back.nodes, tree.nodes):
        assert (a.id, a.parent, a.step, a.token, a.token_id, a.logprob, a.cum_logprob,
                a.score, a.status) == (b.id, b.parent, b.step, b.token, b.token_id,
                                       b.logprob, b.cum_logprob, b.score, b.status)
        assert (a.attention is None and b.attention is None) or np.array_equal(a.attention,
                                                                               b.attention)


@pytest.mark.parametrize("kind", ["encoder-decoder", "decoder-only"])
@pytest.mark.parametrize("k,es", [(2, False), (4, True), (5, "never")])
def test_native_tree_invariants(kind, k, es):
    model = toy_model(kind, seed=k)
    with torch.no_grad():
        model.model.generator.bias[model.cfg.eos_id] += 2.5
    tree = beam_search(model, "the cat sat on the mat", beam_size=k, max_len=7,
                       early_stopping=es)
    check_invariants(tree)
    finished_eos = [n for n in tree.nodes if n.status == "finished" and n.step < 7]
    assert all(n.token_id == model.cfg.eos_id for n in finished_eos)
    assert tree.attention_kind == ("cross" if kind == "encoder-decoder" else "self")
    for n in tree.nodes:
        if n.attention is not None:
            assert n.attention.shape[-1] == len(attention_key_labels(tree, n.id))
            assert np.allclose(n.attention.sum(-1), 1.0, atol=1e-5)
    assert tree.settings["beam_size"] == k and tree.settings["early_stopping"] == es


def test_native_beam_1_equals_greedy():
    for seed in range(3):
        model = toy_model("encoder-decoder", seed=seed)
        with torch.no_grad():
            model.model.generator.bias[model.cfg.eos_id] += 1.5 * seed
        source = "the big dog saw a red house"
        budget = 2 * (len(source.split()) + 1) + 10  # the trace's greedy budget
        tree = beam_search(model, source, beam_size=1, max_len=budget)
        assert tree.hypotheses[0].text == model.trace(source, capture=("pattern",)).output_text
    model = toy_model("decoder-only", seed=5)
    tree = beam_search(model, "the cat", beam_size=1, max_len=20)
    trace = model.trace("the cat", capture=("pattern",), max_new=20)
    assert tree.hypotheses[0].text == trace.output_text


def test_prefix_is_forced():
    model = toy_model("encoder-decoder", seed=2)
    free = beam_search(model, "the cat sat", beam_size=3, max_len=6)
    assert all(h.tokens[:2] != ["le", "chat"] for h in free.hypotheses)
    tree = beam_search(model, "the cat sat", beam_size=3, max_len=6, prefix="le chat")
    for h in tree.hypotheses:
        assert h.tokens[:2] == ["le", "chat"]
    forced = [n for n in tree.nodes if 1 <= n.step <= 2]
    assert [n.token for n in forced] == ["le", "chat"] and tree.settings["forced_steps"] == 2
    # the forced tokens carry the model's own log-probs (teacher forcing)
    with torch.no_grad():
        src = torch.tensor([model.src_vocab.encode("the cat sat")[0] + [model.cfg.eos_id]])
        dec = torch.tensor([[model.cfg.bos_id, *model.tgt_vocab.encode("le chat")[0]]])
        lps = torch.log_softmax(model.model(src, dec[:, :2]).float(), -1)[0]
    assert forced[0].logprob == pytest.approx(float(lps[0, dec[0, 1]]), abs=1e-5)
    assert forced[1].logprob == pytest.approx(float(lps[1, dec[0, 2]]), abs=1e-5)


def test_ablation_changes_the_search_and_is_per_call():
    model = toy_model("encoder-decoder", seed=0)
    plain = beam_search(model, "the cat sat", beam_size=2, max_len=5)
    ablated = beam_search(model, "the cat sat", beam_size=2, max_len=5,
                          ablate={"decoder.0.cross": [0, 1, 2, 3], "encoder.1.self": [0]})
    assert ablated.settings["ablate"] == {"decoder.0.cross": [0, 1, 2, 3],
                                          "encoder.1.self": [0]}
    assert ablated.nodes[1].logprob != plain.nodes[1].logprob
    again = beam_search(model, "the cat sat", beam_size=2, max_len=5)
    assert again.to_json() == plain.to_json()


@pytest.mark.parametrize("kwargs,match", [
    ({"beam_size": 0}, "Beam size"), ({"beam_size": 17}, "Beam size"),
    ({"beam_size": 2.5}, "Beam size"), ({"max_len": 0}, "Maximum length"),
    ({"max_len": 257}, "Maximum length"), ({"num_return": 5, "beam_size": 4}, "Number"),
    ({"length_penalty": float("nan")}, "Length penalty"), ({"early_stopping": "yes"}, "early"),
    ({"prefix": "the cat sat on the mat", "max_len": 3}, "prefix"),
])
def test_settings_are_validated(kwargs, match):
    with pytest.raises(InputError, match=match):
        beam_search(toy_model(), "the cat", **kwargs)


def test_empty_source_and_encoder_only_are_refused():
    with pytest.raises(InputError, match="empty"):
        beam_search(toy_model(), "   ")
    with pytest.raises(InputError, match="cannot generate"):
        beam_search(toy_model("encoder-only"), "the cat")


def test_backend_method_and_settings_record():
    model = toy_model("encoder-decoder", seed=1)
    tree = model.beam_search("the cat", beam_size=3, max_len=5, length_penalty=0.5)
    s = tree.settings
    assert (s["beam_size"], s["max_len"], s["length_penalty"], s["num_return"]) == (3, 5, 0.5, 3)
    assert tree.source_tokens == ["the", "cat", "<eos>"] == tree.attention_keys


# ---- shipped model ----------------------------------------------------------------------
def test_dates_model_beam_equals_greedy_on_most_inputs():
    path = CHECKPOINTS / "dates"
    if not (path / "config.json").is_file():
        pytest.skip("checkpoints/dates is not trained yet")
    import viz_core as vc

    model = vc.load("dates")
    inputs = model.examples()[:8] or ["9 may 2018", "march 3, 1999", "12/25/2001"]
    same = 0
    for text in inputs:
        tree = model.beam_search(text, beam_size=4, max_len=16)
        same += tree.hypotheses[0].text == model.trace(text, capture=("pattern",)).output_text
    assert same >= 0.75 * len(inputs)
