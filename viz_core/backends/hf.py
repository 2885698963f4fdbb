"""Backend for Hugging Face models: BERT/RoBERTa/DistilBERT/MiniLM, GPT-2, BART, T5, Marian.

A run fills the same AttentionTrace as the native backend:

- ``pattern`` is the model's own ``output_attentions`` (loaded with ``attn_implementation=
  "eager"``: SDPA returns no weights). transformers records those through hooks it installs
  once and switches on per call with a ContextVar; we trigger that install at load time, before
  the model is shared, so two threads never race on it.
- ``scores``/``q``/``k``/``v``/``z`` (BERT family and GPT-2 only) are recomputed after the run
  from ``output_hidden_states`` with each layer's own projections (see hf_arch.attention_qkv);
  nothing is hooked or stored on a module per call.
- head ablation: context-scoped pre-hooks on the output projections (see hf_arch).

Tokenizers are never asked to truncate or pad (that mutates the shared Rust tokenizer); we
truncate and pad the id lists ourselves.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import InputError
from ..trace import AttentionTrace, BlockTrace
from .base import Backend, block_filter, to_numpy
from .hf_arch import (
    BYTE_LEVEL_FAMILIES,
    KIND_OF_FAMILY,
    SCORE_FAMILIES,
    ablation,
    attention_qkv,
    decoder_layers,
    encoder_layers,
    install_ablation_hooks,
    max_positions,
    n_heads,
    positional_table,
)
from .hf_load import EXAMPLES, load_hf  # noqa: F401  (viz_core.loading calls hf.load_hf)
from .hf_tokens import display_tokens, truncate_ids

CAPTURE_ALL = ("q", "k", "v", "scores", "pattern", "z")
INTERNALS = ("q", "k", "v", "scores", "z")
DEFAULT_MAX_NEW = 20  # greedy continuation length of a decoder-only model

# ---- the backend -----------------------------------------------------------------------
class HFModel(Backend):
    """A loaded Hugging Face model; one instance serves every session (no per-call state)."""

    def __init__(self, hf_model, tokenizer, family: str, name: str = "", path: str = "",
                 card: dict | None = None):
        self.hf_model = hf_model.eval()
        self.tokenizer = tokenizer
        self.family = family
        self.kind = KIND_OF_FAMILY[family]
        self.name = name
        self.path = path
        self.device = next(hf_model.parameters()).device
        self.byte_level = family in BYTE_LEVEL_FAMILIES
        cfg = hf_model.config
        self.pad_id = _first_int(tokenizer.pad_token_id, cfg.pad_token_id, tokenizer.eos_token_id,
                                 0)
        self.eos_id = _first_int(tokenizer.eos_token_id, getattr(cfg, "eos_token_id", None))
        self.n_encoder_layers = len(encoder_layers(hf_model, family))
        self.n_decoder_layers = len(decoder_layers(hf_model, family))
        self.n_parameters = sum(p.numel() for p in hf_model.parameters())
        self.card = dict(card or {"name": name, "description": self._describe(),
                                  "examples": list(EXAMPLES[family])})
        self._heads = install_ablation_hooks(hf_model, family)
        self._warm_up()

    def _describe(self) -> str:
        layers = self.n_encoder_layers or self.n_decoder_layers
        return (f"{self.family} {self.kind} model ({layers} layers x "
                f"{n_heads(self.hf_model.config)} heads)")

    def _warm_up(self) -> None:
        """Settle shared state before the model is shared: normalise the tokenizer's
        truncation/padding settings and let transformers install its output-recording hooks."""
        ids = self._tokenize("hello world", special=True)["input_ids"] or [self.pad_id]
        with torch.inference_mode():
            x = torch.tensor([ids], device=self.device)
            extra = {}
            if self.kind == "encoder-decoder":
                extra["decoder_input_ids"] = torch.tensor(
                    [[self.hf_model.config.decoder_start_token_id]], device=self.device)
            self.hf_model(input_ids=x, output_attentions=True, output_hidden_states=True,
                          **extra)

    @property
    def max_tokens(self) -> int:
        limits = [max_positions(self.hf_model, self.family)]
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and 0 < tok_max < 100_000:
            limits.append(tok_max)
        limits = [v for v in limits if v]
        return min(limits) if limits else 512

    def info(self) -> dict:
        cfg = self.hf_model.config
        return {**super().info(), "layers": self.n_encoder_layers or self.n_decoder_layers,
                "decoder_layers": self.n_decoder_layers, "heads": n_heads(cfg),
                "d_model": getattr(cfg, "hidden_size", None) or getattr(cfg, "d_model", None),
                "parameters": self.n_parameters, "positional": positional_table(
                    self.hf_model, self.family, 0)[1],
                "scores": self.family in SCORE_FAMILIES, "path": self.path,
                "max_tokens": self.max_tokens}

    # ---- tokenisation -------------------------------------------------------------------
    def _tokenize(self, text: str, pair: str | None = None, special: bool = True) -> dict:
        """ids, special-token mask and segment ids, with no truncation and no padding."""
        enc = self.tokenizer(text, pair, add_special_tokens=special, truncation=False,
                             padding=False, return_special_tokens_mask=True)
        return {"input_ids": list(enc["input_ids"]),
                "special": list(enc.get("special_tokens_mask") or [0] * len(enc["input_ids"])),
                "token_type_ids": list(enc["token_type_ids"]) if "token_type_ids" in enc
                else None}

    def _encode(self, text, what: str, room: int, warnings: list[str], pair=None,
                special: bool = True) -> dict:
        for t, w in ((text, what), (pair, "second sentence")):
            if t is not None and (not isinstance(t, str) or not t.strip()):
                raise InputError(f"The {w} is empty: type some text.")
        enc = self._tokenize(text, pair, special)
        n = len(enc["input_ids"])
        if n == 0:
            raise InputError(f"The {what} has no tokens this model can read.")
        if n > room:
            enc = truncate_ids(enc, room)
            warnings.append(f"The {what} has {n} tokens; only the first {room} fit this model "
                            f"(max {self.max_tokens} tokens), the rest was cut.")
        return enc

    def _unknown(self, texts: list[str]) -> list[str]:
        unk = self.tokenizer.unk_token_id
        if unk is None:
            return []
        out: list[str] = []
        for text in texts:
            # One tokenizer call for the whole text first: almost always nothing is unknown,
            # and per-word calls cost ~0.1 ms each (a third of a 512-token MiniLM trace).
            if unk not in self._tokenize(text or " ", special=False)["input_ids"]:
                continue
            words = (text or "").split()
            ids = self.tokenizer(words, add_special_tokens=False, truncation=False,
                                 padding=False)["input_ids"]  # all words in one batch call
            for word, word_ids in zip(words, ids):
                if unk in word_ids and word not in out:
                    out.append(word)
        return out

    def _shown(self, ids) -> list[str]:
        return display_tokens(self.tokenizer, [int(i) for i in ids], self.byte_level)

    # ---- ablation -----------------------------------------------------------------------
    def _ablation_spec(self, ablate: dict | None) -> dict[str, list[int]] | None:
        if not ablate:
            return None
        spec = {}
        for block, heads in ablate.items():
            if block not in self._heads:
                raise InputError(f"Cannot ablate {block!r}: this model's blocks are "
                                 f"{list(self._heads)}.")
            idx = sorted({int(h) for h in heads})
            bad = [h for h in idx if not 0 <= h < self._heads[block]]
            if bad:
                raise InputError(f"{block!r} has heads 0..{self._heads[block] - 1}; "
                                 f"no head {bad[0]}.")
            if idx:
                spec[block] = idx
        return spec or None

    # ---- decoding -----------------------------------------------------------------------
    def _generate(self, ids: list[int], budget: int) -> list[int]:
        """The model's own greedy output (num_beams=1, no sampling) as a list of ids."""
        x = torch.tensor([ids], device=self.device)
        kwargs = {"max_new_tokens": budget, "do_sample": False, "num_beams": 1}
        if self.hf_model.generation_config.pad_token_id is None:
            kwargs["pad_token_id"] = self.pad_id
        seq = self.hf_model.generate(input_ids=x, attention_mask=torch.ones_like(x), **kwargs)
        return [int(t) for t in seq[0]]

    def _cut_at_eos(self, ids: list[int], start: int) -> list[int]:
        """ids up to (not including) the first eos at or after ``start``."""
        for i in range(start, len(ids)):
            if ids[i] == self.eos_id:
                return ids[:i]
        return ids

    def greedy(self, source: str, max_new: int | None = None) -> str:
        return self.trace(source, capture=("pattern",), max_new=max_new).output_text

    def beam_search(self, source: str, beam_size: int = 4, max_len: int = 32, **options):
        from ..decoding import beam_search

        return beam_search(self, source, beam_size=beam_size, max_len=max_len, **options)

    # ---- trace --------------------------------------------------------------------------
    @torch.inference_mode()
    def trace(self, source: str, target: str | None = None, *, pair: str | None = None,
              capture=CAPTURE_ALL, blocks=None, ablate: dict | None = None,
              max_new: int | None = None) -> AttentionTrace:
        """Run the model once and return a fresh AttentionTrace (see the module docstring).

        pair: second sentence for BERT-family models (segment ids, one sequence with [SEP]);
        capture: which of q, k, v, scores, z to keep besides the pattern (always kept);
        blocks: predicate or list of block names/kinds (None = all);
        ablate: {"encoder.0.self": [heads]} heads whose output is zeroed in this call;
        max_new: greedy tokens to generate when there is no target.
        """
        if pair is not None and self.kind != "encoder-only":
            raise InputError("A second sentence (pair) only applies to encoder-only models.")
        warnings: list[str] = []
        spec = self._ablation_spec(ablate)
        room = self.max_tokens
        with ablation(spec):
            if self.kind == "encoder-only":
                enc = self._encode(source, "input", room, warnings, pair=pair)
                traces = self._run([enc], None, capture, blocks, spec)
                src_words = [source, pair or ""]
                out_ids, forced, prompt_len = [], True, 0
            elif self.kind == "decoder-only":
                enc = self._encode(source, "prompt", room, warnings)
                prompt = enc["input_ids"]
                prompt_len = len(prompt)
                if target is not None and target.strip():
                    t = self._encode(target, "target", max(room - prompt_len, 1), warnings,
                                     special=False)["input_ids"]
                    full, forced = (prompt + t)[:room], True
                else:
                    budget = room - prompt_len
                    budget = min(budget, DEFAULT_MAX_NEW if max_new is None else int(max_new))
                    full = self._generate(prompt, budget) if budget > 0 else list(prompt)
                    full = prompt + self._cut_at_eos(full[prompt_len:], 0)
                    forced = False
                out_ids = full[prompt_len:]
                src_words = [source, target or ""]
                traces = self._run([{"input_ids": full, "special": None,
                                     "token_type_ids": None}], None, capture, blocks, spec,
                                   source_ids=[prompt])
            else:
                enc = self._encode(source, "input", room, warnings)
                start = int(self.hf_model.config.decoder_start_token_id)
                dec_room = max_positions(self.hf_model, self.family) or room
                if target is not None and target.strip():
                    t = self._encode(target, "target", dec_room, warnings)["input_ids"]
                    if t and t[-1] == self.eos_id:
                        t = t[:-1]  # the decoder reads <start> y1..yn; eos is only predicted
                    dec, forced = ([start] + t)[:dec_room], True
                else:
                    budget = dec_room - 1
                    if max_new is None:
                        budget = min(budget, 2 * len(enc["input_ids"]) + 10)
                    else:
                        budget = min(budget, int(max_new))
                    dec = self._generate(enc["input_ids"], max(budget, 1))
                    dec, forced = self._cut_at_eos(dec, 1), False
                out_ids = dec[1:]
                src_words = [source, target or ""]
                traces = self._run([enc], [dec], capture, blocks, spec)
        trace = traces[0]
        trace.warnings = warnings
        trace.unknown_words = self._unknown([w for w in src_words if w])
        if self.kind == "decoder-only":
            if forced:  # what the model predicts at each target position
                predicted = trace.model_info.pop("_predicted")
                out_ids = predicted[prompt_len - 1:len(predicted) - 1]
            trace.output_text = self.tokenizer.decode(out_ids, skip_special_tokens=True)
        elif self.kind == "encoder-decoder":
            predicted = trace.model_info.pop("_predicted")
            ids = predicted if forced else out_ids
            trace.output_text = self.tokenizer.decode(ids, skip_special_tokens=True)
        trace.model_info.pop("_predicted", None)
        return trace

    @torch.inference_mode()
    def trace_batch(self, sources: list[str], targets: list[str] | None = None, *,
                    capture=("pattern",), blocks=None, ablate: dict | None = None
                    ) -> list[AttentionTrace]:
        """Trace several inputs in one right-padded batch (teacher-forced, no generation).

        Each trace keeps the padded length: padding tokens appear on both axes, their key
        columns are marked in ``mask`` and receive exactly zero attention.
        """
        if not sources:
            raise InputError("No inputs given.")
        spec = self._ablation_spec(ablate)
        room = self.max_tokens
        warnings: list[list[str]] = [[] for _ in sources]
        with ablation(spec):
            if self.kind == "encoder-decoder":
                if targets is None or len(targets) != len(sources):
                    raise InputError("An encoder-decoder batch needs one target per input.")
                encs = [self._encode(s, "input", room, w) for s, w in zip(sources, warnings)]
                start = int(self.hf_model.config.decoder_start_token_id)
                decs = []
                for t, w in zip(targets, warnings):
                    ids = self._encode(t, "target", room, w)["input_ids"]
                    decs.append([start] + (ids[:-1] if ids and ids[-1] == self.eos_id else ids))
                traces = self._run(encs, decs, capture, blocks, spec)
            else:
                encs = []
                for i, (s, w) in enumerate(zip(sources, warnings)):
                    e = self._encode(s, "input", room, w)
                    if targets is not None and self.kind == "decoder-only":
                        t = self._encode(targets[i], "target", room, w, special=False)
                        e = {"input_ids": (e["input_ids"] + t["input_ids"])[:room],
                             "special": None, "token_type_ids": None}
                    encs.append(e)
                traces = self._run(encs, None, capture, blocks, spec)
        for tr, w in zip(traces, warnings):
            tr.warnings = w
            tr.model_info.pop("_predicted", None)
        return traces

    # ---- one padded forward pass -> traces ----------------------------------------------
    def _pad(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-pad: ids (B, T) and attention_mask (B, T) with 1 = real token."""
        width = max(len(s) for s in seqs)
        ids = [s + [self.pad_id] * (width - len(s)) for s in seqs]
        att = [[1] * len(s) + [0] * (width - len(s)) for s in seqs]
        return (torch.tensor(ids, device=self.device),
                torch.tensor(att, device=self.device))

    def _run(self, encs: list[dict], decs: list[list[int]] | None, capture, blocks, spec,
             source_ids: list[list[int]] | None = None) -> list[AttentionTrace]:
        points = set(capture or ()) | {"pattern"}
        internals = self.family in SCORE_FAMILIES and bool(points & set(INTERNALS))
        keep = block_filter(blocks)
        ids, att = self._pad([e["input_ids"] for e in encs])
        kwargs = {"output_attentions": True, "output_hidden_states": internals}
        if self.family == "bert" and encs[0].get("token_type_ids") is not None:
            width = ids.shape[1]
            kwargs["token_type_ids"] = torch.tensor(
                [e["token_type_ids"] + [0] * (width - len(e["token_type_ids"])) for e in encs],
                device=self.device)
        if decs is not None:
            dec_ids, dec_att = self._pad(decs)
            out = self.hf_model(input_ids=ids, attention_mask=att, decoder_input_ids=dec_ids,
                                decoder_attention_mask=dec_att, **kwargs)
        else:
            dec_ids = dec_att = None
            out = self.hf_model(input_ids=ids, attention_mask=att, **kwargs)

        extra = self._internals(out, points, keep, spec) if internals else {}
        traces = []
        for b in range(ids.shape[0]):
            src_tok = self._shown(ids[b].tolist())
            src_pad = (att[b] == 0).cpu().numpy()
            found: list[tuple] = []  # (name, attention tensor, mask, q tokens, k tokens)
            if self.kind == "encoder-only":
                enc_mask = np.broadcast_to(src_pad, (len(src_pad),) * 2).copy()
                for i, a in enumerate(out.attentions):
                    found.append((f"encoder.{i}.self", a, enc_mask, src_tok, src_tok))
                dec_tok, predicted = [], []
            elif self.kind == "decoder-only":
                dec_tok = src_tok
                causal = np.triu(np.ones((len(src_pad),) * 2, dtype=bool), k=1)
                mask = causal | src_pad[None, :]
                for i, a in enumerate(out.attentions):
                    found.append((f"decoder.{i}.self", a, mask, dec_tok, dec_tok))
                predicted = out.logits[b].argmax(-1).tolist()
            else:
                enc_mask = np.broadcast_to(src_pad, (len(src_pad),) * 2).copy()
                for i, a in enumerate(out.encoder_attentions):
                    found.append((f"encoder.{i}.self", a, enc_mask, src_tok, src_tok))
                dec_tok = self._shown(dec_ids[b].tolist())
                dec_pad = (dec_att[b] == 0).cpu().numpy()
                causal = np.triu(np.ones((len(dec_pad),) * 2, dtype=bool), k=1)
                cross_mask = np.broadcast_to(src_pad, (len(dec_pad), len(src_pad))).copy()
                for i, (a, c) in enumerate(zip(out.decoder_attentions, out.cross_attentions)):
                    found.append((f"decoder.{i}.self", a, causal | dec_pad[None, :], dec_tok,
                                  dec_tok))
                    found.append((f"decoder.{i}.cross", c, cross_mask, dec_tok, src_tok))
                predicted = out.logits[b].argmax(-1).tolist()

            block_traces = {}
            for name, a, mask, q_tok, k_tok in found:
                if keep is not None and not keep(name):
                    continue
                pattern = a[b:b + 1]  # (1, H, Tq, Tk)
                bt = BlockTrace(name=name, pattern=to_numpy(pattern[0]), scores=None, mask=mask,
                                query_tokens=list(q_tok), key_tokens=list(k_tok))
                for point, t in extra.get(name, {}).items():
                    setattr(bt, point, to_numpy(t[b]))
                block_traces[name] = bt

            if self.kind == "decoder-only":
                src_ids = source_ids[b] if source_ids else ids[b].tolist()
                src_shown = self._shown(src_ids)
            else:
                src_shown = src_tok
            n_pos = max(len(src_tok), len(dec_tok))
            table, pos_kind, pos_note = positional_table(self.hf_model, self.family, n_pos)
            traces.append(AttentionTrace(
                block_traces=block_traces,
                positional=None if table is None else to_numpy(table),
                source_tokens=src_shown, target_tokens=list(dec_tok),
                output_tokens=self._shown(predicted) if predicted else [],
                positional_kind=pos_kind, positional_note=pos_note,
                model_info={**self.info(), "_predicted": predicted}))
        return traces


    def _internals(self, out, points: set[str], keep, spec) -> dict[str, dict]:
        """{block: {point: tensor (B, H, ...)}} for the requested q, k, v, scores, z only,
        recomputed for the whole batch at once, one layer at a time (self-attention stacks
        of the SCORE_FAMILIES, whose blocks are ``{stack}.{i}.self``)."""
        stack = "encoder" if self.kind == "encoder-only" else "decoder"
        need = {p for p in ("q", "k", "v") if p in points}
        need |= {"q", "k"} if "scores" in points else set()
        need |= {"v"} if "z" in points else set()
        found = {}
        for i, attn in enumerate(out.attentions):
            name = f"{stack}.{i}.self"
            if keep is not None and not keep(name):
                continue
            q, k, v, scale = attention_qkv(self.hf_model, self.family, i,
                                           out.hidden_states[i], need)
            parts = {p: t for p, t in (("q", q), ("k", k), ("v", v)) if p in points}
            if "scores" in points:
                parts["scores"] = (q @ k.transpose(-1, -2)).mul_(scale)  # (B, H, Tq, Tk)
            if "z" in points:
                z = attn.to(v.dtype) @ v  # (B, H, Tq, dh): each head's output
                if spec and name in spec:
                    z[:, spec[name]] = 0  # as the ablation hook zeroes them downstream
                parts["z"] = z
            found[name] = parts
        return found


# ---- helpers ---------------------------------------------------------------------------
def _first_int(*values) -> int | None:
    for v in values:
        if isinstance(v, int):
            return v
        if isinstance(v, (list, tuple)) and v and isinstance(v[0], int):
            return v[0]
    return None
