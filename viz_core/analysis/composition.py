"""Head composition scores from the weights alone (Elhage et al., 2021, "A Mathematical
Framework for Transformer Circuits").

For each head, W_QK = W_Q^T W_K (score = x_q^T W_QK x_k, before scaling) and W_OV = W_O W_V
(what the head writes for what it reads), both d_model x d_model. A later head r composes
with an earlier head s when r reads what s writes:

    K-composition  ||W_QK^r   W_OV^s||_F / (||W_QK^r||_F ||W_OV^s||_F)
    Q-composition  ||W_QK^rT  W_OV^s||_F / (||W_QK^r||_F ||W_OV^s||_F)
    V-composition  ||W_OV^r   W_OV^s||_F / (||W_OV^r||_F ||W_OV^s||_F)

Each lies in [0, 1] (the Frobenius norm is submultiplicative); 0 means r's circuit ignores
the subspace s writes to. Grouped-query attention: a query head uses its key/value group's
W_K and W_V. Biases, rotations and the norms' scales (which depend on the input) are left
out: this is the run-free, weight-only score.

fold_norms (default True): the gains of the norms around the heads are folded into the
weights, as the model applies them: the receiver's input norm gain g into its W_Q, W_K,
W_V (W diag(g)), q/k norm gains into W_Q / W_K (diag(g_q) W_Q), and a sender's output norm
gain (Gemma 2/3, OLMo 2) into its W_O (diag(g_o) W_O). LayerNorm's centring and every scale
are not folded, and neither are a post-norm model's norms (they sit after the residual add,
on the whole stream, not on one head's path). fold_norms=False uses the projection weights
exactly as stored.

Computed without ever forming a d_model x d_model matrix: ||A^T B C D||_F (A = W_Q, B = W_K
of the receiver, C = W_O, D = W_V of the sender) equals ||R_A B C R_D^T||_F with R_A^T R_A =
A A^T and R_D^T R_D = D D^T (QR factors, d_head x d_head): one d_head x d_v product per pair
of heads, all pairs of two layers in one einsum (float64).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch


def _heads_of(backend) -> dict[str, int]:
    heads = backend.block_heads
    if not heads:
        raise NotImplementedError("this backend does not list its attention blocks")
    return dict(heads)


def _f64(t: torch.Tensor) -> torch.Tensor:
    """float64 where the weights are (a CUDA GPU), else on the CPU (MPS has no float64)."""
    dev = t.device if t.device.type == "cuda" else torch.device("cpu")
    return t.detach().to(dev, torch.float64)


def _gain(norm) -> torch.Tensor | None:
    return None if norm is None or norm.weight is None else _f64(norm.weight)


def folded(hw, fold_norms: bool) -> dict[str, torch.Tensor]:
    """Per query head, float64 (on the CPU, or the CUDA GPU that holds the weights):
    Q, K (H, d_head, d), V (H, d_v, d), O (H, d, d_v)
    with the kv group's K and V repeated, norm gains folded as the module docstring says."""
    g = hw.group
    q = _f64(hw.W_Q)
    k = _f64(hw.W_K).repeat_interleave(g, 0)
    v = _f64(hw.W_V).repeat_interleave(g, 0)
    o = _f64(hw.W_O)
    if fold_norms:
        gin = _gain(hw.norm)
        if gin is not None:
            q, k, v = q * gin, k * gin, v * gin  # W diag(g)
        for name, norm in (("q", hw.q_norm), ("k", hw.k_norm)):
            gn = _gain(norm)
            if gn is None:
                continue
            m = q if name == "q" else k
            if hw.qk_norm_per_head:
                m = m * gn[None, :, None]
            else:  # one gain vector over all heads' dimensions (OLMo 2): per kv/q head slice
                heads = (hw.W_Q if name == "q" else hw.W_K).shape[0]
                gh = gn.reshape(heads, -1)
                if name == "k":
                    gh = gh.repeat_interleave(g, 0)
                m = m * gh[:, :, None]
            if name == "q":
                q = m
            else:
                k = m
        gout = _gain(hw.post_norm)
        if gout is not None:
            o = o * gout[None, :, None]  # diag(g_o) W_O
    return {"Q": q, "K": k, "V": v, "O": o}


def _root(m: torch.Tensor) -> torch.Tensor:
    """R (.., n, n) with R^T R = m m^T for m (.., n, d), n <= d: ||m^T Z||_F = ||R Z||_F for
    any Z, so a d x d product's norm becomes an n x n one (QR of m^T)."""
    return torch.linalg.qr(m.transpose(-1, -2), mode="r")[1]


@torch.no_grad()
def composition(model, *, fold_norms: bool = True) -> pd.DataFrame:
    """DataFrame: kind (Q|K|V), sender, receiver ("decoder.0.self.h1"), score; every pair of
    heads in different layers of one stack, sender's layer before the receiver's."""
    heads = _heads_of(model)
    by_stack: dict[str, list[str]] = {}
    for block in heads:
        by_stack.setdefault(block.split(".")[0], []).append(block)
    rows = []
    for blocks in by_stack.values():
        mats = {b: folded(model.head_weights(b), fold_norms) for b in blocks}
        layer_of = {b: int(b.split(".")[1]) for b in blocks}
        for rb in blocks:
            senders = [b for b in blocks if layer_of[b] < layer_of[rb]]
            if not senders:
                continue
            r = mats[rb]
            # sender side: ||Z W_O D||_F = ||Z W_O R_D^T||_F with R_D^T R_D = D D^T
            C = torch.cat([mats[b]["O"] for b in senders])  # (S, d, d_v)
            D = torch.cat([mats[b]["V"] for b in senders])  # (S, d_v, d)
            C = C @ _root(D).transpose(1, 2)  # (S, d, d_v): W_OV^s's norms, d_v wide
            names = [f"{b}.h{h}" for b in senders for h in range(heads[b])]
            ov_s = C.pow(2).sum((1, 2))  # ||W_OV^s||_F^2
            cross = rb.endswith(".cross")  # its keys and values read the encoder, not this stack
            # receiver side, each kind as ||P^T (X C_s)||_F = ||R_P X C_s||_F:
            # K: ||W_Q^T W_K W_OV^s||, Q: ||W_K^T W_Q W_OV^s||, V: ||W_O^r W_V^r W_OV^s||
            sides = {"K": (r["Q"], r["K"]), "Q": (r["K"], r["Q"]),
                     "V": (r["O"].transpose(1, 2), r["V"])}
            qk_r = (_root(r["Q"]) @ r["K"]).pow(2).sum((1, 2))  # ||W_QK^r||_F^2
            ov_r = (_root(r["O"].transpose(1, 2)) @ r["V"]).pow(2).sum((1, 2))
            for kind in (("Q",) if cross else ("Q", "K", "V")):
                outer, inner = sides[kind]
                x = _root(outer) @ inner  # (R, n, d)
                num = torch.einsum("rnd,sdv->rsnv", x, C).pow(2).sum((2, 3))  # (R, S)
                den = qk_r if kind != "V" else ov_r
                score = (num / (den[:, None] * ov_s[None]).clamp_min(1e-300)).sqrt()
                score = score.clamp(0, 1).cpu().numpy()
                for h in range(score.shape[0]):
                    recv = f"{rb}.h{h}"
                    rows += [(kind, s, recv, float(v)) for s, v in zip(names, score[h])]
    return pd.DataFrame(rows, columns=["kind", "sender", "receiver", "score"]).astype(
        {"score": np.float64})
