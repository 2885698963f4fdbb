"""How spread out each head's attention is: the mean entropy of its rows.

For one query row p over the keys the mask allows (n of them), the entropy in nats is

    H = -sum_k p_k log p_k        (0 log 0 = 0; blocked keys have p = 0)

between 0 (all weight on one key) and log n (uniform over the allowed keys). Per (block,
head) the table gives the mean of H over the query rows with at least one allowed key, and
the mean of H / log n over the rows with at least two (a row with one key has no choice).
A low entropy marks a sharp head (previous token, a sink); a normalised entropy near 1 a head
that averages.

Rows are read in windows of one head at a time (``BlockTrace.window``), so a long input keeps
nothing N x N per head.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from viz_core.i18n import N_

from ..errors import InputError
from ..model.choices import BlockKind, choose

COLUMNS = ["block", "kind", "layer", "head", "entropy", "normalised", "queries"]
ROW_BYTES = 16 << 20  # bytes of one head's rows read at a time


def row_entropy(weights: np.ndarray) -> np.ndarray:
    """float64 [...]: the entropy in nats of each row of ``weights`` [..., k] (0 log 0 = 0)."""
    p = np.asarray(weights, dtype=np.float64)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(axis=-1)


def block_entropy(block) -> tuple[np.ndarray, np.ndarray, int]:
    """Per head of one BlockTrace: (mean entropy in nats, mean entropy / log(allowed keys),
    number of query rows the first mean is over)."""
    n_heads, n_q, n_k = block.shape
    allowed = np.empty(n_q, dtype=np.int64)
    step = max(1, ROW_BYTES // (4 * max(1, n_k)))
    for r0 in range(0, n_q, step):
        r1 = min(n_q, r0 + step)
        allowed[r0:r1] = (~block.mask_window((r0, r1), (0, n_k))).sum(axis=1)
    seen = allowed >= 1  # a fully blocked row has no distribution
    choice = allowed >= 2  # log 1 = 0: a single key says nothing about spread
    log_n = np.log(np.where(choice, allowed, 2))
    entropy = np.full(n_heads, np.nan)
    normalised = np.full(n_heads, np.nan)
    for h in range(n_heads):
        per_row = np.empty(n_q)
        for r0 in range(0, n_q, step):
            r1 = min(n_q, r0 + step)
            per_row[r0:r1] = row_entropy(block.window(h, (r0, r1), (0, n_k)))
        if seen.any():
            entropy[h] = float(per_row[seen].mean())
        if choice.any():
            normalised[h] = float((per_row[choice] / log_n[choice]).mean())
    return entropy, normalised, int(seen.sum())


def head_entropy(model_or_trace, text=None, target: str | None = None, *,
                 kind: BlockKind | None = None) -> pd.DataFrame:
    """Mean attention entropy per (block, head): a DataFrame with block, kind, layer, head,
    entropy (nats, mean over query rows), normalised (entropy / log(allowed keys), mean over
    rows with two or more keys: 1 = uniform, 0 = one key) and queries (rows averaged).

    ``head_entropy(trace)``, ``model.head_entropy(trace)``, or ``model.head_entropy(text)``
    (traced here; a decoder-only model: the text alone, no generated continuation, unless
    ``target`` is given). ``kind`` keeps one block kind
    ("encoder.self", "decoder.self", "decoder.cross"); None keeps every block."""
    trace = _trace_of(model_or_trace, text, target)
    if kind is not None:
        kind = choose(kind, BlockKind, "kind")
        if kind not in trace.kinds():
            raise InputError(N_("This model has no {kind!r} blocks; it has {kinds}."),
                                kind=kind, kinds=trace.kinds())
    rows = []
    for name in trace.blocks:
        block = trace[name]
        if kind is not None and block.kind != kind:
            continue
        entropy, normalised, queries = block_entropy(block)
        for h in range(block.n_heads):
            rows.append((name, block.kind, block.layer, h, entropy[h], normalised[h], queries))
    return pd.DataFrame(rows, columns=COLUMNS).astype(
        {"layer": np.int64, "head": np.int64, "entropy": np.float64,
         "normalised": np.float64, "queries": np.int64})


def _is_trace(x) -> bool:
    return hasattr(x, "blocks") and hasattr(x, "kinds")  # an AttentionTrace


def _trace_of(model_or_trace, text, target: str | None):
    if _is_trace(model_or_trace):
        return model_or_trace
    if _is_trace(text):
        return text
    model = model_or_trace
    if not isinstance(text, str) or not text.strip():
        raise InputError(N_("The text is empty: type some text."))
    options = {}
    if model.architecture == "decoder-only" and not (target and str(target).strip()):
        options["max_new"] = 0
    return model.trace(text, target, capture=("pattern",), **options)
