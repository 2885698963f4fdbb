"""Scoring functions: how a query rates each key before the softmax, and why Transformers
divide by sqrt(d_k).

Three ways to score a query q against keys k_j, all on the same q and K:

    dot       s_j = q · k_j                               (Luong et al. 2015)
    scaled    s_j = q · k_j / sqrt(d_k)                   (Vaswani et al. 2017)
    additive  s_j = v_a^T tanh(W_1 q + W_2 k_j)           (Bahdanau et al. 2015)

A Transformer has no trained W_1, W_2, v_a, so `additive_params` draws them from an explicit
seed: the additive row is a *random, untrained* scorer of width d_a, there to show the shape of
the function (bounded by tanh, |s_j| <= sum |v_a|), not what a trained one would choose.

Why sqrt(d_k): with q and k_j of i.i.d. components of mean 0 and variance 1, q · k_j is a sum
of d_k products of variance 1, so Var(q · k_j) = d_k. The logits then spread by sqrt(d_k),
the softmax puts nearly all its weight on the largest one (it saturates) and its gradient
(the Jacobian diag(p) - p p^T) vanishes. Dividing by sqrt(d_k) brings the variance back to 1
whatever the head width. `saturation_curves` measures this on random draws.

Pure numpy (float64); every random draw takes an explicit seed. Masks follow the project's
convention: bool, True = blocked; blocked keys get weight exactly 0 and a fully blocked row
is all zeros, never NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..i18n import N_

SCORERS = ("dot", "scaled", "additive")
SCORER_LABELS = {"dot": N_("dot product q·k"), "scaled": N_("scaled dot product q·k/√d_k"),
                 "additive": N_("additive vᵀ tanh(W₁q + W₂k)")}
DK_CHOICES = tuple(2 ** i for i in range(11))  # 1, 2, 4, ..., 1024: the d_k slider
N_KEYS = 16  # keys per random draw in the saturation experiment
N_DRAWS = 400  # random (q, K) draws per d_k for the curves
SATURATED = 0.99  # a row "saturates" when its largest weight exceeds this
STATS = {"max_weight": N_("mean largest weight"),
         "entropy": N_("mean entropy / log n (1 = uniform)"),
         "saturated": N_("share of rows with largest weight > 0.99"),  # SATURATED
         "gradient": N_("mean largest softmax gradient max_j p_j(1−p_j)")}


# ---- softmax under a mask ----------------------------------------------------------------
def masked_softmax(scores: np.ndarray, blocked: np.ndarray | None = None) -> np.ndarray:
    """float64 softmax over the last axis; blocked (True) entries get exactly 0, a fully
    blocked row is all zeros (never NaN)."""
    s = np.asarray(scores, dtype=np.float64)
    if blocked is not None:
        s = np.where(np.broadcast_to(np.asarray(blocked, dtype=bool), s.shape), -np.inf, s)
    top = np.max(s, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)  # an all -inf row: avoid inf - inf
    e = np.exp(s - top)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


# ---- the three scoring functions ---------------------------------------------------------
def dot_scores(q: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """q · k_j: q [..., d_k], keys [..., n, d_k] -> [..., n]."""
    q, keys = np.asarray(q, np.float64), np.asarray(keys, np.float64)
    return np.einsum("...d,...nd->...n", q, keys)


def scaled_scores(q: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """q · k_j / sqrt(d_k)."""
    return dot_scores(q, keys) / math.sqrt(np.shape(q)[-1])


@dataclass(frozen=True)
class AdditiveParams:
    """An untrained additive (Bahdanau) scorer: W_1, W_2 [d_a, d_k], v_a [d_a]."""

    w1: np.ndarray
    w2: np.ndarray
    v_a: np.ndarray
    seed: int

    @property
    def width(self) -> int:
        return int(self.v_a.shape[0])


def additive_params(d_k: int, d_a: int, seed: int) -> AdditiveParams:
    """W_1, W_2 ~ N(0, 1/d_k) and v_a ~ N(0, 1/d_a) (the usual fan-in initialisation, so a
    unit-variance q gives unit-variance pre-activations), drawn from `seed` alone."""
    if d_k < 1 or d_a < 1:
        raise InputError(N_("d_k and d_a must be whole numbers, 1 or more, not {d_k} and "
                            "{d_a}."), d_k=d_k, d_a=d_a)
    rng = np.random.default_rng([int(seed), 0xADD])
    w1 = rng.standard_normal((d_a, d_k)) / math.sqrt(d_k)
    w2 = rng.standard_normal((d_a, d_k)) / math.sqrt(d_k)
    v_a = rng.standard_normal(d_a) / math.sqrt(d_a)
    return AdditiveParams(w1, w2, v_a, int(seed))


def additive_scores(q: np.ndarray, keys: np.ndarray, params: AdditiveParams) -> np.ndarray:
    """v_a^T tanh(W_1 q + W_2 k_j) for every key: q [d_k], keys [n, d_k] -> [n]."""
    q, keys = np.asarray(q, np.float64), np.asarray(keys, np.float64)
    hidden = np.tanh((params.w1 @ q)[None, :] + keys @ params.w2.T)  # (n, d_a)
    return hidden @ params.v_a


@dataclass
class ScoreComparison:
    """The three scorers on one query: scores and softmax weights [n_keys] per scorer."""

    scores: dict[str, np.ndarray]
    weights: dict[str, np.ndarray]
    blocked: np.ndarray  # bool [n_keys], True = blocked
    d_k: int
    d_a: int
    seed: int


def compare_scores(q: np.ndarray, keys: np.ndarray, blocked: np.ndarray | None = None, *,
                   d_a: int | None = None, seed: int = 0) -> ScoreComparison:
    """Dot, scaled dot and additive scores of one query q [d_k] against keys [n, d_k], and
    the softmax of each under `blocked` (bool [n], True = blocked; None: nothing blocked).
    d_a: the additive scorer's width (default d_k); seed: its weights."""
    q = np.asarray(q, np.float64)
    keys = np.asarray(keys, np.float64)
    if q.ndim != 1 or keys.ndim != 2 or keys.shape[1] != q.shape[0]:
        raise InputError(N_("The query must be one vector [d_k] and the keys a matrix [n, "
                            "d_k] of the same width, not {q} and {keys}."),
                         q=list(q.shape), keys=list(keys.shape))
    d_k = q.shape[0]
    d_a = d_k if d_a is None else int(d_a)
    blocked = (np.zeros(len(keys), dtype=bool) if blocked is None
               else np.asarray(blocked, dtype=bool).reshape(len(keys)))
    scores = {"dot": dot_scores(q, keys), "scaled": scaled_scores(q, keys),
              "additive": additive_scores(q, keys, additive_params(d_k, d_a, seed))}
    weights = {name: masked_softmax(s, blocked) for name, s in scores.items()}
    return ScoreComparison(scores, weights, blocked, d_k, d_a, int(seed))


