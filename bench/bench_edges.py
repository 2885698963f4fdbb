"""Edge attribution (issue 30): EAP, EAP-IG and exact edge patching against their references.

On a GPT-2-small-shaped random model (12 layers x 12 heads x 768, the tests' small byte-level
vocabulary; --quick: 2 x 4 x 64) at 64 tokens, CPU (and the GPU when there is one):

- ``edge_attribution(method="eap")`` (the corrupted run, then the clean run forward and
  backward, each head's gradient read at its q/k/v and mapped to its input through the
  norm's vjp) against ``model.trace`` of the clean text, same model, same process, timed
  alternately. Target: <= 3x.
- ``method="eap-ig"`` with 5 steps (one forward and backward of the 5 interpolated copies as
  a batch), against the same trace. Target: <= 12x.
- Both rows also give the CPU seconds of the process (all its threads) in the same runs,
  ``cpu_ratio`` = ours / the trace's: on a shared machine less disturbed than wall time.
- The floor under EAP: the passes it cannot do without, in their plainest form (Hugging Face's
  own module, no recorder): a forward of the corrupted ids, a forward of the clean ids with
  their input embeddings requiring grad and a backward of the answer's logit to them, against
  the same trace. ``eap_over_floor`` = EAP's median over the floor's, same run: what the
  per-edge work and the recorder add. (A floor above 3x would put issue 30's 3x out of reach
  of any implementation of EAP that runs these passes.)
- EAP's and EAP-IG's gradients read at each head's projection and mapped to its input
  through the norm's vjp (what they do) against a normed copy of the stream per head
  (before), same context, timed alternately: the ratio is after / before.
- Exact edge patching's rate in edges per second (160 sampled edges, batched per receiving
  group, each batch sharing the clean run below its layer; all 32,491 edges batch better)
  against TransformerLens 4.3 hooks (8 of those edges), timed alternately in the same
  process: one hooked run per edge, the sender's
  corrupted - clean output added to the receiver's own input (hook_{q,k,v}_input with split
  q/k/v inputs, hook_mlp_in, ln_final.hook_in). The ratio is our seconds per edge over
  TransformerLens's (< 1: ours is faster); both rates are in the row.
- EAP, EAP-IG and the floor again on the same shape with GPT-2's own 50,257-token
  vocabulary (--quick: 4,096), the rows of its embedding and unembedding (the tiny tokenizer
  writes only its first ids). There the trace pays for every position's prediction over the
  whole vocabulary (the Attention page shows them), while EAP's runs and the floor compute the
  last position's logits only.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

import torch

import viz_core as vc
from viz_core.analysis import edges as E

from .common import bench_devices, paired, ratio_row, save_gpt2

N_TOKENS = 64
TARGETS = {"eap": 3.0, "eap-ig": 12.0}
GPT2_VOCAB = 50_257  # GPT-2's own vocabulary (the rows of its embedding and unembedding)


def _texts(model, n: int, word: int = 2) -> tuple[str, str]:
    """A clean text of exactly n tokens and a corrupted one of the same length (its third
    word, or its ``word``-th from 0, -1 the last, swapped for another of the corpus)."""
    from tests.support.hf_tiny import SENTENCES

    words = " ".join(SENTENCES * (n // 20 + 2))
    ids = model.tokenizer(words)["input_ids"][:n]
    clean = model.tokenizer.decode(ids)
    parts = clean.split(" ")
    for swap in ("cat", "dog", "mat", "the"):
        if swap != parts[word]:
            corrupted = " ".join(parts[:word % len(parts)] + [swap]
                                 + parts[word % len(parts) + 1:])
            if len(model.tokenizer(corrupted)["input_ids"]) == len(ids):
                return clean, corrupted
    raise RuntimeError("no corrupted text of the same length")


def tl_sender_output(cache, name: str) -> torch.Tensor:
    """A sender's output in a TransformerLens cache (split attention results on): embed (the
    first block's input), a head's result or an MLP's output. -> (T, d)"""
    if name == "embed":
        return cache["blocks.0.hook_resid_pre"][0]
    layer = int(name.split(".")[1])
    if name.endswith(".mlp"):
        return cache[f"blocks.{layer}.hook_mlp_out"][0]
    return cache[f"blocks.{layer}.attn.hook_result"][0, :, int(name.rsplit("h", 1)[1])]


def tl_receiver_point(receiver: str, which: str) -> tuple[str, int | None]:
    """Where a receiver reads the stream in TransformerLens (split q/k/v inputs, hook_mlp_in
    on): (hook name, head or None), before the receiver's own LayerNorm."""
    if receiver == "logits":
        return "ln_final.hook_in", None
    layer = int(receiver.split(".")[1])
    if receiver.endswith(".mlp"):
        return f"blocks.{layer}.hook_mlp_in", None
    return f"blocks.{layer}.hook_{which}_input", int(receiver.rsplit("h", 1)[1])


