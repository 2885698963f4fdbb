"""Which components write what: direct logit attribution and the logit lens.

In a pre-norm model the residual stream at the end of the last layer is a plain sum:

    x_final = embed + position + sum over layers (sum_h head_h + b_O + mlp)

(Gemma 2/3 and OLMo 2 put a norm on each sublayer's output: there each term is that norm's
linear part with its scale frozen at the real run's value, plus its bias). Each head's share is
W_O[h] z_h with z from the trace. The final norm, its scale frozen at the real run's value
(parts.NormSpec), is then linear, and so is the unembedding: the logit of a token is the sum
of every component's image, exactly (``LogitAttribution.frame.contribution.sum() ==
.logit``). In a post-norm model every sublayer's output is renormalised with the stream, so
no such sum exists: ``DecompositionError``; patching works there.

The logit lens applies the model's own final norm (its real scale, per layer) and the
unembedding to the stream after every layer.

Everything takes a backend by duck typing (viz_core.backends: ``trace(..., capture=...)``,
``final_norm()``, ``unembedding()``, ``logit_softcap()``, ``position_rows(n)``,
``head_weights(block)``, ``token_id(token)``, ``token_strings(ids)``, ``norm_placement``);
this module never imports a backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from viz_core.i18n import N_, Message

from ..errors import DecompositionError, InputError, VizError
from ..model.choices import whole

CAPTURE = ("z", "stream")  # q and k are always kept; z needs v, which comes with it
KINDS = ("embed", "position", "head", "mlp", "bias")
ADDABLE = ("pre", "pre+post", "output")  # norm placements whose stream is a plain sum
LENS_CHUNK_BYTES = 64 << 20  # float32 logits of the lens computed per chunk of positions


# ---- running the model -------------------------------------------------------------------
def check_decomposable(backend) -> None:
    """A DecompositionError for models whose stream is not a sum of components."""
    name = backend.name or "This model"
    if backend.norm_placement not in ADDABLE:
        raise DecompositionError(
            N_("{name} is a post-norm model: its residual stream is renormalised after every "
              "sublayer, so a direct decomposition into heads and MLPs does not add up; use "
              "activation patching (model.patch), which works for every model."), name=name)
    if backend.architecture == "encoder-only":
        raise DecompositionError(
            N_("{name} is an encoder-only model: it has no unembedding (its output is one vector "
              "per token, not scores over a vocabulary), so there is no logit to attribute; use "
              "activation patching (model.patch) instead."), name=name)


def check_unembedding(backend) -> None:
    if backend.architecture == "encoder-only":
        raise DecompositionError(
            N_("{value} is an encoder-only model: it has no unembedding (its output is one vector "
              "per token, not scores over a vocabulary), so there is no logit lens for it."),
                value=backend.name or 'This model')


def run(backend, text: str, target: str | None):
    """One recorded run with z and the stream: the trace (decoder-only: the text alone, no
    generated continuation unless a target is given)."""
    options = {}
    if backend.architecture == "decoder-only" and not (target and str(target).strip()):
        options["max_new"] = 0
    return backend.trace(text, target, capture=CAPTURE, **options)


def decoder_layers(trace, stack: str = "decoder") -> list[str]:
    layers = [k for k in trace.stream if k.split(".")[0] == stack]
    return sorted(layers, key=lambda k: int(k.split(".")[1]))


def recorded(trace, block: str):
    """The recorded inputs of one block (``BlockTrace.source``: q, k, v, z, mask, scaling
    ...), with its head outputs z; VizError when the run kept no z."""
    src = trace[block].source
    if src is None or src.z is None:
        raise VizError(N_("The trace of {block!r} kept no head outputs (z)."), block=block)
    return src


def check_position(position, n: int, what: str = "position") -> int:
    p = whole(position, what)
    if not -n <= p < n:
        raise InputError(N_("The {what} {p} is out of range: this input has {n} tokens (positions "
                           "0..{value}, or -{n}..-1 from the end)."), what=what, p=p, n=n, value=n - 1)
    return p % n


# ---- the stream as a sum of components ---------------------------------------------------
@dataclass
class Components:
    """Named pieces whose sum is the residual stream at some positions."""

    names: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    layers: list[int | None] = field(default_factory=list)
    heads: list[int | None] = field(default_factory=list)
    blocks: list[str | None] = field(default_factory=list)
    parts: list[torch.Tensor] = field(default_factory=list)  # each (P, d) float32

    def add(self, name, kind, layer, head, block, x: torch.Tensor) -> None:
        self.names.append(name)
        self.kinds.append(kind)
        self.layers.append(layer)
        self.heads.append(head)
        self.blocks.append(block)
        self.parts.append(x.float())

    @property
    def vectors(self) -> torch.Tensor:
        """float32 (C, P, d)."""
        return torch.stack(self.parts)


def stream_components(backend, trace, layers: list[str], upto: int, positions: list[int]
                      ) -> Components:
    """The stream entering layer ``upto`` (``upto == len(layers)``: leaving the last) at the
    given positions, split into embeddings, position rows, each head, each attention bias and
    each MLP of the layers before it."""
    placement = backend.norm_placement
    pos = torch.tensor(positions, dtype=torch.long)
    x0 = trace.stream[layers[0]]["in"]
    pos = pos.to(x0.device)
    out = Components()
    x0 = x0.index_select(0, pos).float()  # (P, d)
    rows = backend.position_rows(int(max(positions)) + 1)
    if rows is not None:
        prow = rows.detach().to(x0.device).float().index_select(0, pos)
        out.add("embed", "embed", None, None, None, x0 - prow)
        out.add("position", "position", None, None, None, prow)
    else:
        out.add("embed", "embed", None, None, None, x0)
    for layer in layers[:upto]:
        pts = trace.stream[layer]
        stack, number = layer.split(".")
        for kind in ("self", "cross"):
            block = f"{layer}.{kind}"
            if block not in trace.blocks:
                continue
            hw = backend.head_weights(block)
            src = recorded(trace, block)
            z = src.z.index_select(0, pos.to(src.z.device)).float()  # (P, H, d_v)
            w_o = hw.W_O.detach().to(z.device).float()  # (H, d, d_v)
            shares = torch.einsum("phv,hdv->hpd", z, w_o)  # (H, P, d)
            bias = None if hw.b_O is None else hw.b_O.detach().float().to(z.device)
            if hw.post_norm is not None and placement in ("pre+post", "output"):
                s = hw.post_norm.scale(pts[kind].index_select(0, pos))  # (P, 1)
                shares = hw.post_norm.linear(shares, s)
                if bias is not None:
                    bias = hw.post_norm.linear(bias.expand(len(positions), -1), s)
                pb = hw.post_norm.bias_term()
                if pb is not None:
                    bias = pb.expand(len(positions), -1) if bias is None else bias + pb
            for h in range(shares.shape[0]):
                out.add(f"{block}.h{h}", "head", int(number), h, block, shares[h])
            if bias is not None:
                out.add(f"{block}.bias", "bias", int(number), None, block,
                        bias.expand(len(positions), -1))
        ffn = pts.get("ffn.post_norm" if placement in ("pre+post", "output") else "ffn")
        if ffn is not None:
            out.add(f"{layer}.mlp", "mlp", int(number), None, f"{layer}.mlp",
                    ffn.index_select(0, pos))
    return out


# ---- direct logit attribution ------------------------------------------------------------
@dataclass
class LogitAttribution:
    """Each component's direct contribution to one logit (or logit difference).

    frame: one row per component: component, kind (embed|position|head|mlp|bias), layer,
    head (nullable integers), block, contribution; ``frame.contribution.sum() == logit``.
    logit: the model's own logit of ``token`` at ``position`` (before any final softcap), or
    logit(token) - logit(against).
    """

    frame: pd.DataFrame
    logit: float
    position: int
    token: str
    token_id: int
    against: str | None
    against_id: int | None
    tokens: list[str]  # the input tokens (the positions)
    note: str = ""
    softcapped_logit: float | None = None  # the logit after the model's final softcap
    warnings: list[str] = field(default_factory=list)

    @property
    def metric(self) -> str:
        return (f"logit({self.token})" if self.against is None
                else f"logit({self.token}) - logit({self.against})")


@torch.no_grad()
def final_logits(backend, x: torch.Tensor, softcap: bool = True) -> torch.Tensor:
    """float32 (..., V): the model's head on stream rows x: final norm (its real scale),
    unembedding, and (softcap=True) the model's final logit softcap."""
    norm = backend.final_norm()
    w_u, b_u = backend.unembedding()
    h = x.float() if norm is None else norm(x)
    logits = h @ w_u.detach().float().to(h.device).T
    if b_u is not None:
        logits = logits + b_u.detach().float().to(h.device)
    cap = backend.logit_softcap() if softcap else None
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


