"""Rotary position embeddings (RoPE) for the Positional encoding page: pure functions.

RoFormer (Su et al., 2021): instead of adding a table to the embeddings, every self-attention
turns each 2-D pair i of q's and k's dimensions by the angle pos * theta_i,

    theta_i = base^(-2i/d),  i = 0 .. d/2 - 1  (d = the rotated width of one head),

so q_m . k_n = Re[ sum_i q~_i conj(k~_i) e^{i (m - n) theta_i} ] depends on the positions only
through m - n. Our model and the Hugging Face Llama family pair dimensions (i, i + d/2)
("half-split"); the paper pairs (2i, 2i+1). The angles are the same either way.

Context extension rescales the frequencies (``rope_scaling`` / ``rope_parameters``): linear
(position interpolation), dynamic NTK, YaRN, Llama 3. ``spec_from_hf_config`` takes them from
transformers' own ``ROPE_INIT_FUNCTIONS``; ``scaled_frequencies`` is the written-out closed form
of each, which the tests hold against transformers. Everything returned is numpy.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np

SCALINGS = ("default", "linear", "dynamic", "yarn", "llama3")


@dataclass(frozen=True)
class RopeSpec:
    """What one model's RoPE does, read from its config."""

    base: float  # theta_i = base^(-2i/dim)
    dim: int  # rotated dimensions of one head (head_dim * partial_rotary_factor)
    head_dim: int
    rope_type: str = "default"  # default | linear | dynamic | yarn | llama3 | longrope | ...
    parameters: dict = field(default_factory=dict)  # factor, beta_fast, ... as in the config
    max_positions: int | None = None
    inv_freq: np.ndarray | None = None  # float64 [dim/2], the frequencies the model uses
    attention_factor: float = 1.0  # cos and sin multiplied by it (YaRN's mscale)
    source: str = ""  # where it was read
    layer_type: str | None = None  # Gemma 3: "sliding_attention" / "full_attention"

    @property
    def pairs(self) -> int:
        return self.dim // 2

    @property
    def default_inv_freq(self) -> np.ndarray:
        return rope_frequencies(self.dim, self.base)

    @property
    def frequencies(self) -> np.ndarray:
        return self.default_inv_freq if self.inv_freq is None else self.inv_freq

    @property
    def scaled(self) -> bool:
        return self.rope_type not in ("default", None)


def rope_frequencies(dim: int, base: float = 10000.0) -> np.ndarray:
    """float64 [dim/2]: theta_i = base^(-2i/dim)."""
    return np.power(float(base), -np.arange(0, dim - dim % 2, 2, dtype=np.float64) / dim)


def wavelengths(inv_freq: np.ndarray) -> np.ndarray:
    """Positions per full turn of each pair: 2*pi / theta_i."""
    return 2 * np.pi / np.asarray(inv_freq, dtype=np.float64)


def rotation_angles(inv_freq: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """float64 [pos, dim/2]: the angle pos * theta_i by which pair i is turned."""
    return np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq)[None]


