"""Backend for our own Transformer checkpoints (checkpoints/<name>/)."""

from __future__ import annotations

from pathlib import Path

import torch

from viz_core.i18n import N_, Message

from ..capture.device import pick_device, pick_dtype
from ..capture.recorder import Recorder, last_query_pattern, recording
from ..capture.trace import AttentionTrace, to_numpy
from ..decoding.greedy import greedy_batch
from ..errors import InputError
from ..model.checkpoint import load_checkpoint
from ..model.choices import NormPlacement, PositionalKind
from ..model.tokenizer import BOS, EOS, Vocab
from ..model.transformer import DecoderCache, Transformer
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
)
from .typed import check_count, check_text_or_none, check_texts

# New tokens a decoder-only model generates when the caller leaves it to the model (the
# shipped lm toys stop earlier anyway: max_len 32)
DEFAULT_NEW_TOKENS = 32


class NativeModel(Backend):
    family = "native"

    def __init__(self, model: Transformer, vocabs: dict[str, Vocab], card: dict | None = None,
                 name: str = "", path: str | Path | None = None):
        super().__init__()
        self.model = model.eval()
        self.cfg = model.cfg
        self.architecture = self.cfg.kind
        self.src_vocab = vocabs.get("source")
        self.tgt_vocab = vocabs.get("target")
        self.card = dict(card or {})
        self.name = name or self.card.get("name", "")
        self.path = None if path is None else str(path)
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self._n_params = sum(p.numel() for p in model.parameters())  # info() on every trace
        self._heads = {name: self.cfg.n_heads for name, _, _ in
                       block_layout(self.architecture, self.cfg.n_layers,
                                    self.cfg.n_decoder_layers, [], [])}

    @classmethod
    def from_dir(cls, path: str | Path, device="auto", name: str = "",
                 dtype="auto") -> NativeModel:
        dev = pick_device(device)
        model, vocabs, card = load_checkpoint(path, dev)
        model.to(pick_dtype(dtype, dev))
        return cls(model, vocabs, card, name=name or Path(path).name, path=path)

    @property
    def max_tokens(self) -> int:
        return self.cfg.max_len

    @property
    def positional_kind(self) -> PositionalKind:
        return self.cfg.positional_kind  # "rotary" for positional="rope"

    @property
    def kv_heads(self) -> int:
        return self.cfg.kv_heads

    @property
    def norm_placement(self) -> NormPlacement:
        return "pre" if self.cfg.norm_first else "post"

    def count_tokens(self, text: str) -> int:
        vocab = self.src_vocab if self.cfg.has_encoder else self.tgt_vocab
        ids, _, _ = self.encode_text(vocab, text, self.cfg.max_len - 1, [], "input")
        return len(ids)

    def output_projection(self, block: str):
        stack, layer, kind = block.split(".")
        layers = self.model.encoder if stack == "encoder" else self.model.decoder
        attn = layers[int(layer)].cross_attn if kind == "cross" else layers[int(layer)].self_attn
        return attn.W_O.weight, attn.W_O.bias  # (d_model, heads * d_k), (d_model,)

    # contribution analysis: the linear pieces (viz_core.backends.native_parts)
    def final_norm(self, stack: str = "decoder"):
        from . import native_parts

        decoder = self.cfg.has_decoder and stack != "encoder"
        return native_parts.norm_spec(self.model.decoder_norm if decoder
                                      else self.model.encoder_norm)

    def unembedding(self):
        if not self.cfg.has_decoder:
            raise InputError(N_("This model has no decoder: it has no unembedding."))
        return self.model.generator.weight, self.model.generator.bias

    def position_rows(self, n: int):
        return self.model.positional_table(n)

    def head_weights(self, block: str):
        from . import native_parts

        return native_parts.head_weights(self, block)

    def token_id(self, token, what: str = N_("token")) -> int:
        from . import native_parts

        return native_parts.token_id(self, token, what)

    def token_strings(self, ids) -> list[str]:
        from . import native_parts

        return native_parts.token_strings(self, ids)

    def info(self) -> dict:
        # layers: the encoder's, or the one stack's (a decoder-only model's, as the HF backend
        # counts them); decoder_layers: the decoder's
        return {**super().info(), "layers": self.cfg.n_layers or self.cfg.n_decoder_layers,
                "decoder_layers": self.cfg.n_decoder_layers, "heads": self.cfg.n_heads,
                "kv_heads": self.cfg.kv_heads, "d_model": self.cfg.d_model,
                "d_ff": self.cfg.d_ff, "norm_placement": self.norm_placement,
                "parameters": self._n_params, "positional": self.cfg.positional,
                "positional_kind": self.positional_kind, "norm": self.cfg.norm,
                **({"rope_base": float(self.cfg.rope_base)} if self.cfg.positional == "rope"
                   else {}),
                "dtype": str(self.dtype).removeprefix("torch."), "max_tokens": self.max_tokens}

    def _positional(self, n: int):
        """(this input's rows of the added table or None, a note for RoPE or "")."""
        table = self.model.positional_table(n)
        if table is None:
            return None, Message(N_("rotary position embeddings (RoPE): q and k of every "
                                    "self-attention rotated by position, base {base:g}; nothing "
                                    "is added to the embeddings"), base=float(self.cfg.rope_base))
        return to_numpy(table), ""

    def special_token_mask(self, token_ids: list[int]) -> list[bool]:
        special = {self.cfg.pad_id, self.cfg.bos_id, self.cfg.eos_id}
        return [int(i) in special for i in token_ids]

    # ---- tokenisation -------------------------------------------------------------------
    def encode_text(self, vocab: Vocab, text: str, room: int, warnings: list[str], what: str):
        """(ids, shown tokens, unknown words), cut to ``room`` tokens with a warning."""
        if not isinstance(text, str) or not text.strip():
            raise InputError(N_("The {what} is empty: type some text."), what=what)
        ids, shown, unknown = vocab.encode(text)
        if not ids:
            raise InputError(N_("The {what} has no tokens this model can read."), what=what)
        if len(ids) > room:
            warnings.append(Message(N_("The {what} has {n_ids} tokens; only the first {room} fit this "
                              "model (max_len {max_len}), the rest was cut."),
                                what=what, n_ids=len(ids), room=room, max_len=self.cfg.max_len))
            ids, shown = ids[:room], shown[:room]
        return ids, [vocab.display(t) for t in shown], unknown

    def _tensor(self, ids: list[int]) -> torch.Tensor:
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    def _shown(self, vocab: Vocab, ids) -> list[str]:
        return [vocab.display(vocab.tokens[int(i)]) for i in ids]

    # ---- decoding -----------------------------------------------------------------------
    def make_stepper(self, source: str, prefix: str | None, *, beams: int = 1,
                     max_new: int = 32, length_penalty: float = 1.0, early_stopping=False,
                     ablate: dict | None = None, warnings: list[str] | None = None):
        return NativeStepper(self, source, prefix, check_ablation(ablate, self._heads),
                             warnings if warnings is not None else [])

    # ---- trace --------------------------------------------------------------------------
    @torch.inference_mode()
    def trace(self, source: str, target: str | None = None, *, capture=CAPTURE_ALL,
              blocks=None, ablate: dict | None = None, max_new: int | None = None,
              permute=None, positions: bool = True) -> AttentionTrace:
        """Run the model once and return a fresh, lazy AttentionTrace.

        capture: what to keep besides q and k ("v", "z", "stream"; patterns and scores need
        only q, k);
        blocks: predicate or list of block names/kinds to capture (None = all);
        ablate: {"encoder.0.self": [heads]} heads whose output is zeroed in this call;
        max_new: greedy tokens to generate when there is no target;
        permute: a new order of the input's (or prompt's) tokens, a permutation of 0..n-1
        (``trace.source_order`` then maps each position to its original one);
        positions: False runs the model with no position information (no table, no
        rotation), generation included.
        """
        cfg, warnings = self.cfg, []
        check_text_or_none(target, N_("target"))
        max_new = check_count(max_new, N_("max_new"))
        spec = check_ablation(ablate, self._heads)
        src, src_tokens, unknown = None, [], []
        order = None

        def reorder(ids, shown):
            nonlocal order
            if permute is None:
                return ids, shown
            ids, order = permuted(ids, permute)
            return ids, [shown[i] for i in order]

        if cfg.has_encoder:
            ids, src_tokens, unknown = self.encode_text(self.src_vocab, source,
                                                        cfg.max_len - 1, warnings, "input")
            ids, src_tokens = reorder(ids, src_tokens)
            src_tokens = src_tokens + [EOS]
            src = self._tensor(ids + [cfg.eos_id])
            if order is not None:
                order = order + [len(order)]  # </s> stays last
        if not cfg.has_decoder:
            _, rec = record(lambda: self.model.encode(src), blocks=blocks, capture=capture,
                            ablate=spec, positions=positions)
            return self._finish(rec, src_tokens, [], [], "", unknown, warnings, source, target,
                                order)

        # decoder input: <bos> + (prompt) + target-or-greedy-output
        prefix = [cfg.bos_id]
        if cfg.kind == "decoder-only":
            ids, src_tokens, unknown = self.encode_text(self.tgt_vocab, source,
                                                        cfg.max_len - 1, warnings, "prompt")
            ids, src_tokens = reorder(ids, src_tokens)
            if order is not None:
                order = [0] + [1 + o for o in order]  # <bos> stays first
            prefix += ids
        room = cfg.max_len - len(prefix)
        if target is not None and target.strip():
            t_ids, _, t_unknown = self.encode_text(self.tgt_vocab, target, room, warnings,
                                                   "target")
            unknown += [w for w in t_unknown if w not in unknown]
            generated, forced = t_ids, True
        else:
            budget = room if max_new is None else min(room, max_new)
            if cfg.kind == "encoder-decoder" and max_new is None:
                budget = min(room, 2 * src.shape[1] + 10)
            elif max_new is None:  # a long-context model (induction) would go on for pages
                budget = min(room, DEFAULT_NEW_TOKENS)
            generated = []
            if budget > 0:  # ablation and positions apply here too
                with recording(Recorder(ablate=spec or {}, positions=positions)):
                    generated = greedy_batch(self.model, None if src is None else
                                             [src[0].tolist()], [prefix], budget)[0]
            forced = False
        dec_in = (prefix + [t for t in generated if t != cfg.eos_id])[: cfg.max_len]
        dec_tokens = self._shown(self.tgt_vocab, dec_in)
        dec_tokens[0] = BOS

        def run():
            memory = self.model.encode(src) if src is not None else None
            return self.model.decode(self._tensor(dec_in), memory, src)

        logits, rec = record(run, blocks=blocks, capture=capture, ablate=spec,
                             positions=positions)
        predicted = logits[0].argmax(-1).tolist()
        if order is not None and cfg.kind == "decoder-only":
            order = order + list(range(len(order), len(dec_in)))  # generated: unmoved
        out_ids = generated if not forced else predicted
        output_tokens = self._shown(self.tgt_vocab, predicted)
        output_text = self.tgt_vocab.decode(out_ids)
        if cfg.kind == "decoder-only" and not forced:
            output_text = self.tgt_vocab.decode(generated)
        return self._finish(rec, src_tokens, dec_tokens, output_tokens, output_text, unknown,
                            warnings, source, target, order)

    def _finish(self, rec, src_tokens, dec_tokens, output_tokens, output_text, unknown,
                warnings, source, target, order=None) -> AttentionTrace:
        cfg = self.cfg
        layout = block_layout(self.architecture, cfg.n_layers, cfg.n_decoder_layers,
                              src_tokens, dec_tokens)
        positional, note = self._positional(max(len(src_tokens), len(dec_tokens)))
        trace = AttentionTrace(
            block_traces=blocks_from_records(rec, layout),
            positional=positional, positional_note=note,
            source_tokens=src_tokens, target_tokens=dec_tokens, output_tokens=output_tokens,
            output_text=output_text, positional_kind=self.positional_kind,
            unknown_words=unknown, warnings=warnings, model_info=self.info(),
            stream=stream_from_records(rec), source_order=order)
        return self._stamp(trace, source, target)

    @torch.inference_mode()
    def _reference_outputs(self, source, target, max_tokens=None):
        """Teacher-forced logits (encoder states for encoder-only) with the SDPA kernel,
        against the written-out formula softmax(QK^T/sqrt(d_k))V in every block."""
        cfg, warnings = self.cfg, []
        room = min(cfg.max_len - 1, max_tokens or cfg.max_len)
        src = dec = None
        if cfg.has_encoder:
            ids, _, _ = self.encode_text(self.src_vocab, source, room, warnings, "input")
            src = self._tensor(ids + [cfg.eos_id])
        if cfg.has_decoder:
            text = source if cfg.kind == "decoder-only" else (target or source)
            vocab = self.tgt_vocab
            ids, _, _ = self.encode_text(vocab, text, room, warnings, "input")
            dec = self._tensor([cfg.bos_id] + ids)
        traced, _ = record(lambda: self.model(src, dec))
        reference, _ = record(lambda: self.model(src, dec), capture=(), reference="explicit")
        n = (0 if src is None else src.shape[1]) + (0 if dec is None else dec.shape[1])
        return traced, reference, n

    @torch.inference_mode()
    def trace_batch(self, sources: list[str], targets: list[str] | None = None, *,
                    capture=("pattern", "scores"), blocks=None, ablate: dict | None = None
                    ) -> list[AttentionTrace]:
        """Trace several inputs in one right-padded batch (teacher-forced, no generation).

        Each trace keeps the padded length: <pad> appears on both axes, the pad key columns
        are True in ``mask`` and receive exactly zero attention. Encoder-decoder models need
        one target per source (e.g. each input's own greedy output).
        """
        cfg = self.cfg
        check_texts(sources, N_("inputs"))
        check_texts(targets, N_("targets"), optional=True)
        if not sources:
            raise InputError(N_("No inputs given."))
        if cfg.kind == "encoder-decoder" and (targets is None or len(targets) != len(sources)):
            raise InputError(N_("An encoder-decoder batch needs one target per input."))
        spec = check_ablation(ablate, self._heads)
        warnings: list[list[str]] = [[] for _ in sources]
        unknown: list[list[str]] = [[] for _ in sources]
        src = dec = None
        if cfg.has_encoder:
            rows = []
            for i, text in enumerate(sources):
                ids, _, unknown[i] = self.encode_text(self.src_vocab, text, cfg.max_len - 1,
                                                      warnings[i], "input")
                rows.append(ids + [cfg.eos_id])
            src = right_pad(rows, cfg.pad_id, self.device)[0]
        if cfg.has_decoder:
            texts = targets if cfg.kind == "encoder-decoder" else sources
            what = N_("target") if cfg.kind == "encoder-decoder" else N_("prompt")
            rows = []
            for i, text in enumerate(texts):
                ids, _, unk = self.encode_text(self.tgt_vocab, text, cfg.max_len - 1,
                                               warnings[i], what)
                unknown[i] += [w for w in unk if w not in unknown[i]]
                rows.append([cfg.bos_id] + ids)
            dec = right_pad(rows, cfg.pad_id, self.device)[0]
        _, rec = record(lambda: self.model(src, dec), blocks=blocks, capture=capture,
                        ablate=spec)
        traces = []
        for i in range(len(sources)):
            s_tok = self._shown(self.src_vocab, src[i]) if src is not None else []
            d_tok = self._shown(self.tgt_vocab, dec[i]) if dec is not None else []
            layout = block_layout(self.architecture, cfg.n_layers, cfg.n_decoder_layers,
                                  s_tok, d_tok)
            positional, note = self._positional(max(len(s_tok), len(d_tok)))
            traces.append(AttentionTrace(
                block_traces=blocks_from_records(rec, layout, i),
                positional=positional, positional_note=note,
                source_tokens=s_tok if cfg.has_encoder else d_tok[1:], target_tokens=d_tok,
                positional_kind=self.positional_kind, unknown_words=unknown[i],
                warnings=warnings[i], model_info=self.info(),
                stream=stream_from_records(rec, i)))
            self.device_budget.admit(traces[-1])
        return traces


