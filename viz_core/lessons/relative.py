"""Relative positions: T5's learned bucketed bias and a toy Transformer-XL score split.

T5 adds to every attention logit a learned scalar per head that depends only on the bucket
of the distance k - q (Raffel et al., 2020): exact buckets for short distances, log-spaced
ones up to max_distance, one bucket beyond. Transformer-XL (Dai et al., 2019) writes the
score of query i and key j as four terms:
    A_ij = q_i·k_j  (a, content-content) + q_i·r_{i-j}  (b, content-position)
         + u·k_j    (c, global content bias) + v·r_{i-j}  (d, global position bias)
with q_i = W_q E_i, k_j = W_kE E_j, r_{i-j} = W_kR R_{i-j} (R sinusoidal of the distance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..i18n import N_
from ..model.choices import Stack, choose


# ---- T5 ---------------------------------------------------------------------------------
def t5_bucket(relative_position, bidirectional: bool = True, num_buckets: int = 32,
              max_distance: int = 128) -> np.ndarray:
    """T5's bucket of each relative position (key - query), as int64 (numpy port of
    transformers' T5Attention._relative_position_bucket)."""
    rel = np.asarray(relative_position, dtype=np.int64)
    bucket = np.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        bucket += (rel > 0).astype(np.int64) * num_buckets
        rel = np.abs(rel)
    else:
        rel = -np.minimum(rel, 0)
    max_exact = num_buckets // 2
    is_small = rel < max_exact
    # float32 like the reference, so distances on a bucket edge truncate the same way
    ratio = np.maximum(rel, 1).astype(np.float32) / np.float32(max_exact)
    scaled = (np.log(ratio) / np.float32(math.log(max_distance / max_exact))
              * np.float32(num_buckets - max_exact))
    large = max_exact + scaled.astype(np.float32).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return bucket + np.where(is_small, rel, large)


def t5_bias(weight: np.ndarray, q_len: int, k_len: int | None = None,
            bidirectional: bool = True, max_distance: int = 128) -> np.ndarray:
    """float32 [head, q, k]: weight[bucket(k - q), head]; weight is [num_buckets, heads]."""
    w = np.asarray(weight, dtype=np.float32)
    k_len = q_len if k_len is None else k_len
    rel = np.arange(k_len)[None, :] - np.arange(q_len)[:, None]  # (q, k): memory - context
    buckets = t5_bucket(rel, bidirectional, w.shape[0], max_distance)
    return np.ascontiguousarray(np.moveaxis(w[buckets], -1, 0))


def bias_by_distance(weight: np.ndarray, max_rel: int, bidirectional: bool = True,
                     max_distance: int = 128) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distances -max_rel..max_rel, buckets, float32 [head, distance] bias)."""
    w = np.asarray(weight, dtype=np.float32)
    dist = np.arange(-max_rel, max_rel + 1)
    buckets = t5_bucket(dist, bidirectional, w.shape[0], max_distance)
    return dist, buckets, np.ascontiguousarray(w[buckets].T)


def bucket_boundaries(distances: np.ndarray, buckets: np.ndarray) -> list[float]:
    """Distances (half-way points) where the bucket changes."""
    d, b = np.asarray(distances), np.asarray(buckets)
    return [float(d[i] + d[i + 1]) / 2 for i in range(len(d) - 1) if b[i] != b[i + 1]]


@dataclass
class T5Bias:
    weight: np.ndarray  # float32 [num_buckets, heads]
    bidirectional: bool
    max_distance: int
    stack: Stack


def t5_bias_from_model(hf_model, stack: Stack = "encoder") -> T5Bias | None:
    """The first layer's relative_attention_bias of a T5-family model (None otherwise)."""
    stack = choose(stack, Stack, "stack")
    cfg = getattr(hf_model, "config", None)
    part = getattr(hf_model, stack, None)
    if cfg is None or part is None or not hasattr(part, "block"):
        return None
    attn = part.block[0].layer[0].SelfAttention
    emb = getattr(attn, "relative_attention_bias", None)
    if emb is None:
        return None
    w = emb.weight.detach().float().cpu().numpy()
    return T5Bias(np.ascontiguousarray(w, dtype=np.float32), stack == "encoder",
                  int(getattr(cfg, "relative_attention_max_distance", 128)), stack)


# ---- Transformer-XL (toy) -------------------------------------------------------------------
def sinusoid(distances: np.ndarray, d: int) -> np.ndarray:
    """float64 [len, d]: the paper's sinusoid of each (relative) distance."""
    pos = np.asarray(distances, dtype=np.float64)[:, None]
    i = np.arange(d) // 2
    angle = pos * np.power(10000.0, -2 * i / d)
    return np.where(np.arange(d) % 2 == 0, np.sin(angle), np.cos(angle))


@dataclass
class ToyXL:
    E: np.ndarray  # [n, d] token embeddings
    W_q: np.ndarray  # [d, d_k]
    W_kE: np.ndarray  # [d, d_k]
    W_kR: np.ndarray  # [d, d_k]
    u: np.ndarray  # [d_k] global content bias
    v: np.ndarray  # [d_k] global position bias


def toy_xl(n: int, d: int = 16, d_k: int = 8, seed: int = 0) -> ToyXL:
    rng = np.random.default_rng(seed)
    s = 1 / math.sqrt(d)
    return ToyXL(rng.normal(size=(n, d)), rng.normal(scale=s, size=(d, d_k)),
                 rng.normal(scale=s, size=(d, d_k)), rng.normal(scale=s, size=(d, d_k)),
                 rng.normal(size=d_k), rng.normal(size=d_k))


def xl_terms(m: ToyXL) -> dict[str, np.ndarray]:
    """The four [n, n] score terms (float32) and their sum; rows queries i, columns keys j,
    R indexed by the distance i - j."""
    n, d = m.E.shape
    q = m.E @ m.W_q  # (n, d_k)
    k = m.E @ m.W_kE  # (n, d_k)
    dist = np.arange(n)[:, None] - np.arange(n)[None, :]  # (i, j): i - j
    r = sinusoid(dist.ravel(), d).reshape(n, n, d) @ m.W_kR  # (i, j, d_k)
    terms = {
        N_("a · content–content"): q @ k.T,
        N_("b · content–position"): np.einsum("ie,ije->ij", q, r),
        N_("c · global content bias"): np.broadcast_to(k @ m.u, (n, n)),
        N_("d · global position bias"): r @ m.v,
    }
    out = {name: np.ascontiguousarray(t, dtype=np.float32) for name, t in terms.items()}
    out[N_("total")] = np.sum([terms[t] for t in terms], axis=0).astype(np.float32)
    return out
