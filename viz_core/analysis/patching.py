"""Activation patching and attribution patching: which heads / stream positions matter.

Two inputs with the same number of tokens, a *clean* one and a *corrupted* one, give two values
of one metric (a logit, a logit difference, or for a model without an output head the cosine
of its pooled sentence embedding to the clean run's). Activation patching runs the corrupted
input again with one activation taken from the clean run and reports where the metric lands,
normalised so that 0 = the corrupted run's value and 1 = the clean run's:

    effect(unit) = (metric(corrupted run, unit patched from clean) - corrupted) / (clean - corrupted)

Units (``over``):

- ``"heads"``: one head's output z (before W_O), at every position, in one attention block;
- ``"layers"``: the residual stream entering one layer, at every position;
- ``"positions"``: the residual stream entering one layer at one position.

The patched runs are batched: many patched copies of the corrupted input go through the model
in one forward pass (chunked to bound memory), each copy with its own unit replaced, and only
the metric of each copy is kept. The replacement goes through the capture path of every model
(``viz_core.capture.recorder``: ``Recorder.edit_z`` inside ``attend``, ``Recorder.edit_stream``
where the stream is noted), so it works the same for our models and every Hugging Face family.

Attribution patching (Nanda, 2023; Syed et al., 2023, "AtP") replaces the many patched runs by
the first-order term, with one backward pass on the corrupted run:

    effect(unit) ~= sum over the unit's elements of (clean - corrupted activation) * d metric / d activation

normalised the same way. It is exact when the metric is linear in the activation and drifts
from real patching as the model gets less linear; ``compare`` gives their agreement.

``patch(model, clean, corrupted, ...)`` and ``attribution_patch`` take the model (they are
its methods through viz_core.analysis.registry); the model hands over a ``PatchSubject``
(``model.patching_subject``: tokenisation, how to run n copies, how to read the output), and
``run_patching`` / ``run_attribution_patching`` do the work on it. This module never loads a
model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from viz_core.i18n import N_, Message

from ..capture.recorder import Recorder, recording
from ..errors import InputError
from ..model.choices import Over, PatchMethod, Readout, choose, options, whole

OVER = options(Over)
CHUNK_BYTES = 256 << 20  # rough activation memory of one batch of patched copies


# ---- what a backend hands over -------------------------------------------------------------
@dataclass
class PatchSubject:
    """One model and one (clean, corrupted) pair, ready to run.

    ``run(which, n)`` runs n copies of the clean or corrupted input (``which``) under the
    caller's recorder and returns the readout, float (n, ...): the logits at the metric's
    position (n, vocab) when ``readout == "logits"``, else the pooled sentence embedding
    (n, d_model) (``readout == "embedding"``).
    """

    clean_tokens: list[str]  # the input whose tokens must match (shown form)
    corrupted_tokens: list[str]
    blocks: dict[str, int]  # attention block -> number of (query) heads, in model order
    layers: dict[str, int]  # layer ("encoder.0") -> positions of the stream entering it
    run: Callable[[str, int], torch.Tensor]
    readout: Readout = "logits"
    position: int = -1  # the metric's position (normalised, >= 0), for the name
    position_tokens: list[str] = field(default_factory=list)  # the sequence position indexes
    token_id: Callable[[str, str], int] | None = None  # (text, what) -> id, or InputError
    token_label: Callable[[int], str] = str
    width_per_copy: int = 0  # floats of activation per copy (for chunking)
    layer_tokens: dict[str, list[str]] = field(default_factory=dict)  # tokens per layer's axis
    share_prefix: bool = False  # copies may share the run below their first patched layer
    warnings: list[str] = field(default_factory=list)
    # what every Recorder of this model needs (Hugging Face: its block and stream names)
    recorder_args: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.readout = choose(self.readout, Readout, "readout")

    def recorder(self, **kwargs) -> Recorder:
        return Recorder(**self.recorder_args, **kwargs)


@dataclass
class Patching:
    """The result of ``patch`` / ``attribution_patch``.

    effect: float numpy, 0 = the corrupted run's metric, 1 = the clean run's:
      over="heads": [block, head], one row per attention block in model order (``rows``
      names them: "decoder.0.self", ...; an encoder-decoder model has its encoder blocks, then
      per decoder layer self and cross); over="layers": [layer] (``rows`` names them:
      "encoder.0", "decoder.3"); over="positions": [layer, position] (an encoder-decoder
      model's rows have different lengths: the short ones end in NaN).
    """

    effect: np.ndarray
    clean: float
    corrupted: float
    metric: str
    over: Over
    rows: list[str]
    columns: list[str]  # "h0".. for heads; the tokens for positions; [] for layers
    method: PatchMethod = "activation"
    tokens: list[str] = field(default_factory=list)  # the clean input's tokens
    corrupted_tokens: list[str] = field(default_factory=list)
    token: str = ""
    against: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def frame(self) -> pd.DataFrame:
        """One row per unit: row (block / layer), column (head / position; "" for layers),
        index (head or position number; -1 for layers), effect. For CSV export and plots."""
        out = []
        eff = np.atleast_2d(self.effect) if self.over != "layers" else self.effect[:, None]
        for i, row in enumerate(self.rows):
            for j in range(eff.shape[1]):
                if self.over == "layers":
                    out.append((row, "", -1, float(eff[i, 0])))
                elif not math.isnan(float(eff[i, j])):
                    label = self.columns[j] if j < len(self.columns) else str(j)
                    out.append((row, label, j, float(eff[i, j])))
        return pd.DataFrame(out, columns=["row", "column", "index", "effect"])


@dataclass
class Comparison:
    """Real patching against attribution patching, unit by unit (figure-ready)."""

    frame: pd.DataFrame  # row, column, index, patching, attribution
    pearson: float
    spearman: float
    over: Over
    metric: str


def compare(real: Patching, approx: Patching) -> Comparison:
    """Agreement of attribution patching with real patching: their per-unit table and the
    Pearson and Spearman correlations (NaN where fewer than two units vary)."""
    if real.effect.shape != approx.effect.shape or real.over != approx.over:
        raise InputError(N_("Compare patching results of the same model, input and 'over'."))
    a, b = real.frame, approx.frame
    frame = a.rename(columns={"effect": "patching"})
    frame["attribution"] = b["effect"].to_numpy()
    x, y = frame["patching"].to_numpy(float), frame["attribution"].to_numpy(float)
    return Comparison(frame=frame, pearson=_pearson(x, y), spearman=_pearson(_ranks(x),
                      _ranks(y)), over=real.over, metric=real.metric)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    return pd.Series(x).rank().to_numpy(float)  # ties share their mean rank


# ---- units ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Unit:
    """One patchable activation: a head of a block (kind "head"), a layer's incoming stream
    at every position ("layer", index -1) or at one position ("position")."""

    kind: str
    name: str  # block or layer
    index: int = -1  # head or position


def units(subject: PatchSubject, over: Over) -> tuple[list[Unit], list[str], list[str],
                                                        list[tuple[int, int]]]:
    """(units, row names, column labels, (row, column) cell of each unit)."""
    over = choose(over, Over, "over")
    out, cells = [], []
    if over == "heads":
        rows = list(subject.blocks)
        width = max(subject.blocks.values(), default=0)
        for r, (block, heads) in enumerate(subject.blocks.items()):
            for h in range(heads):
                out.append(Unit("head", block, h))
                cells.append((r, h))
        return out, rows, [f"h{h}" for h in range(width)], cells
    rows = list(subject.layers)
    if over == "layers":
        out = [Unit("layer", layer) for layer in rows]
        return out, rows, [], [(r, 0) for r in range(len(rows))]
    width = max(subject.layers.values(), default=0)
    for r, (layer, n) in enumerate(subject.layers.items()):
        for p in range(n):
            out.append(Unit("position", layer, p))
            cells.append((r, p))
    longest = max(subject.layers, key=lambda k: subject.layers[k], default=None)
    labels = list(subject.layer_tokens.get(longest, [])) if longest else []
    labels = [f"{p}·{t}" for p, t in enumerate(labels)] or [str(p) for p in range(width)]
    return out, rows, labels, cells


# ---- the metric ----------------------------------------------------------------------------
@dataclass
class Metric:
    name: str  # an i18n.Message: English as data (CSV, atlas), translated where shown
    token: str
    against: str | None
    fn: Callable[[torch.Tensor], torch.Tensor]  # readout (n, ...) -> (n,)
    # the logit's token id, or (token, against) for a difference; () for the cosine
    ids: tuple[int, ...] = ()


# The metric's name, in the results (English) and on the pages (translated)
METRIC_LOGIT = N_("logit {token} at {position}")
METRIC_DIFF = N_("logit diff {token} - {against} at {position}")
METRIC_COSINE = N_("cosine similarity of the pooled sentence embedding to the clean run's")


def make_metric(subject: PatchSubject, clean_readout: torch.Tensor, token, against) -> Metric:
    """The logit (difference) at the subject's position, or the cosine to the clean
    embedding for a model without an output head."""
    if subject.readout == "embedding":
        if token is not None or against is not None:
            raise InputError(N_("This model has no output head (no token logits): its patching "
                             "metric is the cosine similarity of the sentence embedding to the "
                             "clean run's; leave the target token and contrast empty."))
        ref = clean_readout[0].detach().float()

        def cosine(x):
            return torch.nn.functional.cosine_similarity(x.float(), ref[None], dim=-1)
        return Metric(Message(METRIC_COSINE), "", None, cosine)
    if token is None or (isinstance(token, str) and not token.strip()):
        tok = int(clean_readout[0].argmax())
    else:
        tok = subject.token_id(token, N_("target token"))
    alt = None
    if against is not None and not (isinstance(against, str) and not against.strip()):
        alt = subject.token_id(against, N_("contrast token"))
        if alt == tok:
            raise InputError(N_("The contrast token {token_label!r} is the target token itself: "
                               "pick a different contrast (or none)."), token_label=subject.token_label(alt))
    t_label = subject.token_label(tok)
    pos = subject.position
    if alt is None:
        name = Message(METRIC_LOGIT, token=repr(t_label), position=pos)

        def logit(x):
            return x[:, tok].float()
        return Metric(name, t_label, None, logit, (tok,))
    a_label = subject.token_label(alt)

    def diff(x):
        return x[:, tok].float() - x[:, alt].float()
    return Metric(Message(METRIC_DIFF, token=repr(t_label), against=repr(a_label), position=pos),
                  t_label, a_label, diff, (tok, alt))


# ---- activation patching -------------------------------------------------------------------
def _record_run(subject: PatchSubject, which: str, want_z: bool, want_stream: bool
                ) -> tuple[torch.Tensor, Recorder]:
    names = set(subject.blocks)
    rec = subject.recorder(keep=(lambda n: n in names) if want_z else None,
                   points=frozenset({"z"}) if want_z else frozenset(), stream=want_stream)
    with recording(rec):
        out = subject.run(which, 1)
    return out, rec


def clean_values(rec: Recorder, subject: PatchSubject, over: Over) -> dict:
    """{block: z (T, H, d)} or {layer: stream entering it (T, d)} of a recorded single run."""
    if over == "heads":
        return {b: rec.records[b][-1].z[0] for b in subject.blocks}
    return {layer: rec.states[layer]["in"][0] for layer in subject.layers}


def _edits(groups: Sequence[Sequence[Unit]], clean: dict) -> tuple[dict, dict]:
    """Recorder edits that patch, in copy i of a batch, every unit of groups[i]."""
    by_block: dict[str, tuple[list, list]] = {}
    by_layer: dict[str, tuple[list, list]] = {}
    for row, group in enumerate(groups):
        for u in group:
            target = by_block if u.kind == "head" else by_layer
            rows, idx = target.setdefault(u.name, ([], []))
            rows.append(row)
            idx.append(u.index)
    edit_z, edit_stream = {}, {}
    for block, (rows, heads) in by_block.items():
        edit_z[block] = _head_edit(rows, heads, clean[block])
    for layer, (rows, pos) in by_layer.items():
        edit_stream[(layer, "in")] = _stream_edit(rows, pos, clean[layer])
    return edit_z, edit_stream


def _head_edit(rows: list[int], heads: list[int], clean_z: torch.Tensor):
    r = torch.tensor(rows, device=clean_z.device)
    h = torch.tensor(heads, device=clean_z.device)
    src = clean_z[:, h].transpose(0, 1)  # (n, T, d): the clean z of each patched head

    def edit(z: torch.Tensor) -> torch.Tensor:  # z (B, T, H, d)
        z = z.clone()
        z[r, :, h] = src.to(z.dtype)
        return z
    return edit


def _stream_edit(rows: list[int], positions: list[int], clean_x: torch.Tensor):
    whole = [i for i, p in enumerate(positions) if p < 0]
    one = [i for i, p in enumerate(positions) if p >= 0]
    dev = clean_x.device
    r_all = torch.tensor([rows[i] for i in whole], dtype=torch.long, device=dev)
    r_one = torch.tensor([rows[i] for i in one], dtype=torch.long, device=dev)
    p_one = torch.tensor([positions[i] for i in one], dtype=torch.long, device=dev)

    def edit(x: torch.Tensor) -> torch.Tensor:  # x (B, T, d)
        x = x.clone()
        if len(r_all):
            x[r_all] = clean_x.to(x.dtype)
        if len(r_one):
            x[r_one, p_one] = clean_x[p_one].to(x.dtype)
        return x
    return edit


def chunk_size(subject: PatchSubject, total: int, chunk: int | None) -> int:
    if chunk is not None:
        return max(1, whole(chunk, N_("chunk")))
    per_copy = max(1, subject.width_per_copy) * 4  # float32 bytes
    return max(1, min(total, CHUNK_BYTES // per_copy))


@torch.no_grad()
def run_groups(subject: PatchSubject, groups: Sequence[Sequence[Unit]], clean: dict,
               metric: Metric, chunk: int | None = None, share_prefix: bool = True
               ) -> np.ndarray:
    """The metric of the corrupted input with each group of units patched from the clean
    run (a group may be empty: the corrupted run itself), ``chunk`` copies per forward.

    share_prefix: copies whose patches all sit in layer l or later are the corrupted run
    itself below layer l, so a batch of them runs as one copy up to layer l and is widened
    to its n copies there (the stream entering layer l, expanded by the recorder's stream
    edit). Patching layer l's heads then costs the layers from l on only, about half the
    work over a whole model. Only where nothing else in a layer holds a batch of its own
    (``subject.share_prefix``: no cross-attention over an encoder's output).
    """
    step = chunk_size(subject, len(groups), chunk)
    out = np.zeros(len(groups))
    for index, start in _chunks(subject, groups, step, share_prefix):
        part = [groups[i] for i in index]
        edit_z, edit_stream = _edits(part, clean)
        if start is not None:
            edit_stream[(start, "in")] = _widen(len(part), edit_stream.get((start, "in")))
        with recording(subject.recorder(edit_z=edit_z, edit_stream=edit_stream)):
            readout = subject.run("corrupted", 1 if start is not None else len(part))
        out[index] = metric.fn(readout).detach().cpu().double().numpy()
    return out


def _widen(n: int, then=None):
    def edit(x: torch.Tensor) -> torch.Tensor:  # (1, T, d) -> (n, T, d), then the patches
        x = x.expand(n, *x.shape[1:]).contiguous()
        return x if then is None else then(x)
    return edit


def _chunks(subject: PatchSubject, groups, step: int, share_prefix: bool):
    """(indices of the groups in one forward, the layer to widen at or None), in order."""
    order = {layer: i for i, layer in enumerate(subject.layers)}

    def first_layer(group):
        if not group:
            return None
        layers = [u.name.rsplit(".", 1)[0] if u.kind == "head" else u.name for u in group]
        return None if any(la not in order for la in layers) else min(layers, key=order.get)

    by_start: dict = {}
    for i, g in enumerate(groups):
        start = first_layer(g) if share_prefix and subject.share_prefix else None
        by_start.setdefault(start, []).append(i)
    for start in sorted(by_start, key=lambda s: -1 if s is None else order[s]):
        index = by_start[start]
        for c0 in range(0, len(index), step):
            yield index[c0:c0 + step], start


SMALL_GAP = 0.01  # of the metric's size (at least 1): below it, every share is mostly noise
SMALL_GAP_WARNING = N_("The corruption barely moves the metric ({name}: clean {clean:.4g}, "
                       "corrupted {corrupted:.4g}): every number here is a share of that "
                       "difference, so it is mostly noise. Pick a position (or target token) "
                       "whose prediction depends on the changed word, or change another word.")


def small_gap(clean: float, corrupted: float) -> bool:
    """Whether the corruption barely moves the metric: effects and edge scores are shares of
    clean - corrupted, so a tiny difference makes rounding look like an effect."""
    return abs(clean - corrupted) < SMALL_GAP * max(1.0, abs(clean), abs(corrupted))


def gap_warnings(clean: float, corrupted: float, metric_name: str) -> list[Message]:
    """[the warning] when ``small_gap``, else []."""
    if not small_gap(clean, corrupted):
        return []
    return [Message(SMALL_GAP_WARNING, name=metric_name, clean=clean, corrupted=corrupted)]


def _check_gap(clean: float, corrupted: float, metric: Metric) -> float:
    gap = clean - corrupted
    if not (np.isfinite(clean) and np.isfinite(corrupted)):
        raise InputError(N_("The {name} is not a number on the clean or the corrupted input "
                            "({clean:.4g} and {corrupted:.4g}): the model's outputs hold NaN or "
                            "infinity, so there is nothing to compare."), name=metric.name,
                         clean=clean, corrupted=corrupted)
    if not np.isfinite(gap) or abs(gap) <= 1e-6 * max(1.0, abs(clean), abs(corrupted)):
        raise InputError(N_("The clean and corrupted inputs give the same {name} ({clean:.4g} and "
                           "{corrupted:.4g}): there is nothing to restore. Change the corrupted "
                           "text (or the target token)."), name=metric.name, clean=clean, corrupted=corrupted)
    return gap


def patch(model, clean: str, corrupted: str, *, target: str | None = None, token=None,
          against=None, position: int = -1, over: Over = "heads", chunk: int | None = None,
          share_prefix: bool = True) -> Patching:
    """Activation patching of ``model`` on a (clean, corrupted) pair of equal token length:
    a ``Patching`` whose effect is 0 = the corrupted run's metric, 1 = the clean run's, per
    head (``over="heads"``), layer (``"layers"``) or (layer, position) (``"positions"``).

    The metric is logit(token) (default: the clean run's top token), or logit(token) -
    logit(against), at ``position`` of the decoder input (``target``: teacher-forced after a
    decoder-only prompt; the decoder input of an encoder-decoder model); a model without an
    output head uses the cosine of its pooled sentence embedding to the clean run's.
    ``chunk``: patched copies per forward pass (None: as many as fit the memory bound).
    """
    over = choose(over, Over, "over")
    subject = model.patching_subject(clean, corrupted, target, position)
    return run_patching(subject, token=token, against=against, over=over, chunk=chunk,
                        share_prefix=share_prefix)


def attribution_patch(model, clean: str, corrupted: str, *, target: str | None = None,
                      token=None, against=None, position: int = -1,
                      over: Over = "heads") -> Patching:
    """Attribution patching (one forward and one backward pass of the corrupted run): the
    first-order estimate of ``patch``, with the same arguments, shape and scale."""
    over = choose(over, Over, "over")
    subject = model.patching_subject(clean, corrupted, target, position)
    return run_attribution_patching(subject, token=token, against=against, over=over)


def run_patching(subject: PatchSubject, *, token=None, against=None, over: Over = "heads",
                 chunk: int | None = None, share_prefix: bool = True) -> Patching:
    """Activation patching of every unit of ``over`` on a ready PatchSubject (module
    docstring)."""
    unit_list, rows, columns, cells = units(subject, over)
    with torch.no_grad():
        clean_out, rec = _record_run(subject, "clean", over == "heads", over != "heads")
    metric = make_metric(subject, clean_out, token, against)
    clean_vals = clean_values(rec, subject, over)
    del rec
    m_clean = float(metric.fn(clean_out)[0])
    with torch.no_grad():
        m_corr = float(metric.fn(subject.run("corrupted", 1))[0])
    gap = _check_gap(m_clean, m_corr, metric)
    values = run_groups(subject, [[u] for u in unit_list], clean_vals, metric, chunk,
                        share_prefix)
    return _result(subject, over, rows, columns, cells, (values - m_corr) / gap, m_clean,
                   m_corr, metric, "activation")


def _result(subject, over, rows, columns, cells, values, m_clean, m_corr, metric, method):
    if over == "layers":
        effect = np.asarray(values, dtype=np.float64)
    else:
        width = max((c for _, c in cells), default=-1) + 1
        effect = np.full((len(rows), width), np.nan)
        for (r, c), v in zip(cells, values):
            effect[r, c] = v
    return Patching(effect=effect, clean=m_clean, corrupted=m_corr, metric=metric.name,
                    over=over, rows=rows, columns=columns, method=method,
                    tokens=list(subject.clean_tokens),
                    corrupted_tokens=list(subject.corrupted_tokens), token=metric.token,
                    against=metric.against,
                    warnings=[*subject.warnings, *gap_warnings(m_clean, m_corr, metric.name)])


# ---- attribution patching ------------------------------------------------------------------
def run_attribution_patching(subject: PatchSubject, *, token=None, against=None,
                             over: Over = "heads") -> Patching:
    """(clean - corrupted activation) . d metric / d activation for every unit, from one
    forward and one backward pass of the corrupted run (plus the clean run's activations)."""
    unit_list, rows, columns, cells = units(subject, over)
    with torch.no_grad():
        clean_out, rec = _record_run(subject, "clean", over == "heads", over != "heads")
    metric = make_metric(subject, clean_out, token, against)
    clean_vals = clean_values(rec, subject, over)
    del rec
    m_clean = float(metric.fn(clean_out)[0])
    # The corrupted run with a zero added at every patchable activation: the gradient of the
    # metric with respect to that zero is its gradient with respect to the activation.
    deltas: dict = {}
    acts: dict = {}

    def tap(key):
        def edit(x):
            d = torch.zeros_like(x, requires_grad=True)
            deltas[key], acts[key] = d, x.detach()
            return x + d
        return edit

    if over == "heads":
        rec = subject.recorder(edit_z={b: tap(b) for b in subject.blocks})
    else:
        rec = subject.recorder(edit_stream={(layer, "in"): tap(layer)
                                            for layer in subject.layers})
    with torch.enable_grad(), recording(rec):
        m = metric.fn(subject.run("corrupted", 1))[0]
        keys = [k for k in (subject.blocks if over == "heads" else subject.layers)
                if k in deltas]
        grads = torch.autograd.grad(m, [deltas[k] for k in keys], allow_unused=True)
    m_corr = float(m.detach())
    gap = _check_gap(m_clean, m_corr, metric)
    terms = {}
    for k, g in zip(keys, grads):
        if g is None:  # the metric does not depend on this activation
            g = torch.zeros_like(deltas[k])
        diff = clean_vals[k].float() - acts[k][0].float()  # (T, H, d) or (T, d)
        prod = diff * g[0].float()
        if over == "heads":
            terms[k] = prod.sum(dim=(0, 2))  # (H,)
        elif over == "positions":
            terms[k] = prod.sum(dim=-1)  # (T,)
        else:
            terms[k] = prod.sum()
    values = []
    for u in unit_list:
        t = terms.get(u.name)
        if t is None:
            values.append(0.0)
        elif u.kind == "layer":
            values.append(float(t))
        else:
            values.append(float(t[u.index]))
    values = np.asarray(values, dtype=np.float64) / gap
    return _result(subject, over, rows, columns, cells, values, m_clean, m_corr, metric,
                   "attribution")


# ---- input checks shared by the backends ---------------------------------------------------
def check_same_length(clean_ids: Sequence[int], corrupted_ids: Sequence[int],
                      clean_tokens: Sequence[str], corrupted_tokens: Sequence[str]) -> None:
    """InputError naming both token counts and where the two inputs first differ."""
    if len(clean_ids) == len(corrupted_ids):
        return
    n = min(len(clean_ids), len(corrupted_ids))
    i = next((j for j in range(n) if clean_ids[j] != corrupted_ids[j]), n)

    def tok(tokens, j):
        return repr(_short(tokens[j])) if j < len(tokens) else "(end of input)"
    raise InputError(N_("The clean text has {n_clean_ids} tokens and the corrupted text "
                       "{n_corrupted_ids}: they must have the same number. They first differ at "
                       "token {i}: {tok} (clean) vs {tok2} (corrupted)."),
                         n_clean_ids=len(clean_ids), n_corrupted_ids=len(corrupted_ids), i=i,
                         tok=tok(clean_tokens, i), tok2=tok(corrupted_tokens, i))


def _short(text: str, n: int = 30) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def normalise_position(position, length: int, what: str = "input") -> int:
    """A position (negative counts from the end) -> 0..length-1, or an InputError."""
    p = whole(position, N_("position"))
    if not -length <= p < length:
        raise InputError(N_("Position {p} is outside this {what} of {length} tokens (use "
                           "0..{value}, or -1 for the last)."),
                             p=p, what=what, length=length, value=length - 1)
    return p % length
