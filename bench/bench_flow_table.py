"""Abnar & Zuidema (2020), Tables 1 and 2, on our shipped models (issue 29 item 4): how well raw
attention, attention rollout and attention flow rank the input tokens by importance.

For each held-out sequence the model predicts its next token at the last position p (the
model's own top prediction y). Three attention-based scores of each input token j:
- raw: layer l's attention of p to j, mean over heads;
- rollout: ``viz_core.analysis.heads.rollout`` of layers 1..l, row p;
- flow: ``viz_core.analysis.attention_flow.flow_from_patterns`` of layers 1..l, row p;
and two importance scores, as in the paper:
- blank-out: p(y | x) - p(y | x with token j replaced by <unk>), one batched forward pass;
- input gradient: the L2 norm of d log p(y) / d e_j at token j's embedding e_j.
The table is the mean +- standard deviation over sequences of each sequence's Spearman rank
correlation between an attention score and an importance score over positions 1..p (<bos>,
position 0, is left out: nothing blanks it out, and as the attention sink it would decide raw
attention's ranks on its own). Sequences where either side is constant are skipped (counted).

Models and their held-out sequences (the tasks' own test split, never seen in training):
- ``induction``: random words, then the same words again; the model reads all but the last
  word, so y is a repeated-half word (2 layers);
- ``lm``: held-out sentences of the toy grammar with at least 5 words, less their last word
  (2 layers).
The paper's model is a 6-layer encoder classifying from CLS; ours are 2-layer causal decoders
(the paper notes that decoders bias rollout and flow toward the first tokens), so only its
L1 and L2 columns have a counterpart here.

    python -m bench.bench_flow_table [--quick]     # prints the rows and the two tables
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.stats import spearmanr

import viz_core as vc
from viz_core.analysis.attention_flow import flow_from_patterns
from viz_core.analysis.heads import rollout
from viz_core.loading.shipped import CHECKPOINTS
from viz_core.model.checkpoint import load_checkpoint
from viz_core.tasks import induction, lm

METHODS = ("raw", "rollout", "flow")
IMPORTANCE = ("blank-out", "gradient")
SEED = 7  # the held-out draw (the tasks' test split is the same set whatever the seed)
# Abnar & Zuidema (2020), verb-number model (6-layer encoder, 2,000 test samples), L1..L6:
# Table 1 (blank-out) and Table 2 (input gradients), mean and standard deviation.
PAPER = {
    "blank-out": {
        "raw": [(0.69, 0.27), (0.10, 0.43), (-0.11, 0.49), (-0.09, 0.52), (0.20, 0.45),
                (0.29, 0.39)],
        "rollout": [(0.32, 0.26), (0.38, 0.27), (0.51, 0.26), (0.62, 0.26), (0.70, 0.25),
                    (0.71, 0.24)],
        "flow": [(0.32, 0.26), (0.44, 0.29), (0.70, 0.25), (0.70, 0.22), (0.71, 0.22),
                 (0.70, 0.22)],
    },
    "gradient": {
        "raw": [(0.53, 0.33), (0.16, 0.38), (-0.06, 0.42), (0.00, 0.47), (0.24, 0.40),
                (0.46, 0.35)],
        "rollout": [(0.22, 0.31), (0.27, 0.32), (0.39, 0.32), (0.47, 0.32), (0.53, 0.32),
                    (0.54, 0.31)],
        "flow": [(0.22, 0.31), (0.31, 0.34), (0.54, 0.32), (0.61, 0.28), (0.60, 0.28),
                 (0.61, 0.28)],
    },
}


def prefixes(name: str, n: int) -> list[str]:
    """n held-out texts of model ``name``, each less its last word (what the model reads)."""
    if name == "induction":
        texts = [p.target for p in induction.dataset("test", n, SEED)]
    else:
        texts, k = [], n
        while len(texts) < n:  # keep the sentences of at least 5 words
            texts = [p.target for p in lm.dataset("test", 4 * k, SEED)
                     if len(p.target.split()) >= 5][:n]
            k *= 2
    return [" ".join(t.split()[:-1]) for t in texts]


def importance(net, ids: list[int], unk: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(y, blank-out [n], gradient norm [n]) for the prediction at the last position."""
    x = torch.tensor([ids])
    kept = {}

    def keep(module, args, out):  # this private copy only: the embedding's output
        out.retain_grad()
        kept["e"] = out

    hook = net.tgt_embed.register_forward_hook(keep)
    try:
        logp = torch.log_softmax(net.decode(x)[0, -1].double(), -1)
    finally:
        hook.remove()
    y = int(logp.argmax())
    logp[y].backward()
    grad = kept["e"].grad[0].norm(dim=-1).double().numpy()  # (n,)
    with torch.no_grad():
        blanked = x.repeat(len(ids), 1)
        blanked[torch.arange(len(ids)), torch.arange(len(ids))] = unk  # row j: token j blanked
        p = torch.softmax(net.decode(blanked)[:, -1].double(), -1)[:, y].numpy()
    blank = math.exp(float(logp[y].detach())) - p
    return y, blank, grad


