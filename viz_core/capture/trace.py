"""AttentionTrace: everything one run of a model shows about its attention, computed lazily.

A trace is created fresh by every call of ``model.trace(...)`` and never stored on the model,
so one shared model object can serve many browser sessions at once.

A block keeps what its attention call really used (q, k, v after rotary embeddings, per
key/value head, the model's own mask, any bias and softcap; see viz_core.capture.recorder) on the
model's device. Nothing N x N exists until a view asks for it:

- ``block.head(h)``: float32 [q, k] of one head, computed alone;
- ``block.overview(size)``: every head pooled to at most size x size (block means), computed
  in row chunks, so the N x N of all heads never exists at once;
- ``block.window(h, rows, cols)``: a full-resolution window of one head;
- ``block.pattern`` / ``block.scores``: all heads, computed on first read.

Each result is cached in the trace (thread-safe: a trace may be read by several sessions).

Conventions (docs/ARCHITECTURE.md):
- ``pattern`` and ``scores`` are float32 [head, q_pos, k_pos]; rows are queries.
- ``mask`` is bool [q_pos, k_pos], True = this query may NOT attend to this key.
- Each pattern row sums to 1 over its allowed keys; blocked cells are exactly 0; a fully
  blocked row is all zeros (never NaN).
- ``scores`` are the logits the softmax sees before masking: q k^T * scaling (softcapped
  where the model caps them) + any position bias.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..model.choices import BlockKind, PositionalKind, View, What, choose
from .recorder import MaskSpec, Record, scores_of, softmax_rows

CHUNK_BYTES = 64 << 20  # float32 scores computed per chunk (heads x rows x keys)


def parse_block_name(name: str) -> tuple[str, int, str]:
    """``"decoder.0.cross" -> ("decoder", 0, "cross")``."""
    stack, layer, kind = name.split(".")
    return stack, int(layer), kind


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy().astype(np.float32, copy=False)


# ---- what one block keeps on the device ------------------------------------------------
@dataclass(frozen=True)
class HeadSource:
    """One block's attention inputs for one example (no batch axis), on the model's device:
    what its attention call really used (``BlockTrace.source``). Read-only: the trace is
    shared by every session, so never write into these tensors."""

    q: torch.Tensor  # (H, Tq, d)
    k: torch.Tensor  # (Hkv, Tk, d)
    v: torch.Tensor | None  # (Hkv, Tk, d_v)
    z: torch.Tensor | None  # (Tq, H, d_v)
    mask: MaskSpec  # batch axis of size 1
    scaling: float
    bias: torch.Tensor | None = None  # (1, H|1, Tq, Tk)
    softcap: float | None = None
    window: int | None = None

    @classmethod
    def from_record(cls, rec: Record, b: int, n_q: int | None = None,
                    n_k: int | None = None) -> HeadSource:
        """Batch row b of a record, cut to its first n_q queries / n_k keys (views)."""
        nq = rec.q.shape[2] if n_q is None else n_q
        nk = rec.k.shape[2] if n_k is None else n_k
        mask = rec.mask.row(b)
        mask = MaskSpec(nq, nk, None if mask.allowed is None else mask.allowed[:, :nq, :nk],
                        None if mask.key_pad is None else mask.key_pad[:, :nk],
                        mask.causal and rec.mask.n_keys - rec.mask.n_queries == nk - nq)
        bias = None
        if rec.bias is not None:
            bias = rec.bias[min(b, rec.bias.shape[0] - 1):][:1, :, :nq, :nk]
        return cls(q=rec.q[b, :, :nq], k=rec.k[b, :, :nk],
                   v=None if rec.v is None else rec.v[b, :, :nk],
                   z=None if rec.z is None else rec.z[b, :nq], mask=mask, scaling=rec.scaling,
                   bias=bias, softcap=rec.softcap, window=rec.window)

    @property
    def group(self) -> int:
        return self.q.shape[0] // self.k.shape[0]

    def scores_rows(self, heads: list[int], r0: int, r1: int) -> torch.Tensor:
        """float32 (h, r, Tk): the logits of the chosen heads for query rows r0..r1. Every
        head in order (as a chunked analysis asks, chunk after chunk) reads q, k and the bias
        as they are: no copy of every head's q and k per chunk (at 512 tokens those copies
        were 0.44 s of information_flow's 3.3 s)."""
        every = list(heads) == list(range(self.q.shape[0]))
        q = self.q[:, r0:r1]
        bias = None if self.bias is None else self.bias[0][:, r0:r1]
        if every:
            k = self.k if self.group == 1 else self.k.repeat_interleave(self.group, dim=0)
        else:
            idx = torch.tensor(heads, device=self.q.device)
            q, k = q.index_select(0, idx), self.k.index_select(0, idx // self.group)
            if bias is not None and bias.shape[0] != 1:
                bias = bias.index_select(0, idx)
        return scores_of(q, k, self.scaling, bias, self.softcap)

    def blocked_rows(self, r0: int, r1: int) -> torch.Tensor | None:
        m = self.mask.blocked_rows(r0, r1, self.q.device)
        return None if m is None else m[0]

    def pattern_rows(self, heads: list[int], r0: int, r1: int) -> torch.Tensor:
        return softmax_rows(self.scores_rows(heads, r0, r1), self.blocked_rows(r0, r1))

    def to(self, device) -> HeadSource:
        def mv(t):
            return None if t is None else t.to(device)
        m = self.mask
        return HeadSource(mv(self.q), mv(self.k), mv(self.v), mv(self.z),
                          MaskSpec(m.n_queries, m.n_keys, mv(m.allowed), mv(m.key_pad),
                                   m.causal), self.scaling, mv(self.bias), self.softcap,
                          self.window)

    def nbytes(self) -> int:
        ts = [self.q, self.k, self.v, self.z, self.bias, self.mask.allowed, self.mask.key_pad]
        return sum(t.numel() * t.element_size() for t in ts if t is not None)


def _segment_sums(x: torch.Tensor, edges: torch.Tensor, dim: int) -> torch.Tensor:
    """Sums of x over contiguous segments [edges[i], edges[i+1]) along dim."""
    upper = torch.cumsum(x, dim=dim).index_select(dim, edges[1:] - 1)  # sum up to each end
    lower = torch.cat([torch.zeros_like(upper.narrow(dim, 0, 1)),
                       upper.narrow(dim, 0, upper.shape[dim] - 1)], dim=dim)
    return upper - lower


def _bins(n: int, size: int) -> tuple[int, np.ndarray]:
    """(number of bins, bin of each of n positions): contiguous, as even as possible."""
    nb = max(1, min(n, size))
    return nb, (np.arange(n) * nb) // n


# ---- one block -------------------------------------------------------------------------
class BlockTrace:
    """One attention block (one layer's self- or cross-attention), all heads.

    Built eagerly from numpy arrays (``BlockTrace(name, pattern, scores, mask, q_tokens,
    k_tokens)``) or lazily from a HeadSource (``BlockTrace.lazy(...)``); both read the same.
    """

    def __init__(self, name: str, pattern: np.ndarray | None = None,
                 scores: np.ndarray | None = None, mask: np.ndarray | None = None,
                 query_tokens: list[str] | None = None, key_tokens: list[str] | None = None,
                 q: np.ndarray | None = None, k: np.ndarray | None = None,
                 v: np.ndarray | None = None, z: np.ndarray | None = None):
        self.name = name
        self.query_tokens = list(query_tokens or [])
        self.key_tokens = list(key_tokens or [])
        self._source: HeadSource | None = None
        self._lock = threading.RLock()
        self._cache: dict[Any, Any] = {}
        for key, value in (("pattern", pattern), ("scores", scores), ("mask", mask),
                           ("q", q), ("k", k), ("v", v), ("z", z)):
            if value is not None:
                self._cache[key] = value
        self._kv_heads: int | None = None

    @classmethod
    def lazy(cls, name: str, source: HeadSource, query_tokens: list[str],
             key_tokens: list[str]) -> BlockTrace:
        block = cls(name, query_tokens=query_tokens, key_tokens=key_tokens)
        block._source = source
        block._kv_heads = int(source.k.shape[0])
        return block

    # ---- shape ---------------------------------------------------------------------------
    @property
    def n_heads(self) -> int:
        if self._source is not None:
            return int(self._source.q.shape[0])
        return int(self._cache["pattern"].shape[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        """(heads, queries, keys)."""
        if self._source is not None:
            return (self.n_heads, self._source.mask.n_queries, self._source.mask.n_keys)
        return tuple(self._cache["pattern"].shape)

    @property
    def kv_heads(self) -> int:
        return self._kv_heads or self.n_heads

    @property
    def kv_group(self) -> list[int]:
        """The key/value head each query head reads (grouped-query attention)."""
        g = self.n_heads // self.kv_heads
        return [h // g for h in range(self.n_heads)]

    @property
    def window_size(self) -> int | None:
        """The sliding-window size of this layer (None: global attention)."""
        return None if self._source is None else self._source.window

    @property
    def softcap(self) -> float | None:
        return None if self._source is None else self._source.softcap

    @property
    def scaling(self) -> float | None:
        """The factor the model multiplies q k^T by (1/sqrt(d_k) unless the model says
        otherwise, e.g. T5: 1, Gemma 2: query_pre_attn_scalar^-0.5); None when not known."""
        return None if self._source is None else self._source.scaling

    @property
    def layer(self) -> int:
        return parse_block_name(self.name)[1]

    @property
    def kind(self) -> BlockKind:
        """"encoder.self", "decoder.self" or "decoder.cross"."""
        stack, _, kind = parse_block_name(self.name)
        return f"{stack}.{kind}"

    @property
    def is_lazy(self) -> bool:
        return self._source is not None

    @property
    def source(self) -> HeadSource | None:
        """The recorded inputs of this block's attention call, for analyses that recompute
        from the model's own numbers (logit and QK attribution): torch tensors on the model's
        device, no batch axis, in the model's dtype: ``q`` (head, q, d) after any rotary,
        ``k`` and ``v`` (kv head, k, d) before any GQA repeat (``group`` query heads share
        one), ``z`` (q, head, d_v) or None when not captured, ``mask`` (a MaskSpec; True =
        blocked), ``scaling``, ``bias`` (T5's position bias, or None), ``softcap`` and
        ``window``. None for a block built from numpy arrays. Read-only: the trace is shared,
        so never write into these tensors; views read ``head()`` / ``pattern`` / ``q`` ...
        (float32 numpy) instead."""
        return self._source

    # ---- cached computation ----------------------------------------------------------------
    def _cached(self, key, compute):
        value = self._cache.get(key)
        if value is None and key not in self._cache:
            with self._lock:
                if key not in self._cache:
                    self._cache[key] = compute()
                value = self._cache[key]
        return value

    def _rows_per_chunk(self, heads: int) -> int:
        return max(1, CHUNK_BYTES // max(1, 4 * heads * self.shape[2]))

    def _all(self, what: str) -> np.ndarray:
        src = self._source
        H, Tq, Tk = self.shape
        out = np.empty((H, Tq, Tk), dtype=np.float32)
        heads = list(range(H))
        step = self._rows_per_chunk(H)
        for r0 in range(0, Tq, step):
            r1 = min(Tq, r0 + step)
            rows = (src.pattern_rows if what == "pattern" else src.scores_rows)(heads, r0, r1)
            out[:, r0:r1] = rows.cpu().numpy()
        return out

    @property
    def pattern(self) -> np.ndarray:
        """float32 [head, q, k]: softmax weights after masking (all heads)."""
        return self._cached("pattern", lambda: self._all("pattern"))

    @property
    def scores(self) -> np.ndarray | None:
        """float32 [head, q, k]: the logits before masking (None when not captured)."""
        if self._source is None:
            return self._cache.get("scores")
        return self._cached("scores", lambda: self._all("scores"))

    @property
    def raw_scores(self) -> np.ndarray | None:
        """Scores before the softcap (equal to ``scores`` when the model has none)."""
        src = self._source
        if src is None or src.softcap is None:
            return self.scores

        def compute():
            plain = HeadSource(src.q, src.k, None, None, src.mask, src.scaling, src.bias)
            return to_numpy(plain.scores_rows(list(range(self.n_heads)), 0, self.shape[1]))
        return self._cached("raw_scores", compute)

    @property
    def mask(self) -> np.ndarray:
        """bool [q, k], True = blocked."""
        def compute():
            src = self._source
            m = src.blocked_rows(0, src.mask.n_queries)
            if m is None:
                return np.zeros((src.mask.n_queries, src.mask.n_keys), dtype=bool)
            return m.cpu().numpy().copy()
        return self._cached("mask", compute)

    def mask_window(self, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
        """bool [r1 - r0, c1 - c0] of ``mask`` (True = blocked), from those query rows only:
        the N x N mask is never built for it."""
        _, Tq, Tk = self.shape
        r0, r1 = max(0, int(rows[0])), min(Tq, int(rows[1]))
        c0, c1 = max(0, int(cols[0])), min(Tk, int(cols[1]))
        r1, c1 = max(r0, r1), max(c0, c1)
        if self._source is None or "mask" in self._cache:
            full = self._cache.get("mask")
            if full is None:
                return np.zeros((r1 - r0, c1 - c0), dtype=bool)
            return np.ascontiguousarray(full[r0:r1, c0:c1], dtype=bool)
        m = self._source.blocked_rows(r0, r1)
        if m is None:
            return np.zeros((r1 - r0, c1 - c0), dtype=bool)
        return m[:, c0:c1].cpu().numpy().copy()

    def head(self, h: int, what: What = "pattern") -> np.ndarray:
        """float32 [q, k] of one head, computed alone (or read from the full tensor)."""
        h = self._check_head(h)
        what = choose(what, What, "what")
        full = self._cache.get(what)
        if full is not None or self._source is None:
            return (self.pattern if what == "pattern" else self.scores)[h]

        def compute():
            src, (_, Tq, Tk) = self._source, self.shape
            out = np.empty((Tq, Tk), dtype=np.float32)
            step = self._rows_per_chunk(1)
            fn = src.pattern_rows if what == "pattern" else src.scores_rows
            for r0 in range(0, Tq, step):
                r1 = min(Tq, r0 + step)
                out[r0:r1] = fn([h], r0, r1)[0].cpu().numpy()
            return out
        return self._cached(("head", what, h), compute)

    def window(self, h: int, rows: tuple[int, int], cols: tuple[int, int],
               what: What = "pattern") -> np.ndarray:
        """float32 [r1 - r0, c1 - c0]: a full-resolution window of head h."""
        h = self._check_head(h)
        what = choose(what, What, "what")
        _, Tq, Tk = self.shape
        r0, r1 = max(0, int(rows[0])), min(Tq, int(rows[1]))
        c0, c1 = max(0, int(cols[0])), min(Tk, int(cols[1]))
        if r0 >= r1 or c0 >= c1:
            raise ValueError(f"empty window rows {rows} x cols {cols} of a {Tq} x {Tk} block")
        if self._source is None or what in self._cache or ("head", what, h) in self._cache:
            return np.ascontiguousarray(self.head(h, what)[r0:r1, c0:c1])
        src = self._source
        fn = src.pattern_rows if what == "pattern" else src.scores_rows
        out = np.empty((r1 - r0, c1 - c0), dtype=np.float32)
        step = self._rows_per_chunk(1)
        for a in range(r0, r1, step):
            b = min(r1, a + step)
            out[a - r0:b - r0] = fn([h], a, b)[0, :, c0:c1].cpu().numpy()
        return out

    def overview(self, size: int = 256, heads: list[int] | None = None,
                 what: What = "pattern") -> np.ndarray:
        """float32 [head, <=size, <=size]: block means of each head's [q, k] matrix.

        Bins are contiguous and as even as possible (position i of n goes to bin i*nb // n);
        computed in row chunks on the model's device, so only the pooled result is kept.
        """
        what = choose(what, What, "what")
        size = int(size)
        if size < 1:
            raise ValueError("overview size must be at least 1")
        heads = list(range(self.n_heads)) if heads is None else [self._check_head(h)
                                                                 for h in heads]
        key = ("overview", what, size, tuple(heads))
        return self._cached(key, lambda: self._pool(heads, size, what))

    def _pool(self, heads: list[int], size: int, what: What) -> np.ndarray:
        _, Tq, Tk = self.shape
        nbq, qbin = _bins(Tq, size)
        nbk, kbin = _bins(Tk, size)
        if self._source is None:
            full = (self.pattern if what == "pattern" else self.scores)[heads]
            device = torch.device("cpu")
            rows_of = lambda a, b: torch.from_numpy(full[:, a:b])
        else:
            device = self._source.q.device
            fn = self._source.pattern_rows if what == "pattern" else self._source.scores_rows
            rows_of = lambda a, b: fn(heads, a, b)
        # Bin sums by differences of cumulative sums at the bin edges (bins are contiguous);
        # float64 for scores, whose sums over thousands of keys lose float32 precision.
        dtype = torch.float32 if what == "pattern" else torch.float64
        kedges = torch.from_numpy(np.searchsorted(kbin, np.arange(nbk + 1))).to(device)
        acc = torch.zeros((len(heads), nbq, nbk), dtype=torch.float64, device=device)
        step = self._rows_per_chunk(len(heads))
        for r0 in range(0, Tq, step):
            r1 = min(Tq, r0 + step)
            chunk = rows_of(r0, r1).to(dtype)  # (h, r, Tk)
            cols = _segment_sums(chunk, kedges, dim=2)  # (h, r, nbk)
            local = qbin[r0:r1]
            first, last = int(local[0]), int(local[-1])
            redges = np.searchsorted(local, np.arange(first, last + 2))
            sums = _segment_sums(cols, torch.from_numpy(redges).to(device), dim=1)
            acc[:, first:last + 1] += sums.to(torch.float64)
        counts = np.outer(np.bincount(qbin, minlength=nbq), np.bincount(kbin, minlength=nbk))
        return (acc.cpu().numpy() / counts[None]).astype(np.float32)

    def _check_head(self, h: int) -> int:
        h = int(h)
        if not 0 <= h < self.n_heads:
            raise IndexError(f"{self.name} has heads 0..{self.n_heads - 1}; no head {h}")
        return h

    # ---- per-head internals (Inside a head) ------------------------------------------------
    def _internal(self, what: str) -> np.ndarray | None:
        if self._source is None:
            return self._cache.get(what)
        src = self._source

        def compute():
            if what == "q":
                return to_numpy(src.q)
            if what in ("k", "v"):
                t = src.k if what == "k" else src.v
                if t is None:
                    return None
                return to_numpy(t.repeat_interleave(src.group, dim=0))  # per query head
            return None if src.z is None else to_numpy(src.z.transpose(0, 1))
        return self._cached(what, compute)

    @property
    def q(self) -> np.ndarray | None:
        """float32 [head, q, d_k]."""
        return self._internal("q")

    @property
    def k(self) -> np.ndarray | None:
        """float32 [head, k, d_k], per query head (a key/value head repeated for its group)."""
        return self._internal("k")

    @property
    def v(self) -> np.ndarray | None:
        """float32 [head, k, d_v], per query head; None when not captured."""
        return self._internal("v")

    @property
    def z(self) -> np.ndarray | None:
        """float32 [head, q, d_v]: each head's output (pattern @ v), as the model computed it."""
        return self._internal("z")

    # ---- memory --------------------------------------------------------------------------------
    def captured_bytes(self) -> int:
        """Bytes of what the capture kept (q, k, v, z, mask, bias), wherever they live."""
        return 0 if self._source is None else self._source.nbytes()

    def computed_bytes(self) -> int:
        """Bytes of the numpy results computed so far (patterns, heads, overviews ...)."""
        return sum(v.nbytes for v in list(self._cache.values()) if isinstance(v, np.ndarray))

    def device_bytes(self) -> int:
        src = self._source
        if src is None or src.q.device.type == "cpu":
            return 0
        return src.nbytes()

    def to_host(self) -> None:
        with self._lock:
            if self._source is not None and self._source.q.device.type != "cpu":
                self._source = self._source.to("cpu")

    # ---- notebooks: plain plotly figures (they display themselves as a cell's value) ------
    def show(self, head: int = 0, view: View = "weights"):
        """One head as a heatmap (view "weights" or "scores"): exact up to 1,024 tokens,
        pooled (block means) beyond, as on the Attention page. Returns the plotly figure."""
        from ..figures.heatmap import block_heatmap

        return block_heatmap(self, self._check_head(head), choose(view, View, "view"))

    def head_view(self, heads: list[int] | None = None, **options):
        """The head view (lines from queries to keys, one colour per head) of these heads
        (default: all); options as figures.block_head_view (rows/cols: a window of a long
        block). Returns the plotly figure."""
        from ..figures.headview import block_head_view

        chosen = None if heads is None else [self._check_head(h) for h in heads]
        return block_head_view(self, chosen, **options)


# ---- one run ---------------------------------------------------------------------------
@dataclass
class AttentionTrace:
    """All blocks of one run, plus the tokens and what the model added as positions."""

    block_traces: dict[str, BlockTrace]
    positional: np.ndarray | None  # float32 [pos, d_model], or None (see positional_note)
    source_tokens: list[str]  # encoder input (or the prompt of a decoder-only model)
    target_tokens: list[str] = field(default_factory=list)  # decoder input (<bos> y1 .. yn)
    output_tokens: list[str] = field(default_factory=list)  # what each decoder position predicts
    output_text: str = ""
    positional_kind: PositionalKind = "sinusoidal"
    positional_note: str = ""  # e.g. "relative position bias, no absolute encoding"
    unknown_words: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    model_info: dict[str, Any] = field(default_factory=dict)
    # max |logits(traced run) - logits(the model's own SDPA run)| for this model, and the
    # token count of the input it was found on (None: not checked)
    faithfulness: float | None = None
    faithfulness_tokens: int | None = None
    # Only when the run was asked for capture "stream": {layer ("encoder.0"): {point: tensor
    # (T, d_model) on the model's device}}, points as in viz_core.capture.recorder.STREAM_POINTS.
    stream: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    # Only for a run with ``permute``: the original position of each source position.
    source_order: list[int] | None = None

    @property
    def blocks(self) -> list[str]:
        """Block names in model order: encoder self, then per decoder layer self and cross."""
        return list(self.block_traces)

    def __getitem__(self, name: str) -> BlockTrace:
        try:
            return self.block_traces[name]
        except KeyError:
            raise KeyError(f"no block {name!r}; this trace has {self.blocks}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.block_traces

    def kinds(self) -> list[str]:
        """Block kinds present, e.g. ["encoder.self", "decoder.self", "decoder.cross"]."""
        seen: list[str] = []
        for b in self.block_traces.values():
            if b.kind not in seen:
                seen.append(b.kind)
        return seen

    def layers(self, kind: BlockKind) -> list[BlockTrace]:
        """Blocks of one kind, in layer order (none: this model has no such blocks)."""
        kind = choose(kind, BlockKind, "kind")
        return [b for b in self.block_traces.values() if b.kind == kind]

    def stack(self, kind: BlockKind) -> np.ndarray:
        """Patterns of every layer of one kind: float32 [layer, head, q, k]."""
        return np.stack([b.pattern for b in self.layers(kind)])

    def show(self, kind: BlockKind | None = None, size: int = 64):
        """The layer x head grid of one block kind (default: the last, e.g. the decoder's
        cross-attention of a translation model), each head a thumbnail: exact up to `size`
        tokens, pooled beyond, as on the Attention page. Returns the plotly figure."""
        from ..figures.grid import trace_grid

        kinds = self.kinds()
        if kind is None:
            if not kinds:
                raise ValueError("this trace has no attention blocks")
            kind = kinds[-1]
        elif kind not in kinds:
            raise ValueError(f"no {kind!r} blocks; this trace has {kinds}")
        return trace_grid(self, kind, size, title=f"{kind}: layers × heads")

    def device_bytes(self) -> int:
        """Bytes of captured tensors this trace holds on an accelerator."""
        seen, total = set(), 0
        for b in self.block_traces.values():
            src = b.source
            if src is None or id(src.q) in seen:
                continue
            seen.add(id(src.q))
            total += b.device_bytes()
        for points in self.stream.values():
            total += sum(x.numel() * x.element_size() for x in points.values()
                         if x.device.type != "cpu")
        return total

    def to_host(self) -> None:
        """Move every captured tensor to host memory (still fully readable, slower)."""
        for b in self.block_traces.values():
            b.to_host()
        self.stream = {layer: {p: x.cpu() for p, x in points.items()}
                       for layer, points in self.stream.items()}
