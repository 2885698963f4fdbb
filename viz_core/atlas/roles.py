"""Head-role scores of one attention block on one example: pure numpy, no model.

Every score is in [0, 1] and is a mean over the query positions where the role is defined
(its "eligible" queries); with none it is NaN, so an example without a repeated token says
nothing about duplicate or induction heads instead of dragging them to 0. The peak of a role
is the eligible query position where that head's contribution is largest.
Definitions with examples: docs/ATLAS.md.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from ..i18n import N_

# the six "specific" roles first: a head's dominant role is one of them when it is clear
SPECIFIC = ("previous", "duplicate", "induction", "first", "delimiter", "current")
ROLES = (*SPECIFIC, "local", "broad")
SELF_ONLY = ("previous", "duplicate", "induction", "current", "local")
ROLE_LABELS = {
    "previous": N_("previous-token"), "duplicate": N_("duplicate-token"),
    "induction": N_("induction"), "first": N_("first-token / sink"),
    "delimiter": N_("delimiter / special"), "current": N_("current-token"),
    "local": N_("local (distance)"), "broad": N_("broad (entropy)"),
}

_SPECIAL = re.compile(r"^(<\|?[^<>\s]{1,20}\|?>|\[[A-Z]{2,8}\])$")  # <eos> <|endoftext|> [SEP]
_DELIMS = frozenset(".,;:!?|/\\-–—()[]{}\"'`\n\t␣") | {"...", "``", "''", "\\n"}
_MARKERS = ("Ġ", "▁", "##", "Ċ")  # BPE / SentencePiece / WordPiece word markers


@functools.lru_cache(maxsize=65536)
def is_special(token: str) -> bool:
    """A tokenizer's special token: <bos>, <eos>, <pad>, <unk>, [CLS], [SEP], <|endoftext|>."""
    return bool(_SPECIAL.match(token))


@functools.lru_cache(maxsize=65536)
def is_delimiter(token: str) -> bool:
    """Punctuation, a separator or a special token (after stripping word markers)."""
    if is_special(token):
        return True
    bare = token
    for m in _MARKERS:
        bare = bare.replace(m, "")
    return bare == "" and token != "" or bare in _DELIMS or (bare != "" and all(
        c in _DELIMS for c in bare))


