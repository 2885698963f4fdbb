"""Masks: padding for a batch of sentences, causal, their union, and what masking does to
the scores (before masking, after masking, after softmax).

Convention (docs/ARCHITECTURE.md): bool, True = blocked. A padding mask blocks PAD *columns*
(keys) for every query row; a causal mask blocks keys after the query. Blocked cells are
drawn grey with a ✕ (small matrices), never as a colour extreme, and every figure says
"True = blocked".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz_core.i18n import N_, _

from ..analysis.heads import masked_softmax
from .common import (
    BLOCKED_COLOR,
    BLOCKED_NOTE,
    SCORE_COLORSCALE,
    WEIGHT_COLORSCALE,
    base_layout,
    blocked_marks,
    colorbar,
    f32,
    label_px,
    plot_text,
    pool2d,
    pool_factor,
    pooled_labels,
    title_dict,
    token_axis,
)

MASK_COLORSCALE = [[0.0, "#ffffff"], [0.5, "#ffffff"], [0.5, "#8c2d2d"], [1.0, "#8c2d2d"]]
MASK_NOTE = N_("True = blocked (dark red ✕); False = allowed (white)")
POOLED_NOTE = N_("each cell: the share of {f}×{f} query–key pairs blocked (dark red = all)")
SHARE_COLORSCALE = [[0.0, "#ffffff"], [1.0, "#8c2d2d"]]  # pooled masks: white = none blocked
MAX_CELLS_PER_PANEL = 90_000  # three float32 panels of this size stay well under 1.5 MB
# a figure's masks send one byte a cell (a share in percent when pooled): 1.3 MB of base64
MAX_MASK_BYTES = 1_000_000  # three panels of 577 x 577 tokens before they are pooled


def padding_mask(lengths: Sequence[int], max_len: int | None = None) -> np.ndarray:
    """bool [batch, max_len, max_len]: key column j is blocked for every row when j >= length."""
    lengths = np.asarray(lengths, dtype=int)
    n = int(lengths.max()) if max_len is None else int(max_len)
    is_pad = np.arange(n)[None, :] >= lengths[:, None]  # (B, K)
    return np.broadcast_to(is_pad[:, None, :], (len(lengths), n, n)).copy()  # (B, Q, K)


def causal_mask(n: int) -> np.ndarray:
    """bool [n, n]: True where key k lies after query q (k > q)."""
    return np.triu(np.ones((n, n), dtype=bool), k=1)


def sliding_window_mask(n_queries: int, window: int, n_keys: int | None = None) -> np.ndarray:
    """bool [q, k]: True where key k lies `window` or more positions before query q (q - k >=
    window), i.e. outside a sliding window of `window` keys ending at the query itself.
    Mistral's and Gemma's local layers block this together with the causal mask."""
    n_keys = n_queries if n_keys is None else n_keys
    return (np.arange(n_queries)[:, None] - np.arange(n_keys)[None, :]) >= int(window)


def span_label(window: int | None) -> str:
    """How far a layer looks: "local, window 4" for a sliding-window layer, else "global"."""
    return _("global") if not window else _("local, window {window}").format(window=int(window))


def layer_masks(blocks, max_tokens: int = 256):
    """Each layer's real mask, grouped: blocks whose top-left max_tokens x max_tokens masks
    are equal share one entry. Returns (entries, n) with n the side shown and entries a list
    of (mask bool [n, n], window or None, [layer, ...]) in layer order of first appearance.
    Reads only the first n query rows (``mask_window``): never an N x N mask."""
    if not blocks:
        return [], 0
    _, n_q, n_k = blocks[0].shape
    n_q, n_k = min(n_q, max_tokens), min(n_k, max_tokens)
    entries: list[tuple[np.ndarray, int | None, list[int]]] = []
    for b in blocks:
        m = np.asarray(b.mask_window((0, n_q), (0, n_k)), dtype=bool)
        for seen, window, layers in entries:
            if window == b.window_size and np.array_equal(seen, m):
                layers.append(b.layer)
                break
        else:
            entries.append((m, b.window_size, [b.layer]))
    return entries, n_q


def layer_masks_figure(blocks, query_tokens: Sequence[str], key_tokens: Sequence[str],
                       max_tokens: int = 256, max_panels: int = 4) -> go.Figure:
    """The model's own mask per layer, one panel per distinct mask (``layer_masks``), titled
    with its layers and "local, window N" / "global"; the first max_tokens tokens only."""
    entries, n = layer_masks(blocks, max_tokens)
    entries = entries[:max_panels]
    titles = [f"{_layers_text(layers)}: {span_label(w)}" for _, w, layers in entries]
    n_k = entries[0][0].shape[1] if entries else 0
    title = _("This model's mask in each layer")
    if n < len(query_tokens) or n_k < len(key_tokens):
        title += _(" (first {n} tokens)").format(n=n)
    return mask_panels([m for m, _, _ in entries], titles,
                       [list(query_tokens)[:n]] * len(entries),
                       [list(key_tokens)[:n_k]] * len(entries), title=title)


def _layers_text(layers: Sequence[int]) -> str:
    head = ", ".join(str(x) for x in layers[:6])
    more = f" … (+{len(layers) - 6})" if len(layers) > 6 else ""
    return (_("layers {list}") if len(layers) > 1 else _("layer {list}")).format(list=head + more)


def pad_columns(mask: np.ndarray) -> np.ndarray:
    """bool [k]: key columns blocked for every query row, i.e. padding. A causal mask never
    blocks a whole column (the last query sees every real key), so this reads the padding
    of any block's mask: encoder, decoder (padding | causal) or cross-attention."""
    m = np.asarray(mask, dtype=bool)
    if m.ndim != 2 or m.shape[0] == 0:
        return np.zeros(m.shape[-1] if m.ndim else 0, dtype=bool)
    return m.all(axis=0)


