"""BERT's input: token + segment + position embeddings, read from the model's own tables.

For a BERT-family model (BERT, MiniLM, RoBERTa, DistilBERT) the encoder's input is
LayerNorm(E_token[id] + E_segment[type] + E_position[pos]) (dropout is off at inference).
This module reads the three tables and returns each token's three rows, their sum and the
LayerNorm output, so a page can show how much each part contributes (their norms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from viz_core.i18n import N_

from ..errors import InputError


def _f32(p):
    """A parameter in float32, or None."""
    return None if p is None else p.float()


@dataclass
class EmbeddingParts:
    tokens: list[str]
    input_ids: list[int]
    segments: list[int]  # token_type_ids: 0 = sentence A, 1 = sentence B
    positions: list[int]  # row of the position table each token reads
    token: np.ndarray  # float32 [n, d]
    segment: np.ndarray  # float32 [n, d] (zeros when the model has no segment table)
    position: np.ndarray  # float32 [n, d]
    total: np.ndarray  # float32 [n, d]: token + segment + position
    normed: np.ndarray  # float32 [n, d]: LayerNorm(total), what layer 0 reads
    has_segments: bool

    def norms(self) -> dict[str, np.ndarray]:
        """L2 norm per token of each part, float32 [n]."""
        return {name: np.linalg.norm(getattr(self, name), axis=1).astype(np.float32)
                for name in ("token", "segment", "position", "total", "normed")}


def embeddings_module(hf_model):
    """The module holding word_embeddings and position_embeddings (BERT-family), or None."""
    for _, module in hf_model.named_modules():
        if hasattr(module, "word_embeddings") and hasattr(module, "position_embeddings"):
            return module
    return None


def segment_runs(segments: list[int]) -> list[tuple[int, int, int]]:
    """(start, end, segment) of each run of equal segment ids, end exclusive."""
    runs, start = [], 0
    for i in range(1, len(segments) + 1):
        if i == len(segments) or segments[i] != segments[start]:
            runs.append((start, i, int(segments[start])))
            start = i
    return runs


def embedding_parts(model, text: str, pair: str | None = None) -> EmbeddingParts:
    """The three embedding rows of every token of `text` (and `pair`, as sentence B)."""
    import torch

    hf = getattr(model, "hf_model", None)
    tokenizer = getattr(model, "tokenizer", None)
    emb = embeddings_module(hf) if hf is not None else None
    if emb is None or tokenizer is None:
        raise InputError(N_("This model has no BERT-style embedding tables (token, segment, "
                         "position) to show."))
    if not isinstance(text, str) or not text.strip():
        raise InputError(N_("The input is empty: type some text."))
    pair = pair if pair and pair.strip() else None
    # the backend's tokenizer call: a tokenizer that fails, or gives ids the weights lack,
    # is an InputError there (cut to the position table below, not there)
    enc = model.encode_text(text, "input", 1 << 62, [], pair=pair)
    ids = list(enc["input_ids"])
    n_pos = emb.position_embeddings.num_embeddings
    pad = getattr(emb, "padding_idx", None)  # RoBERTa numbers positions from padding_idx + 1
    offset = pad + 1 if isinstance(pad, int) else 0
    room = n_pos - offset
    if not ids:
        raise InputError(N_("The input has no tokens this model can read."))
    segments = list(enc.get("token_type_ids") or [0] * len(ids))[:room]
    ids = ids[:room]
    positions = [offset + i for i in range(len(ids))]
    with torch.inference_mode():
        dev = emb.word_embeddings.weight.device
        id_t = torch.tensor(ids, device=dev)
        tok = emb.word_embeddings(id_t).float()
        pos = emb.position_embeddings(torch.tensor(positions, device=dev)).float()
        table = getattr(emb, "token_type_embeddings", None)
        if table is not None:
            seg = table(torch.tensor(segments, device=dev)).float()
        else:
            seg = torch.zeros_like(tok)
        total = tok + seg + pos
        norm = getattr(emb, "LayerNorm", None) or getattr(emb, "layer_norm", None)
        # the norm in float32 with the module's own parameters: a bfloat16 model (the GPU's
        # default precision) would otherwise get float32 input and bfloat16 weights
        normed = torch.nn.functional.layer_norm(
            total, norm.normalized_shape, _f32(norm.weight), _f32(norm.bias),
            norm.eps) if norm is not None else total
    shown = tokenizer.convert_ids_to_tokens(ids)
    return EmbeddingParts(
        tokens=[str(t) for t in shown], input_ids=ids, segments=[int(s) for s in segments],
        positions=positions, token=_np(tok), segment=_np(seg), position=_np(pos),
        total=_np(total), normed=_np(normed), has_segments=table is not None)


def _np(t) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float32)


def parts_rows(parts: EmbeddingParts) -> list[dict]:
    """One row per token: its segment, position and the norm of each part."""
    norms = parts.norms()
    return [{"position": i, "token": t, "segment": "AB"[s] if s in (0, 1) else str(s),
             "position row": p, "‖token‖": round(float(norms["token"][i]), 3),
             "‖segment‖": round(float(norms["segment"][i]), 3),
             "‖position‖": round(float(norms["position"][i]), 3),
             "‖sum‖": round(float(norms["total"][i]), 3)}
            for i, (t, s, p) in enumerate(zip(parts.tokens, parts.segments, parts.positions))]
