"""The shipped lm-rope (RoPE + grouped-query attention + RMSNorm): loads as the app loads it,
traces, continues a prompt, and its held-out perplexity stands beside lm's."""

import json

import pytest
import torch

import viz_core as vc
from viz_core.loading.entry import CHECKPOINTS
from viz_core.model.positional import apply_rope
from viz_core.tasks import lm
from viz_core.tasks.common import lm_perplexity, unigram_perplexity

N_EVAL = 400
SEED = 11  # held-out draw other than training's (the split is by hash)


@pytest.fixture(scope="module")
def models():
    return {name: vc.load(name, device="cpu") for name in ("lm-rope", "lm")}


def test_files_and_card():
    path = CHECKPOINTS / "lm-rope"
    assert "lm-rope" in vc.shipped_models()
    cfg = json.loads((path / "config.json").read_text())
    assert (cfg["positional"], cfg["n_heads"], cfg["n_kv_heads"], cfg["norm"]) == (
        "rope", 4, 2, "rmsnorm")
    card = json.loads((path / "card.json").read_text())
    assert card["name"] == "lm-rope" and card["task"] == "lm"
    assert card["generator_version"] == lm.GENERATOR_VERSION
    assert card["metrics"]["n"] == card["compared"]["lm"]["n"]
    # lm's perplexity beside it, computed by the same code on the same held-out set: the same
    # number lm's own card holds
    lm_card = json.loads((CHECKPOINTS / "lm" / "card.json").read_text())
    assert card["compared"]["lm"]["perplexity"] == lm_card["metrics"]["perplexity"]
    assert sum(f.stat().st_size for f in path.iterdir()) < 3 * 2**20


def test_loads_and_traces(models):
    model = models["lm-rope"]
    info = model.info()
    assert info["kv_heads"] == 2 and info["heads"] == 4 and model.kv_heads == 2
    assert model.positional_kind == "rotary" and info["positional_kind"] == "rotary"
    trace = model.trace("the small black cats", max_new=6)
    assert trace.positional is None and trace.positional_kind == "rotary"
    assert trace.blocks == ["decoder.0.self", "decoder.1.self"]
    block = trace["decoder.1.self"]
    assert block.kv_heads == 2 and list(block.kv_group) == [0, 0, 1, 1]
    p = block.pattern
    assert p.shape[0] == 4 and p.shape[1] == p.shape[2] == len(trace.target_tokens)
    torch.testing.assert_close(torch.from_numpy(p.sum(-1)), torch.ones(p.shape[:2]))
    assert model.check_faithfulness("the small black cats") < 1e-4


def test_recorded_keys_are_rotated(models):
    """The trace's q and k are after RoPE: un-rotating them gives W_Q x and W_K x."""
    model = models["lm-rope"]
    trace = model.trace("she sees", target="the red car", capture=("v",))
    block = trace["decoder.0.self"]
    q, k = torch.from_numpy(block.q), torch.from_numpy(block.k)  # (H, T, d): k per query head
    pos = torch.arange(q.shape[1])
    attn = model.model.decoder[0].self_attn
    ids = torch.tensor([[model.cfg.bos_id] + model.tgt_vocab.encode("she sees the red car")[0]])
    with torch.no_grad():
        h = model.model.decoder[0].sublayer[0].norm(model.model.embed(model.model.tgt_embed, ids))
        q_raw = attn.split_heads(attn.W_Q(h))[0]
        k_raw = attn.split_heads(attn.W_K(h), attn.n_kv_heads)[0]
    torch.testing.assert_close(q, apply_rope(q_raw, pos), atol=1e-5, rtol=1e-5)
    k_rot = apply_rope(k_raw, pos).repeat_interleave(2, dim=0)  # kv head h // 2 for head h
    torch.testing.assert_close(k, k_rot, atol=1e-5, rtol=1e-5)


def test_continues_a_prompt(models):
    model = models["lm-rope"]
    out = model.trace("the red", max_new=8).output_text
    assert out and all(w in model.tgt_vocab.index for w in out.split())
    tree = model.beam_search("i do not", beam_size=3, max_len=8)
    assert tree.hypotheses and tree.hypotheses[0].text


def test_held_out_perplexity_beside_lm(models):
    test = [p.target for p in lm.dataset("test", N_EVAL, SEED)]
    train = [p.target for p in lm.dataset("train", 20_000, 0)]
    ppl = {name: lm_perplexity(m.model, m.tgt_vocab, test) for name, m in models.items()}
    unigram = unigram_perplexity(models["lm"].tgt_vocab, train, test)
    print(f"\nheld-out perplexity ({N_EVAL} sentences): lm-rope {ppl['lm-rope']:.2f}, "
          f"lm {ppl['lm']:.2f}, unigram {unigram:.2f}")
    assert ppl["lm-rope"] < unigram / 2
    assert ppl["lm-rope"] < 1.15 * ppl["lm"]


def test_train_writes_the_modern_options_and_the_comparison(tmp_path):
    from viz_core.training.train import train

    out = train("lm", tmp_path / "m", steps=2, n_train=300, n_test=15, progress=False,
                positional="rope", n_kv_heads=1, norm="rmsnorm", rope_base=500.0,
                name="tiny-rope", compare=[CHECKPOINTS / "lm"])
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert (cfg["positional"], cfg["n_kv_heads"], cfg["norm"], cfg["rope_base"]) == (
        "rope", 1, "rmsnorm", 500.0)
    card = out["card"]
    assert card["name"] == "tiny-rope" and card["architecture"]["kv_heads"] == 1
    assert "RoPE (base 500)" in card["description"]
    assert card["compared"]["lm"]["n"] == card["metrics"]["n"] == 15
    lm_model = vc.load("lm", device="cpu")
    test = [p.target for p in out["test"]]
    assert card["compared"]["lm"]["perplexity"] == pytest.approx(
        lm_perplexity(lm_model.model, lm_model.tgt_vocab, test), abs=1e-3)
