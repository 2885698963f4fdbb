"""Backend for Hugging Face models: every family in viz_core.backends.families.

Models are loaded with attn_implementation="attention_lab" (viz_core.capture.recorder): each attention
call goes through our function, which computes the output with SDPA and, when the running
call records, keeps q, k, v after rotary embeddings, the model's real mask, T5's position bias
and any softcap. A trace is built from those records lazily (viz_core.capture.trace); head ablation
goes through the same function. What differs between families is in their adapter
(families.py); this module is the same for all of them.

Tokenizers are never asked to truncate or pad (that mutates the shared Rust tokenizer); we
truncate and pad the id lists ourselves.
"""

from __future__ import annotations

import torch

from viz_core.i18n import N_, Message

from ..capture.recorder import Recorder, call_names, install_stream_hooks, recording
from ..capture.trace import AttentionTrace
from ..decoding.steppers import HFStepper
from ..errors import InputError
from ..model.choices import NormPlacement, PositionalKind
from .base import (
    CAPTURE_ALL,
    Backend,
    block_layout,
    blocks_from_records,
    check_ablation,
    permuted,
    record,
    right_pad,
    stream_from_records,
    to_numpy,
)
from .continuation import default_new_tokens
from .families import Family
from .hf_tokens import display_tokens, truncate_ids
from .typed import check_count, check_text_or_none, check_texts

ARCHITECTURE_WORDS = {"encoder-only": N_("encoder-only"), "decoder-only": N_("decoder-only"),
                      "encoder-decoder": N_("encoder-decoder")}
DEFAULT_MAX_NEW = 20  # greedy continuation length of a decoder-only model

