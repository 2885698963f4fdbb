"""Head statistics, aggregates, rollout, head similarity and alignment: pure numpy.

Conventions (docs/ARCHITECTURE.md): patterns are float32 [head, q, k], rows are queries, each
row sums to 1 over its allowed keys, and a fully blocked row is all zeros. Such all-zero rows
carry no distribution, so every per-row statistic below skips them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..capture.trace import AttentionTrace
from ..model.choices import BlockKind

SPECIAL_TOKENS = frozenset(
    {"[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "<bos>", "<eos>", "<pad>", "<unk>",
     "<s>", "</s>"}
)

# --------------------------------------------------------------------------- basics


def masked_softmax(scores: np.ndarray, mask: np.ndarray | None, axis: int = -1) -> np.ndarray:
    """Softmax over `axis` with blocked (True) entries set to -inf first.

    A fully blocked row gives zeros, never NaN (same contract as the models).
    """
    s = np.asarray(scores, dtype=np.float64)
    if mask is not None:
        s = np.where(np.broadcast_to(mask, s.shape), -np.inf, s)
    top = np.max(s, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)  # all -inf row: avoid inf - inf
    e = np.exp(s - top)
    total = e.sum(axis=axis, keepdims=True)
    return (e / np.where(total > 0, total, 1.0)).astype(np.float32)


def _live_rows(pattern: np.ndarray) -> np.ndarray:
    """bool [..., q]: rows that hold a distribution (not fully blocked)."""
    return pattern.sum(axis=-1) > 0


def _row_mean(values: np.ndarray, live: np.ndarray) -> np.ndarray:
    """Mean over the q axis (last) of `values` [..., q], counting only live rows."""
    n = live.sum(axis=-1)
    return np.where(n > 0, (values * live).sum(axis=-1) / np.maximum(n, 1), np.nan)


# --------------------------------------------------------------------------- per-head stats


def entropy(pattern: np.ndarray) -> np.ndarray:
    """Mean row entropy in nats, [head, q, k] -> [head]. Uniform over n keys gives log(n)."""
    p = np.asarray(pattern, dtype=np.float64)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return _row_mean(-plogp.sum(axis=-1), _live_rows(p))


def mean_distance(pattern: np.ndarray) -> np.ndarray:
    """Mean over rows of sum_k w[q,k] * |q - k|, [head, q, k] -> [head] (in positions)."""
    p = np.asarray(pattern, dtype=np.float64)
    nq, nk = p.shape[-2:]
    dist = np.abs(np.arange(nq)[:, None] - np.arange(nk)[None, :])
    return _row_mean((p * dist).sum(axis=-1), _live_rows(p))


def _offset_score(pattern: np.ndarray, offset: int) -> np.ndarray:
    """Mean weight on key q + offset, over live rows where that key exists."""
    p = np.asarray(pattern, dtype=np.float64)
    nq, nk = p.shape[-2:]
    q = np.arange(nq)
    k = q + offset
    ok = (k >= 0) & (k < nk)
    vals = np.zeros(p.shape[:-1])
    vals[..., ok] = p[..., q[ok], k[ok]]
    return _row_mean(vals, _live_rows(p) & ok)


def previous_token_score(pattern: np.ndarray) -> np.ndarray:
    """Mean weight on k = q - 1 (rows q >= 1). A pure previous-token head scores 1."""
    return _offset_score(pattern, -1)


def diagonal_score(pattern: np.ndarray) -> np.ndarray:
    """Mean weight on k = q (attending to itself)."""
    return _offset_score(pattern, 0)


def sink_score(pattern: np.ndarray) -> np.ndarray:
    """Mean weight on the first key (k = 0), the usual 'attention sink'."""
    p = np.asarray(pattern, dtype=np.float64)
    return _row_mean(p[..., 0], _live_rows(p))


def _special_predicate(special) -> Callable[[str], bool]:
    if special is None:
        return SPECIAL_TOKENS.__contains__
    if callable(special):
        return special
    s = frozenset(special)
    return s.__contains__


def special_share(pattern: np.ndarray, key_tokens: Sequence[str],
                  special: Iterable[str] | Callable[[str], bool] | None = None) -> np.ndarray:
    """Mean share of each row's weight that lands on special tokens, [head, q, k] -> [head]."""
    p = np.asarray(pattern, dtype=np.float64)
    is_special = np.array([_special_predicate(special)(t) for t in key_tokens], dtype=bool)
    return _row_mean(p[..., is_special].sum(axis=-1), _live_rows(p))