def real_length(mask: np.ndarray) -> int:
    """Number of key columns that some query may attend to (real tokens, padding excluded)."""
    return int((~pad_columns(mask)).sum())


def pad_batch(sentences: Sequence[Sequence[str]], pad: str = "<pad>") -> list[list[str]]:
    """Right-pad token lists to the longest one."""
    n = max(len(s) for s in sentences)
    return [list(s) + [pad] * (n - len(s)) for s in sentences]


NOTHING_BLOCKED = N_("nothing is blocked:<br>every query sees every key")
FIGURE_PX = 1100  # about the width a full-width chart gets in the app's wide layout


def panel_spacing(labels: Sequence[str]) -> float:
    """horizontal_spacing (a fraction of the figure's width) that leaves room for the query
    tick labels drawn left of a panel, so they never run into the panel before it."""
    return min(0.25, max(0.04, (label_px(labels) + 24) / FIGURE_PX))


def panel_ticks(n_panels: int, spacing: float, px: int = 20) -> int:
    """How many key labels (px = 20: a vertical label's line box is ~18 px wide) or 9 px ✕
    marks (px = 12) a panel can show side by side when the figure is about FIGURE_PX wide
    (its plotting area ~100 px less); beyond that every n-th key is labelled, or no ✕."""
    panel_px = (FIGURE_PX - 100) * (1 - spacing * (n_panels - 1)) / max(n_panels, 1)
    return max(4, int(panel_px // px))


def panels_height(n_rows: int, key_labels: Sequence[str], base: int = 140) -> int:
    """Height of a row of square-ish token panels: 22 px per query row, plus room for the key
    labels, which plotly turns vertical when they do not fit side by side."""
    return max(320, min(900, 22 * n_rows + base)) + label_px(key_labels)


def row_ticks(n_rows: int, base: int = 140, px: int = 16) -> int:
    """How many query labels fit down a panel of panels_height(n_rows, ..., base): its
    plotting area is about the height less ``base``, and a 12 px label needs ~16 px (a
    decoder teacher-forced to 64 tokens gave 12 px a row: neighbouring labels overlapped);
    beyond that every n-th query is labelled."""
    return max(4, int((max(320, min(900, 22 * n_rows + base)) - base) // px))


def mask_panels(masks: Sequence[np.ndarray], titles: Sequence[str],
                query_tokens: Sequence[Sequence[str]], key_tokens: Sequence[Sequence[str]],
                title: str | None = None) -> go.Figure:
    """Side-by-side mask matrices (z = 1 where True = blocked), one panel per mask. Panels
    with the same queries share one column of query labels; a mask that blocks nothing says
    so in its panel (an all-white grid would read as "not drawn")."""
    masks = [np.asarray(m, dtype=bool) for m in masks]
    # long inputs: each cell the share of an f x f block that is blocked (a 2,000-token batch
    # sent 34 MB of full-size masks to the browser)
    f = pool_factor(max(m.shape[0] for m in masks), max(m.shape[1] for m in masks),
                    MAX_MASK_BYTES // len(masks))
    rows = [pooled_labels(q, f) for q in query_tokens]  # (labels, tick tokens) per panel
    cols = [pooled_labels(k, f) for k in key_tokens]
    shared = all(labels == rows[0][0] for labels, _ticks in rows)
    later_labels = [plot_text(t) for labels, _ticks in rows[1:] for t in labels]
    spacing = 0.04 if shared else panel_spacing(later_labels)
    fig = make_subplots(rows=1, cols=len(masks), subplot_titles=list(titles),
                        horizontal_spacing=spacing, shared_yaxes=shared)
    ticks = panel_ticks(len(masks), spacing)
    for i, (m, (yl, qt), (xl, kt)) in enumerate(zip(masks, rows, cols, strict=True), start=1):
        if f == 1:
            gap = int(m.size <= 64 * 64)
            cells = dict(z=m.astype(np.uint8), colorscale=MASK_COLORSCALE, zmax=1, xgap=gap,
                         ygap=gap,
                         hovertemplate="%{y} → %{x}: %{z} (1 = True = " + _("blocked")
                         + ")<extra></extra>")
        else:
            percent = np.rint(100 * pool2d(m, how="mean", factor=f)).astype(np.uint8)
            cells = dict(z=percent, colorscale=SHARE_COLORSCALE, zmax=100,
                         hovertemplate="%{y} → %{x}: " + _("{share} blocked").format(
                             share="%{z}%") + "<extra></extra>")
        fig.add_trace(go.Heatmap(x=xl, y=yl, zmin=0, showscale=False, name="mask", **cells),
                      row=1, col=i)
        axis_id = "" if i == 1 else str(i)
        marks = None if f > 1 else blocked_marks(
            m, xl, yl, xaxis=f"x{axis_id}", yaxis=f"y{axis_id}", showlegend=False,
            max_side=panel_ticks(len(masks), spacing, 12))
        if marks is not None:
            marks.textfont.color = "white"
            fig.add_trace(marks, row=1, col=i)
        elif m.size and not m.any():
            fig.add_annotation(text=_(NOTHING_BLOCKED), x=0.5, y=0.5, xref=f"x{axis_id} domain",
                               yref=f"y{axis_id} domain", showarrow=False, name="nothing blocked",
                               font=dict(size=13, color="#444444"), bgcolor="white",
                               bordercolor="#8c2d2d", borderpad=4)
        fig.update_xaxes(**token_axis(xl, kt, "key", max_ticks=ticks), side="bottom", row=1,
                         col=i)
        fig.update_yaxes(**token_axis(yl, qt, "query" if i == 1 else "", reversed_=True,
                                      max_ticks=row_ticks(len(yl))), row=1, col=i)
    # grey behind the 1 px gaps: an allowed (white) cell reads as a cell of a grid
    note = _(MASK_NOTE) if f == 1 else _(POOLED_NOTE).format(f=f)
    base_layout(fig, title_dict(f"{title or _('Masks')}   <sup>{note}</sup>", above=24),
                showlegend=False, plot_bgcolor="#d9d9d9",
                height=panels_height(max(len(labels) for labels, _ticks in rows),
                                     [plot_text(t) for _labels, ticks in cols for t in ticks]))
    return fig


def padding_batch_figure(sentences: Sequence[Sequence[str]], pad: str = "<pad>",
                         causal: bool = False) -> go.Figure:
    """One padding-mask panel per sentence of a right-padded batch (union with causal if
    asked). Panel i's z equals padding_mask(lengths)[i] (| causal_mask)."""
    padded = pad_batch(sentences, pad)
    masks = padding_mask([len(s) for s in sentences], len(padded[0]))
    if causal:
        masks = masks | causal_mask(len(padded[0]))[None]
    titles = [_("sentence {i} (len {n})").format(i=i, n=len(s)) for i, s in enumerate(sentences)]
    return mask_panels(list(masks), titles, padded, padded,
                       title=_("Padding mask ∪ causal per sentence") if causal
                       else _("Padding mask per sentence"))


def batch_masks_figure(masks: Sequence[np.ndarray], query_tokens: Sequence[Sequence[str]],
                       key_tokens: Sequence[Sequence[str]], title: str | None = None
                       ) -> go.Figure:
    """One panel per sentence of a padded batch, drawing each block's own mask (what the
    model used), titled with the sentence's real length read from the mask."""
    titles = [_("sentence {i} (len {n} of {total})").format(i=i, n=real_length(m),
                                                            total=np.asarray(m).shape[1])
              for i, m in enumerate(masks)]
    return mask_panels(list(masks), titles, query_tokens, key_tokens,
                       title=title or _("The batch's masks, as the model used them"))


def mask_parts_figure(mask: np.ndarray, query_tokens: Sequence[str],
                      key_tokens: Sequence[str], causal: bool,
                      window: int | None = None) -> go.Figure:
    """A block's real mask next to its parts: padding (the whole-column blocks) and, for a
    decoder's self-attention, the causal mask and, on a sliding-window layer, the keys
    `window` or more positions back; their union should equal the real mask."""
    m = np.asarray(mask, dtype=bool)
    pad = np.broadcast_to(pad_columns(m)[None, :], m.shape).copy()
    if not causal:
        return mask_panels([pad, m], [_("padding (PAD keys)"), _("the model's mask")],
                           [query_tokens] * 2, [key_tokens] * 2, title=_("Padding mask"))
    c = causal_mask(m.shape[0])[:, : m.shape[1]]
    if not window:
        return mask_panels([pad, c, m], [_("padding (PAD keys)"), _("causal (k > q)"),
                                         _("the model's mask (union)")],
                           [query_tokens] * 3, [key_tokens] * 3,
                           title=_("Padding, causal and their union"))
    w = sliding_window_mask(m.shape[0], window, m.shape[1])
    return mask_panels([pad, c, w, m], [_("padding (PAD keys)"), _("causal (k > q)"),
                                        _("outside the window (q − k ≥ {window})").format(
                                            window=int(window)),
                                        _("the model's mask (union)")],
                       [query_tokens] * 4, [key_tokens] * 4,
                       title=_("Padding, causal, sliding window of {window} and their union").format(
                                 window=int(window)))


def mask_union_figure(tokens: Sequence[str], length: int | None = None) -> go.Figure:
    """Padding, causal and their union for one padded sentence of `tokens` whose first
    `length` tokens are real (the rest padding)."""
    n = len(tokens)
    length = n if length is None else length
    pad = padding_mask([length], n)[0]
    causal = causal_mask(n)
    return mask_panels([pad, causal, pad | causal],
                       [_("padding (PAD keys)"), _("causal (k > q)"), _("union (decoder self)")],
                       [tokens] * 3, [tokens] * 3, title=_("Padding, causal and their union"))


def masking_steps_figure(scores: np.ndarray, mask: np.ndarray, query_tokens: Sequence[str],
                         key_tokens: Sequence[str], title: str | None = None) -> go.Figure:
    """Three panels: scores before masking, after masking (blocked = -inf, drawn grey ✕),
    and softmax weights (blocked = exactly 0, also grey ✕)."""
    s = np.asarray(scores, dtype=np.float32)
    m = np.asarray(mask, dtype=bool)
    weights = masked_softmax(s, m)
    lim = float(np.max(np.abs(s))) if s.size else 1.0
    after = s.copy()
    after[m] = np.nan  # -inf is not a colour: show it as a grey gap (the plot background)
    w_shown = weights.copy()
    w_shown[m] = np.nan
    title = title or _("Masking, step by step")
    f = pool_factor(*s.shape, MAX_CELLS_PER_PANEL)  # long inputs: mean-pool f x f
    if f > 1:
        s, after, w_shown = (pool2d(a, how="mean", factor=f) for a in (s, after, w_shown))
        m = np.isnan(after)
        title = _("{title} (mean-pooled {f}×{f})").format(title=title, f=f)
    xl, kt = pooled_labels(key_tokens, f)
    yl, qt = pooled_labels(query_tokens, f)
    # Scores before and after masking share one colour scale (their bar at the top right),
    # the weights have theirs (bottom right): both right of the last panel, never over the
    # middle panel's plot. The three panels share the query labels (left of the first).
    score_bar = colorbar("score", x=1.02, xanchor="left", y=1.0, yanchor="top", len=0.47)
    weight_bar = colorbar("weight", x=1.02, xanchor="left", y=0.0, yanchor="bottom", len=0.47)
    panels = [
        (s, _("1 · scores QKᵀ/√d_k"), SCORE_COLORSCALE, -lim, lim, "score", score_bar),
        (after, _("2 · masked: blocked → −∞"), SCORE_COLORSCALE, -lim, lim, "score", None),
        (w_shown, _("3 · softmax weights"), WEIGHT_COLORSCALE, 0.0, 1.0, "weight", weight_bar),
    ]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[p[1] for p in panels],
                        horizontal_spacing=0.04, shared_yaxes=True)
    for i, (z, _unused, cs, lo, hi, name, bar) in enumerate(panels, start=1):
        fig.add_trace(go.Heatmap(
            z=f32(z), x=xl, y=yl, colorscale=cs, zmin=lo, zmax=hi, name=name,
            hoverongaps=False, showscale=bar is not None, colorbar=bar or {},
            hovertemplate="%{y} → %{x}: %{z:.4f}<extra>" + _(name) + "</extra>"), row=1, col=i)
        if i > 1:
            axis_id = str(i)
            marks = blocked_marks(m, xl, yl, xaxis=f"x{axis_id}", yaxis=f"y{axis_id}",
                                  showlegend=False, max_side=panel_ticks(3, 0.04, 12))
            if marks is not None:
                fig.add_trace(marks, row=1, col=i)
        fig.update_xaxes(**token_axis(xl, kt, "key", max_ticks=panel_ticks(3, 0.04)), row=1,
                         col=i)
        fig.update_yaxes(**token_axis(yl, qt, "query" if i == 1 else "", reversed_=True,
                                      max_ticks=row_ticks(len(yl), base=160)), row=1, col=i)
    base_layout(fig, title_dict(f"{title}   <sup>{_(BLOCKED_NOTE)}</sup>", above=24),
                plot_bgcolor=BLOCKED_COLOR, showlegend=False,
                height=panels_height(len(yl), [plot_text(t) for t in kt], base=160))
    return fig
