"""Greedy decoding of our own Transformer: the one greedy loop (batched, with a KV cache).

Used by the native backend (a trace without a target decodes its own output) and by the
demo tasks' evaluation. Hugging Face models decode greedily with their own ``generate``.
"""

from __future__ import annotations

import torch

from ..model.transformer import DecoderCache, Transformer


def pad_batch(seqs: list[list[int]], pad_id: int = 0) -> torch.Tensor:
    """Right-pad id lists into one (B, T) tensor."""
    width = max(len(s) for s in seqs)
    return torch.tensor([s + [pad_id] * (width - len(s)) for s in seqs], dtype=torch.long)


@torch.inference_mode()
def greedy_batch(model: Transformer, sources: list[list[int]] | None, prefixes: list[list[int]],
                 max_new: int) -> list[list[int]]:
    """Greedy continuation of each prefix (all the same length), batched, with a KV cache.

    sources: source ids with their <eos> (None for a decoder-only model). Returns the new ids
    of each row, cut before its <eos>.
    """
    cfg = model.cfg
    device = next(model.parameters()).device
    src = memory = None
    if sources is not None:
        src = pad_batch(sources, cfg.pad_id).to(device)
        memory = model.encode(src)
    cache = DecoderCache()
    step_in = torch.tensor(prefixes, dtype=torch.long, device=device)
    max_new = min(max_new, cfg.max_len - step_in.shape[1])
    out = torch.full((len(prefixes), 0), cfg.pad_id, dtype=torch.long, device=device)
    done = torch.zeros(len(prefixes), dtype=torch.bool, device=device)
    for _ in range(max_new):
        logits = model.decode(step_in, memory, src, cache)
        nxt = logits[:, -1].argmax(-1)  # (B,)
        nxt = torch.where(done, torch.full_like(nxt, cfg.eos_id), nxt)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == cfg.eos_id
        if bool(done.all()):
            break
        step_in = nxt[:, None]
    result = []
    for row in out.tolist():
        result.append(row[: row.index(cfg.eos_id)] if cfg.eos_id in row else row)
    return result
