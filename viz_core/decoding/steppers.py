"""Steppers: one decoding step of a model, for every live beam at once.

The beam search (search.py) is written once against the small `Stepper` interface below;
each backend's ``make_stepper`` provides one stepper that owns the model-specific parts: encoding the source
once, the key/value cache, reordering it when beams are re-ranked, and reading the attention
of the newest position.

A stepper instance belongs to one search call: it holds that call's cache and tokens, and
never stores anything on the (shared) model.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Protocol

import torch

from ..capture.recorder import Recorder, last_query_pattern, recording
from ..model.choices import Attention


class Stepper(Protocol):
    attention_kind: Attention  # "cross" (over the source) or "self" (over the prefix so far)
    start_ids: list[int]  # decoder input before the first generated token (start / prompt)
    eos_ids: tuple[int, ...]  # a candidate ending in one of these finishes its hypothesis
    special_ids: set[int]  # left out of Hypothesis.token_ids / text
    room: int  # most tokens the model can generate after start_ids
    source_tokens: list[str]
    attention_keys: list[str]  # labels of the key axis at the first step
    root_token: str
    processors: list[str]  # names of logits processors applied (HF), for the record
    prefix_ids: list[int]  # tokens forced as the first generated ones
    device: torch.device

    def start(self, beams: int) -> Any:
        """Fresh per-call state (cache) for `beams` identical rows."""

    def step(self, state: Any, seqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """seqs (B, T): full decoder sequences so far; the stepper feeds only the part its
        cache has not seen. Returns logprobs (B, vocab) float32 of the next token, attention
        (B, layers, heads, keys) float32 of the newest position, and the new state."""

    def reorder(self, state: Any, index: torch.Tensor) -> Any:
        """Row i of the new state is row index[i] of the old one."""

    def token_strings(self, ids: list[int]) -> list[str]:
        ...

    def decode(self, ids: list[int]) -> str:
        ...


def newest_attention(rec: Recorder, names: list[str]) -> torch.Tensor:
    """(B, layers, H, Tk) float32: the attention of the newest position in each block."""
    rows = [last_query_pattern(rec.records[n][-1]) for n in names]  # (B, H, Tk) each
    # A sliding-window layer's cache keeps only its last keys: those are the newest
    # positions, so its row is padded on the left (older keys: no attention).
    width = max(r.shape[-1] for r in rows)
    rows = [torch.nn.functional.pad(r, (width - r.shape[-1], 0)) for r in rows]
    return torch.stack(rows, dim=1)


# ---------------------------------------------------------------------------------------
class HFStepper:
    """A Hugging Face generative model: encoder outputs once, the model's own Cache object
    (reordered with reorder_cache, as generate does); the attention of the newest position is