# ---- the backend -----------------------------------------------------------------------
class HFModel(Backend):
    """A loaded Hugging Face model; one instance serves every session (no per-call state)."""

    def __init__(self, hf_model, tokenizer, adapter: Family, name: str = "", path: str = "",
                 card: dict | None = None):
        super().__init__()
        self.hf_model = hf_model.eval()
        self.load_notices: list = []  # what the app says under the model picker (Messages)
        self.tokenizer = tokenizer
        self.adapter = adapter
        self.family = adapter.model_type
        self.architecture = adapter.architecture
        self.name = name
        self.path = path
        self.device = next(hf_model.parameters()).device
        self._rows = int(hf_model.get_input_embeddings().weight.shape[0])  # token ids < this
        self.dtype = next(hf_model.parameters()).dtype
        self.byte_level = adapter.byte_level
        cfg = hf_model.config
        self.pad_id = _first_int(tokenizer.pad_token_id, cfg.pad_token_id, tokenizer.eos_token_id,
                                 0)
        self.eos_id = _first_int(tokenizer.eos_token_id, getattr(cfg, "eos_token_id", None))
        modules = adapter.block_modules(hf_model)
        self.n_encoder_layers = sum(n.startswith("encoder.") for n in modules)
        self.n_decoder_layers = sum(n.endswith(".self") and n.startswith("decoder.")
                                    for n in modules)
        # {id(attention module): block name (or the names of its successive calls)}
        self.block_names = call_names((id(m), block) for block, m in modules.items())
        self._modules = modules  # keeps the ids above valid (static model structure)
        # stream points (residual stream, sublayer outputs, norms): forward hooks installed
        # once, here, before the model is shared; they keep nothing themselves
        points = adapter.stream_modules(hf_model)
        self._stream_modules = {(layer, point): m for layer, point, m in points}
        self.stream_names = install_stream_hooks(points)
        self._d_ff = self._ffn_width()
        # the class of its norms, e.g. "LayerNorm", "LlamaRMSNorm", "T5LayerNorm"
        self._norm_class = next((type(m).__name__ for (_, p), m in self._stream_modules.items()
                                 if p.endswith("norm")), None)
        self._heads = {block: _heads_of(m, cfg) for block, m in modules.items()}
        self._kv_heads = _kv_heads_of(next(iter(modules.values())), cfg, self._heads)
        self.n_parameters = sum(p.numel() for p in hf_model.parameters())
        self.card = dict(card or {"name": name, "description": self._describe(),
                                  "examples": list(adapter.examples)})
        self._warm_up()

    def _describe(self) -> Message:
        """"gpt2 decoder-only model (2 layers x 4 heads)": English as data, translated where
        shown (the Home page, as a shipped card's description is)."""
        layers = self.n_encoder_layers or self.n_decoder_layers
        heads = next(iter(self._heads.values()), 0)
        kv = "" if self._kv_heads == heads else Message(N_(", {kv} key/value heads"),
                                                         kv=self._kv_heads)
        return Message(N_("{family} {kind} model ({layers} layers x {heads} heads{kv})"),
                       family=self.family, kind=Message(ARCHITECTURE_WORDS[self.architecture]),
                       layers=layers, heads=heads, kv=kv)

    def _warm_up(self) -> None:
        """Settle shared state before the model is shared: normalise the tokenizer's
        truncation/padding settings and run one forward pass."""
        ids = self._tokenize("hello world", special=True)["input_ids"] or [self.pad_id]
        with torch.inference_mode():
            x = torch.tensor([ids], device=self.device)
            extra = {}
            if self.architecture == "encoder-decoder":
                extra["decoder_input_ids"] = torch.tensor(
                    [[self.hf_model.config.decoder_start_token_id]], device=self.device)
            self.hf_model(input_ids=x, **extra)

    @property
    def positional_kind(self) -> PositionalKind:
        return self.adapter.positional_kind

    @property
    def kv_heads(self) -> int:
        return self._kv_heads

    @property
    def norm_placement(self) -> NormPlacement:
        return self.adapter.norm_placement

    def count_tokens(self, text: str) -> int:
        enc = self.encode_text(text, "input", self.max_tokens, [])
        special = enc.get("special") or [0] * len(enc["input_ids"])
        return sum(1 for s in special if not s)

    def output_projection(self, block: str):
        stack, layer, kind = block.split(".")
        m = self._stream_modules.get((f"{stack}.{layer}", kind))
        if m is None:
            raise KeyError(f"no output projection known for {block!r}")
        w = m.weight
        if type(m).__name__ == "Conv1D":  # GPT-2 stores (in, out): y = x @ W + b
            w = w.t()
        return w, getattr(m, "bias", None)  # (d_model, heads * d_v)

    # contribution analysis: the linear pieces (viz_core.backends.hf_parts)
    def final_norm(self, stack: str = "decoder"):
        from . import hf_parts

        return hf_parts.final_norm(self, stack)

    def unembedding(self):
        from . import hf_parts

        return hf_parts.unembedding(self)

    def logit_softcap(self):
        from . import hf_parts

        return hf_parts.logit_softcap(self)

    def position_rows(self, n: int):
        from . import hf_parts

        return hf_parts.position_rows(self, n)

    def head_weights(self, block: str):
        from . import hf_parts

        return hf_parts.head_weights(self, block)

    def token_id(self, token, what: str = N_("token")) -> int:
        from . import hf_parts

        return hf_parts.token_id(self, token, what)

    def token_strings(self, ids) -> list[str]:
        from . import hf_parts

        return hf_parts.token_strings(self, ids)

    def _ffn_width(self) -> int | None:
        for (_, point), m in self._stream_modules.items():
            if point == "ffn":
                w = m.weight
                return int(w.shape[0] if type(m).__name__ == "Conv1D" else w.shape[1])
        return None

    def special_token_mask(self, token_ids: list[int]) -> list[bool]:
        special = set(getattr(self.tokenizer, "all_special_ids", []) or [])
        return [int(i) in special for i in token_ids]

    @property
    def max_tokens(self) -> int:
        limits = [self.adapter.max_positions(self.hf_model)]
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and 0 < tok_max < 100_000:
            limits.append(tok_max)
        limits = [v for v in limits if v]
        return min(limits) if limits else 512

    def info(self) -> dict:
        cfg = self.hf_model.config
        return {**super().info(), "layers": self.n_encoder_layers or self.n_decoder_layers,
                "decoder_layers": self.n_decoder_layers,
                "heads": next(iter(self._heads.values()), 0), "kv_heads": self._kv_heads,
                "d_model": getattr(cfg, "hidden_size", None) or getattr(cfg, "d_model", None),
                "parameters": self.n_parameters, "d_ff": self._d_ff,
                "norm_placement": self.norm_placement, "norm": self._norm_class,
                "positional": self.adapter.positional_table(self.hf_model, 0)[1],
                "positional_kind": self.positional_kind, "path": self.path,
                "dtype": str(self.dtype).removeprefix("torch."), "max_tokens": self.max_tokens}

    # ---- tokenisation -------------------------------------------------------------------
    def _tokenize(self, text: str, pair: str | None = None, special: bool = True) -> dict:
        """ids, special-token mask and segment ids, with no truncation and no padding. A
        tokenizer that fails on the text, or gives ids the weights lack, is an InputError
        (its files were checked at load on a plain sentence: viz_core.loading.hf)."""
        try:
            enc = self.tokenizer(text, pair, add_special_tokens=special, truncation=False,
                                 padding=False, return_special_tokens_mask=True,
                                 verbose=False)  # no "longer than the maximum" in the log:
            # the text is cut to the model's room by the caller (encode_text), with a notice
        except Exception as err:  # noqa: BLE001 - tokenizers raises a bare Exception
            raise InputError(N_("This model's tokenizer cannot read the text: {short}"),
                             short=" ".join(str(err).split())[:300]) from err
        ids = list(enc["input_ids"])
        try:
            lacking = bool(ids) and not (min(ids) >= 0 and max(ids) < self._rows)
        except TypeError:  # None or a string among the ids
            lacking = True
        if lacking:
            raise InputError(N_("This model's tokenizer gives the text token ids its weights "
                                "lack (ids 0 to {last}): its tokenizer files do not match the "
                                "model."), last=self._rows - 1)
        return {"input_ids": ids,
                "special": list(enc.get("special_tokens_mask") or [0] * len(enc["input_ids"])),
                "token_type_ids": list(enc["token_type_ids"]) if "token_type_ids" in enc
                else None}

    def encode_text(self, text, what: str, room: int, warnings: list[str], pair=None,
                special: bool = True) -> dict:
        for t, w in ((text, what), (pair, "second sentence")):
            if t is not None and (not isinstance(t, str) or not t.strip()):
                raise InputError(N_("The {w} is empty: type some text."), w=w)
        enc = self._tokenize(text, pair, special)
        n = len(enc["input_ids"])
        if n == 0:
            raise InputError(N_("The {what} has no tokens this model can read."), what=what)
        if n > room:
            enc = truncate_ids(enc, room)
            warnings.append(Message(N_("The {what} has {n} tokens; only the first {room} fit this model "
                              "(max {max_tokens} tokens), the rest was cut."),
                                what=what, n=n, room=room, max_tokens=self.max_tokens))
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
                                 padding=False, verbose=False)["input_ids"]  # one batch call
            for word, word_ids in zip(words, ids):
                if unk in word_ids and word not in out:
                    out.append(word)
        return out

    def shown_tokens(self, ids) -> list[str]:
        return display_tokens(self.tokenizer, [int(i) for i in ids], self.byte_level)

    # ---- decoding -----------------------------------------------------------------------
    def greedy_ids(self, ids: list[int], budget: int, ablate=None, positions: bool = True
                  ) -> list[int]:
        """The model's own greedy output after ``ids`` (``hf_model.generate`` with num_beams=1,
        no sampling, at most ``budget`` new tokens), prompt included, as a list of ids; ablate
        and positions as ``trace``'s. The load check (viz_core.loading.hf) runs it too."""
        x = torch.tensor([ids], device=self.device)
        kwargs = {"max_new_tokens": budget, "do_sample": False, "num_beams": 1}
        if self.hf_model.generation_config.pad_token_id is None:
            kwargs["pad_token_id"] = self.pad_id
        with recording(Recorder(ablate=ablate or {}, names=self.block_names,
                                positions=positions)):
            seq = self.hf_model.generate(input_ids=x, attention_mask=torch.ones_like(x),
                                         **kwargs)
        return [int(t) for t in seq[0]]

    def _cut_at_eos(self, ids: list[int], start: int) -> list[int]:
        """ids up to (not including) the first eos at or after ``start``."""
        for i in range(start, len(ids)):
            if ids[i] == self.eos_id:
                return ids[:i]
        return ids

    def make_stepper(self, source: str, prefix: str | None, *, beams: int = 1,
                     max_new: int = 32, length_penalty: float = 1.0, early_stopping=False,
                     ablate: dict | None = None, warnings: list[str] | None = None):
        warnings = warnings if warnings is not None else []
        what = N_("prompt") if self.architecture == "decoder-only" else N_("input")
        enc = self.encode_text(source, what, self.max_tokens, warnings)
        ids = torch.tensor([enc["input_ids"]], dtype=torch.long)
        prefix_ids = None
        if prefix is not None and prefix.strip():
            prefix_ids = self._tokenize(prefix, special=False)["input_ids"]
        kind = "cross" if self.architecture == "encoder-decoder" else "self"
        blocks = [f"decoder.{i}.{kind}" for i in range(self.n_decoder_layers)]
        return HFStepper(self.hf_model, ids, tokenizer=self.tokenizer, prefix_ids=prefix_ids,
                         max_new=max_new, beams=beams, length_penalty=length_penalty,
                         early_stopping=early_stopping, warnings=warnings,
                         display=self.shown_tokens, block_names=self.block_names,
                         attention_blocks=blocks,
                         ablate=check_ablation(ablate, self._heads))

    # ---- trace --------------------------------------------------------------------------
    @torch.inference_mode()
    def trace(self, source: str, target: str | None = None, *, pair: str | None = None,
              capture=CAPTURE_ALL, blocks=None, ablate: dict | None = None,
              max_new: int | None = None, permute=None, positions: bool = True
              ) -> AttentionTrace:
        """Run the model once and return a fresh, lazy AttentionTrace.

        pair: second sentence for encoder-only models (segment ids, one sequence with [SEP]);
        capture: what to keep besides q and k ("v", "z"; patterns and scores need only q, k);
        blocks: predicate or list of block names/kinds (None = all);
        ablate: {"encoder.0.self": [heads]} heads whose output is zeroed in this call;
        max_new: greedy tokens to generate when there is no target;
        permute: a new order of the input's (prompt's) ordinary tokens, a permutation of
        0..n-1; special tokens stay in place (``trace.source_order`` maps positions back);
        positions: False runs with no position information: all-zero position ids (every
        token gets the same position vector or rotation) or, for T5, no relative bias.
        """
        arch = self.architecture
        check_text_or_none(target, N_("target"))
        check_text_or_none(pair, N_("second sentence"))
        max_new = check_count(max_new, N_("max_new"))
        if pair is not None and arch != "encoder-only":
            raise InputError(N_("A second sentence (pair) only applies to encoder-only models."))
        if permute is not None and pair is not None:
            raise InputError(N_("Reordering tokens applies to a single sentence, not a pair."))
        mode = "on" if positions else self._positions_off_mode()
        if mode == "position_ids" and arch != "encoder-only" and not (
                (target is not None and target.strip()) or max_new == 0):
            raise InputError(N_("With positions switched off this model is traced on its input "
                             "alone: give a target or generate no new tokens (max_new=0)."))
        warnings: list[str] = []
        spec = check_ablation(ablate, self._heads)
        room = self.max_tokens
        forced = target is not None and bool(target.strip())
        decs = source_ids = None
        order = None

        def reorder(enc):
            nonlocal order
            if permute is None:
                return enc
            special = enc.get("special") or [False] * len(enc["input_ids"])
            ids, order = permuted(enc["input_ids"], permute, [bool(x) for x in special])
            return {**enc, "input_ids": ids}

        if arch == "encoder-only":
            encs = [reorder(self.encode_text(source, "input", room, warnings, pair=pair))]
            src_words = [source, pair or ""]
        elif arch == "decoder-only":
            prompt = reorder(self.encode_text(source, "prompt", room, warnings))["input_ids"]
            if forced:
                t = self.encode_text(target, "target", max(room - len(prompt), 1), warnings,
                                     special=False)["input_ids"]
                full = (prompt + t)[:room]
            else:
                budget = min(room - len(prompt),
                             DEFAULT_MAX_NEW if max_new is None else int(max_new))
                if max_new is None:  # continue only when cheaper than the trace (a note if not)
                    budget = default_new_tokens(self.hf_model, len(prompt), budget, warnings)
                full = self.greedy_ids(prompt, budget, spec) if budget > 0 else list(prompt)
                full = prompt + self._cut_at_eos(full[len(prompt):], 0)
            encs = [{"input_ids": full, "special": None, "token_type_ids": None}]
            source_ids = [prompt]
            src_words = [source, target or ""]
        else:
            enc = reorder(self.encode_text(source, "input", room, warnings))
            start = int(self.hf_model.config.decoder_start_token_id)
            dec_room = self.adapter.max_positions(self.hf_model) or room
            if forced:
                t = self.encode_text(target, "target", dec_room, warnings)["input_ids"]
                if t and t[-1] == self.eos_id:
                    t = t[:-1]  # the decoder reads <start> y1..yn; eos is only predicted
                dec = ([start] + t)[:dec_room]
            else:
                budget = dec_room - 1
                budget = min(budget, 2 * len(enc["input_ids"]) + 10 if max_new is None
                             else int(max_new))
                dec = self._cut_at_eos(self.greedy_ids(enc["input_ids"], max(budget, 1), spec,
                                                      positions), 1)
            encs, decs = [enc], [dec]
            src_words = [source, target or ""]
        traces, predicted = self._run(encs, decs, capture, blocks, spec, source_ids, mode)
        trace, predicted = traces[0], predicted[0]
        if order is not None:
            n = len(trace.target_tokens) if arch == "decoder-only" else len(trace.source_tokens)
            trace.source_order = order + list(range(len(order), n))
        trace.warnings = warnings
        trace.unknown_words = self._unknown([w for w in src_words if w])
        if arch == "decoder-only":
            n_prompt = len(source_ids[0])
            out_ids = (predicted[n_prompt - 1:len(predicted) - 1] if forced
                       else encs[0]["input_ids"][n_prompt:])
            trace.output_text = self.tokenizer.decode(out_ids, skip_special_tokens=True)
        elif arch == "encoder-decoder":
            ids = predicted if forced else decs[0][1:]
            trace.output_text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return self._stamp(trace, source, target)

    @torch.inference_mode()
    def trace_batch(self, sources: list[str], targets: list[str] | None = None, *,
                    capture=("pattern",), blocks=None, ablate: dict | None = None
                    ) -> list[AttentionTrace]:
        """Trace several inputs in one right-padded batch (teacher-forced, no generation).

        Each trace keeps the padded length: padding tokens appear on both axes, their key
        columns are marked in ``mask`` and receive exactly zero attention.
        """
        check_texts(sources, N_("inputs"))
        check_texts(targets, N_("targets"), optional=True)
        if not sources:
            raise InputError(N_("No inputs given."))
        if targets is not None and len(targets) != len(sources):
            raise InputError(N_("Give one target per input: {n} inputs, {m} targets."),
                             n=len(sources), m=len(targets))
        spec = check_ablation(ablate, self._heads)
        room = self.max_tokens
        warnings: list[list[str]] = [[] for _ in sources]
        decs = None
        if self.architecture == "encoder-decoder":
            if targets is None or len(targets) != len(sources):
                raise InputError(N_("An encoder-decoder batch needs one target per input."))
            encs = [self.encode_text(s, "input", room, w) for s, w in zip(sources, warnings)]
            start = int(self.hf_model.config.decoder_start_token_id)
            decs = []
            for t, w in zip(targets, warnings):
                ids = self.encode_text(t, "target", room, w)["input_ids"]
                decs.append([start] + (ids[:-1] if ids and ids[-1] == self.eos_id else ids))
        else:
            encs = []
            for i, (s, w) in enumerate(zip(sources, warnings)):
                e = self.encode_text(s, "input", room, w)
                if targets is not None and self.architecture == "decoder-only":
                    t = self.encode_text(targets[i], "target", room, w, special=False)
                    e = {"input_ids": (e["input_ids"] + t["input_ids"])[:room],
                         "special": None, "token_type_ids": None}
                encs.append(e)
        traces, _ = self._run(encs, decs, capture, blocks, spec)
        for tr, w in zip(traces, warnings):
            tr.warnings = w
            self.device_budget.admit(tr)
        return traces

    def _positions_off_mode(self) -> str:
        """How this model runs with positions off: "position_ids" (all zero: the same
        position vector, or no rotation, for every token), "bias" (T5: the recorder drops
        the relative bias); an InputError where neither applies."""
        import inspect

        if self.positional_kind == "relative":
            return "bias"
        if "position_ids" in inspect.signature(self.hf_model.forward).parameters:
            return "position_ids"
        raise InputError(N_("Positions cannot be switched off for {family} models here: their "
                           "forward pass takes no position ids."), family=self.family)

    # ---- one padded forward pass -> traces ----------------------------------------------
    def _inputs(self, encs: list[dict], decs: list[list[int]] | None,
                mode: str = "on") -> dict:
        ids, att = right_pad([e["input_ids"] for e in encs], self.pad_id, self.device)
        kwargs = {"input_ids": ids, "attention_mask": att}
        if mode == "position_ids":
            kwargs["position_ids"] = torch.zeros_like(ids)
        types = [e.get("token_type_ids") for e in encs]
        if all(t is not None for t in types) and self.adapter.token_types:
            kwargs["token_type_ids"] = right_pad(types, 0, self.device)[0]
        if decs is not None:
            kwargs["decoder_input_ids"], kwargs["decoder_attention_mask"] = right_pad(
                decs, self.pad_id, self.device)
        return kwargs

    def _run(self, encs: list[dict], decs: list[list[int]] | None, capture, blocks, spec,
             source_ids: list[list[int]] | None = None, mode: str = "on"
             ) -> tuple[list[AttentionTrace], list[list[int]]]:
        """One forward pass, recorded: (a lazy trace per row, its argmax prediction per
        position; empty for encoder-only models). mode: positions "on" or how they are off."""
        kwargs = self._inputs(encs, decs, mode)
        out, rec = record(lambda: self.hf_model(**kwargs), blocks=blocks, capture=capture,
                          ablate=spec, names=self.block_names, stream_names=self.stream_names,
                          positions=mode == "on")
        ids = kwargs["input_ids"]
        predicted = [[] for _ in encs]
        if self.architecture != "encoder-only":
            predicted = out.logits.argmax(-1).tolist()
        traces = []
        for b in range(ids.shape[0]):
            src_tok = self.shown_tokens(ids[b].tolist())
            dec_tok = []
            if self.architecture == "decoder-only":
                dec_tok = src_tok
                src_shown = self.shown_tokens(source_ids[b]) if source_ids else src_tok
            else:
                src_shown = src_tok
                if decs is not None:
                    dec_tok = self.shown_tokens(kwargs["decoder_input_ids"][b].tolist())
            layout = block_layout(self.architecture, self.n_encoder_layers,
                                  self.n_decoder_layers, src_tok, dec_tok)
            table, note = self.adapter.positional_table(self.hf_model,
                                                        max(len(src_tok), len(dec_tok)))
            traces.append(AttentionTrace(
                block_traces=blocks_from_records(rec, layout, b),
                positional=None if table is None else to_numpy(table),
                source_tokens=src_shown, target_tokens=list(dec_tok),
                output_tokens=self.shown_tokens(predicted[b]) if predicted[b] else [],
                positional_kind=self.positional_kind, positional_note=note,
                model_info=self.info(), stream=stream_from_records(rec, b)))
        return traces, predicted

    # ---- faithfulness -------------------------------------------------------------------
    @torch.inference_mode()
    def _reference_outputs(self, source, target, max_tokens=None):
        """Logits (last hidden state for encoder-only models) of a recorded run against
        the same input through transformers' own attention function, untouched."""
        warnings: list[str] = []
        room = min(self.max_tokens, max_tokens or self.max_tokens)
        enc = self.encode_text(source, "input", room, warnings)
        decs = None
        if self.architecture == "encoder-decoder":
            start = int(self.hf_model.config.decoder_start_token_id)
            text = target if target and target.strip() else source
            t = self.encode_text(text, "target", room, warnings)["input_ids"]
            decs = [[start] + t]
        kwargs = self._inputs([enc], decs)

        def run():
            out = self.hf_model(**kwargs)
            return out.logits if self.architecture != "encoder-only" else out.last_hidden_state
        traced, _ = record(run, names=self.block_names)
        reference, _ = record(run, capture=(), names=self.block_names, reference="transformers")
        n = len(enc["input_ids"]) + (len(decs[0]) if decs else 0)
        return traced, reference, n