STAT_COLUMNS = ("entropy", "distance", "special", "previous", "diagonal", "sink")


def head_stats(trace: AttentionTrace, special=None) -> pd.DataFrame:
    """Tidy table, one row per (block, head): block, kind, layer, head + STAT_COLUMNS."""
    rows = []
    for name, b in trace.block_traces.items():
        stats = {
            "entropy": entropy(b.pattern),
            "distance": mean_distance(b.pattern),
            "special": special_share(b.pattern, b.key_tokens, special),
            "previous": previous_token_score(b.pattern),
            "diagonal": diagonal_score(b.pattern),
            "sink": sink_score(b.pattern),
        }
        for h in range(b.n_heads):
            rows.append({"block": name, "kind": b.kind, "layer": b.layer, "head": h,
                         **{k: float(v[h]) for k, v in stats.items()}})
    cols = ["block", "kind", "layer", "head", *STAT_COLUMNS]
    return pd.DataFrame(rows, columns=cols)


# --------------------------------------------------------------------------- aggregates


def mean_over_heads(pattern: np.ndarray) -> np.ndarray:
    """[..., head, q, k] -> [..., q, k]."""
    return np.asarray(pattern, dtype=np.float32).mean(axis=-3)


def max_over_heads(pattern: np.ndarray) -> np.ndarray:
    """[..., head, q, k] -> [..., q, k]."""
    return np.asarray(pattern, dtype=np.float32).max(axis=-3)


def rollout(patterns: np.ndarray, cumulative: bool = False) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020) of self-attention patterns [layer, head, n, n].

    Per layer A' = 0.5 * mean_heads(A) + 0.5 * I (the residual path), rows renormalised;
    rollout = A'_L @ ... @ A'_1 (first layer applied first). Returns [n, n], or with
    cumulative=True the rollout up to each layer, [layer, n, n].
    """
    p = np.asarray(patterns, dtype=np.float64)
    if p.ndim != 4 or p.shape[-1] != p.shape[-2]:
        raise ValueError(f"rollout needs square self-attention [layer, head, n, n], got {p.shape}")
    n = p.shape[-1]
    eye = np.eye(n)
    out = eye
    steps = []
    for layer in p:
        a = 0.5 * layer.mean(axis=0) + 0.5 * eye
        a = a / a.sum(axis=-1, keepdims=True)
        out = a @ out
        steps.append(out)
    return np.stack(steps).astype(np.float32) if cumulative else out.astype(np.float32)


# --------------------------------------------------------------------------- head similarity


def _row_entropy(p: np.ndarray) -> np.ndarray:
    """-sum_k p log p over the last axis (0 log 0 = 0)."""
    logp = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logp).sum(axis=-1)


def js_divergence_matrix(patterns: np.ndarray, labels: Sequence[str] | None = None,
                         max_rows: int | None = 64):
    """Pairwise JS divergence between heads, each compared row by row and averaged over rows.

    patterns: [n_heads_total, q, k] (e.g. trace_head_patterns(trace, kind)).
    Returns (matrix float32 [n, n], symmetric with zero diagonal, labels).
    Rows that are fully blocked in either head are skipped. For long inputs only max_rows
    evenly spaced query rows are compared (the cost is heads^2 * rows * keys).
    """
    p = np.asarray(patterns, dtype=np.float64)
    if max_rows is not None and p.shape[1] > max_rows:
        p = p[:, np.linspace(0, p.shape[1] - 1, max_rows).round().astype(int)]
    n = p.shape[0]
    labels = list(labels) if labels is not None else [f"head {i}" for i in range(n)]
    live = _live_rows(p)
    h = _row_entropy(p)  # [n, q]
    out = np.zeros((n, n))
    for i in range(n - 1):
        # JS(a, b) = H((a + b) / 2) - (H(a) + H(b)) / 2, row by row: one log per pair cell
        js = _row_entropy(0.5 * (p[i][None] + p[i + 1:])) - 0.5 * (h[i][None] + h[i + 1:])
        js = np.maximum(js, 0.0)  # rounding can leave -1e-17
        both = live[i][None] & live[i + 1:]
        vals = _row_mean(js, both)
        out[i, i + 1:] = vals
        out[i + 1:, i] = vals
    return out.astype(np.float32), labels


def _sample_rows(p: np.ndarray, max_rows: int | None) -> np.ndarray:
    """Keep at most max_rows evenly spaced query rows (axis -2) of p [..., q, k]."""
    if max_rows is None or p.shape[-2] <= max_rows:
        return p
    return p[..., np.linspace(0, p.shape[-2] - 1, max_rows).round().astype(int), :]


def _mean_js(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mean over rows of JS(a[q], b[q]), [..., q, k] x [..., q, k] -> [...]; rows fully
    blocked in either pattern are skipped (NaN when none is left)."""
    js = _row_entropy(0.5 * (a + b)) - 0.5 * (_row_entropy(a) + _row_entropy(b))
    return _row_mean(np.maximum(js, 0.0), _live_rows(a) & _live_rows(b))


