"""A small GPT-style language model over the English side of the en-fr grammar.

Decoder-only, pre-LN, causal self-attention only: for the causal-mask and continuation
demos. Each training sequence is <bos> sentence <eos>; the held-out sentences are the
held-out English sources of the en-fr task (same hash split), never seen in training.
"""

from __future__ import annotations

import random

from ..model.choices import Split
from ..model.tokenizer import Vocab
from . import en_fr
from .common import Pair, lm_perplexity, make_split, unigram_perplexity

NAME = "lm"
KIND = "decoder-only"
GENERATOR_VERSION = "lm-1+" + en_fr.EVERYDAY_VERSION
DESCRIPTION = "Small GPT-style language model of the toy English grammar (causal attention)"
EXAMPLES = ["the red", "i do not", "the small black cats", "she sees", "my old dog does not",
            "we"]
DEFAULTS = dict(d_model=128, n_heads=4, n_layers=0, n_decoder_layers=2, d_ff=256, dropout=0.1,
                max_len=32, norm_first=True, steps=1500, batch_size=64, lr=1.5e-3, warmup=150,
                n_train=100_000, n_test=1000)


def sample(rng: random.Random) -> Pair:
    return Pair("", en_fr.sample(rng).source)


def dataset(split: Split, n: int, seed: int = 0) -> list[Pair]:
    return make_split(sample, split, n, seed, key=lambda p: p.target)


def build_vocabs(pairs: list[Pair]) -> dict[str, Vocab]:
    en, _ = en_fr.lexicon_texts()
    return {"target": Vocab.build(en, "word")}


def evaluate(model, vocabs, test: list[Pair], train: list[Pair]) -> dict:
    vocab = vocabs["target"]
    test_texts = [p.target for p in test]
    ppl = lm_perplexity(model, vocab, test_texts)
    unigram = unigram_perplexity(vocab, [p.target for p in train], test_texts)
    return {"n": len(test), "perplexity": round(ppl, 3), "unigram_perplexity": round(unigram, 3),
            "ratio_to_unigram": round(ppl / unigram, 4)}