def attention_scores(patterns: np.ndarray) -> dict[str, np.ndarray]:
    """{method: [layer, n]}: the last position's row of each method after layers 1..l."""
    n_layers, p = patterns.shape[0], patterns.shape[-1] - 1
    rolled = rollout(patterns, cumulative=True)  # [layer, n, n]
    return {"raw": patterns[:, :, p].mean(axis=1),
            "rollout": rolled[:, p],
            "flow": np.stack([flow_from_patterns(patterns[:lay + 1], [p])[p]
                              for lay in range(n_layers)])}


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def correlations(name: str, n: int) -> dict:
    """{(importance, method): [sequence, layer] Spearman} over n held-out sequences."""
    model = vc.load(name)
    net, vocabs, _ = load_checkpoint(CHECKPOINTS / name)
    vocab = vocabs["target"]
    out: dict = {}
    for text in prefixes(name, n):
        trace = model.trace(text, max_new=0, capture=("pattern",))
        ids = [net.cfg.bos_id, *vocab.encode(text)[0]]
        if len(trace.target_tokens) != len(ids):
            raise AssertionError(f"token counts differ on {text!r}")
        patterns = np.stack([b.pattern for b in trace.layers("decoder.self")])
        _, blank, grad = importance(net, ids, net.cfg.unk_id)
        scores = attention_scores(patterns)
        for imp, values in (("blank-out", blank), ("gradient", grad)):
            for method in METHODS:
                out.setdefault((imp, method), []).append(
                    [spearman(s[1:], values[1:]) for s in scores[method]])
    return {k: np.asarray(v) for k, v in out.items()}


def run(quick: bool = False) -> list[dict]:
    n = 6 if quick else 500
    rows = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small models: one thread is fastest on a shared machine
    try:
        corr_by_model = {name: correlations(name, n)
                         for name in (("induction",) if quick else ("induction", "lm"))}
    finally:
        torch.set_num_threads(threads)
    for name, corr in corr_by_model.items():
        for (imp, method), values in corr.items():
            for layer in range(values.shape[1]):
                col = values[:, layer]
                ok = col[np.isfinite(col)]
                rows.append({
                    "name": f"{name}, {method} vs {imp}, L{layer + 1}", "model": name,
                    "importance": imp, "method": method, "layer": layer + 1,
                    "spearman_mean": float(ok.mean()) if len(ok) else float("nan"),
                    "spearman_std": float(ok.std()) if len(ok) else float("nan"),
                    "sequences": int(len(ok)), "constant": int(len(col) - len(ok)),
                    "device": "cpu"})
    return rows


def table(rows: list[dict], imp: str) -> str:
    """Markdown: the paper's L1..L2 beside ours for one importance score."""
    models = sorted({r["model"] for r in rows}, key=["induction", "lm"].index)
    layers = max(r["layer"] for r in rows)
    head = ["", *[f"paper L{i + 1}" for i in range(layers)],
            *[f"{m} L{i + 1}" for m in models for i in range(layers)]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method in METHODS:
        cells = [f"{m:.2f} ± {s:.2f}" for m, s in PAPER[imp][method][:layers]]
        for model in models:
            for i in range(layers):
                r = next(r for r in rows if (r["model"], r["importance"], r["method"],
                                             r["layer"]) == (model, imp, method, i + 1))
                cells.append(f"{r['spearman_mean']:.2f} ± {r['spearman_std']:.2f}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m bench.bench_flow_table [--quick]
    import sys

    result = run("--quick" in sys.argv)
    for row in result:
        print(row)
    for imp in IMPORTANCE:
        print(f"\nSpearman with {imp} (mean ± std over sequences)\n" + table(result, imp))