def layer_to_layer_divergence(stacked: np.ndarray, max_rows: int | None = 64) -> np.ndarray:
    """How much each head's pattern changes from one layer to the next.

    stacked: [layer, head, q, k] (``trace.stack(kind)``). Returns float32 [layer - 1, head]:
    row i is the Jensen-Shannon divergence (nats, 0 = same, at most ln 2) between head h of
    layer i and head h of layer i + 1, row by row and averaged over the query rows. ALBERT's
    layers share their weights, so only the changing input moves its patterns from layer to
    layer. For long inputs only max_rows evenly spaced query rows are compared.
    """
    p = _sample_rows(np.asarray(stacked, dtype=np.float64), max_rows)
    if p.ndim != 4:
        raise ValueError(f"layer_to_layer_divergence needs [layer, head, q, k], got {p.shape}")
    if p.shape[0] < 2:
        return np.zeros((0, p.shape[1]), dtype=np.float32)
    return _mean_js(p[:-1], p[1:]).astype(np.float32)


def kv_group_divergence(pattern: np.ndarray, kv_group: Sequence[int],
                        max_rows: int | None = 64) -> tuple[float, float]:
    """Grouped-query attention: are heads that read the same key/value head alike?

    pattern: [head, q, k] of one block; kv_group[h]: the key/value head query head h reads.
    Returns (within, across): the mean Jensen-Shannon divergence over pairs of heads in the
    same group, and over pairs in different groups (NaN where there is no such pair, e.g.
    ``within`` for plain multi-head attention, ``across`` for multi-query attention).
    """
    p = np.asarray(pattern, dtype=np.float64)
    groups = [int(g) for g in kv_group]
    if len(groups) != p.shape[0]:
        raise ValueError(f"kv_group has {len(groups)} entries for {p.shape[0]} heads")
    matrix, _ = js_divergence_matrix(p, max_rows=max_rows)
    same = np.equal.outer(groups, groups)
    upper = np.triu(np.ones_like(same), k=1)
    within, across = matrix[same & upper], matrix[~same & upper]
    return (float(within.mean()) if within.size else float("nan"),
            float(across.mean()) if across.size else float("nan"))


def kv_group_table(trace: AttentionTrace, kind: BlockKind, max_rows: int | None = 64) -> pd.DataFrame:
    """One row per layer of one block kind: layer, groups, within, across
    (``kv_group_divergence`` of its pattern)."""
    rows = []
    for b in trace.layers(kind):
        within, across = kv_group_divergence(b.pattern, b.kv_group, max_rows)
        rows.append({"layer": b.layer, "groups": b.kv_heads, "within": within,
                     "across": across})
    return pd.DataFrame(rows, columns=["layer", "groups", "within", "across"])