computed from the q and k the attention interface recorded (viz_core.capture.recorder).

    The logits processors `generate` would build from the model's generation config
    (forced EOS at max length, bad words, no-repeat n-grams, ...) are applied to the
    log-probabilities exactly as in generate, so that scores and choices agree with it.
    """

    def __init__(self, hf_model, input_ids: torch.Tensor, *, tokenizer=None,
                 prefix_ids: list[int] | None = None, max_new: int = 32, beams: int = 1,
                 length_penalty: float = 1.0, early_stopping: bool | str = False,
                 warnings: list[str] | None = None,
                 display: Callable[[list[int]], list[str]] | None = None,
                 block_names: dict[int, str] | None = None, attention_blocks: list[str] = (),
                 ablate: dict[str, list[int]] | None = None):
        """input_ids (1, S): the encoder input (encoder-decoder) or the prompt (decoder-only).
        display: ids -> token labels; block_names: {id(attention module): block name};
        attention_blocks: the blocks whose newest-position attention each step returns (the
        cross-attention of an encoder-decoder, the self-attention of a decoder-only model);
        ablate: {block: heads} zeroed in every forward pass of this search."""
        self.hf = hf_model
        self.tokenizer = tokenizer
        self.display = display
        self._tok_cache: dict[int, str] = {}
        self.block_names = dict(block_names or {})
        self.attention_blocks = list(attention_blocks)
        self.ablate = dict(ablate or {})
        self.device = next(hf_model.parameters()).device
        cfg = hf_model.config
        self.is_enc_dec = bool(getattr(cfg, "is_encoder_decoder", False))
        input_ids = input_ids.to(self.device)
        gen = copy.deepcopy(hf_model.generation_config)
        # the logits processors are all this config feeds; a beam's own settings on a search
        # of one beam made transformers warn "generation flags are not valid" in the log
        beam = {"length_penalty": length_penalty, "early_stopping": early_stopping} \
            if beams > 1 else {}
        gen.update(num_beams=beams, do_sample=False, num_return_sequences=1, **beam)
        hf_model._prepare_special_tokens(gen, True, device=self.device)
        eos = gen._eos_token_tensor
        self.eos_ids = tuple(int(e) for e in eos.reshape(-1).tolist()) if eos is not None else ()
        self.special_ids = set(self.eos_ids)
        if tokenizer is not None:
            self.special_ids |= set(getattr(tokenizer, "all_special_ids", []) or [])
        if gen.pad_token_id is not None:
            self.special_ids.add(int(gen.pad_token_id))
        limit = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
        if self.is_enc_dec:
            start = gen._decoder_start_token_tensor
            self.start_ids = [int(start.reshape(-1)[0])]
            self.special_ids.add(self.start_ids[0])
            self.src = input_ids  # (1, S)
            self.attention_kind = "cross"
            self.source_tokens = self.token_strings(input_ids[0].tolist())
            self.attention_keys = list(self.source_tokens)
            self.root_token = self.token_strings(self.start_ids)[0]
        else:
            self.start_ids = input_ids[0].tolist()
            self.src = None
            self.attention_kind = "self"
            self.source_tokens = self.token_strings(self.start_ids)
            self.attention_keys = list(self.source_tokens)
            self.root_token = self.decode(self.start_ids) or self.source_tokens[-1]
        self.room = max_new if limit is None else max(0, int(limit) - len(self.start_ids))
        self.prefix_ids = list(prefix_ids or [])
        gen.max_length = len(self.start_ids) + min(max_new, self.room)
        self.logits_processor = hf_model._get_logits_processor(
            gen, input_ids_seq_length=len(self.start_ids),
            encoder_input_ids=input_ids if self.is_enc_dec else None, device=self.device)
        self.processors = [type(p).__name__ for p in self.logits_processor]

    @torch.inference_mode()
    def start(self, beams: int) -> dict:
        state: dict = {"cache": None, "fed": 0, "beams": beams}
        if self.is_enc_dec:
            mask = torch.ones_like(self.src)
            with recording(Recorder(ablate=self.ablate, names=self.block_names)):
                enc = self.hf.get_encoder()(input_ids=self.src, attention_mask=mask,
                                            return_dict=True)
            enc.last_hidden_state = enc.last_hidden_state.expand(beams, -1, -1)
            state["encoder_outputs"] = enc
            state["mask"] = mask.expand(beams, -1)
        return state

    @torch.inference_mode()
    def step(self, state: dict, seqs: torch.Tensor):
        new = seqs[:, state["fed"]:]
        wanted = set(self.attention_blocks)
        rec = Recorder(keep=lambda name: name in wanted, ablate=self.ablate,
                       names=self.block_names)
        with recording(rec):
            if self.is_enc_dec:
                out = self.hf(encoder_outputs=state["encoder_outputs"],
                              attention_mask=state["mask"], decoder_input_ids=new,
                              past_key_values=state["cache"], use_cache=True,
                              return_dict=True)
            else:
                out = self.hf(input_ids=new, attention_mask=torch.ones_like(seqs),
                              past_key_values=state["cache"], use_cache=True,
                              return_dict=True)
        logprobs = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # (B, V)
        if len(self.logits_processor):
            logprobs = self.logits_processor(seqs, logprobs)
        state["cache"] = out.past_key_values
        state["fed"] = seqs.shape[1]
        return logprobs, newest_attention(rec, self.attention_blocks), state

    def reorder(self, state: dict, index: torch.Tensor) -> dict:
        cache = state["cache"]
        if hasattr(self.hf, "_reorder_cache"):
            state["cache"] = self.hf._reorder_cache(cache, index)
        else:
            cache.reorder_cache(index)
        return state

    def token_strings(self, ids: list[int]) -> list[str]:
        missing = [i for i in dict.fromkeys(ids) if i not in self._tok_cache]
        if missing:
            if self.display is not None:
                shown = self.display(missing)
            elif self.tokenizer is not None:
                shown = [str(t) for t in self.tokenizer.convert_ids_to_tokens(missing)]
            else:
                shown = [str(i) for i in missing]
            self._tok_cache.update(zip(missing, shown))
        return [self._tok_cache[i] for i in ids]

    def decode(self, ids: list[int]) -> str:
        if self.tokenizer is None:
            return " ".join(str(i) for i in ids if i not in self.special_ids)
        return self.tokenizer.decode(ids, skip_special_tokens=True)