@torch.no_grad()
def logit_attribution(model, text: str, target: str | None = None, *, position: int = -1,
                      token=None, against=None) -> LogitAttribution:
    """Each component's direct contribution to the logit of ``token`` (default: the model's
    top prediction) at ``position`` of ``text``, or to logit(token) - logit(against): a
    LogitAttribution whose ``frame.contribution`` adds up to ``logit`` (module docstring).
    Pre-norm models with an unembedding (DecompositionError otherwise); ``target``
    teacher-forces the decoder's input (decoder-only: appended to the text)."""
    check_decomposable(model)
    trace = run(model, text, target)
    layers = decoder_layers(trace)
    if not layers:
        raise VizError(N_("This run recorded no residual stream."))
    tokens = list(trace.target_tokens)
    p = check_position(position, len(tokens))
    x_final = trace.stream[layers[-1]]["out"][p:p + 1]  # (1, d)
    logits = final_logits(model, x_final, softcap=False)[0]  # (V,)
    t_id = int(logits.argmax()) if token is None else model.token_id(token, N_("target token"))
    a_id = None if against is None else model.token_id(against, N_("contrast token"))
    if a_id is not None and a_id == t_id:
        raise InputError(N_("The contrast token is the target token itself: their logit "
                         "difference is always 0. Pick a different contrast token."))
    w_u, b_u = model.unembedding()
    direction = w_u[t_id].detach().float()
    if a_id is not None:
        direction = direction - w_u[a_id].detach().float()
    comps = stream_components(model, trace, layers, len(layers), [p])
    vec = comps.vectors[:, 0]  # (C, d)
    norm = model.final_norm()
    direction = direction.to(vec.device)
    if norm is not None:
        s = norm.scale(x_final)  # (1, 1): the real run's scale
        vec = norm.linear(vec, s)
    contrib = (vec @ direction).tolist()
    names, kinds = list(comps.names), list(comps.kinds)
    layers_col, heads_col, blocks = list(comps.layers), list(comps.heads), list(comps.blocks)
    final_bias = 0.0
    if norm is not None and norm.bias_term() is not None:
        final_bias += float(norm.bias_term().to(direction.device) @ direction)
    if b_u is not None:
        b = b_u.detach().float()
        final_bias += float(b[t_id] - (b[a_id] if a_id is not None else 0.0))
    if (norm is not None and norm.bias is not None) or b_u is not None:
        names.append("bias")
        kinds.append("bias")
        layers_col.append(None)
        heads_col.append(None)
        blocks.append(None)
        contrib.append(final_bias)
    frame = pd.DataFrame({
        "component": names, "kind": kinds,
        "layer": pd.array(layers_col, dtype="Int64"), "head": pd.array(heads_col, dtype="Int64"),
        "block": blocks, "contribution": np.asarray(contrib, dtype=np.float64)})
    logit = float(logits[t_id] - (logits[a_id] if a_id is not None else 0.0))
    names_of = model.token_strings([t_id] + ([a_id] if a_id is not None else []))
    note = Message(N_("Each component through the final norm with its scale frozen at this "
                      "run's value, then the unembedding."))
    cap = model.logit_softcap()
    softcapped = None
    if cap:
        full = torch.tanh(logits / cap) * cap
        softcapped = float(full[t_id] - (full[a_id] if a_id is not None else 0.0))
        note = Message.joined([note, Message(N_(
            "This model caps its final logits (tanh, cap {cap:g}); the attribution is of the "
            "logit before the cap, which is linear."), cap=cap)])
    warnings = list(trace.warnings)
    gap = abs(float(frame.contribution.sum()) - logit)
    if gap > 1e-4 * max(1.0, abs(logit)):  # low precision: each sublayer's output was rounded
        warnings.append(Message(N_("The components add up to the logit only to within {gap:.2g}: this "
                          "model runs in {removeprefix}, and each sublayer's output was rounded "
                          "before it was added to the stream."),
                            gap=gap, removeprefix=str(x_final.dtype).removeprefix('torch.')))
    return LogitAttribution(frame=frame, logit=logit, position=p, token=names_of[0],
                            token_id=t_id, against=names_of[1] if a_id is not None else None,
                            against_id=a_id, tokens=tokens, note=note,
                            softcapped_logit=softcapped, warnings=warnings)


