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
are not folded. fold_norms=False uses the projection weights exactly as stored.

Computed without ever forming a d_model x d_model matrix: with A = W_Q, B = W_K (d_head x d),
C = W_O^s, D = W_V^s, ||A^T B C D||_F^2 = tr((A A^T) (B C) (D D^T) (B C)^T), small
d_head x d_head products for every pair at once (float64).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch


def _heads_of(backend) -> dict[str, int]:
    heads = getattr(backend, "_heads", None)
    if not heads:
        raise NotImplementedError("this backend does not list its attention blocks")
    return dict(heads)


def _gain(norm) -> torch.Tensor | None:
    return None if norm is None or norm.weight is None else norm.weight.detach().double().cpu()


def folded(hw, fold_norms: bool) -> dict[str, torch.Tensor]:
    """Per query head, float64 on the CPU: Q, K (H, d_head, d), V (H, d_v, d), O (H, d, d_v)
    with the kv group's K and V repeated, norm gains folded as the module docstring says."""
    g = hw.group
    q = hw.W_Q.detach().double().cpu()
    k = hw.W_K.detach().double().cpu().repeat_interleave(g, 0)
    v = hw.W_V.detach().double().cpu().repeat_interleave(g, 0)
    o = hw.W_O.detach().double().cpu()
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


def _sq_norm(a, m, b):
    """||X||_F^2 = tr(a m b m^T), batched over the leading axes of m (.., p, q):
    a (.., p, p), b (.., q, q)."""
    return torch.einsum("...ij,...jk,...ik->...", a @ m, b, m).clamp_min(0)


@torch.no_grad()
def composition(backend, *, fold_norms: bool = True) -> pd.DataFrame:
    """DataFrame: kind (Q|K|V), sender, receiver ("decoder.0.self.h1"), score; every pair of
    heads in different layers of one stack, sender's layer before the receiver's."""
    heads = _heads_of(backend)
    by_stack: dict[str, list[str]] = {}
    for block in heads:
        by_stack.setdefault(block.split(".")[0], []).append(block)
    rows = []
    for blocks in by_stack.values():
        mats = {b: folded(backend.head_weights(b), fold_norms) for b in blocks}
        layer_of = {b: int(b.split(".")[1]) for b in blocks}
        for rb in blocks:
            senders = [b for b in blocks if layer_of[b] < layer_of[rb]]
            if not senders:
                continue
            r = mats[rb]
            C = torch.cat([mats[b]["O"] for b in senders])  # (S, d, d_v)
            D = torch.cat([mats[b]["V"] for b in senders])  # (S, d_v, d)
            names = [f"{b}.h{h}" for b in senders for h in range(heads[b])]
            g_d = D @ D.transpose(1, 2)  # (S, d_v, d_v)
            ov_s = torch.einsum("sij,sji->s", C.transpose(1, 2) @ C, g_d)  # ||W_OV^s||^2
            g_q = r["Q"] @ r["Q"].transpose(1, 2)  # (R, d_h, d_h)
            g_k = r["K"] @ r["K"].transpose(1, 2)
            g_o = r["O"].transpose(1, 2) @ r["O"]  # (R, d_v, d_v)
            g_v = r["V"] @ r["V"].transpose(1, 2)
            qk_r = torch.einsum("rij,rji->r", g_q, g_k)  # ||W_QK^r||^2
            ov_r = torch.einsum("rij,rji->r", g_o, g_v)
            cross = rb.endswith(".cross")  # its keys and values read the encoder, not this stack
            kinds = ("Q",) if cross else ("Q", "K", "V")
            for kind in kinds:
                if kind == "K":  # ||W_Q^T (W_K C) D||
                    a, m, den = g_q, torch.einsum("rhd,sdv->rshv", r["K"], C), qk_r
                elif kind == "Q":  # ||W_K^T (W_Q C) D||
                    a, m, den = g_k, torch.einsum("rhd,sdv->rshv", r["Q"], C), qk_r
                else:  # ||W_O^r (W_V^r C) D||
                    a, m, den = g_o, torch.einsum("rhd,sdv->rshv", r["V"], C), ov_r
                num = _sq_norm(a[:, None], m, g_d[None])  # (R, S)
                score = (num / (den[:, None] * ov_s[None]).clamp_min(1e-300)).sqrt()
                score = score.clamp(0, 1).numpy()
                for h in range(score.shape[0]):
                    recv = f"{rb}.h{h}"
                    rows += [(kind, s, recv, float(v)) for s, v in zip(names, score[h])]
    return pd.DataFrame(rows, columns=["kind", "sender", "receiver", "score"]).astype(
        {"score": np.float64})