def tl_edge_logits(bridge, ids_c, cache_c, cache_k, sender: str, receiver: str, which: str):
    """TransformerLens's side of one edge: the clean run with ``sender``'s output in the
    receiver's input (a head's q/k/v input, an MLP's input or the final norm's) swapped from
    clean to corrupted by a hook (split q/k/v inputs, attention results and MLP inputs on).
    -> the logits."""
    diff = tl_sender_output(cache_k, sender) - tl_sender_output(cache_c, sender)  # (T, d)
    hook_name, head = tl_receiver_point(receiver, which)

    def hook(act, hook):
        act = act.clone()
        if head is None:
            act[0] += diff
        else:
            act[0, :, head] += diff
        return act

    with torch.no_grad():
        return bridge.run_with_hooks(ids_c, fwd_hooks=[(hook_name, hook)])


def _tl_runner(folder: str, clean: str, corrupted: str, pairs, graph):
    """TransformerLens: a function running one hooked forward per edge of ``pairs``."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    bridge = TransformerBridge.boot_transformers(folder, device="cpu", tokenizer=tok)
    bridge.enable_compatibility_mode()
    bridge.set_use_split_qkv_input(True)
    bridge.set_use_attn_result(True)
    bridge.set_use_hook_mlp_in(True)
    bridge.eval()
    ids_c = torch.tensor([tok(clean)["input_ids"]])
    ids_k = torch.tensor([tok(corrupted)["input_ids"]])
    with torch.no_grad():
        _, cache_c = bridge.run_with_cache(ids_c)
        _, cache_k = bridge.run_with_cache(ids_k)

    def one(s: int, r: int) -> float:
        name, which = graph.receivers[r]
        return float(tl_edge_logits(bridge, ids_c, cache_c, cache_k, graph.senders[s], name,
                                    which)[0, -1, 0])

    return lambda: [one(s, r) for s, r in pairs]


def _floor(model, clean: str, corrupted: str):
    """The passes EAP cannot do without, on the model's own Hugging Face module (no recorder,
    nothing per edge): the corrupted ids forward without grad, up to the final stream (its
    metric is read off that stream: no logits); the clean ids forward with their input
    embeddings requiring grad, the last position's logits (the metric's token is the top
    one), then the gradient of that token's logit to those embeddings through its row of W_U
    (the backward runs through every layer, as EAP's must to reach layer 0's inputs). EAP's
    runs do the same."""
    hf = model.hf_model
    device = next(hf.parameters()).device
    ids = [torch.tensor([model.tokenizer(t)["input_ids"]], device=device)
           for t in (clean, corrupted)]
    embed, head = hf.get_input_embeddings(), hf.get_output_embeddings()

    def passes():
        with torch.no_grad():
            hf.base_model(input_ids=ids[1])
        with torch.enable_grad():
            x = embed(ids[0]).detach().requires_grad_()
            final = hf.base_model(inputs_embeds=x).last_hidden_state[0, -1]  # normed
            top = int(head(final.detach()).argmax())
            return torch.autograd.grad(final @ head.weight[top], x)[0]

    return passes


def _cpu_timed(fn, seconds: list[float]):
    """fn, appending the process's CPU seconds (all threads) of each call to ``seconds``."""
    def call():
        t0 = time.process_time()
        out = fn()
        seconds.append(time.process_time() - t0)
        return out
    return call


def _method_rows(model, clean: str, corrupted: str, device, repeat: int, what: str,
                 label: str) -> list[dict]:
    """EAP and EAP-IG (5 steps) against the trace of the clean text, then the floor under
    EAP, on one model; ``what`` names the model and length in the rows."""
    rows = []

    def trace():
        return model.trace(clean, max_new=0)

    for method, target in TARGETS.items():
        def attribution(method=method):
            return model.edge_attribution(clean, corrupted, method=method, steps=5)

        n_edges = len(attribution().edges)
        cpu = ([], [])  # CPU seconds of each call, warm-up first
        ours, peer = paired(_cpu_timed(attribution, cpu[0]), _cpu_timed(trace, cpu[1]),
                            repeat, device)
        ours_cpu, peer_cpu = (statistics.median(c[1:]) for c in cpu)
        name = f"edge_attribution {method}" + (" (5 steps)" if method == "eap-ig" else "")
        rows.append(ratio_row(f"{name}, {what}", ours, peer, "our plain trace, same input",
                              device, target=target, model=label, edges=n_edges,
                              cpu_s=ours_cpu, cpu_ratio=ours_cpu / peer_cpu))
    floor, peer = paired(_floor(model, clean, corrupted), trace, repeat, device)
    rows.append(ratio_row(f"EAP's floor: two plain forwards and one backward, {what}", floor,
                          peer, "our plain trace, same input", device, model=label,
                          eap_over_floor=rows[0]["ours_s"] / floor["median"]))
    return rows


