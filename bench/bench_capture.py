"""Capture cost: ``model.trace`` against the same model's SDPA forward without capture, and
against the peers' ways of getting attention (Hugging Face eager ``output_attentions``).

Rows (each a ratio against a peer measured in the same run, both timed alternately):
- native and MiniLM(-shaped) traces at 512 tokens versus the SDPA forward (target 1.15 on a
  CPU, 1.3 on a GPU): the trace keeps q, k on the device, nothing N x N;
- the same trace plus reading what the Attention page draws first (the layer x head grid:
  every block pooled to 64 x 64; one head's heatmap), versus Hugging Face eager with
  ``output_attentions=True`` (every layer x head x N x N, brought to numpy);
- opening one head (first read of ``block.head(h)``) at 2,048 tokens (budget 150 ms, CPU) and
  one head's view at 8,192 (pooled to 512 x 512, or a 512 x 512 window at full resolution:
  budget 50 ms, GPU);
- peak memory: an 8,192-token native trace (6 layers x 8 heads) with its grid and one head
  read, in its own process (host RSS, budget 1.5 GB); on a GPU the 32,768-token trace of a
  12-layer, 768-wide decoder (GPU peak, budget 8 GB).
- the default trace of a user-loaded Qwen2.5-0.5B-shaped decoder at 512 prompt tokens
  (traced on the prompt alone, see bench/decoder_default.py) versus its SDPA forward
  (target 1.2, CPU).
GPU shapes: BERT-base, GPT-2-small and BART-base, random weights.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import torch

import viz_core as vc
from viz_core.backends.native import NativeModel
from viz_core.model import Transformer, TransformerConfig
from viz_core.model.tokenizer import Vocab

from . import decoder_default
from .common import budget_row, paired, ratio_row, summary, sync

WORDS = [f"w{i}" for i in range(50)]


def words(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def native(kind: str, n_layers: int, heads: int, d_model: int, max_len: int, device,
           dtype=torch.float32) -> NativeModel:
    vocab = Vocab.build([" ".join(WORDS)])
    cfg = TransformerConfig(kind=kind, src_vocab_size=len(vocab.tokens),
                            tgt_vocab_size=len(vocab.tokens), d_model=d_model, n_heads=heads,
                            n_layers=n_layers if kind != "decoder-only" else 0,
                            n_decoder_layers=n_layers if kind != "encoder-only" else 0,
                            d_ff=4 * d_model, dropout=0.0, max_len=max_len).validate()
    torch.manual_seed(0)
    model = Transformer(cfg).to(device=device, dtype=dtype).eval()
    return NativeModel(model, {"source": vocab, "target": vocab}, {"name": "bench"},
                       name="bench")


def first_view(trace, head: int = 0) -> None:
    """What the Attention page reads first: every block pooled for the grid, one head."""
    for name in trace.blocks:
        trace[name].overview(64)
    b = trace[trace.blocks[-1]]
    if b.shape[1] <= 1024:
        b.head(head)
    else:
        b.overview(512, heads=[head])


def native_rows(n: int, repeat: int, device) -> list[dict]:
    m = native("decoder-only", 6, 8, 512, n + 8, device)
    text = words(n - 2)
    src = None
    dec = torch.tensor([[m.cfg.bos_id] + m.src_vocab.encode(text)[0] + [4]], device=device)

    def trace():
        return m.trace(text, target="w1", capture=("pattern",))

    def forward():
        with torch.inference_mode():
            return m.model(src, dec)

    trace()  # the first trace after load also checks faithfulness: not timed
    t_ours, t_peer = paired(trace, forward, repeat, device)
    rows = [ratio_row(f"native trace, {n} tokens (6 x 8, d 512)", t_ours, t_peer,
                      "same forward, SDPA, no capture", device,
                      target=1.15 if device.type == "cpu" else 1.3, n_tokens=n,
                      faithfulness=m.faithfulness[0] if m.faithfulness else None)]
    t_view, _ = paired(lambda: first_view(trace()), forward, repeat, device)
    rows.append(ratio_row(f"native trace + grid + one head, {n} tokens", t_view, t_peer,
                          "same forward, SDPA, no capture", device, n_tokens=n))
    return rows


def bert_shaped(hidden: int, layers: int, heads: int, positions: int, attn: str, device,
                dtype=torch.float32):
    from transformers import BertConfig, BertModel

    from viz_core.capture.recorder import register_with_transformers

    register_with_transformers()
    cfg = BertConfig(vocab_size=1000, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=4 * hidden,
                     max_position_embeddings=positions, attn_implementation=attn)
    torch.manual_seed(0)
    return BertModel(cfg).to(device=device, dtype=dtype).eval()


def hf_rows(n: int, repeat: int, device, shape=(384, 6, 12), label="MiniLM-shaped",
            target=None, dtype=torch.float32) -> list[dict]:
    """Our capture path against the same weights under SDPA (no capture) and under eager
    with output_attentions (the peer every attention tool uses)."""
    from viz_core.backends.base import block_layout, blocks_from_records, record

    hidden, layers, heads = shape
    ours = bert_shaped(hidden, layers, heads, max(512, n), "attention_lab", device, dtype)
    sdpa = bert_shaped(hidden, layers, heads, max(512, n), "sdpa", device, dtype)
    eager = bert_shaped(hidden, layers, heads, max(512, n), "eager", device, dtype)
    sdpa.load_state_dict(ours.state_dict())
    eager.load_state_dict(ours.state_dict())
    ids = torch.randint(5, 1000, (1, n), device=device)
    names = {id(layer.attention.self): f"encoder.{i}.self"
             for i, layer in enumerate(ours.encoder.layer)}
    # the stream hooks every loaded model has (idle unless a call asks for the stream)
    from viz_core.backends.families import FAMILIES
    from viz_core.capture.recorder import install_stream_hooks

    stream_names = install_stream_hooks(FAMILIES["bert"].stream_modules(ours))
    toks = [str(i) for i in range(n)]
    layout = block_layout("encoder-only", layers, 0, toks, toks)

    def trace():
        with torch.inference_mode():
            _, rec = record(lambda: ours(input_ids=ids), names=names, capture=("pattern",))
            return blocks_from_records(rec, layout)

    def forward():
        with torch.inference_mode():
            return sdpa(input_ids=ids).last_hidden_state

    def whole_block():  # what the whole-block page asks for
        with torch.inference_mode():
            _, rec = record(lambda: ours(input_ids=ids), names=names, capture=("z", "stream"),
                            stream_names=stream_names)
            return rec

    def eager_all():
        with torch.inference_mode():
            out = eager(input_ids=ids, output_attentions=True)
            return [a.float().cpu().numpy() for a in out.attentions]

    def trace_and_view():
        blocks = trace()
        for b in blocks.values():
            b.overview(64)
        b.head(0) if n <= 1024 else b.overview(512, heads=[0])
        return blocks

    rows = []
    same = None
    if n <= 2048:  # our lazily computed pattern is eager's, to float tolerance
        ref = eager_all()[0][0]
        same = bool(abs(trace()["encoder.0.self"].pattern - ref).max() < 2e-2
                    if dtype != torch.float32 else
                    abs(trace()["encoder.0.self"].pattern - ref).max() < 1e-5)
    t_ours, t_peer = paired(trace, forward, repeat, device)
    rows.append(ratio_row(f"{label} trace, {n} tokens", t_ours, t_peer,
                          "same weights, transformers SDPA, no attention out", device,
                          target=target, n_tokens=n, same_output=same))
    if n <= 2048:
        t_block, t_plain = paired(whole_block, trace, repeat, device)
        rows.append(ratio_row(f"{label} trace + z + residual stream, {n} tokens", t_block,
                              t_plain, "our plain trace (q, k)", device, n_tokens=n))
    if n <= 8192 or device.type != "cpu":
        t_view, t_eager = paired(trace_and_view, eager_all, max(1, repeat // 2), device)
        rows.append(ratio_row(f"{label} trace + grid + one head, {n} tokens", t_view, t_eager,
                              "HF eager output_attentions=True, to numpy", device,
                              n_tokens=n))
    return rows


def head_open_rows(n: int, repeat: int, device, budget_s: float) -> list[dict]:
    m = native("decoder-only", 6, 8, 512, n + 8, device)
    text = words(n - 2)
    m.trace("w1 w2", target="w3")  # warm-up + faithfulness check
    rows = []
    views = [("one head, full resolution", lambda b: b.head(3))]
    if n > 2048:
        views = [("one head pooled to 512 x 512", lambda b: b.overview(512, heads=[3])),
                 ("one head, 512 x 512 window at full resolution",
                  lambda b: b.window(3, (n // 2, n // 2 + 512), (0, 512)))]
    for what, view in views:
        times = []
        for _ in range(repeat):
            tr = m.trace(text, target="w1", capture=("pattern",))
            b = tr["decoder.5.self"]
            sync(device)
            t0 = time.perf_counter()
            view(b)
            sync(device)
            times.append(time.perf_counter() - t0)
        rows.append(budget_row(f"open {what}, {n} tokens", summary(times), budget_s, device,
                               n_tokens=n))
    return rows


MEMORY_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    sys.path.insert(0, sys.argv[1])
    from bench.bench_capture import native, words, first_view
    n, device = int(sys.argv[2]), torch.device(sys.argv[3])
    torch.set_num_threads(2)
    layers, heads, d = (6, 8, 512) if device.type == "cpu" else (12, 12, 768)
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    m = native("decoder-only", layers, heads, d, n + 8, device, dtype)
    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    base = rss()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base_gpu = torch.cuda.memory_allocated()
    tr = m.trace(words(n - 2), target="w1", capture=("pattern",))
    first_view(tr)
    out = {"rss_peak": rss(), "rss_before": base}
    if device.type == "cuda":
        out["gpu_peak"] = torch.cuda.max_memory_allocated()
        out["gpu_weights"] = base_gpu
    print(json.dumps(out))
""")