class NativeStepper:
    """One search over our own Transformer: encoder once, a DecoderCache, and the attention
    of the newest position read from the recorded q and k (viz_core.decoding.Stepper)."""

    def __init__(self, backend: NativeModel, source: str, prefix_text: str | None,
                 ablate: dict[str, list[int]] | None, warnings: list[str]):
        cfg = backend.cfg
        self.model = backend.model
        self.vocab = backend.tgt_vocab
        self.device = backend.device
        self.eos_ids = (cfg.eos_id,)
        self.special_ids = {cfg.pad_id, cfg.bos_id, cfg.eos_id}
        self.processors: list[str] = []
        self.ablate = ablate or {}
        self.src = None
        if cfg.kind == "encoder-decoder":
            ids, shown, _ = backend.encode_text(backend.src_vocab, source, cfg.max_len - 1,
                                                warnings, "input")
            self.source_tokens = shown + [EOS]
            self.src = backend._tensor(ids + [cfg.eos_id])  # (1, S)
            self.start_ids = [cfg.bos_id]
            self.attention_kind = "cross"
            self.attention_keys = list(self.source_tokens)
            self.root_token = BOS
        elif cfg.kind == "decoder-only":
            ids, shown, _ = backend.encode_text(self.vocab, source, cfg.max_len - 1, warnings,
                                                "prompt")
            self.source_tokens = shown
            self.start_ids = [cfg.bos_id] + ids
            self.attention_kind = "self"
            self.attention_keys = [BOS] + shown
            self.root_token = " ".join(shown)
        else:
            raise InputError(N_("This model has no decoder: it cannot generate text."))
        self.room = cfg.max_len - len(self.start_ids)
        self.prefix_ids: list[int] = []
        if prefix_text is not None and prefix_text.strip():
            self.prefix_ids, _, _ = self.vocab.encode(prefix_text)
        self.names = [f"decoder.{i}.{self.attention_kind}" for i in range(cfg.n_decoder_layers)]

    @torch.inference_mode()
    def start(self, beams: int) -> dict:
        memory = src = None
        if self.src is not None:
            with recording(Recorder(ablate=self.ablate)):
                memory = self.model.encode(self.src)  # (1, S, d)
            memory = memory.expand(beams, -1, -1)  # (B, S, d): one encoder pass for all beams
            src = self.src.expand(beams, -1)
        return {"cache": DecoderCache(), "memory": memory, "src": src, "fed": 0}

    @torch.inference_mode()
    def step(self, state: dict, seqs: torch.Tensor):
        new = seqs[:, state["fed"]:]  # (B, T_new)
        wanted = set(self.names)
        rec = Recorder(keep=lambda name: name in wanted, ablate=self.ablate)
        with recording(rec):
            logits = self.model.decode(new, state["memory"], state["src"], state["cache"])
        logprobs = torch.log_softmax(logits[:, -1].float(), dim=-1)  # (B, V)
        attention = torch.stack([last_query_pattern(rec.records[n][-1])  # (B, layers, H, keys)
                                 for n in self.names], dim=1)
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
