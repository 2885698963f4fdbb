"""The default trace of a user-loaded decoder against its own SDPA forward (issue 24, item 2).

A Qwen2.5-0.5B-shaped model (24 layers, 14 heads over 2 key/value heads, d_model 896, MLP
4864; a small byte-level vocabulary to keep it light), random weights, saved with
save_pretrained and loaded by path through vc.load, as a user would. ``model.trace(text)``
with no max_new is traced on the prompt alone (generating would cost more than the trace:
viz_core.backends.continuation), so at 512 prompt tokens it should cost <= 1.2x the same
model's SDPA forward on the same ids (CPU). The row also reports what one greedy step costs
in tokens of a batched forward (``step_tokens``, the measured side of STEP_TOKENS).

Run alone: ``python -m bench.decoder_default`` (also a row of bench_capture).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import torch

import viz_core as vc

from .common import paired, ratio_row

QWEN_05B = dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                num_key_value_heads=2, intermediate_size=4864)
QUICK = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, intermediate_size=128)
CORPUS = ["the cat sat on the mat because it was tired", "a dog ran after the red ball",
          "she reads a long book about the sea and the ships", "we walked home in the rain"]


def _tokenizer(vocab_size: int):
    import json

    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Tokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS * 5, vocab_size=vocab_size, min_frequency=1,
                            special_tokens=["<|endoftext|>"], show_progress=False)
    model = json.loads(bpe._tokenizer.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return GPT2Tokenizer(vocab=model["vocab"], merges=merges, model_max_length=32768)


def save_decoder(path: Path, shape: dict, positions: int = 32768) -> Path:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = _tokenizer(1000)
    eos = tok.eos_token_id
    cfg = Qwen2Config(**shape, vocab_size=len(tok), max_position_embeddings=positions,
                      rope_theta=1e6, tie_word_embeddings=True, bos_token_id=eos,
                      eos_token_id=eos, pad_token_id=eos)
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path


def prompt_of(tokenizer, n: int) -> str:
    """A text that the tokenizer reads as n tokens."""
    words = " ".join(CORPUS * (n // 4 + 8))
    ids = tokenizer(words)["input_ids"][:n]
    text = tokenizer.decode(ids)
    assert len(tokenizer(text)["input_ids"]) == n
    return text


def rows(n: int, repeat: int, shape=QWEN_05B, label="Qwen2.5-0.5B-shaped") -> list[dict]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-decoder-"))
    try:
        model = vc.load(str(save_decoder(tmp / "model", shape)), device="cpu",
                        dtype="float32")
        hf = model.hf_model
        text = prompt_of(model.tokenizer, n)
        ids = torch.tensor([model.tokenizer(text)["input_ids"]])
        first = model.trace(text)
        skipped = any("prompt alone" in w for w in first.warnings)
        assert len(first.target_tokens) == n, (len(first.target_tokens), n)

        def trace():
            return model.trace(text)

        def forward():
            implementation = hf.config._attn_implementation
            hf.set_attn_implementation("sdpa")
            try:
                with torch.inference_mode():
                    return hf(input_ids=ids).logits
            finally:
                hf.set_attn_implementation(implementation)

        t_ours, t_peer = paired(trace, forward, repeat, "cpu")
        # one greedy step against a token of the batched forward (min of 2 each, same ids)
        new = 8
        gen = []
        for _ in range(2):
            t0 = time.perf_counter()
            model.trace(text, max_new=new, capture=("pattern",))
            gen.append(time.perf_counter() - t0)
        per_token = t_peer["min"] / n
        step = max(0.0, (min(gen) - t_ours["min"]) / new)
        return [ratio_row(f"{label} decoder, default trace, {n} prompt tokens",
                          t_ours, t_peer, "same model's SDPA forward, same ids", "cpu",
                          target=1.2, n_tokens=n, skipped_generation=skipped,
                          step_tokens=step / per_token if per_token > 0 else None,
                          trace_with_8_new_s=min(gen))]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(quick: bool = False) -> list[dict]:
    if quick:
        return rows(64, 1, QUICK, "tiny Qwen2")
    return rows(512, 5)


if __name__ == "__main__":
    for r in run(quick=False):
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
        print(f"ratio: {r['ratio']:.3f} (target <= {r['target']})")
