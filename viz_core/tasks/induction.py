"""Induction: random words of the toy lexicon, then the same words again (A B C ... A B C ...).

A two-layer decoder-only model trained on these sequences cannot predict the first half
(the words are drawn uniformly: about ln 445 = 6.1 nats a word) and can predict the repeated
half only by looking back: the circuit of Elhage et al. (2021) and Olsson et al. (2022), a
previous-token head in layer 0 whose output lets an induction head in layer 1 find "the
token after the earlier copy of the current token" (K-composition) and copy it.

Each sequence is <bos> w_1 .. w_h w_1 .. w_h <eos>; held-out sequences are split off by hash,
as every task's. ``half_losses`` measures the mean loss on each half (optionally with heads
ablated), ``half_scores`` also the repeated half's next-word accuracy; the card reports them
on held-out halves of 32, 128 and 512 words (``half_metrics``) and at 256, 1,024 and 8,192
tokens (``long_losses``).

Training has two stages (make checkpoints). The first learns the circuit on halves of 8-24
words (the training set, DEFAULTS). The second (``train --init ... --curriculum``) carries it
to every length: ``curriculum_batch`` draws each batch's half length log-uniformly between 8
words and a maximum that grows from 32 to 512 words, CURRICULUM["batch_tokens"] tokens a
batch, new random sequences every step (none of the held-out split). It also raises the
rotary base from 100 to 10,000 (--rope-base; see CURRICULUM).
"""

from __future__ import annotations

import math
import random

import torch

from ..capture.recorder import Recorder, full_pattern, recording
from ..model.choices import Split
from ..model.tokenizer import BOS, EOS, SPECIALS, Vocab
from . import en_fr
from .common import Pair, is_held_out, make_split

NAME = "induction"
KIND = "decoder-only"
GENERATOR_VERSION = "induction-1+" + en_fr.EVERYDAY_VERSION
DESCRIPTION = ("Two-layer induction model: random words of the toy lexicon, then the same "
               "words again (A B C … A B C …). A previous-token head in layer 0 and an "
               "induction head in layer 1 copy the repeated half (Olsson et al., 2022)")
EXAMPLES = [
    "cat sees the red king cat sees the red king",
    "mother green walks my teacher blue mother green walks my teacher blue",
    "they apple old do run a horse they apple old do run a horse",
    "i do not know i do not know",
    "the small black cats the small black cats",
]
# Words in each half: training is short (the phase change comes after a few hundred steps on
# these; longer contexts slow it down), and the held-out set is the longer training lengths.
HALF_WORDS = (8, 24)
TEST_HALF_WORDS = (16, 24)
LENGTHS = (256, 1024, 8192)  # the card's lengths (model input positions, <bos> included)
LONG_SEQUENCES = {256: 16, 1024: 4, 8192: 1}  # sequences averaged at each length
# Two heads a layer, so that layer 0 has one previous-token head and one other: with four
# (d_model 128) the circuit forms, but two more layer-0 heads learn partial previous-token
# patterns (atlas 0.54 and 0.38 beside 0.92) and stand in for the main one when it is ablated
# (the repeated-half loss only rises from 0.14 to 0.32); with three, runs went either way by
# seed. RoPE base 100: more rotary pairs turn fast enough to tell offset 1 from offsets 0 and
# 2. The previous-token head is sharp (0.98) where training put first-half words, and
# loses weight to <bos> at the positions it rarely saw there (queries past ~30), which is what
# keeps its mean near 0.8. The seed matters: seed 2 of this recipe (make checkpoints) scores
# 0.87 and ablating it breaks the circuit; seed 0 scores 0.79, and in seed 1 (0.81) the other
# layer-0 head partly stands in (ablated, the repeated half's loss only reaches 1.8). Longer
# training halves (up to 48 or 64 words) formed the circuit more slowly and worse in the same
# steps.
DEFAULTS = dict(d_model=96, n_heads=2, n_layers=0, n_decoder_layers=2, d_ff=256,
                dropout=0.0, max_len=8192, norm_first=True, positional="rope", norm="rmsnorm",
                rope_base=100.0, steps=3000, batch_size=32, lr=5e-3, warmup=50, n_train=30_000, n_test=200,
                label_smoothing=0.0)


