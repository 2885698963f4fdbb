"""Tiny random-weight native models, for tests and benchmarks (they teach nothing)."""

from __future__ import annotations

from pathlib import Path

import torch

from ..backends.native import NativeModel
from ..model.checkpoint import save_checkpoint
from ..model.choices import Architecture
from ..model.config import TransformerConfig
from ..model.tokenizer import SPECIALS, Vocab
from ..model.transformer import Transformer

WORDS = ("the a cat dog sat saw on mat red big small house i you we see it not do and "
         "le la chat chien voit sur tapis rouge grand petit maison je tu nous vois pas").split()


def toy_model(kind: Architecture = "encoder-decoder", seed: int = 0, words=WORDS, **overrides
              ) -> NativeModel:
    """A random model over a small word vocabulary, shared by source and target."""
    vocab = Vocab([*SPECIALS, *dict.fromkeys(words)])
    settings = dict(kind=kind, src_vocab_size=len(vocab) if kind != "decoder-only" else 0,
                    tgt_vocab_size=len(vocab) if kind != "encoder-only" else 0, d_model=32,
                    n_heads=4, n_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64)
    settings.update(overrides)
    cfg = TransformerConfig(**settings).validate()
    torch.manual_seed(seed)
    model = Transformer(cfg).eval()
    vocabs = {}
    if cfg.has_encoder:
        vocabs["source"] = vocab
    if cfg.has_decoder:
        vocabs["target"] = vocab
    card = {"name": f"toy-{kind}", "description": "random weights, for tests",
            "examples": ["the cat sat on the mat"]}
    return NativeModel(model, vocabs, card, name=card["name"])


def save_toy(path: str | Path, kind: Architecture = "encoder-decoder", seed: int = 0, **overrides) -> Path:
    m = toy_model(kind, seed, **overrides)
    vocabs = {k: v for k, v in (("source", m.src_vocab), ("target", m.tgt_vocab)) if v}
    return save_checkpoint(m.model, vocabs, path, m.card)
