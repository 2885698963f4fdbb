"""The shipped induction model reproduces the published circuit on held-out sequences.

Elhage et al. (2021), "A Mathematical Framework for Transformer Circuits", and Olsson et al.
(2022), "In-context Learning and Induction Heads": a two-layer model trained on repeated
random tokens predicts the repeated half through a previous-token head in layer 0 and an
induction head in layer 1 that reads it by K-composition. Each test is one of those results,
on sequences the model never saw (the held-out split is by hash; SEED is not training's).
The heads are found by the atlas's own role scores, never written in here.
"""

import json
import random

import numpy as np
import pytest
import torch

import viz_core as vc
from viz_core.atlas.worker import trace_rows
from viz_core.loading.entry import CHECKPOINTS
from viz_core.tasks import induction

SEED = 11  # any seed draws held-out sequences (the split is by hash); training used 0
N_EVAL = 200  # held-out sequences for the losses
N_ATLAS = 24  # held-out sequences the atlas scores
L0, L1 = "decoder.0.self", "decoder.1.self"


@pytest.fixture(scope="module")
def model():
    return vc.load("induction", device="cpu")


@pytest.fixture(scope="module")
def heldout():
    return [p.target for p in induction.dataset("test", N_EVAL, SEED)]


@pytest.fixture(scope="module")
def ids(model, heldout):
    return induction.encode(model.tgt_vocab, heldout)


@pytest.fixture(scope="module")
def roles(model, heldout):
    """Mean atlas scores per (layer, head) over held-out sequences: {role: [layer, head]}."""
    n_layers, n_heads = model.cfg.n_decoder_layers, model.cfg.n_heads
    sums = {r: np.zeros((n_layers, n_heads)) for r in ("previous", "induction")}
    for text in heldout[:N_ATLAS]:
        cols, _ = trace_rows(model.trace(text, capture=("pattern",), max_new=0))
        for i, (layer, head) in enumerate(zip(cols["layer"], cols["head"])):
            for r in sums:
                sums[r][layer, head] += cols[r][i] / N_ATLAS
    print("\natlas previous-token:", np.round(sums["previous"], 3).tolist(),
          "\natlas induction:", np.round(sums["induction"], 3).tolist())
    return sums


@pytest.fixture(scope="module")
def circuit(roles):
    """(previous-token head of layer 0, induction head of layer 1), as the atlas ranks them."""
    return int(np.argmax(roles["previous"][0])), int(np.argmax(roles["induction"][1]))


def test_files_config_and_card(model):
    path = CHECKPOINTS / "induction"
    assert "induction" in vc.shipped_models()
    assert {f.name for f in path.iterdir()} >= {"model.safetensors", "config.json",
                                                 "vocab.json", "card.json"}
    assert sum(f.stat().st_size for f in path.iterdir()) < 4 * 2**20
    cfg = json.loads((path / "config.json").read_text())
    assert (cfg["kind"], cfg["positional"], cfg["n_decoder_layers"], cfg["max_len"]) == (
        "decoder-only", "rope", 2, 8192)
    card = json.loads((path / "card.json").read_text())
    assert card["task"] == "induction" and card["generator_version"] == (
        induction.GENERATOR_VERSION)
    assert 4 <= len(card["examples"]) <= 6
    by_length = card["metrics"]["by_length"]
    assert list(by_length) == ["256 tokens", "1,024 tokens", "8,192 tokens"]
    scores = {"first_half", "repeated_half", "repeated_half_accuracy"}
    assert all(set(v) == scores for v in by_length.values())
    by_half = card["metrics"]["by_half"]
    assert list(by_half) == ["32 words", "128 words", "512 words"]
    assert all(set(v) == scores for v in by_half.values())
    assert model.max_tokens == 8192 and model.info()["positional_kind"] == "rotary"


def test_half_losses_match_a_plain_cross_entropy(model, ids):
    """half_losses (batched by length) against one sequence's loss written out by hand."""
    seq = ids[0]
    with torch.inference_mode():
        logits = model.model.decode(torch.tensor([seq[:-1]]))[0].float()
    nll = -torch.log_softmax(logits, -1)[torch.arange(len(seq) - 1), torch.tensor(seq[1:])]
    h = len(seq) // 2
    first, second = induction.half_losses(model.model, [seq])
    # same model, same kernel; batched vs unbatched float32 sums
    assert first == pytest.approx(float(nll[:h].mean()), abs=1e-5)
    assert second == pytest.approx(float(nll[h:].mean()), abs=1e-5)
    # accuracy: the repeat's words after its first, w_2 .. w_h', each predicted by the argmax
    # at the word before it (logits row t predicts seq[t + 1]; the repeat starts at seq[h + 1])
    rows = range(h + 1, len(seq) - 1)
    right = [int(logits[t].argmax()) == seq[t + 1] for t in rows]
    scores = induction.half_scores(model.model, [seq])
    assert scores["repeated_half_accuracy"] == sum(right) / len(right)


