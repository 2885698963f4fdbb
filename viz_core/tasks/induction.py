"""Induction: random words of the toy lexicon, then the same words again (A B C ... A B C ...).

A two-layer decoder-only model trained on these sequences cannot predict the first half
(the words are drawn uniformly: about ln 445 = 6.1 nats a word) and can predict the repeated
half only by looking back: the circuit of Elhage et al. (2021) and Olsson et al. (2022), a
previous-token head in layer 0 whose output lets an induction head in layer 1 find "the
token after the earlier copy of the current token" (K-composition) and copy it.

Each sequence is <bos> w_1 .. w_h w_1 .. w_h <eos>; held-out sequences are split off by hash,
as every task's. ``half_losses`` measures the mean loss on each half (optionally with heads
ablated); the card reports it at 256, 1,024 and 8,192 tokens (``long_losses``).
"""

from __future__ import annotations

import math
import random

import torch

from ..capture.recorder import Recorder, recording
from ..model.choices import Split
from ..model.tokenizer import SPECIALS, Vocab
from . import en_fr
from .common import Pair, make_split

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
def half_losses(model, sequences: list[list[int]], ablate: dict | None = None,
                batch_size: int = 32) -> tuple[float, float]:
    """Mean next-token loss (nats) on the first and on the repeated half.

    sequences: id lists <bos> w_1 .. w_h w_1 .. w_{h'} (h' <= h; the model reads all but the
    last id). The first half is the targets w_1 .. w_h, the repeated half the rest (its first
    word included, which nothing predicts). ablate: {block: [heads]} zeroed in every call.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    totals = [0.0, 0.0]
    counts = [0, 0]
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
    model.train(was_training)
    return totals[0] / max(counts[0], 1), totals[1] / max(counts[1], 1)


def encode(vocab: Vocab, texts: list[str], bos: int = 1) -> list[list[int]]:
    return [[bos, *vocab.encode(t)[0]] for t in texts]


def long_sequences(vocab: Vocab, positions: int, n: int, seed: int = 0) -> list[list[int]]:
    """n sequences that fill ``positions`` model inputs: <bos> + 2h - 1 words (h = positions
    / 2), the last word a target only."""
    rng = random.Random(f"{seed}:long:{positions}")
    pool = [vocab.index[w] for w in words()]
    half = positions // 2
    return [[1, *repeated(rng, half, pool)][: positions + 1] for _ in range(n)]


def long_losses(model, vocab: Vocab, seed: int = 0) -> dict[str, dict[str, float]]:
    """{"256 tokens": {"first_half": .., "repeated_half": ..}, ...} at LENGTHS that fit."""
    out = {}
    for n in LENGTHS:
        if n > model.cfg.max_len:
            continue
        seqs = long_sequences(vocab, n, LONG_SEQUENCES[n], seed)
        first, second = half_losses(model, seqs, batch_size=max(1, 4096 // n))
        out[f"{n:,} tokens"] = {"first_half": round(first, 4), "repeated_half": round(second, 4)}
    return out


def evaluate(model, vocabs, test: list[Pair], train: list[Pair]) -> dict:
    vocab = vocabs["target"]
    first, second = half_losses(model, encode(vocab, [p.target for p in test]))
    return {"n": len(test), "first_half_loss": round(first, 4),
            "repeated_half_loss": round(second, 4),
            "ratio": round(first / max(second, 1e-9), 1),
            "uniform_loss": round(math.log(len(words())), 4),
            "by_length": long_losses(model, vocab)}
