"""Beam search: our tree-recording search versus Hugging Face `generate` with the same settings.

Same model (random BART, d_model 256, 3+3 layers), same input, measured in the same run:
wall-time ratio (median of several runs, min/max), and the time of one search step at step 5
and step 50 (flat thanks to the key/value cache). A native-model row checks the same flatness.
"""

from __future__ import annotations

import statistics
import time

import torch

import viz_core as vc
from viz_core.backends.hf import stepper_for
from viz_core.capture.recorder import register_with_transformers
from viz_core.decoding import search_with

from .common import paired, ratio_row, sync

EOS = 2


def bart(device, vocab: int = 8000):
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = BartConfig(vocab_size=vocab, d_model=256, encoder_layers=3, decoder_layers=3,
                     encoder_attention_heads=4, decoder_attention_heads=4,
                     encoder_ffn_dim=1024, decoder_ffn_dim=1024, max_position_embeddings=128,
                     bos_token_id=0, pad_token_id=1, eos_token_id=EOS,
                     decoder_start_token_id=EOS, forced_eos_token_id=EOS,
                     attn_implementation=register_with_transformers())
    torch.manual_seed(0)
    model = BartForConditionalGeneration(cfg).to(device).eval()
    with torch.no_grad():  # never finish early: every run does all max_new steps
        model.final_logits_bias[0, EOS] = -1e4
    return model


class StepTimer:
    """Wraps a stepper; records the wall time between successive steps (one search step,
    model + bookkeeping)."""

    def __init__(self, inner, device):
        self.inner, self.device, self.marks = inner, device, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def step(self, state, seqs):
        sync(self.device)
        self.marks.append(time.perf_counter())
        return self.inner.step(state, seqs)


def per_step(make_stepper, settings, device, repeat: int) -> tuple[float, float]:
    """Median seconds of step 5 and step 50 over `repeat` searches."""
    s5, s50 = [], []
    for _ in range(repeat):
        timer = StepTimer(make_stepper(), device)
        search_with(timer, dict(settings))
        d = [b - a for a, b in zip(timer.marks, timer.marks[1:])]
        s5.append(d[4])
        s50.append(d[49])
    return statistics.median(s5), statistics.median(s50)


def hf_rows(device, k: int, max_new: int, repeat: int) -> list[dict]:
    model = bart(device)
    torch.manual_seed(1)
    src = torch.randint(4, 8000, (1, 24), device=device)
    settings = dict(beam_size=k, max_len=max_new, length_penalty=1.0, early_stopping=False,
                    num_return=k)

    def make():
        return stepper_for(model, src, max_new=max_new, beams=k, length_penalty=1.0,
                         early_stopping=False)

    def ours():
        return search_with(make(), dict(settings))

    @torch.inference_mode()
    def peer():
        return model.generate(src, attention_mask=torch.ones_like(src), num_beams=k,
                              num_return_sequences=k, max_new_tokens=max_new,
                              length_penalty=1.0, early_stopping=False, do_sample=False,
                              output_scores=True, return_dict_in_generate=True)

    tree = ours()
    ref = peer()
    same = [[n.token_id for n in tree.path(h.node_id)] for h in tree.hypotheses] == \
        [s[1:].tolist() for s in ref.sequences]
    t_ours, t_peer = paired(ours, peer, repeat, device)
    row = ratio_row(f"beam search k={k}, {max_new} steps (BART 256d 3+3)", t_ours, t_peer,
                    "HF generate, same settings", device, target=1.5, same_output=same,
                    nodes=len(tree.nodes))
    if max_new > 50:
        t5, t50 = per_step(make, settings, device, max(1, repeat // 2))
        row.update(step5_s=t5, step50_s=t50, step50_over_step5=t50 / t5)
    return [row]


def native_rows(device, k: int, max_new: int, repeat: int) -> list[dict]:
    from viz_core.training.toy import toy_model

    model = toy_model("encoder-decoder", seed=0, d_model=128, n_heads=4, n_layers=3,
                      n_decoder_layers=3, d_ff=512, max_len=128)
    with torch.no_grad():
        model.model.generator.bias[model.cfg.eos_id] = -1e4
    source = "the cat sat on the mat and the dog saw the red house"
    settings = dict(beam_size=k, max_len=max_new, length_penalty=1.0, early_stopping=False,
                    num_return=k)
    t5, t50 = per_step(lambda: model.make_stepper(source, None), settings,
                       model.device, repeat)
    return [{"name": f"native beam search k={k}: step 50 / step 5", "ratio": t50 / t5,
             "target": 1.5, "meets_target": t50 / t5 <= 1.5, "ours_s": t50, "peer_s": t5,
             "peer": "step 5 of the same search", "device": str(model.device)}]


def run(quick: bool = False) -> list[dict]:
    device = vc.pick_device("auto")
    repeat = 2 if quick else 5
    max_new = 20 if quick else 60
    try:
        rows = hf_rows(device, 4, max_new, repeat)
    except ImportError as err:
        rows = [{"name": "beam search vs HF generate", "skipped": str(err)}]
    if not quick:
        rows += native_rows(device, 4, 60, 3)
    return rows


if __name__ == "__main__":
    torch.set_num_threads(min(2, torch.get_num_threads()))
    for r in run(quick=False):
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
