"""Exports of what the pages show: traces as NPZ (arrays) and JSON (tokens + arrays)."""

from __future__ import annotations

import io
import json

import numpy as np

from .trace import AttentionTrace

ARRAY_FIELDS = ("pattern", "scores", "mask", "q", "k", "v", "z")


def trace_arrays(trace: AttentionTrace, blocks: list[str] | None = None) -> dict[str, np.ndarray]:
    """Flat {"encoder.0.self/pattern": array, ...} of every captured array."""
    out = {}
    for name in blocks or trace.blocks:
        b = trace[name]
        for field in ARRAY_FIELDS:
            a = getattr(b, field)
            if a is not None:
                out[f"{name}/{field}"] = a
    if trace.positional is not None:
        out["positional"] = trace.positional
    return out


def npz_bytes(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def trace_npz(trace: AttentionTrace, blocks: list[str] | None = None) -> bytes:
    return npz_bytes(trace_arrays(trace, blocks))


def trace_meta(trace: AttentionTrace) -> dict:
    return {
        "blocks": trace.blocks, "source_tokens": trace.source_tokens,
        "target_tokens": trace.target_tokens, "output_tokens": trace.output_tokens,
        "output_text": trace.output_text, "positional_kind": trace.positional_kind,
        "positional_note": trace.positional_note, "unknown_words": trace.unknown_words,
        "warnings": trace.warnings, "model_info": trace.model_info,
    }


def trace_json(trace: AttentionTrace, blocks: list[str] | None = None,
               fields: tuple[str, ...] = ("pattern", "mask")) -> str:
    """Tokens, metadata and the chosen arrays (as nested lists) of the chosen blocks."""
    payload = trace_meta(trace)
    payload["block_data"] = {
        name: {"query_tokens": trace[name].query_tokens, "key_tokens": trace[name].key_tokens,
               **{f: getattr(trace[name], f).tolist() for f in fields
                  if getattr(trace[name], f) is not None}}
        for name in blocks or trace.blocks}
    return json.dumps(payload, default=str)