# ---- helpers ---------------------------------------------------------------------------
def _first_int(*values) -> int | None:
    for v in values:
        if isinstance(v, int):
            return v
        if isinstance(v, (list, tuple)) and v and isinstance(v[0], int):
            return v[0]
    return None


def _heads_of(module, cfg) -> int:
    """Query heads of one attention module (from the module, else from the config)."""
    for obj in (module, cfg):
        for attr in ("num_heads", "n_heads", "num_attention_heads", "n_head",
                     "encoder_attention_heads"):
            value = getattr(obj, attr, None)
            if isinstance(value, int) and value > 0:
                return value
    raise ValueError("cannot tell the number of heads")


def _kv_heads_of(module, cfg, heads: dict[str, int]) -> int:
    """Key/value heads (grouped-query attention); == heads for plain multi-head."""
    n = next(iter(heads.values()), 0)
    group = getattr(module, "num_key_value_groups", None)
    if isinstance(group, int) and group > 1:
        return n // group
    value = getattr(cfg, "num_key_value_heads", None)
    return int(value) if isinstance(value, int) and value > 0 else n


def stepper_for(hf_model, input_ids: torch.Tensor, **options) -> HFStepper:
    """An HFStepper over any supported Hugging Face model loaded with
    ``attn_implementation="attention_lab"`` (block names from its family adapter)."""
    from .families import family_for

    adapter = family_for(getattr(hf_model.config, "model_type", None))
    modules = adapter.block_modules(hf_model)
    kind = "cross" if adapter.architecture == "encoder-decoder" else "self"
    names = {id(m): n for n, m in modules.items()}
    blocks = [n for n in modules if n.startswith("decoder.") and n.endswith(kind)]
    return HFStepper(hf_model, input_ids, block_names=names, attention_blocks=blocks, **options)