def test_repeated_half_is_ten_times_easier(model, ids):
    """Result 1: the loss on the repeated half is at least 10x lower than on the first half
    (in-context learning: the first half is random, about ln 445 = 6.1 nats a word)."""
    first, second = induction.half_losses(model.model, ids)
    print(f"\nheld-out ({len(ids)} sequences): first half {first:.4f}, repeated half "
          f"{second:.4f}, ratio {first / second:.1f}")
    assert first > 5.5  # nothing to learn in the first half: near the uniform ln 445
    assert first >= 10 * second


@pytest.mark.parametrize("half,n", [(32, 8), (128, 4), (512, 2)])
def test_the_circuit_holds_at_every_length(model, half, n):
    """Issue 30 item 4: on held-out sequences of halves far beyond the first training stage's
    (8-24 words), the repeated half is still predicted: next-word accuracy >= 0.9 at halves
    of 32, 128 and 512 words (65 to 1,025 positions)."""
    seqs = induction.held_out_sequences(model.tgt_vocab, half, n, SEED)
    assert all(len(s) == 2 * half + 1 and s[1:half + 1] == s[half + 1:] for s in seqs)
    scores = induction.half_scores(model.model, seqs, batch_size=max(1, 4096 // (2 * half)))
    print(f"\nhalves of {half} words ({n} held-out sequences): {scores}")
    assert scores["repeated_half_accuracy"] >= 0.9
    assert scores["first_half"] > 5.5  # the first half stays unpredictable


def test_atlas_finds_previous_token_and_induction_heads(roles, circuit):
    """Result 2: one layer-0 head is a previous-token head and one layer-1 head an induction
    head, by the atlas's scores (viz_core.atlas.roles), both >= 0.8."""
    prev, ind = circuit
    print(f"\nprevious-token head: {L0} h{prev} ({roles['previous'][0, prev]:.3f}); "
          f"induction head: {L1} h{ind} ({roles['induction'][1, ind]:.3f})")
    assert roles["previous"][0, prev] >= 0.8
    assert roles["induction"][1, ind] >= 0.8


def test_ablating_the_previous_token_head_breaks_the_circuit(model, ids, circuit):
    """Result 3: with the previous-token head's output zeroed, the repeated half loses most
    of its advantage (loss >= half the first half's); zeroing any other single layer-0 head
    changes it far less (at most a fifth as much)."""
    prev, _ = circuit
    first, second = induction.half_losses(model.model, ids)
    raised = {}
    for h in range(model.cfg.n_heads):
        raised[h] = induction.half_losses(model.model, ids, ablate={L0: [h]})[1]
    print(f"\nrepeated-half loss {second:.4f}; with one layer-0 head ablated: "
          + ", ".join(f"h{h}: {v:.4f}" for h, v in raised.items()))
    assert raised[prev] >= first / 2
    for h, loss in raised.items():
        if h != prev:
            assert loss - second <= (raised[prev] - second) / 5, h


def test_ablation_goes_through_the_trace_api(model, heldout, circuit):
    """The ablation half_losses applies is the app's: trace(..., ablate=) zeroes the same
    head, and the trace's predictions equal the ablated logits' argmax."""
    prev, _ = circuit
    text = heldout[0]
    trace = model.trace(text, ablate={L0: [prev]}, max_new=0)
    seq = induction.encode(model.tgt_vocab, [text])[0]
    from viz_core.capture.recorder import Recorder, recording

    with torch.inference_mode(), recording(Recorder(ablate={L0: [prev]})):
        logits = model.model.decode(torch.tensor([seq]))[0]
    assert trace.output_tokens == [model.tgt_vocab.tokens[i] for i in logits.argmax(-1)]


# ---- the "why": composition, QK attribution, patching (issue 23, items 3 and 4) ----------
def _pair(model, rng: random.Random, half: int) -> tuple[str, str, str]:
    """(clean, corrupted, the word clean predicts next): the same first half; clean repeats
    it (all but its last word), corrupted goes on with other random words of the same count."""
    words = induction.words()
    first = [rng.choice(words) for _ in range(half)]
    other = [rng.choice([w for w in words if w not in first]) for _ in range(half - 1)]
    return " ".join(first + first[:-1]), " ".join(first + other), first[-1]


def test_k_composition_links_the_circuit(model, circuit):
    """Result 4: among layer-0 -> layer-1 head pairs, the previous-token head -> induction
    head pair has the largest K-composition (from the weights alone)."""
    prev, ind = circuit
    frame = model.composition()
    k = frame[(frame["kind"] == "K") & frame["sender"].str.startswith(f"{L0}.h")
              & frame["receiver"].str.startswith(f"{L1}.h")]
    assert len(k) == model.cfg.n_heads ** 2
    top = k.sort_values("score", ascending=False).iloc[0]
    print(f"\nlargest K-composition: {top['sender']} -> {top['receiver']} ({top['score']:.3f});"
          f" median {k['score'].median():.3f}")
    assert (top["sender"], top["receiver"]) == (f"{L0}.h{prev}", f"{L1}.h{ind}")


def test_qk_attribution_of_the_induction_cell(model, circuit):
    """Result 5: in the induction head's score from the second occurrence of a word to the
    word after its first occurrence, the largest key-side term is the previous-token head's
    output (the key is found by what came before it)."""
    prev, ind = circuit
    rng = random.Random(f"{SEED}:qk")
    hits = 0
    for _ in range(3):
        clean, _, _ = _pair(model, rng, 20)
        n = len(clean.split())  # positions: <bos> at 0, then the words
        query = n  # the last word: the second occurrence of word 19
        key = 20  # word 20 of the first half: right after word 19's first occurrence
        assert clean.split()[query - 1] == clean.split()[key - 2]
        qk = model.qk_attribution(clean, L1, ind, query, key)
        by_key = qk.frame.groupby("key_component")["contribution"].sum()
        assert qk.frame["contribution"].sum() == pytest.approx(qk.score, rel=1e-4)
        print(f"\nkey-side terms: {by_key.sort_values(ascending=False).head(4).round(3).to_dict()}")
        hits += by_key.idxmax() == f"{L0}.h{prev}"
    assert hits == 3


def test_head_patching_finds_the_induction_head(model, circuit):
    """Result 6: patching each head's output from the clean run (first half repeated) into
    the corrupted one (the same first half, then other words), the induction head restores
    the most of the clean prediction."""
    _, ind = circuit
    rng = random.Random(f"{SEED}:patch")
    effects = []
    for _ in range(3):
        clean, corrupted, word = _pair(model, rng, 20)
        result = model.patch(clean, corrupted, token=word, over="heads")
        effects.append(np.asarray(result.effect))
    mean = np.mean(effects, axis=0)  # [layer, head]
    print(f"\nhead patching effect (mean of 3 pairs): {np.round(mean, 3).tolist()}")
    assert np.unravel_index(np.argmax(mean), mean.shape) == (1, ind)


# ---- long inputs ------------------------------------------------------------------------
@pytest.mark.slow
def test_traces_8192_tokens(model):
    """max_len 8,192: a full-length trace (lazy capture), and the induction head still
    attends along the repeat at that length."""
    rng = random.Random(f"{SEED}:long")
    words = induction.words()
    first = [rng.choice(words) for _ in range(4096)]
    text = " ".join(first + first[:-1])  # 8,191 words + <bos> = 8,192 positions
    trace = model.trace(text, capture=("pattern",), max_new=0)
    assert not trace.warnings
    block = trace[L1]
    assert block.shape == (model.cfg.n_heads, 8192, 8192)
    rows = block.window(0, (8100, 8192), (0, 8192))
    np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-4)
    overview = block.overview(64)
    assert overview.shape == (model.cfg.n_heads, 64, 64)


def test_second_stage_keeps_the_previous_token_head_and_adds_a_two_back_head():
    """make checkpoints' second stage (train --curriculum): ``curriculum_start`` names the
    previous-token head's query/key rows (and layer 1's second head's) to keep, and starts
    the other layer-0 head as the previous-token head turned one position back: it attends
    two positions back. Training puts the kept rows back after every step (weight decay
    moves them otherwise)."""
    from viz_core.capture.recorder import Recorder, full_pattern, recording
    from viz_core.model.checkpoint import load_checkpoint
    from viz_core.training.train import train

    net, vocabs, _ = load_checkpoint(CHECKPOINTS / "induction")
    kept = induction.curriculum_start(net, vocabs)
    assert {name for name, _ in kept} == {f"decoder.{layer}.self_attn.{w}.{kind}"
                                          for layer in (0, 1) for w in ("W_Q", "W_K")
                                          for kind in ("weight", "bias")}
    seqs = induction.held_out_sequences(vocabs["target"], 16, 2, SEED)
    with torch.no_grad(), recording(Recorder(keep=lambda n: n == L0)) as rec:
        net.decode(torch.tensor(seqs))
    p = full_pattern(rec.records[L0][0]).float()  # (B, H, T, T)
    t = torch.arange(2, p.shape[-1])
    d_k = net.cfg.d_model // net.cfg.n_heads
    prev = int(kept[0][1][0]) // d_k  # layer 0's W_Q rows of the kept head
    other = 1 - prev
    assert float(p[:, prev, t, t - 1].mean()) >= 0.8  # kept: still the previous token
    assert float(p[:, other, t, t - 2].mean()) >= 0.8  # the copy turned back: two back

    result = train("induction", None, init=CHECKPOINTS / "induction", curriculum=True,
                   steps=3, lr=0.05, warmup=1, rope_base=10_000.0, n_train=64, n_test=0,
                   progress=False, evaluate=False)
    trained = dict(result["model"].named_parameters())
    started = dict(net.named_parameters())
    for name, rows in kept:  # bit for bit, even at a large learning rate
        assert torch.equal(trained[name][rows], started[name][rows]), name
    moved = [n for n in trained if not torch.equal(trained[n], started[n])]
    assert "decoder.1.self_attn.W_V.weight" in moved  # the rest did train
