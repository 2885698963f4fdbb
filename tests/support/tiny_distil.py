"""Tiny random BERTs for the teacher-and-student tests (viz_core.analysis.distillation).

``make_bert(path, layers, heads)`` writes a BERT folder with the WordPiece tokenizer of
tests/support/hf_tiny.py (every model here shares it); ``copy_student(teacher, path,
layers)`` writes a student whose embeddings are the teacher's and whose layer i is the
teacher's layer (i + 1) * k - 1 (k = teacher layers / student layers): TinyBERT's uniform
map. For every mapped pair to be the same computation, the teacher's layers off the map must
hand their input on unchanged: ``make_bert(..., passthrough=[0, 2])`` zeroes those layers'
output projections (attention W_O and the feed-forward's second matrix), so with BERT's
post-norm (LayerNorm weight 1, bias 0) they write nothing into the stream; their attention
patterns stay random, so they differ from the copied layers' off the map.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tests.support.hf_tiny import MAX_POSITIONS, wordpiece_tokenizer

TEXTS = ["the cat sat on the mat because it was tired",
         "a quick brown fox jumps over the lazy dog",
         "where is the train station? i would like a cup of coffee."]


def make_bert(path, layers: int, heads: int, seed: int = 0, hidden: int = 32,
              passthrough: tuple[int, ...] = ()) -> Path:
    """A random BERT whose heads attend sharply enough to tell layers apart; the layers in
    `passthrough` write nothing into the residual stream."""
    from transformers import BertConfig, BertModel

    tok = wordpiece_tokenizer()
    cfg = BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=2 * hidden,
                     max_position_embeddings=MAX_POSITIONS, pad_token_id=tok.pad_token_id,
                     initializer_range=0.2)
    torch.manual_seed(seed)
    model = BertModel(cfg).eval()
    with torch.no_grad():
        for i in passthrough:
            layer = model.encoder.layer[i]
            for linear in (layer.attention.output.dense, layer.output.dense):
                linear.weight.zero_()
                linear.bias.zero_()
    path = Path(path)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def copy_student(teacher_path, path, layers: int) -> Path:
    """The student made of the teacher's embeddings and layers k - 1, 2k - 1, ..."""
    from transformers import BertConfig, BertModel

    teacher = BertModel.from_pretrained(teacher_path).eval()
    n = teacher.config.num_hidden_layers
    cfg = BertConfig.from_dict({**teacher.config.to_dict(), "num_hidden_layers": layers})
    student = BertModel(cfg).eval()
    student.embeddings.load_state_dict(teacher.embeddings.state_dict())
    student.pooler.load_state_dict(teacher.pooler.state_dict())
    for i in range(layers):
        student.encoder.layer[i].load_state_dict(
            teacher.encoder.layer[(i + 1) * n // layers - 1].state_dict())
    path = Path(path)
    student.save_pretrained(path)
    wordpiece_tokenizer().save_pretrained(path)
    return path
