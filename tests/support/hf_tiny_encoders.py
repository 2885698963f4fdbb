"""Tiny random-weight ALBERT and ELECTRA encoders, built offline for tests.

``make_tiny_albert(path)`` / ``make_tiny_electra(path)`` write a model folder (config.json,
safetensors weights, tokenizer files) and return it as a ``Path``. Both use the WordPiece
tokenizer of tests/support/hf_tiny.py: ALBERT normally ships a SentencePiece model, but the folder
saves a ``BertTokenizer`` whose ``tokenizer_config.json`` names its class, so ``AutoTokenizer``
loads it whatever the model type (the tokenizer does not change what attention does).

Sizes as in tests/support/hf_tiny.py: hidden 32, 4 heads, 64 positions. ALBERT: 3 layers sharing one
layer group (``num_hidden_groups=1``: one attention module called three times) and a factorised
embedding of 16; ELECTRA: 2 layers, embedding 16 projected to the hidden size.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tests.support.hf_tiny import MAX_POSITIONS, SIZES, _save, wordpiece_tokenizer

ALBERT_LAYERS = 3


def _spread_norms(model) -> None:
    """Random LayerNorms start at weight 1 / bias 0: spread them so layers differ a bit."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))


def make_tiny_albert(path, seed: int = 0) -> Path:
    from transformers import AlbertConfig, AlbertModel

    tok = wordpiece_tokenizer()
    cfg = AlbertConfig(vocab_size=len(tok), embedding_size=16, hidden_size=SIZES["hidden"],
                       num_hidden_layers=ALBERT_LAYERS, num_hidden_groups=1,
                       num_attention_heads=SIZES["heads"], intermediate_size=SIZES["ffn"],
                       max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id,
                       eos_token_id=tok.sep_token_id)
    torch.manual_seed(seed)
    model = AlbertModel(cfg)
    _spread_norms(model)
    return _save(model, tok, path)


def make_tiny_electra(path, seed: int = 0) -> Path:
    from transformers import ElectraConfig, ElectraModel

    tok = wordpiece_tokenizer()
    cfg = ElectraConfig(vocab_size=len(tok), embedding_size=16, hidden_size=SIZES["hidden"],
                        num_hidden_layers=SIZES["layers"], num_attention_heads=SIZES["heads"],
                        intermediate_size=SIZES["ffn"], max_position_embeddings=MAX_POSITIONS,
                        type_vocab_size=2, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = ElectraModel(cfg)
    _spread_norms(model)
    return _save(model, tok, path)


ENCODERS = {"albert": make_tiny_albert, "electra": make_tiny_electra}