# The second stage (train --curriculum --rope-base 10000, from the first stage's weights).
# Rotary base 10,000:
# the induction head matches a key that is h - 1 positions back, h the half's length, by its
# content; every rotary pair turns the score of that match by angle theta_i * (h - 1), and at
# base 100 even the slowest pair (theta = 100^(-46/48) = 0.012 a position) turns a full circle
# by h = 512, so no pair can carry a content match over halves of 32-512 words. At base 10,000
# the six slowest pairs turn by under 0.6 rad at h = 512 (and the fastest still turns by 1 rad
# a position for the previous-token head).
CURRICULUM = dict(min_half=8, first_max=32, last_max=512, ramp=0.6, batch_tokens=2048)
EVAL_HALVES = {32: 32, 128: 16, 512: 6}  # held-out halves (words): sequences evaluated


def curriculum_max(progress: float) -> int:
    """The longest half (words) at this point of the second stage (progress 0..1): from
    first_max to last_max geometrically over the first ``ramp`` of the steps."""
    c = CURRICULUM
    f = min(1.0, max(0.0, progress) / c["ramp"])
    return round(c["first_max"] * (c["last_max"] / c["first_max"]) ** f)


def curriculum_batch(rng: random.Random, progress: float, vocabs) -> list[tuple]:
    """One training batch of the second stage: (None, decoder input, decoder output) per
    sequence, all of one half length h, log-uniform in [min_half, curriculum_max(progress)];
    about batch_tokens tokens. Sequences of the held-out split are drawn again."""
    c = CURRICULUM
    vocab = vocabs["target"]
    pool = words()
    lo, hi = c["min_half"], curriculum_max(progress)
    half = round(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    out = []
    while len(out) < max(1, c["batch_tokens"] // (2 * half + 1)):
        seq = repeated(rng, half, pool)
        if is_held_out(" ".join(seq)):
            continue
        ids = [vocab.index[w] for w in seq]
        out.append((None, [vocab.index[BOS], *ids], [*ids, vocab.index[EOS]]))
    return out


@torch.no_grad()
def curriculum_start(model, vocabs) -> list[tuple[str, torch.Tensor]]:
    """Set up the second stage; returns the rows it keeps as they are (train --curriculum).

    At halves of hundreds of words most words repeat inside a half, so the repeated half can
    be predicted only by matching the word two back as well (a simulation of plurality
    voting over the words that followed earlier copies: 44 % right at 512-word halves when
    matching one word, 99.7 % when matching two). Left free, the model blurs that into the
    previous-token head (0.62 of its attention on the previous word, 0.37 on the one before),
    which then no longer is one. So this keeps the previous-token head's query and key rows
    (the layer-0 head with the most attention on the previous position over a few held-out
    sequences) as the first stage left them, and starts the other layer-0 head as a copy of
    its query and key with the query turned one position back (rotary angles of position
    p - 1): a head on the word two back, whose output the induction head learns to match.
    It also keeps the query and key rows of layer 1's second head (the one with less
    attention on the word after the earlier copy): left free, both layer-1 heads become
    induction heads of about equal strength, and which one a measure calls "the" induction
    head turns on the third decimal.
    """
    from ..model.positional import apply_rope

    was_training = model.training
    model.eval()
    seqs = held_out_sequences(vocabs["target"], 16, 4, seed=5)
    with recording(Recorder(keep=lambda name: name.endswith(".self"))) as rec:
        model.decode(torch.tensor(seqs))
    model.train(was_training)
    pattern = full_pattern(rec.records["decoder.0.self"][0])  # (B, H, T, T)
    t = torch.arange(1, pattern.shape[-1])
    previous = pattern[:, :, t, t - 1].float().mean((0, 2))  # (H,)
    head, other = int(previous.argmax()), int(previous.argmin())
    if float(previous[head]) < 0.8 or head == other:
        raise ValueError(f"layer 0 has no previous-token head to keep "
                         f"(best: h{head}, {float(previous[head]):.2f})")
    # layer 1's induction head: the most attention from the repeat's words to the word after
    # their earlier copy (query at 16 + k, key at k + 1: 15 positions back)
    pattern = full_pattern(rec.records["decoder.1.self"][0])
    q = torch.arange(18, pattern.shape[-1])
    copies = pattern[:, :, q, q - 15].float().mean((0, 2))  # (H,)
    second_head = int(copies.argmin())  # the weaker one: kept, so the other stays the head
    attn = model.decoder[0].self_attn
    d_k = model.cfg.d_model // model.cfg.n_heads
    rows = torch.arange(head * d_k, (head + 1) * d_k)
    to = torch.arange(other * d_k, (other + 1) * d_k)
    back = torch.full((model.cfg.d_model,), -1)
    w_q = attn.W_Q.weight[rows].T  # (d_model, d_k): one query vector per input dimension
    attn.W_Q.weight[to] = apply_rope(w_q, back, model.cfg.rope_base).T
    attn.W_Q.bias[to] = apply_rope(attn.W_Q.bias[rows][None], back[:1], model.cfg.rope_base)[0]
    attn.W_K.weight[to] = attn.W_K.weight[rows]
    attn.W_K.bias[to] = attn.W_K.bias[rows]
    second_rows = torch.arange(second_head * d_k, (second_head + 1) * d_k)
    return [(f"decoder.{layer}.self_attn.{w}.{kind}", r)
            for layer, r in ((0, rows), (1, second_rows)) for w in ("W_Q", "W_K")
            for kind in ("weight", "bias")]


def held_out_sequences(vocab: Vocab, half: int, n: int, seed: int = 0) -> list[list[int]]:
    """n held-out sequences (the test split, by hash) of halves of ``half`` words: <bos>
    w_1 .. w_h w_1 .. w_h."""
    rng = random.Random(f"{seed}:heldout:{half}")
    pool = words()
    out = []
    while len(out) < n:
        seq = repeated(rng, half, pool)
        if is_held_out(" ".join(seq)):
            out.append([1, *(vocab.index[w] for w in seq)])
    return out


def words() -> list[str]:
    """The lexicon's words (the lm vocabulary without its special tokens)."""
    return [t for t in build_vocabs([])["target"].tokens if t not in SPECIALS]


def repeated(rng: random.Random, half: int, pool: list[str] | None = None) -> list[str]:
    """half random words (uniform, with replacement), then the same words again."""
    pool = pool or words()
    first = [rng.choice(pool) for _ in range(half)]
    return first + first


def dataset(split: Split, n: int, seed: int = 0) -> list[Pair]:
    """One episode per sequence: halves of HALF_WORDS words (training) or TEST_HALF_WORDS
    words (held out)."""
    pool = words()
    lo, hi = HALF_WORDS if split == "train" else TEST_HALF_WORDS

    def sample(rng: random.Random) -> Pair:
        return Pair("", " ".join(repeated(rng, rng.randint(lo, hi), pool)))

    return make_split(sample, split, n, seed, key=lambda p: p.target)


def build_vocabs(pairs: list[Pair]) -> dict[str, Vocab]:
    en, _ = en_fr.lexicon_texts()
    return {"target": Vocab.build(en, "word")}  # the same vocabulary as lm's


@torch.inference_mode()
def half_scores(model, sequences: list[list[int]], ablate: dict | None = None,
                batch_size: int = 32) -> dict[str, float]:
    """Mean next-token loss (nats) on the first and on the repeated half, and the repeated
    half's next-word accuracy (greedy prediction = the word).

    sequences: id lists <bos> w_1 .. w_h w_1 .. w_{h'} (h' <= h; the model reads all but the
    last id). The first half is the targets w_1 .. w_h, the repeated half the rest (its first
    word included in the loss, which nothing predicts; left out of the accuracy, which counts
    w_2 .. w_h' of the repeat). ablate: {block: [heads]} zeroed in every call.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    totals = [0.0, 0.0]
    counts = [0, 0]
    hits = guesses = 0
    by_len: dict[int, list[list[int]]] = {}
    for seq in sequences:
        by_len.setdefault(len(seq), []).append(seq)
    with recording(Recorder(ablate=dict(ablate or {}))):
        for length, group in by_len.items():
            half = length // 2  # of the length - 1 targets, the first h are the first half
            for start in range(0, len(group), batch_size):
                ids = torch.tensor(group[start:start + batch_size], device=device)
                logits = model.decode(ids[:, :-1])  # (B, T, V)
                nll = torch.nn.functional.cross_entropy(
                    logits.float().transpose(1, 2), ids[:, 1:], reduction="none")  # (B, T)
                totals[0] += float(nll[:, :half].sum())
                totals[1] += float(nll[:, half:].sum())
                counts[0] += nll[:, :half].numel()
                counts[1] += nll[:, half:].numel()
                right = logits[:, half + 1:].argmax(-1) == ids[:, half + 2:]  # (B, h' - 1)
                hits += int(right.sum())
                guesses += right.numel()
    model.train(was_training)
    return {"first_half": totals[0] / max(counts[0], 1),
            "repeated_half": totals[1] / max(counts[1], 1),
            "repeated_half_accuracy": hits / max(guesses, 1)}


def half_losses(model, sequences: list[list[int]], ablate: dict | None = None,
                batch_size: int = 32) -> tuple[float, float]:
    """(first half's, repeated half's) mean loss: ``half_scores`` without the accuracy."""
    s = half_scores(model, sequences, ablate, batch_size)
    return s["first_half"], s["repeated_half"]


def encode(vocab: Vocab, texts: list[str], bos: int = 1) -> list[list[int]]:
    return [[bos, *vocab.encode(t)[0]] for t in texts]


def long_sequences(vocab: Vocab, positions: int, n: int, seed: int = 0) -> list[list[int]]:
    """n held-out sequences that fill ``positions`` model inputs: <bos> + 2h - 1 words
    (h = positions / 2), the last word a target only."""
    return [s[: positions + 1] for s in held_out_sequences(vocab, positions // 2, n,
                                                           seed + 1000 * positions)]


def _rounded(scores: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in scores.items()}


def long_losses(model, vocab: Vocab, seed: int = 0) -> dict[str, dict[str, float]]:
    """{"256 tokens": {"first_half": .., "repeated_half": .., "repeated_half_accuracy": ..},
    ...} at LENGTHS that fit, on held-out sequences."""
    out = {}
    for n in LENGTHS:
        if n > model.cfg.max_len:
            continue
        seqs = long_sequences(vocab, n, LONG_SEQUENCES[n], seed)
        out[f"{n:,} tokens"] = _rounded(half_scores(model, seqs, batch_size=max(1, 4096 // n)))
    return out


def half_metrics(model, vocab: Vocab, seed: int = 0) -> dict[str, dict[str, float]]:
    """{"32 words": {...}, "128 words": ..., "512 words": ...}: half_scores on held-out
    sequences of each EVAL_HALVES half length that fits."""
    out = {}
    for half, n in EVAL_HALVES.items():
        if 2 * half > model.cfg.max_len:
            continue
        seqs = held_out_sequences(vocab, half, n, seed)
        out[f"{half} words"] = _rounded(half_scores(model, seqs,
                                                    batch_size=max(1, 4096 // (2 * half))))
    return out


def progress(model, vocabs) -> dict[str, float]:
    """A quick held-out measure for training logs (train --eval-every): the repeated half's
    accuracy at halves of 32, 128 and 512 words (a few sequences each)."""
    vocab = vocabs["target"]
    out = {}
    for half, n in ((32, 4), (128, 2), (512, 1)):
        seqs = held_out_sequences(vocab, half, n, seed=99)
        out[f"acc@{half}"] = round(half_scores(model, seqs)["repeated_half_accuracy"], 3)
    return out


def evaluate(model, vocabs, test: list[Pair], train: list[Pair]) -> dict:
    vocab = vocabs["target"]
    scores = half_scores(model, encode(vocab, [p.target for p in test]))
    first, second = scores["first_half"], scores["repeated_half"]
    return {"n": len(test), "first_half_loss": round(first, 4),
            "repeated_half_loss": round(second, 4),
            "repeated_half_accuracy": round(scores["repeated_half_accuracy"], 4),
            "ratio": round(first / max(second, 1e-9), 1),
            "uniform_loss": round(math.log(len(words())), 4),
            "by_half": half_metrics(model, vocab),
            "by_length": long_losses(model, vocab)}
