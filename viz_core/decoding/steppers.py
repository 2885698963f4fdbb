"""Steppers: one decoding step of a model, for every live beam at once.

The beam search (search.py) is written once against the small `Stepper` interface below;
each backend provides one stepper that owns the model-specific parts: encoding the source
once, the key/value cache, reordering it when beams are re-ranked, and reading the attention
of the newest position.

A stepper instance belongs to one search call: it holds that call's cache and tokens, and
never stores anything on the (shared) model.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any, Protocol

import torch

from ..errors import InputError
from ..model.hooks import Hooks, ablate_heads
from ..model.transformer import DecoderCache
from ..tokenizer import BOS, EOS


class Stepper(Protocol):
    attention_kind: str  # "cross" (over the source) or "self" (over the prefix so far)
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


def _stack_last(patterns: list[torch.Tensor]) -> torch.Tensor:
    """Per-layer (B, H, Tq, Tk) -> (B, layers, H, Tk) attention of the last query."""
    return torch.stack([p[:, :, -1, :] for p in patterns], dim=1).float()


# ---------------------------------------------------------------------------------------
class NativeStepper:
    """Our own Transformer (viz_core.model): encoder once, DecoderCache, Hooks capture."""

    def __init__(self, backend, source: str, prefix_text: str | None, ablate: dict | None,
                 warnings: list[str]):
        self.backend = backend
        cfg = backend.cfg
        self.model = backend.model
        self.vocab = backend.tgt_vocab
        self.device = backend.device
        self.eos_ids = (cfg.eos_id,)
        self.special_ids = {cfg.pad_id, cfg.bos_id, cfg.eos_id}
        self.processors: list[str] = []
        interventions = ablate_heads(ablate or {})
        self.src = None
        if cfg.kind == "encoder-decoder":
            ids, shown, _ = backend._encode(backend.src_vocab, source, cfg.max_len - 1,
                                            warnings, "input")
            self.source_tokens = shown + [EOS]
            self.src = backend._tensor(ids + [cfg.eos_id])  # (1, S)
            self.start_ids = [cfg.bos_id]
            self.attention_kind = "cross"
            self.attention_keys = list(self.source_tokens)
            self.root_token = BOS
        elif cfg.kind == "decoder-only":
            ids, shown, _ = backend._encode(self.vocab, source, cfg.max_len - 1, warnings,
                                            "prompt")
            self.source_tokens = shown
            self.start_ids = [cfg.bos_id] + ids
            self.attention_kind = "self"
            self.attention_keys = [BOS] + shown
            self.root_token = " ".join(shown)
        else:
            raise InputError("This model has no decoder: it cannot generate text.")
        self.room = cfg.max_len - len(self.start_ids)
        self.prefix_ids: list[int] = []
        if prefix_text is not None and prefix_text.strip():
            self.prefix_ids, _, _ = self.vocab.encode(prefix_text)
        wanted = ".cross" if self.attention_kind == "cross" else ".self"
        self.hooks = Hooks(("pattern",), lambda name: name.startswith("decoder.") and
                           name.endswith(wanted), interventions)
        self.names = [f"decoder.{i}{wanted}.hook_pattern" for i in range(cfg.n_decoder_layers)]
        self.enc_hooks = Hooks((), None, interventions) if interventions else None

    @torch.inference_mode()
    def start(self, beams: int) -> dict:
        memory = src = None
        if self.src is not None:
            memory = self.model.encode(self.src, self.enc_hooks)  # (1, S, d)
            memory = memory.expand(beams, -1, -1)  # (B, S, d): one encoder pass for all beams
            src = self.src.expand(beams, -1)
        return {"cache": DecoderCache(), "memory": memory, "src": src, "fed": 0}

    @torch.inference_mode()
    def step(self, state: dict, seqs: torch.Tensor):
        new = seqs[:, state["fed"]:]  # (B, T_new)
        logits = self.model.decode(new, state["memory"], state["src"], self.hooks,
                                   state["cache"])  # (B, T_new, V)
        logprobs = torch.log_softmax(logits[:, -1].float(), dim=-1)  # (B, V)
        attention = _stack_last([self.hooks.cache[n] for n in self.names])
        state["fed"] = seqs.shape[1]
        return logprobs, attention, state

    def reorder(self, state: dict, index: torch.Tensor) -> dict:
        state["cache"] = state["cache"].reorder(index)
        return state

    def token_strings(self, ids: list[int]) -> list[str]:
        toks = self.vocab.tokens
        return [self.vocab.display(toks[i]) for i in ids]

    def decode(self, ids: list[int]) -> str:
        return self.vocab.decode(ids)


# ---------------------------------------------------------------------------------------
class HFStepper:
    """A Hugging Face generative model: encoder outputs once, the model's own Cache object
    (reordered with reorder_cache, as generate does), output_attentions for the pattern.

    The logits processors `generate` would build from the model's generation config
    (forced EOS at max length, bad words, no-repeat n-grams, ...) are applied to the
    log-probabilities exactly as in generate, so that scores and choices agree with it.
    """

    def __init__(self, hf_model, input_ids: torch.Tensor, *, tokenizer=None,
                 prefix_ids: list[int] | None = None, max_new: int = 32, beams: int = 1,
                 length_penalty: float = 1.0, early_stopping: bool | str = False,
                 warnings: list[str] | None = None,
                 display: Callable[[list[int]], list[str]] | None = None,
                 context: Callable[[], contextlib.AbstractContextManager] | None = None):
        """input_ids (1, S): the encoder input (encoder-decoder) or the prompt (decoder-only).
        display: ids -> token labels; context: entered around every forward pass (e.g. the
        HF backend's per-call head ablation)."""
        self.hf = hf_model
        self.tokenizer = tokenizer
        self.display = display
        self._tok_cache: dict[int, str] = {}
        self.context = context or contextlib.nullcontext
        self.device = next(hf_model.parameters()).device
        cfg = hf_model.config
        self.is_enc_dec = bool(getattr(cfg, "is_encoder_decoder", False))
        input_ids = input_ids.to(self.device)
        gen = copy.deepcopy(hf_model.generation_config)
        gen.update(num_beams=beams, do_sample=False, length_penalty=length_penalty,
                   early_stopping=early_stopping, num_return_sequences=1)
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
            with self.context():
                enc = self.hf.get_encoder()(input_ids=self.src, attention_mask=mask,
                                            return_dict=True)
            enc.last_hidden_state = enc.last_hidden_state.expand(beams, -1, -1)
            state["encoder_outputs"] = enc
            state["mask"] = mask.expand(beams, -1)
        return state

    @torch.inference_mode()
    def step(self, state: dict, seqs: torch.Tensor):
        new = seqs[:, state["fed"]:]
        with self.context():
            if self.is_enc_dec:
                out = self.hf(encoder_outputs=state["encoder_outputs"],
                              attention_mask=state["mask"], decoder_input_ids=new,
                              past_key_values=state["cache"], use_cache=True,
                              output_attentions=True, return_dict=True)
                patterns = out.cross_attentions
            else:
                out = self.hf(input_ids=new, attention_mask=torch.ones_like(seqs),
                              past_key_values=state["cache"], use_cache=True,
                              output_attentions=True, return_dict=True)
                patterns = out.attentions
        logprobs = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # (B, V)
        if len(self.logits_processor):
            logprobs = self.logits_processor(seqs, logprobs)
        state["cache"] = out.past_key_values
        state["fed"] = seqs.shape[1]
        return logprobs, _stack_last(list(patterns)), state

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


def hf_stepper_for(backend, source: str, prefix_text: str | None, *, max_new: int, beams: int,
                   length_penalty: float, early_stopping, ablate: dict | None,
                   warnings: list[str]) -> HFStepper:
    """HFStepper for a viz_core HF backend (viz_core.backends.hf.HFModel): its tokenisation
    (no truncation by the shared tokenizer), token labels and per-call head ablation."""
    from ..backends.hf_arch import ablation

    what = "prompt" if backend.kind == "decoder-only" else "input"
    enc = backend._encode(source, what, backend.max_tokens, warnings)
    ids = torch.tensor([enc["input_ids"]], dtype=torch.long)
    prefix_ids = None
    if prefix_text is not None and prefix_text.strip():
        prefix_ids = backend._tokenize(prefix_text, special=False)["input_ids"]
    spec = backend._ablation_spec(ablate)
    return HFStepper(backend.hf_model, ids, tokenizer=backend.tokenizer, prefix_ids=prefix_ids,
                     max_new=max_new, beams=beams, length_penalty=length_penalty,
                     early_stopping=early_stopping, warnings=warnings, display=backend._shown,
                     context=(lambda: ablation(spec)) if spec else None)