def _masked_mean(c: np.ndarray, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per head: mean of c[h, q] over eligible q, and the eligible q where c peaks."""
    n_heads = c.shape[0]
    if not eligible.any():
        return np.full(n_heads, np.nan, np.float32), np.full(n_heads, -1, np.int32)
    sel = c[:, eligible]  # (head, n_eligible)
    where = np.flatnonzero(eligible)
    score = sel.mean(axis=1, dtype=np.float64)
    peak = where[np.argmax(sel, axis=1)]  # first maximum: deterministic on ties
    return np.clip(score, 0.0, 1.0).astype(np.float32), peak.astype(np.int32)


def block_roles(pattern: np.ndarray, mask: np.ndarray, q_tokens: list[str],
                k_tokens: list[str], q_valid: np.ndarray, k_valid: np.ndarray,
                self_attention: bool) -> dict[str, np.ndarray]:
    """Scores of every head of one block on one example.

    pattern: float32 [head, q, k]; mask: bool [q, k], True = blocked; q_valid / k_valid:
    bool, False at padding. Returns {role: float32 [head]}, {"peak_"+role: int32 [head]},
    and the raw "distance" (mean attention distance in tokens) and "entropy" (nats).
    """
    n_heads, n_q, n_k = pattern.shape
    allowed = ~mask & q_valid[:, None] & k_valid[None, :]  # (q, k)
    # blocked cells are exactly 0 (the trace contract), so pad keys add nothing; pad and
    # one-key rows are never eligible below. No masked copy of the pattern is needed.
    p = np.asarray(pattern, dtype=np.float32)  # (head, q, k)
    n_allowed = allowed.sum(axis=1)
    rows = n_allowed >= 2  # a query that can see one key only has no choice: it says nothing
    qi = np.arange(n_q)
    out: dict[str, np.ndarray] = {}

    def put(role: str, c: np.ndarray, eligible: np.ndarray) -> None:
        out[role], out["peak_" + role] = _masked_mean(c, eligible & rows)

    def undefined(role: str) -> None:
        out[role] = np.full(n_heads, np.nan, np.float32)
        out["peak_" + role] = np.full(n_heads, -1, np.int32)

    # first token / sink: attention to key 0 (query 0 excluded in self-attention: a causal
    # query 0 can only see itself, which says nothing)
    first_ok = allowed[:, 0] & ((qi >= 1) if self_attention else True)
    put("first", p[:, :, 0], first_ok)

    # delimiter / special: mass on punctuation, separators and special tokens other than key 0
    delim = np.array([is_delimiter(t) for t in k_tokens]) & k_valid
    delim[0] = False
    put("delimiter", p[:, :, delim].sum(axis=2), (allowed & delim[None, :]).any(axis=1))

    # broad: entropy of the row over its allowed keys, normalised by log(#allowed)
    log_p = np.log(p, out=np.zeros_like(p), where=p > 0)
    ent = -np.einsum("hqk,hqk->hq", p, log_p)  # (head, q)
    del log_p
    norm = ent / np.log(np.maximum(n_allowed, 2))[None, :]
    put("broad", norm, rows)
    out["entropy"] = (ent[:, rows].mean(axis=1) if rows.any()
                      else np.full(n_heads, np.nan)).astype(np.float32)

    if not self_attention:  # cross-attention: positions of two different sequences
        for role in SELF_ONLY:
            undefined(role)
        out["distance"] = np.full(n_heads, np.nan, np.float32)
        return _ordered(out)

    put("current", p[:, qi, qi], allowed[qi, qi])
    prev_ok = np.zeros(n_q, bool)
    prev_ok[1:] = allowed[qi[1:], qi[1:] - 1]
    prev = np.zeros((n_heads, n_q), np.float32)
    prev[:, 1:] = p[:, qi[1:], qi[1:] - 1]
    put("previous", prev, prev_ok)

    # duplicate: earlier keys holding the same token as the query (specials never count)
    vocab = {t: i for i, t in enumerate(dict.fromkeys([*k_tokens, *q_tokens]))}
    k_ids = np.array([vocab[t] for t in k_tokens])
    q_ids = np.array([vocab[t] for t in q_tokens])
    plain = np.array([not is_special(t) for t in k_tokens]) & k_valid
    earlier = np.tril(np.ones((n_q, n_k), bool), k=-1)
    same = (q_ids[:, None] == k_ids[None, :]) & earlier & plain[None, :] & allowed
    put("duplicate", _sum_over(p, same), same.any(axis=1))

    # induction: the key right after an earlier copy of the query's token (not the query itself)
    succ = np.zeros_like(same)
    succ[:, 1:] = same[:, :-1]
    succ &= allowed & (np.arange(n_k)[None, :] != qi[:, None])
    put("induction", _sum_over(p, succ), succ.any(axis=1))

    # local: 1 - (mean distance / farthest allowed distance) of each row
    dist = np.abs(qi[:, None] - np.arange(n_k)[None, :]).astype(np.float32)  # (q, k)
    far = np.where(allowed, dist, 0).max(axis=1)
    mean_dist = np.einsum("hqk,qk->hq", p, dist)  # (head, q)
    with np.errstate(divide="ignore", invalid="ignore"):
        put("local", 1.0 - mean_dist / np.where(far > 0, far, 1)[None, :], far > 0)
    out["distance"] = (mean_dist[:, rows].mean(axis=1) if rows.any()
                       else np.full(n_heads, np.nan)).astype(np.float32)
    return _ordered(out)


def _sum_over(p: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """sum_k p[h, q, k] over the (few) True cells of cells[q, k] -> (head, q)."""
    q_idx, k_idx = np.nonzero(cells)
    total = np.zeros((p.shape[1], p.shape[0]), np.float32)  # (q, head)
    np.add.at(total, q_idx, p[:, q_idx, k_idx].T)
    return total.T


def _ordered(out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    keys = [*ROLES, "distance", "entropy", *(f"peak_{r}" for r in ROLES)]
    return {k: out[k] for k in keys}


# ---- per-head summary: which role describes a head best ----------------------------------
CLEAR = 0.4  # a specific role must reach this mean score to be a head's dominant role
BROAD, LOCAL = 0.75, 0.75


def dominant_role(scores: dict[str, float]) -> str:
    """The head's dominant role from its mean scores (NaN = not measured).

    The strongest specific role when it reaches CLEAR; otherwise "broad" when the mean
    normalised entropy reaches BROAD, "local" when the local score reaches LOCAL, else "mixed".
    """
    best, best_score = None, -1.0
    for role in SPECIFIC:
        s = scores.get(role)
        if s is not None and np.isfinite(s) and s > best_score:
            best, best_score = role, float(s)
    if best is not None and best_score >= CLEAR:
        return best
    if np.isfinite(scores.get("broad", np.nan)) and scores["broad"] >= BROAD:
        return "broad"
    if np.isfinite(scores.get("local", np.nan)) and scores["local"] >= LOCAL:
        return "local"
    return "mixed"