def run(quick: bool = False) -> list[dict]:
    repeat = 2 if quick else 5
    n_exact, n_peer = (40, 6) if quick else (160, 8)
    repeat_exact = 2 if quick else 3
    rows = []
    devices = bench_devices()
    shape = "tiny GPT-2" if quick else "GPT-2-small-shaped"
    label = "tiny" if quick else "gpt2 12x12x768"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "gpt2-small"
        save_gpt2(folder, quick)
        for device in devices:
            model = vc.load(str(folder), device=device, dtype="float32")
            clean, corrupted = _texts(model, N_TOKENS)
            tokens = len(model.tokenizer(clean)["input_ids"])
            rows += _method_rows(model, clean, corrupted, device, repeat,
                                 f"{shape}, {tokens} tokens", label)

            ctx = E.prepare(model, clean, corrupted, None, None, None)
            for steps, what in ((1, "EAP"), (5, "EAP-IG")):
                after, before = paired(
                    lambda ctx=ctx, s=steps: E.gradient_scores(ctx, s, projected=True),
                    lambda ctx=ctx, s=steps: E.gradient_scores(ctx, s, projected=False),
                    repeat, device)
                rows.append(ratio_row(f"{what} gradients at the projections, {shape}, {tokens} "
                                      f"tokens, {steps} step{'s' if steps > 1 else ''}", after,
                                      before, "a normed copy of the stream per head", device,
                                      model=label))
            valid = [(int(s), int(r)) for s, r in zip(*ctx.graph.valid.nonzero())]
            pairs = random.Random(0).sample(valid, min(n_exact, len(valid)))
            name = f"exact edge patching, {shape}, {tokens} tokens (seconds per edge)"

            def ours_fn(ctx=ctx, pairs=pairs):
                return E.exact_scores(ctx, edges=pairs)

            if device == "cpu":  # ours and TransformerLens alternately (common.paired)
                tl_fn = _tl_runner(str(folder), clean, corrupted, pairs[:n_peer], ctx.graph)
                ours, tl = paired(ours_fn, tl_fn, repeat_exact, device)
                ours = {k: v / len(pairs) if k != "runs" else v for k, v in ours.items()}
                tl = {k: v / n_peer if k != "runs" else v for k, v in tl.items()}
                row = ratio_row(name, ours, tl, "TransformerLens 4.3 hooks, one run per edge",
                                device, model=label, edges=len(pairs),
                                edges_per_s=1 / ours["median"],
                                peer_edges_per_s=1 / tl["median"], peer_edges=n_peer)
            else:
                t0 = time.perf_counter()
                ours_fn()
                per = (time.perf_counter() - t0) / len(pairs)
                row = {"name": name, "device": device, "model": label, "edges": len(pairs),
                       "edges_per_s": 1 / per, "ours_s": per, "ours_min_s": per,
                       "ours_max_s": per}
            rows.append(row)
        # the same shape with GPT-2's own vocabulary: the trace computes every position's
        # prediction over it (the Attention page shows them), EAP's runs only the last one's
        folder = Path(tmp) / "gpt2-vocab"
        vocab = 4096 if quick else GPT2_VOCAB
        save_gpt2(folder, quick, vocab_size=vocab)
        for device in devices:
            model = vc.load(str(folder), device=device, dtype="float32")
            clean, corrupted = _texts(model, N_TOKENS)
            tokens = len(model.tokenizer(clean)["input_ids"])
            rows += _method_rows(model, clean, corrupted, device, repeat,
                                 f"{shape} with a {vocab:,}-token vocabulary, {tokens} tokens",
                                 f"{label}, vocab {vocab}")
            rows.append(_late_row(model, device, repeat, f"{shape} with a {vocab:,}-token "
                                  f"vocabulary, {tokens} tokens", f"{label}, vocab {vocab}"))
    return rows


def _late_row(model, device, repeat: int, what: str, label: str) -> dict:
    """EAP on a pair that differs at its last word, against the trace: the positions before
    the first difference carry no score (their senders are the same in both runs), so EAP
    computes the receivers' gradients and the scores from there on."""
    clean, corrupted = _texts(model, N_TOKENS, word=-1)
    ctx = E.prepare(model, clean, corrupted, None, None, None)
    first = E.first_difference(ctx.difference["decoder"])
    ours, peer = paired(lambda: model.edge_attribution(clean, corrupted, method="eap"),
                        lambda: model.trace(clean, max_new=0), repeat, device)
    return ratio_row(f"edge_attribution eap, the pair differing at its last word, {what}",
                     ours, peer, "our plain trace, same input", device, target=TARGETS["eap"],
                     model=label, first_difference=first)
