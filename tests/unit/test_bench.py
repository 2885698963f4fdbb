"""Every benchmark module runs in its quick mode (small sizes, one repetition), so none can
rot. Only sizes and correctness are asserted here, never wall-clock times."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.__main__ import MODULES, merged
from tests.support.bench_rows import quick_rows

pytestmark = pytest.mark.slow


def test_every_module_is_in_the_runner():
    here = Path(__file__).resolve().parents[2] / "bench"
    files = sorted(p.stem for p in here.glob("bench_*.py"))
    assert sorted(MODULES) == files


def test_a_partial_run_keeps_the_other_modules_rows(tmp_path):
    import json

    path = tmp_path / "results.json"
    path.write_text(json.dumps([
        {"module": "bench_flow", "name": "flow a", "ratio": 1.0},
        {"module": "bench_edges", "name": "eap", "ratio": 7.3},
        {"name": "eap-ig", "ratio": 7.7},  # written before rows named their module
        {"name": "untouched", "ratio": 2.0}]))
    new = [{"module": "bench_edges", "name": "eap", "ratio": 4.1},
           {"module": "bench_edges", "name": "eap-ig", "ratio": 6.0}]
    assert merged(path, new) == [{"module": "bench_flow", "name": "flow a", "ratio": 1.0},
                                 {"name": "untouched", "ratio": 2.0}, *new]
    assert merged(tmp_path / "none.json", new) == new


def test_capture():
    rows = quick_rows("bench_capture")
    native = [r for r in rows if r["name"].startswith("native")]
    assert [r["n_tokens"] for r in native] == [64, 64]
    assert native[0]["faithfulness"] is not None and native[0]["faithfulness"] < 1e-4
    hf = [r for r in rows if r["name"].startswith("MiniLM-shaped trace,")]
    assert hf and all(r["same_output"] for r in hf)  # our patterns are eager's
    memory = [r for r in rows if "peak" in r["name"]]
    assert memory and memory[0]["peak_gb"] > 0


def test_peers():
    rows = quick_rows("bench_peers")
    peers = {r["name"].split(" vs ")[1].split(",")[0] for r in rows}
    assert peers == {"eager", "tl"}  # both peers measured on the same model and length
    for r in rows:
        assert r["n_tokens"] == 64 and r["peak_growth_mb"] >= 0 and r["peer_peak_growth_mb"] >= 0


def test_beam():
    rows = quick_rows("bench_beam")
    for r in rows:
        assert r["same_output"], r  # the same hypotheses as HF generate


def test_payload():
    rows = quick_rows("bench_payload")
    assert {r["n_tokens"] for r in rows} == {32}
    for r in rows:
        assert 0 < r["our_bytes"] and 0 < r["bertviz_bytes"]
    together = next(r for r in rows if "all three" in r["name"])
    assert together["our_bytes"] == sum(r["our_bytes"] for r in rows if r is not together)


def test_scaling():
    rows = quick_rows("bench_scaling")
    assert [r["n_tokens"] for r in rows] == [64, 128]
    for r in rows:
        n = r["n_tokens"]
        assert r["shape"] == [4, n, n] and r["rows_sum_to_1"]
        assert r["page_bounded"] and set(r["page_bytes_by_figure"]) == {
            "heatmap", "grid", "head view", "mean", "rollout"}
        # the lazy trace holds q and k: 9 blocks x 2 x n x d_model 128, float32
        assert r["trace_mb"] == pytest.approx(9 * 2 * n * 128 * 4 / 2**20)
        # every pattern and score read: + 9 blocks x 2 x 4 heads x n x n float32 (+ v, z)
        assert r["trace_mb_all_points"] > r["trace_mb"] + 9 * 2 * 4 * n * n * 4 / 2**20
    assert rows[1]["trace_mb"] == pytest.approx(2 * rows[0]["trace_mb"])  # linear in N


def test_atlas():
    assert quick_rows("bench_atlas")


def test_contributions():
    rows = [r for r in quick_rows("bench_contributions") if r["device"] == "cpu"]  # (+ GPU's)
    assert [r["name"].split(",")[0] for r in rows] == ["logit_attribution", "logit_lens (k=5)"]
    assert rows[0]["adds_up"]  # the timed attribution adds up to the model's logit


def test_flow():
    rows = [r for r in quick_rows("bench_flow") if r["device"] == "cpu"]  # (+ the GPU's)
    assert [r["name"].split(",")[0] for r in rows] == ["information_flow", "attention_flow",
                                                        "attention_flow"]
    assert rows[1]["cpu_s"] > 0 and rows[0]["peak_growth_mb"] is not None


def test_distillation():
    rows = quick_rows("bench_distillation")
    assert len(rows) == 1 and "18 pairs, 32 sentences" in rows[0]["name"]  # 3 x 6 layers
    assert rows[0]["plain_trace_batch_s"] > 0


def test_flow_table():
    rows = quick_rows("bench_flow_table")
    # blank-out and gradient x raw, rollout, flow x the induction model's 2 layers
    assert sorted((r["importance"], r["method"], r["layer"]) for r in rows) == sorted(
        (i, m, lay) for i in ("blank-out", "gradient") for m in ("raw", "rollout", "flow")
        for lay in (1, 2))
    for r in rows:
        assert r["sequences"] + r["constant"] == 6 and r["sequences"] > 0
        assert -1 <= r["spearman_mean"] <= 1 and r["spearman_std"] >= 0
    # the scores they correlate: through one layer the maximum flow from j to i is the edge's
    # capacity A[i, j], which is also rollout's first layer (the paper: "the first layer of
    # attention rollout and attention flow are the same"), up to flow's integer capacities
    # (2^-30 for 1: near-zero weights round, so the two can rank those differently)
    import numpy as np

    import viz_core as vc
    from bench.bench_flow_table import attention_scores, prefixes

    trace = vc.load("induction").trace(prefixes("induction", 1)[0], max_new=0,
                                       capture=("pattern",))
    patterns = np.stack([b.pattern for b in trace.layers("decoder.self")])
    scores = attention_scores(patterns)
    np.testing.assert_allclose(scores["flow"][0], scores["rollout"][0], rtol=0, atol=2e-9)
    n = patterns.shape[-1]
    np.testing.assert_allclose(scores["raw"][1], patterns[1, :, n - 1].mean(0))
    assert not np.allclose(scores["flow"][1], scores["rollout"][1])  # two layers: they differ


def test_flow_table_importance_scores():
    """The two importance scores against direct computations: blank-out against one
    unbatched forward pass per blanked token, the gradient's norm against central differences
    of log p(y) in each coordinate of that token's embedding (float64)."""
    import torch

    from bench.bench_flow_table import importance, prefixes
    from viz_core.loading.shipped import CHECKPOINTS
    from viz_core.model.checkpoint import load_checkpoint

    net, vocabs, _ = load_checkpoint(CHECKPOINTS / "induction")
    net = net.double()
    text = prefixes("induction", 1)[0]
    ids = [net.cfg.bos_id, *vocabs["target"].encode(text)[0]]
    y, blank, grad = importance(net, ids, net.cfg.unk_id)

    def logp(seq, shift=None):
        hook = None
        if shift is not None:
            j, delta = shift

            def move(module, args, out):
                out = out.clone()
                out[0, j] += delta
                return out

            hook = net.tgt_embed.register_forward_hook(move)
        try:
            with torch.no_grad():
                return float(torch.log_softmax(net.decode(torch.tensor([seq]))[0, -1], -1)[y])
        finally:
            if hook is not None:
                hook.remove()

    base = logp(ids)
    for j in (1, len(ids) // 2, len(ids) - 1):
        alone = list(ids)
        alone[j] = net.cfg.unk_id
        assert blank[j] == pytest.approx(math.exp(base) - math.exp(logp(alone)), abs=1e-9)
    # the gradient at one token's embedding, coordinate by coordinate, by central differences
    j, eps = len(ids) - 2, 1e-5
    d = net.cfg.d_model
    fd = [(logp(ids, (j, eps * torch.eye(d, dtype=torch.float64)[k]))
           - logp(ids, (j, -eps * torch.eye(d, dtype=torch.float64)[k]))) / (2 * eps)
          for k in range(d)]
    assert grad[j] == pytest.approx(math.hypot(*fd), rel=1e-5)  # autograd vs differences


def test_edges():
    rows = quick_rows("bench_edges")
    names = [r["name"] for r in rows]
    assert any("eap," in n for n in names) and any("eap-ig (5 steps)" in n for n in names)
    assert any(n.startswith("EAP-IG gradients at the projections") for n in names)
    assert any(n.startswith("EAP gradients at the projections") for n in names)
    floor = [r for r in rows if r["name"].startswith("EAP's floor")]
    assert floor and all(r["ratio"] > 0 and r["eap_over_floor"] > 0 for r in floor)
    methods = [r for r in rows if r["name"].startswith("edge_attribution")
               and "last word" not in r["name"]]
    assert len(methods) == 4 and all(r["cpu_ratio"] > 0 for r in methods)  # CPU s, same runs
    late = [r for r in rows if "differing at its last word" in r["name"]]
    assert len(late) == 1 and late[0]["ratio"] > 0 and late[0]["first_difference"] > 32
    # the second model: the same shape with a vocabulary of its own (GPT-2's in the full run)
    vocab = [r for r in rows if "4,096-token vocabulary" in r["name"]
             and "last word" not in r["name"]]
    assert [r["name"].split(",")[0] for r in vocab] == [
        "edge_attribution eap", "edge_attribution eap-ig (5 steps)", "EAP's floor: two plain "
        "forwards and one backward"] and vocab[0]["edges"] == methods[0]["edges"]
    exact = [r for r in rows if r["name"].startswith("exact edge patching")]
    assert exact and all(r["edges_per_s"] > 0 for r in exact)
    assert exact[0]["peer_edges_per_s"] > 0  # TransformerLens hooks, same process