# ---- logit lens --------------------------------------------------------------------------
@dataclass
class LogitLens:
    """The stream after every layer through the final norm and the unembedding.

    Rows are streams: "embed" (entering layer 0), then after each layer ("decoder.0", ...);
    the last row is the model's own output. Arrays are [stream, position, ...].
    """

    layers: list[str]
    tokens: list[str]  # the input tokens (positions)
    top_ids: np.ndarray  # int64 [L+1, T, k]
    top_tokens: list[list[list[str]]]  # [L+1][T][k]
    top_probs: np.ndarray  # float32 [L+1, T, k]
    prediction_ids: np.ndarray  # int64 [T]: the model's final top prediction per position
    prediction_tokens: list[str]
    rank: np.ndarray  # int64 [L+1, T]: rank of the final prediction (0 = top)
    prob: np.ndarray  # float32 [L+1, T]: its probability
    warnings: list[str] = field(default_factory=list)

    @property
    def frame(self) -> pd.DataFrame:
        """Long form for export: one row per (stream, position)."""
        rows = []
        for li, layer in enumerate(self.layers):
            for t, tok in enumerate(self.tokens):
                rows.append({"layer": layer, "position": t, "token": tok,
                             "top": self.top_tokens[li][t][0],
                             "top_prob": float(self.top_probs[li, t, 0]),
                             "prediction": self.prediction_tokens[t],
                             "rank": int(self.rank[li, t]), "prob": float(self.prob[li, t])})
        return pd.DataFrame(rows)