# ---- the saturation experiment -----------------------------------------------------------
def random_qk(d_k: int, n_keys: int = N_KEYS, draws: int = 1, seed: int = 0
              ) -> tuple[np.ndarray, np.ndarray]:
    """q [draws, d_k] and K [draws, n_keys, d_k], i.i.d. N(0, 1), from (seed, d_k) alone, so
    one d_k's draws do not depend on which other widths were drawn. float32: drawing is the
    cost of the experiment, and its statistics need no more precision."""
    if d_k < 1 or n_keys < 1 or draws < 1:
        raise InputError(N_("d_k, n_keys and draws must be whole numbers, 1 or more, not "
                            "{d_k}, {n_keys} and {draws}."), d_k=d_k, n_keys=n_keys,
                         draws=draws)
    rng = np.random.default_rng([int(seed), int(d_k), int(n_keys)])
    q = rng.standard_normal((draws, d_k), dtype=np.float32)
    keys = rng.standard_normal((draws, n_keys, d_k), dtype=np.float32)
    return q, keys


def row_stats(weights: np.ndarray) -> dict[str, np.ndarray]:
    """Per row of softmax weights [..., n]: largest weight, entropy / log n, whether the
    largest weight exceeds SATURATED (as 0/1), and the largest entry of the softmax's
    Jacobian diag(p) - p p^T, which is max_j p_j (1 - p_j) (it goes to 0 as the softmax
    saturates: the vanishing gradient)."""
    p = np.asarray(weights, np.float64)
    n = p.shape[-1]
    top = p.max(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0)
    entropy = -plogp.sum(axis=-1) / (math.log(n) if n > 1 else 1.0)
    return {"max_weight": top, "entropy": entropy,
            "saturated": (top > SATURATED).astype(np.float64),
            "gradient": (p * (1.0 - p)).max(axis=-1)}


