"""Backend for our own Transformer checkpoints (checkpoints/<name>/)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..device import pick_device
from ..errors import InputError
from ..model.checkpoint import load_checkpoint
from ..model.hooks import Hooks, ablate_heads
from ..model.masks import causal_mask
from ..model.transformer import DecoderCache, Transformer
from ..tokenizer import BOS, EOS, Vocab
from ..trace import AttentionTrace
from .base import Backend, block_filter, blocks_from_cache, to_numpy

CAPTURE_ALL = ("q", "k", "v", "scores", "pattern", "z")


class NativeModel(Backend):
    family = "native"

    def __init__(self, model: Transformer, vocabs: dict[str, Vocab], card: dict | None = None,
                 name: str = "", path: str | Path | None = None):
        self.model = model.eval()
        self.cfg = model.cfg
        self.kind = self.cfg.kind
        self.src_vocab = vocabs.get("source")
        self.tgt_vocab = vocabs.get("target")
        self.card = dict(card or {})
        self.name = name or self.card.get("name", "")
        self.path = None if path is None else str(path)
        self.device = next(model.parameters()).device
        self._n_params = sum(p.numel() for p in model.parameters())  # info() on every trace

    @classmethod
    def from_dir(cls, path: str | Path, device="auto", name: str = "") -> NativeModel:
        model, vocabs, card = load_checkpoint(path, pick_device(device))
        return cls(model, vocabs, card, name=name or Path(path).name, path=path)

    @property
    def max_tokens(self) -> int:
        return self.cfg.max_len

    def info(self) -> dict:
        n_params = self._n_params
        return {**super().info(), "layers": self.cfg.n_layers, "decoder_layers":
                self.cfg.n_decoder_layers, "heads": self.cfg.n_heads, "d_model":
                self.cfg.d_model, "parameters": n_params, "positional": self.cfg.positional}

    # ---- tokenisation -------------------------------------------------------------------
    def _encode(self, vocab: Vocab, text: str, room: int, warnings: list[str], what: str):
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"The {what} is empty: type some text.")
        ids, shown, unknown = vocab.encode(text)
        if not ids:
            raise InputError(f"The {what} has no tokens this model can read.")
        if len(ids) > room:
            warnings.append(f"The {what} has {len(ids)} tokens; only the first {room} fit "
                            f"this model (max_len {self.cfg.max_len}), the rest was cut.")
            ids, shown = ids[:room], shown[:room]
        return ids, [vocab.display(t) for t in shown], unknown

    def _tensor(self, ids: list[int]) -> torch.Tensor:
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    # ---- decoding -----------------------------------------------------------------------
    @torch.inference_mode()
    def _greedy(self, src: torch.Tensor | None, prefix: list[int], max_new: int,
                hooks: Hooks | None) -> list[int]:
        """Greedy continuation after prefix (which starts with <bos>), using a KV cache."""
        memory = self.model.encode(src, hooks) if src is not None else None
        cache, out = DecoderCache(), []
        step_in = self._tensor(prefix)
        for _ in range(max_new):
            logits = self.model.decode(step_in, memory, src, hooks, cache)
            nxt = int(logits[0, -1].argmax())
            out.append(nxt)
            if nxt == self.cfg.eos_id or len(prefix) + len(out) >= self.cfg.max_len:
                break
            step_in = self._tensor([nxt])
        return out

    def greedy(self, source: str, max_new: int | None = None) -> str:
        return self.trace(source, capture=("pattern",)).output_text

    # ---- trace --------------------------------------------------------------------------
    @torch.inference_mode()
    def trace(self, source: str, target: str | None = None, *, capture=CAPTURE_ALL,
              blocks=None, ablate: dict | None = None, max_new: int | None = None
              ) -> AttentionTrace:
        """Run the model once with hooks and return a fresh AttentionTrace.

        capture: hook points to keep (drop "q", "k", "v", "z", "scores" for long inputs);
        blocks: predicate or list of block names/kinds to capture (None = all);
        ablate: {"encoder.0.self": [heads]} heads whose output is zeroed in this call.
        """
        cfg, warnings = self.cfg, []
        interventions = ablate_heads(ablate or {})
        run_hooks = Hooks(capture, block_filter(blocks), interventions)
        gen_hooks = Hooks((), None, interventions) if interventions else None
        src = None
        src_tokens: list[str] = []
        unknown: list[str] = []
        names: list[str] = []
        masks: dict[str, np.ndarray] = {}
        tok: dict[str, tuple[list[str], list[str]]] = {}

        if cfg.has_encoder:
            ids, src_tokens, unknown = self._encode(self.src_vocab, source, cfg.max_len - 1,
                                                    warnings, "input")
            src_tokens = src_tokens + [EOS]
            src = self._tensor(ids + [cfg.eos_id])
            for i in range(cfg.n_layers):
                names.append(f"encoder.{i}.self")
                masks[names[-1]] = np.zeros((len(src_tokens),) * 2, dtype=bool)
                tok[names[-1]] = (src_tokens, src_tokens)
        if not cfg.has_decoder:
            self.model.encode(src, run_hooks)
            return self._finish(run_hooks, names, masks, tok, src_tokens, [], [], "", unknown,
                                warnings)

        # decoder input: <bos> + (prompt) + target-or-greedy-output
        prefix = [cfg.bos_id]
        if cfg.kind == "decoder-only":
            ids, src_tokens, unknown = self._encode(self.tgt_vocab, source, cfg.max_len - 1,
                                                    warnings, "prompt")
            prefix += ids
        room = cfg.max_len - len(prefix)
        if target is not None and target.strip():
            t_ids, _, t_unknown = self._encode(self.tgt_vocab, target, room, warnings, "target")
            unknown += [w for w in t_unknown if w not in unknown]
            generated, forced = t_ids, True
        else:
            budget = room if max_new is None else min(room, max_new)
            if cfg.kind == "encoder-decoder" and max_new is None:
                budget = min(room, 2 * src.shape[1] + 10)
            generated = self._greedy(src, prefix, budget, gen_hooks) if budget > 0 else []
            forced = False
        dec_in = prefix + [t for t in generated if t != cfg.eos_id]
        dec_in = dec_in[: cfg.max_len]
        dec_tokens = [self.tgt_vocab.display(self.tgt_vocab.tokens[i]) for i in dec_in]
        dec_tokens[0] = BOS

        memory = self.model.encode(src, run_hooks) if src is not None else None
        logits = self.model.decode(self._tensor(dec_in), memory, src, run_hooks)
        predicted = logits[0].argmax(-1).tolist()
        T = len(dec_in)
        causal = causal_mask(T).numpy()
        for i in range(cfg.n_decoder_layers):
            names.append(f"decoder.{i}.self")
            masks[names[-1]], tok[names[-1]] = causal, (dec_tokens, dec_tokens)
            if cfg.kind == "encoder-decoder":
                names.append(f"decoder.{i}.cross")
                masks[names[-1]] = np.zeros((T, len(src_tokens)), dtype=bool)
                tok[names[-1]] = (dec_tokens, src_tokens)
        out_ids = generated if not forced else predicted
        output_tokens = [self.tgt_vocab.display(self.tgt_vocab.tokens[i]) for i in predicted]
        output_text = self.tgt_vocab.decode(out_ids)
        if cfg.kind == "decoder-only" and not forced:
            output_text = self.tgt_vocab.decode(generated)
        return self._finish(run_hooks, names, masks, tok, src_tokens, dec_tokens, output_tokens,
                            output_text, unknown, warnings)

    def _finish(self, hooks, names, masks, tok, src_tokens, dec_tokens, output_tokens,
                output_text, unknown, warnings) -> AttentionTrace:
        n_pos = max(len(src_tokens), len(dec_tokens))
        return AttentionTrace(
            block_traces=blocks_from_cache(hooks.cache, names, masks, tok),
            positional=to_numpy(self.model.positions.table[:n_pos]),
            source_tokens=src_tokens, target_tokens=dec_tokens, output_tokens=output_tokens,
            output_text=output_text, positional_kind=self.cfg.positional,
            unknown_words=unknown, warnings=warnings, model_info=self.info())

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
        if not sources:
            raise InputError("No inputs given.")
        if cfg.kind == "encoder-decoder" and (targets is None or len(targets) != len(sources)):
            raise InputError("An encoder-decoder batch needs one target per input.")
        warnings: list[list[str]] = [[] for _ in sources]
        unknown: list[list[str]] = [[] for _ in sources]

        def pad(rows: list[list[int]]) -> torch.Tensor:
            width = max(len(r) for r in rows)
            return torch.tensor([r + [cfg.pad_id] * (width - len(r)) for r in rows],
                                dtype=torch.long, device=self.device)

        src = dec = None
        if cfg.has_encoder:
            rows = []
            for i, text in enumerate(sources):
                ids, _, unknown[i] = self._encode(self.src_vocab, text, cfg.max_len - 1,
                                                  warnings[i], "input")
                rows.append(ids + [cfg.eos_id])
            src = pad(rows)
        if cfg.has_decoder:
            texts = targets if cfg.kind == "encoder-decoder" else sources
            what = "target" if cfg.kind == "encoder-decoder" else "prompt"
            rows = []
            for i, text in enumerate(texts):
                ids, _, unk = self._encode(self.tgt_vocab, text, cfg.max_len - 1, warnings[i],
                                           what)
                unknown[i] += [w for w in unk if w not in unknown[i]]
                rows.append([cfg.bos_id] + ids)
            dec = pad(rows)
        hooks = Hooks(capture, block_filter(blocks), ablate_heads(ablate or {}))
        self.model(src, dec, hooks)

        def shown(vocab: Vocab, ids: torch.Tensor) -> list[str]:
            return [vocab.display(vocab.tokens[i]) for i in ids.tolist()]

        traces = []
        for i in range(len(sources)):
            names, masks, tok = [], {}, {}
            s_tok = shown(self.src_vocab, src[i]) if src is not None else []
            d_tok = shown(self.tgt_vocab, dec[i]) if dec is not None else []
            s_pad = (src[i] == cfg.pad_id).cpu().numpy() if src is not None else None
            d_pad = (dec[i] == cfg.pad_id).cpu().numpy() if dec is not None else None
            for j in range(cfg.n_layers if cfg.has_encoder else 0):
                names.append(f"encoder.{j}.self")
                masks[names[-1]] = np.broadcast_to(s_pad, (len(s_tok), len(s_tok))).copy()
                tok[names[-1]] = (s_tok, s_tok)
            for j in range(cfg.n_decoder_layers if cfg.has_decoder else 0):
                names.append(f"decoder.{j}.self")
                masks[names[-1]] = causal_mask(len(d_tok)).numpy() | d_pad[None, :]
                tok[names[-1]] = (d_tok, d_tok)
                if cfg.kind == "encoder-decoder":
                    names.append(f"decoder.{j}.cross")
                    masks[names[-1]] = np.broadcast_to(s_pad, (len(d_tok), len(s_tok))).copy()
                    tok[names[-1]] = (d_tok, s_tok)
            one = {k: v[i:i + 1] for k, v in hooks.cache.items()}
            traces.append(AttentionTrace(
                block_traces=blocks_from_cache(one, names, masks, tok),
                positional=to_numpy(self.model.positions.table[:max(len(s_tok), len(d_tok))]),
                source_tokens=s_tok if cfg.has_encoder else d_tok[1:], target_tokens=d_tok,
                positional_kind=cfg.positional, unknown_words=unknown[i],
                warnings=warnings[i], model_info=self.info()))
        return traces

    def beam_search(self, source: str, beam_size: int = 4, max_len: int = 32, **options):
        from ..decoding import beam_search

        return beam_search(self, source, beam_size=beam_size, max_len=max_len, **options)