def kv_group_heads(kv_group: Sequence[int]) -> dict[int, list[int]]:
    """{key/value head: [query heads reading it]}, e.g. [0, 0, 1, 1] -> {0: [0, 1], 1: [2, 3]}."""
    out: dict[int, list[int]] = {}
    for h, g in enumerate(kv_group):
        out.setdefault(int(g), []).append(h)
    return out


def trace_head_patterns(trace: AttentionTrace, kind: BlockKind):
    """All heads of one block kind as ([layer*head, q, k], labels "L{layer}H{head}")."""
    stacked = trace.stack(kind)  # [layer, head, q, k]
    n_layers, n_heads = stacked.shape[:2]
    labels = [f"L{layer}H{h}" for layer in range(n_layers) for h in range(n_heads)]
    return stacked.reshape(n_layers * n_heads, *stacked.shape[2:]), labels


def cluster_order(distance: np.ndarray) -> list[int]:
    """Leaf order of average-linkage agglomerative clustering (pure numpy, no scipy).

    Similar heads end up next to each other, which makes a similarity heatmap show blocks.
    Cluster distances are updated with the Lance-Williams rule for average linkage.
    """
    d = np.array(distance, dtype=np.float64)
    n = len(d)
    if n == 0:
        return []
    members: list[list[int] | None] = [[i] for i in range(n)]
    np.fill_diagonal(d, np.inf)
    for _ in range(n - 1):
        a, b = np.unravel_index(np.argmin(d), d.shape)
        a, b = min(a, b), max(a, b)
        na, nb = len(members[a]), len(members[b])
        merged = (na * d[a] + nb * d[b]) / (na + nb)
        d[a, :] = merged
        d[:, a] = merged
        d[a, a] = np.inf
        d[b, :] = np.inf
        d[:, b] = np.inf
        members[a] = members[a] + members[b]
        members[b] = None
    return next(m for m in members if m is not None)


# --------------------------------------------------------------------------- alignment


def alignment_argmax(pattern: np.ndarray) -> np.ndarray:
    """For each head and target (query) token, the source key with the largest weight.

    [head, q, k] -> int [head, q]; -1 for fully blocked rows.
    """
    p = np.asarray(pattern)
    out = p.argmax(axis=-1)
    return np.where(_live_rows(p), out, -1)


def gold_sets(gold) -> dict[int, set[int]]:
    sets: dict[int, set[int]] = {}
    items = gold.items() if isinstance(gold, Mapping) else gold
    for q, k in items:
        ks = {int(x) for x in k} if isinstance(k, Iterable) else {int(k)}
        sets.setdefault(int(q), set()).update(ks)
    return sets


def alignment_score(pattern_head: np.ndarray, gold) -> float:
    """Fraction of gold target tokens whose argmax source token is a gold source.

    pattern_head: [q, k] of one head. gold: list of (q, k) pairs, or {q: k or [k, ...]}.
    A target with several gold sources counts as hit if the argmax is any of them.
    """
    sets = gold_sets(gold)
    if not sets:
        raise ValueError("gold alignment is empty")
    best = alignment_argmax(np.asarray(pattern_head)[None])[0]
    hits = [int(best[q]) in ks for q, ks in sets.items()]
    return float(np.mean(hits))


def alignment_scores(trace: AttentionTrace, gold, kind: BlockKind = "decoder.cross") -> pd.DataFrame:
    """alignment_score of every (layer, head) of one kind, best first."""
    rows = []
    for b in trace.layers(kind):
        for h in range(b.n_heads):
            rows.append({"block": b.name, "layer": b.layer, "head": h,
                         "score": alignment_score(b.pattern[h], gold)})
    df = pd.DataFrame(rows, columns=["block", "layer", "head", "score"])
    return df.sort_values(["score", "layer", "head"], ascending=[False, True, True],
                          ignore_index=True)


def best_alignment_head(trace: AttentionTrace, gold, kind: BlockKind = "decoder.cross"):
    """(layer, head, score) of the head whose argmax best matches the gold alignment."""
    df = alignment_scores(trace, gold, kind)
    if df.empty:
        raise ValueError(f"trace has no {kind} blocks")
    top = df.iloc[0]
    return int(top["layer"]), int(top["head"]), float(top["score"])