def memory_row(n: int, device, budget_gb: float) -> dict:
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, root, str(n), str(device)],
                         capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        return {"name": f"trace memory, {n} tokens", "skipped": out.stderr[-300:]}
    r = json.loads(out.stdout.strip().splitlines()[-1])
    used = r["gpu_peak"] if "gpu_peak" in r else r["rss_peak"]
    what = "GPU peak" if "gpu_peak" in r else "peak RSS (whole process)"
    shape = "12 x 12, d 768, bf16" if "gpu_peak" in r else "6 x 8, d 512"
    return ratio_row(f"{what} of a {n}-token trace + grid + one head ({shape})",
                     {"median": used / 2**30, "min": used / 2**30, "max": used / 2**30},
                     {"median": budget_gb}, f"budget {budget_gb} GB", device, target=1.0,
                     n_tokens=n, peak_gb=used / 2**30, process_wall_s=wall,
                     rss_before_gb=r["rss_before"] / 2**30)


def run(quick: bool = False) -> list[dict]:
    device = vc.pick_device("auto")
    gpu = device.type == "cuda"
    if quick:
        return (native_rows(64, 1, device) + hf_rows(64, 1, device)
                + head_open_rows(128, 1, device, 0.15) + [memory_row(256, device, 1.5)]
                + decoder_default.run(quick=True))
    rows = native_rows(512, 7, device) + hf_rows(512, 7, device, target=None if gpu else 1.15)
    rows += decoder_default.run()  # a loaded decoder's default trace (CPU, target 1.2)
    rows += hf_rows(2048, 3, device)
    rows += head_open_rows(2048, 5, device, 0.15)
    rows.append(memory_row(8192, torch.device("cpu"), 1.5))
    if gpu:
        for shape, label in (((768, 12, 12), "BERT-base-shaped"),):
            rows += hf_rows(512, 7, device, shape, label, target=1.3, dtype=torch.bfloat16)
            rows += hf_rows(8192, 3, device, shape, label, dtype=torch.bfloat16)
        rows += head_open_rows(8192, 5, device, 0.05)
        rows.append(memory_row(32768, device, 8.0))
    return rows