# ---- scaling: the closed forms (transformers computes the same, see the tests) -------------
def scaled_frequencies(rope_type: str, dim: int, base: float, params: dict,
                       max_positions: int | None = None, seq_len: int | None = None
                       ) -> tuple[np.ndarray, float]:
    """(theta'_i, attention factor) of a scaling, written out from its paper / reference.

    linear (Chen et al. 2023, position interpolation): theta_i / factor.
    dynamic NTK: base' = base * (factor * L / L0 - (factor - 1))^(d / (d - 2)) once the
      sequence L is longer than L0 = max_positions (else the default frequencies).
    yarn (Peng et al. 2023): per pair, blend theta_i / factor (long wavelengths) and theta_i
      (short ones) by a linear ramp between the dimensions that turn beta_slow and beta_fast
      times over L0; cos and sin scaled by 0.1 ln(factor) + 1.
    llama3: theta_i / factor for wavelengths above L0 / low_freq_factor, theta_i below
      L0 / high_freq_factor, and a smooth blend between.
    """
    theta = rope_frequencies(dim, base)
    factor = float(params.get("factor", 1.0) or 1.0)
    if rope_type in ("default", None):
        return theta, 1.0
    if rope_type == "linear":
        return theta / factor, 1.0
    if rope_type == "dynamic":
        L0 = int(max_positions)
        L = max(seq_len or L0, L0)
        new_base = base * ((factor * L / L0) - (factor - 1)) ** (dim / (dim - 2))
        return rope_frequencies(dim, new_base), 1.0
    if rope_type == "llama3":
        L0 = float(params["original_max_position_embeddings"])
        low, high = float(params["low_freq_factor"]), float(params["high_freq_factor"])
        wl = wavelengths(theta)
        smooth = (L0 / wl - low) / (high - low)
        blended = (1 - smooth) * theta / factor + smooth * theta
        out = np.where(wl > L0 / low, theta / factor, np.where(wl < L0 / high, theta, blended))
        return out, 1.0
    if rope_type == "yarn":
        L0 = float(params.get("original_max_position_embeddings") or max_positions)
        beta_fast, beta_slow = params.get("beta_fast") or 32, params.get("beta_slow") or 1

        def dim_turning(n_turns):  # the (fractional) pair index that turns n_turns times over L0
            return dim * math.log(L0 / (n_turns * 2 * math.pi)) / (2 * math.log(base))

        lo, hi = dim_turning(beta_fast), dim_turning(beta_slow)
        if params.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(dim // 2) - lo) / (hi - lo), 0, 1)  # 0: keep, 1: interpolate
        out = theta * (1 - ramp) + theta / factor * ramp
        attention = params.get("attention_factor")
        if attention is None:
            mscale, mscale_all = params.get("mscale"), params.get("mscale_all_dim")

            def m(scale, k=1.0):
                return 1.0 if scale <= 1 else 0.1 * k * math.log(scale) + 1.0

            attention = m(factor, mscale) / m(factor, mscale_all) if mscale and mscale_all \
                else m(factor)
        return out, float(attention)
    raise ValueError(f"no closed form for rope_type {rope_type!r}; known: {SCALINGS}")


# ---- reading a model's config --------------------------------------------------------------
def _hf_rope_parameters(config) -> dict:
    """{layer type or "": rope parameters dict} of a transformers config (either format)."""
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    params = dict(params) if isinstance(params, dict) else {}
    if params and all(isinstance(v, dict) for v in params.values()):  # per layer type
        return {k: dict(v) for k, v in params.items()}
    if "rope_theta" not in params and getattr(config, "rope_theta", None) is not None:
        params["rope_theta"] = config.rope_theta
    params.setdefault("rope_type", params.get("type", "default"))
    return {"": params}


def spec_from_hf_config(config, seq_len: int | None = None) -> list[RopeSpec]:
    """One RopeSpec per rope layer type of a transformers config (most models: one).

    The frequencies come from transformers' own functions: the model class's default
    computation (base^(-2i/d)) or ``ROPE_INIT_FUNCTIONS[rope_type]`` for a scaling; they run
    on a copy of the config (they normalise it in place). seq_len matters for dynamic NTK only.
    """
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    specs = []
    head_dim = getattr(config, "head_dim", None) or (config.hidden_size //
                                                     config.num_attention_heads)
    max_pos = getattr(config, "max_position_embeddings", None)
    for layer_type, params in _hf_rope_parameters(config).items():
        base = float(params.get("rope_theta") or 10000.0)
        dim = int(head_dim * float(params.get("partial_rotary_factor",
                                              getattr(config, "partial_rotary_factor", 1.0)
                                              or 1.0)))
        rope_type = params.get("rope_type", "default")
        inv, attention = rope_frequencies(dim, base), 1.0
        if rope_type != "default" and rope_type in ROPE_INIT_FUNCTIONS:
            fn = ROPE_INIT_FUNCTIONS[rope_type]
            t, attention = fn(copy.deepcopy(config), "cpu", seq_len=seq_len,
                              layer_type=layer_type or None)
            inv = t.double().numpy()
        extra = {k: v for k, v in params.items() if k not in ("rope_theta", "rope_type", "type")}
        where = "config.rope_parameters" if getattr(config, "rope_parameters", None) else (
            "config.rope_scaling" if getattr(config, "rope_scaling", None) else "config")
        specs.append(RopeSpec(base=base, dim=dim, head_dim=head_dim, rope_type=rope_type,
                              parameters=extra, max_positions=max_pos, inv_freq=inv,
                              attention_factor=float(attention or 1.0), source=where,
                              layer_type=layer_type or None))
    return specs


def spec_from_native_config(cfg) -> RopeSpec:
    """Our TransformerConfig with positional="rope": default RoPE over each head's d_k."""
    return RopeSpec(base=float(cfg.rope_base), dim=cfg.d_k, head_dim=cfg.d_k,
                    max_positions=cfg.max_len, source="config.json rope_base",
                    inv_freq=rope_frequencies(cfg.d_k, cfg.rope_base))


def rope_specs(model) -> list[RopeSpec]:
    """The RoPE of a loaded backend (native or Hugging Face), or [] if it uses none."""
    if getattr(model, "positional_kind", None) != "rotary":
        return []
    hf = getattr(model, "hf_model", None)
    if hf is not None:
        return spec_from_hf_config(hf.config)
    cfg = getattr(model, "cfg", None)
    if cfg is not None and getattr(cfg, "positional", None) == "rope":
        return [spec_from_native_config(cfg)]
    return []


# ---- the 2-D picture and the relative-position property -------------------------------------
def rotate2d(v: np.ndarray, angle: float) -> np.ndarray:
    """A 2-vector turned counter-clockwise by angle."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])


@dataclass(frozen=True)
class PairDemo:
    """One query pair and one key pair, rotated at (m, n) and at (m + shift, n + shift)."""

    theta: float
    q: np.ndarray  # the unrotated 2-vectors
    k: np.ndarray
    positions: tuple[tuple[int, int], tuple[int, int]]  # ((m, n), (m + s, n + s))
    rotated: tuple[tuple[np.ndarray, np.ndarray], ...]  # (q_m, k_n) for each position pair
    dots: tuple[float, float]  # q_m . k_n at both


def pair_demo(q: np.ndarray, k: np.ndarray, theta: float, m: int, n: int, shift: int
              ) -> PairDemo:
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    rotated, dots = [], []
    for a, b in ((m, n), (m + shift, n + shift)):
        qa, kb = rotate2d(q, a * theta), rotate2d(k, b * theta)
        rotated.append((qa, kb))
        dots.append(float(qa @ kb))
    return PairDemo(theta, q, k, ((m, n), (m + shift, n + shift)), tuple(rotated),
                    tuple(dots))


def rotary_scores(q: np.ndarray, k: np.ndarray, inv_freq: np.ndarray, n_pos: int
                  ) -> np.ndarray:
    """float64 [n_pos, n_pos]: q rotated at m . k rotated at n, half-split pairs; constant
    along diagonals (depends on m - n only)."""
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    h = len(inv_freq)
    qc = q[:h] + 1j * q[h:2 * h]  # pair i as a complex number
    kc = k[:h] + 1j * k[h:2 * h]
    pos = np.arange(n_pos)
    qm = qc[None] * np.exp(1j * pos[:, None] * inv_freq[None])  # (n, h)
    kn = kc[None] * np.exp(1j * pos[:, None] * inv_freq[None])
    return np.real(qm @ np.conj(kn).T)  # Re(q_m conj(k_n)) summed over pairs = dot product


# ---- long-range decay (RoFormer section 3.4.3) -----------------------------------------------
def decay_bound(inv_freq: np.ndarray, distances: np.ndarray) -> np.ndarray:
    """float64 [len(distances)]: (1 / (d/2)) * sum_{j=1}^{d/2} |S_j(r)|, S_j(r) =
    sum_{k=0}^{j-1} e^{i r theta_k}, the relative upper bound of RoFormer 3.4.3.

    By Abel summation, |sum_i h_i e^{i r theta_i}| <= max_i |h_{i+1} - h_i| * sum_j |S_j(r)|
    (h_{d/2} = 0): the attention score of any q, k is bounded by a curve that decays, with
    oscillations, as the distance r grows.
    """
    r = np.asarray(distances, dtype=np.float64)[:, None]
    partial = np.cumsum(np.exp(1j * r * np.asarray(inv_freq)[None]), axis=1)  # S_1 .. S_{d/2}
    return np.abs(partial).mean(axis=1)