@dataclass
class Draw:
    """One random query against n keys at one d_k: scores and weights, unscaled and scaled."""

    d_k: int
    seed: int
    dot: np.ndarray  # [n]
    weights: dict[str, np.ndarray]  # "unscaled" / "scaled" -> [n]
    stats: dict[str, dict[str, float]]  # "unscaled" / "scaled" -> row_stats of this draw

    @property
    def scaled(self) -> np.ndarray:
        return self.dot / math.sqrt(self.d_k)


def one_draw(d_k: int, n_keys: int = N_KEYS, seed: int = 0) -> Draw:
    """The first draw of `random_qk(d_k, n_keys, seed=seed)` (the same q and K the curves'
    first draw uses), softmaxed with and without the 1/sqrt(d_k)."""
    q, keys = random_qk(d_k, n_keys, 1, seed)
    dot = dot_scores(q[0], keys[0])
    weights = {"unscaled": masked_softmax(dot), "scaled": masked_softmax(dot / math.sqrt(d_k))}
    stats = {name: {k: float(v) for k, v in row_stats(w).items()}
             for name, w in weights.items()}
    return Draw(int(d_k), int(seed), dot, weights, stats)


@dataclass
class SaturationCurves:
    """Statistics of the softmax over random draws, as a function of d_k.

    stats["unscaled" | "scaled"][stat]: float64 [len(d_ks)], the mean over draws of each
    row statistic (see STATS / row_stats); dot_var: the empirical variance of q · k_j at each
    d_k (about d_k; the scaled scores' variance is dot_var / d_k, about 1)."""

    d_ks: np.ndarray  # int64 [m]
    n_keys: int
    draws: int
    seed: int
    stats: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    dot_var: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def scaled_var(self) -> np.ndarray:
        return self.dot_var / self.d_ks


def saturation_curves(d_ks=DK_CHOICES, n_keys: int = N_KEYS, draws: int = N_DRAWS,
                      seed: int = 0) -> SaturationCurves:
    """For each d_k: `draws` random queries against `n_keys` random keys (random_qk), the
    softmax of q · k_j and of q · k_j / sqrt(d_k), and the mean of each row statistic."""
    d_ks = np.asarray(list(d_ks), dtype=np.int64)
    stats = {"unscaled": {s: np.zeros(len(d_ks)) for s in STATS},
             "scaled": {s: np.zeros(len(d_ks)) for s in STATS}}
    dot_var = np.zeros(len(d_ks))
    for i, d_k in enumerate(d_ks):
        q, keys = random_qk(int(d_k), n_keys, draws, seed)
        dot = np.matmul(keys, q[:, :, None])[..., 0].astype(np.float64)  # (draws, n_keys)
        dot_var[i] = dot.var()
        for name, logits in (("unscaled", dot), ("scaled", dot / math.sqrt(d_k))):
            for stat, values in row_stats(masked_softmax(logits)).items():
                stats[name][stat][i] = values.mean()
    return SaturationCurves(d_ks, int(n_keys), int(draws), int(seed), stats, dot_var)


def nearest_choice(value: int, choices=DK_CHOICES) -> int:
    """The choice closest to value on a log scale (d_k slider: 100 -> 128, -5 -> 1)."""
    choices = sorted(int(c) for c in choices)
    if value <= choices[0]:
        return choices[0]
    if value >= choices[-1]:
        return choices[-1]
    return min(choices, key=lambda c: (abs(math.log2(c) - math.log2(value)), c))
