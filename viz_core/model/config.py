"""Model configuration: one frozen dataclass, one comment per field."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from viz_core.i18n import N_

from ..errors import CheckpointError
from .choices import Architecture, Norm, Positional, PositionalKind, options

KINDS = options(Architecture)
POSITIONAL_KINDS = options(Positional)
NORMS = options(Norm)

# Limits checked before any allocation, so a hostile config.json cannot exhaust memory.
MAX_PARAMS = 2_000_000_000
MAX_LEN = 65_536
MAX_VOCAB = 1_000_000


@dataclass(frozen=True)
class TransformerConfig:
    kind: Architecture = "encoder-decoder"
    src_vocab_size: int = 0  # encoder vocabulary (0 for decoder-only)
    tgt_vocab_size: int = 0  # decoder vocabulary (0 for encoder-only)
    d_model: int = 128  # width of every residual stream
    n_heads: int = 4  # attention heads per block; d_k = d_v = d_model / n_heads
    # key/value heads (grouped-query attention): query head h reads kv head
    # h // (n_heads / n_kv_heads); None = n_heads (plain multi-head), 1 = multi-query
    n_kv_heads: int | None = None
    n_layers: int = 2  # encoder layers
    n_decoder_layers: int = 2  # decoder layers
    d_ff: int = 512  # inner width of the position-wise feed-forward
    dropout: float = 0.1  # on sublayer outputs, attention weights and embeddings (training only)
    max_len: int = 256  # longest sequence; the positional table has this many rows
    # sinusoidal | learned: a table added to the embeddings; rope: no table, q and k of every
    # self-attention rotated by position (RoFormer), cross-attention left unrotated
    positional: Positional = "sinusoidal"
    rope_base: float = 10000.0  # RoPE: dimension pair i turns by pos * rope_base^(-2i/d_k)
    norm: Norm = "layernorm"  # rmsnorm: (x / rms(x) * g, no centring, no bias)
    norm_first: bool = False  # False: post-LN as in the paper; True: pre-LN (GPT-2 style)
    share_embeddings: bool = False  # tie decoder input embedding and output projection
    pad_id: int = 0  # special token ids, the same in every vocabulary of a model
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def positional_kind(self) -> PositionalKind:
        """The trace's name for it: sinusoidal | learned | rotary."""
        return "rotary" if self.positional == "rope" else self.positional

    @property
    def has_encoder(self) -> bool:
        return self.kind in ("encoder-decoder", "encoder-only")

    @property
    def has_decoder(self) -> bool:
        return self.kind in ("encoder-decoder", "decoder-only")

    def approx_params(self) -> int:
        """Parameter count estimate, used to refuse absurd configs before allocating."""
        d, f = self.d_model, self.d_ff
        kv = 2 * d * self.kv_heads * self.d_k if self.n_heads else 2 * d * d  # W_K, W_V
        enc = self.n_layers * (2 * d * d + kv + 2 * d * f) if self.has_encoder else 0
        dec = self.n_decoder_layers * (6 * d * d + kv + 2 * d * f) if self.has_decoder else 0
        emb = (self.src_vocab_size + 2 * self.tgt_vocab_size) * d + self.max_len * d
        return enc + dec + emb

    def validate(self) -> TransformerConfig:
        def bad(msg: str) -> CheckpointError:
            return CheckpointError(N_("invalid model config: {msg}"), msg=msg)

        ints = ["src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_layers",
                "n_decoder_layers", "d_ff", "max_len"]
        for name in ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise bad(f"{name} must be a non-negative integer, got {value!r}")
        if self.kind not in KINDS:
            raise bad(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.positional not in POSITIONAL_KINDS:
            raise bad(f"positional must be one of {POSITIONAL_KINDS}, got {self.positional!r}")
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise bad(f"d_model ({self.d_model}) must be a positive multiple of n_heads "
                      f"({self.n_heads})")
        kv = self.n_kv_heads
        if kv is not None and (not isinstance(kv, int) or isinstance(kv, bool) or kv < 1
                               or self.n_heads % kv):
            raise bad(f"n_kv_heads must be a positive divisor of n_heads ({self.n_heads}), "
                      f"got {kv!r}")
        if self.norm not in NORMS:
            raise bad(f"norm must be one of {NORMS}, got {self.norm!r}")
        if self.positional == "rope" and self.d_k % 2:
            raise bad(f"RoPE rotates pairs of dimensions: d_k ({self.d_k}) must be even")
        base = self.rope_base
        if isinstance(base, bool) or not isinstance(base, (int, float)) or not (
                1.0 < float(base) < 1e12):
            raise bad(f"rope_base must be a number in (1, 1e12), got {base!r}")
        if self.max_len < 1 or self.max_len > MAX_LEN:
            raise bad(f"max_len must be in 1..{MAX_LEN}, got {self.max_len}")
        if self.has_encoder and not 0 < self.src_vocab_size <= MAX_VOCAB:
            raise bad(f"src_vocab_size must be in 1..{MAX_VOCAB}")
        if self.has_decoder and not 0 < self.tgt_vocab_size <= MAX_VOCAB:
            raise bad(f"tgt_vocab_size must be in 1..{MAX_VOCAB}")
        d = self.dropout
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0.0 <= d < 1.0:
            raise bad(f"dropout must be a number in [0, 1), got {d!r}")
        for name in ("norm_first", "share_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise bad(f"{name} must be true or false, got {getattr(self, name)!r}")
        vocab = min([n for n, used in ((self.src_vocab_size, self.has_encoder),
                                       (self.tgt_vocab_size, self.has_decoder)) if used])
        for name in ("pad_id", "bos_id", "eos_id", "unk_id"):  # an id in every vocabulary
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < vocab:
                raise bad(f"{name} must be a token id in 0..{vocab - 1}, got {value!r}")
        if self.approx_params() > MAX_PARAMS:
            raise bad(f"about {self.approx_params():,} parameters, over the limit of "
                      f"{MAX_PARAMS:,}")
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TransformerConfig:
        if not isinstance(data, dict):
            raise CheckpointError(N_("invalid model config: config.json must hold an object"))
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise CheckpointError(N_("invalid model config: unknown fields {unknown}"), unknown=unknown)
        try:
            cfg = cls(**data)
        except TypeError as err:
            raise CheckpointError(N_("invalid model config: {err}"), err=err) from None
        return cfg.validate()