@torch.no_grad()
def logit_lens(model, text: str, target: str | None = None, *, k: int = 5) -> LogitLens:
    """The residual stream entering layer 0 and leaving every layer, read through the
    model's own final norm and unembedding: the top ``k`` tokens and their probabilities per
    (layer, position), and where the model's final prediction ranks (a LogitLens; its last
    row is the model's output). Models with an unembedding (DecompositionError otherwise)."""
    check_unembedding(model)
    k = whole(k, N_("number of top tokens k"))
    trace = run(model, text, target)
    layers = decoder_layers(trace)
    if not layers:
        raise VizError(N_("This run recorded no residual stream."))
    streams = [trace.stream[layers[0]]["in"]] + [trace.stream[lay]["out"] for lay in layers]
    w_u, _ = model.unembedding()
    vocab = w_u.shape[0]
    if not 1 <= k <= vocab:
        raise InputError(N_("The number of top tokens k must be between 1 and the vocabulary size "
                           "{vocab}, not {k}."), vocab=vocab, k=k)
    step = max(1, LENS_CHUNK_BYTES // (4 * vocab))  # positions per chunk of (rows, V) logits
    n = streams[-1].shape[0]
    pred = torch.cat([final_logits(model, streams[-1][r0:r0 + step]).argmax(-1)
                      for r0 in range(0, n, step)])  # (T,): the model's own prediction
    top_ids, top_probs, ranks, probs = [], [], [], []
    for x in streams:
        parts = []
        for r0 in range(0, n, step):
            lp = torch.log_softmax(final_logits(model, x[r0:r0 + step]), dim=-1)
            tp, ti = lp.topk(k, dim=-1)
            own = lp.gather(-1, pred[r0:r0 + step, None])  # (rows, 1)
            parts.append((ti, tp.exp(), (lp > own).sum(-1), own[:, 0].exp()))
        top_ids.append(torch.cat([p[0] for p in parts]))
        top_probs.append(torch.cat([p[1] for p in parts]))
        ranks.append(torch.cat([p[2] for p in parts]))
        probs.append(torch.cat([p[3] for p in parts]))
    top_ids_np = torch.stack(top_ids).cpu().numpy().astype(np.int64)
    flat = model.token_strings(top_ids_np.reshape(-1).tolist())
    n_l, n_t = top_ids_np.shape[:2]
    top_tokens = [[flat[(li * n_t + t) * k:(li * n_t + t + 1) * k] for t in range(n_t)]
                  for li in range(n_l)]
    return LogitLens(
        layers=["embed"] + layers, tokens=list(trace.target_tokens), top_ids=top_ids_np,
        top_tokens=top_tokens, top_probs=torch.stack(top_probs).float().cpu().numpy(),
        prediction_ids=pred.cpu().numpy().astype(np.int64),
        prediction_tokens=model.token_strings(pred.tolist()),
        rank=torch.stack(ranks).cpu().numpy().astype(np.int64),
        prob=torch.stack(probs).float().cpu().numpy(), warnings=list(trace.warnings))
