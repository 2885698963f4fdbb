"""Patching subjects: one (clean, corrupted) pair on one backend, ready for
viz_core.analysis.patching (tokenisation, the same-length check, how to run n copies).

What each architecture patches and reads:

- decoder-only: the prompt (plus ``target``, teacher-forced, appended to both inputs); the
  metric reads the logits at ``position`` of that sequence (-1 = the last token's prediction);
- encoder-decoder: the source is clean or corrupted; the decoder input is the same for both,
  ``target`` teacher-forced, or the clean input's greedy output when no target is given; the
  metric reads the decoder's logits at ``position``;
- encoder-only (no output head): the metric is the cosine of the pooled sentence embedding
  (the mean of the last hidden state over the non-special tokens, as sentence-transformers
  pools MiniLM) to the clean run's.
"""

from __future__ import annotations

import inspect

import torch

from viz_core.i18n import N_

from ..analysis.patching import PatchSubject, check_same_length, normalise_position
from ..errors import InputError
from ..model.tokenizer import BOS, EOS
from . import hf_parts, native_parts
from .typed import check_text_or_none


def subject_for(backend, clean: str, corrupted: str, target: str | None = None,
                position: int = -1) -> PatchSubject:
    for text, what in ((clean, N_("clean text")), (corrupted, N_("corrupted text"))):
        if not isinstance(text, str) or not text.strip():
            raise InputError(N_("The {what} is empty: type some text."), what=what)
    check_text_or_none(target, N_("target"))
    # told apart by what they hold (importing their classes here would close an import circle)
    if getattr(backend, "hf_model", None) is not None:
        return _hf(backend, clean, corrupted, target, position)
    if getattr(backend, "family", None) == "native":
        return _native(backend, clean, corrupted, target, position)
    raise InputError(N_("Patching is not available for {name} models."), name=type(backend).__name__)


def _width(n_tokens: int, d_model: int, d_ff: int, heads: int, vocab_rows: int) -> int:
    """Rough floats of activation one patched copy holds at its peak (chunking)."""
    return n_tokens * (8 * d_model + 2 * d_ff + 2 * heads * n_tokens) + vocab_rows


def _pool(hidden: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean over the kept (non-special) tokens: (n, T, d), (T,) bool -> (n, d)."""
    w = keep.to(hidden.dtype)[None, :, None]
    return (hidden * w).sum(1) / w.sum(1).clamp(min=1)


# ---- our own models ----------------------------------------------------------------------
def _native(backend, clean, corrupted, target, position) -> PatchSubject:
    cfg, model, warnings = backend.cfg, backend.model, []
    src_c = src_k = None
    room = cfg.max_len - 1
    src_tokens: list[str] = []
    if cfg.has_encoder:
        c_ids, c_tok, _ = backend.encode_text(backend.src_vocab, clean, room, warnings,
                                              N_("clean text"))
        k_ids, k_tok, _ = backend.encode_text(backend.src_vocab, corrupted, room, warnings,
                                              N_("corrupted text"))
        check_same_length(c_ids, k_ids, c_tok, k_tok)
        src_c, src_k = c_ids + [cfg.eos_id], k_ids + [cfg.eos_id]
        src_tokens, shown = c_tok + [EOS], (c_tok, k_tok)
    dec_c = dec_k = None
    if cfg.kind == "decoder-only":
        c_ids, c_tok, _ = backend.encode_text(backend.tgt_vocab, clean, room, warnings,
                                              N_("clean text"))
        k_ids, k_tok, _ = backend.encode_text(backend.tgt_vocab, corrupted, room, warnings,
                                              N_("corrupted text"))
        check_same_length(c_ids, k_ids, c_tok, k_tok)
        t_ids = _native_target(backend, target, room - len(c_ids), warnings)
        dec_c = ([cfg.bos_id] + c_ids + t_ids)[: cfg.max_len]
        dec_k = ([cfg.bos_id] + k_ids + t_ids)[: cfg.max_len]
        shown = (c_tok, k_tok)
    elif cfg.kind == "encoder-decoder":
        t_ids = _native_target(backend, target, room, warnings)
        if target is None or not target.strip():
            from ..capture.recorder import Recorder, recording
            from ..decoding.greedy import greedy_batch

            with torch.inference_mode(), recording(Recorder()):
                t_ids = greedy_batch(model, [src_c], [[cfg.bos_id]],
                                     min(room, 2 * len(src_c) + 10))[0]
        dec_c = dec_k = [cfg.bos_id] + t_ids[: room]
    dev = backend.device

    def tensor(ids):
        return None if ids is None else torch.tensor([ids], dtype=torch.long, device=dev)

    inputs = {"clean": (tensor(src_c), tensor(dec_c)), "corrupted": (tensor(src_k), tensor(dec_k))}
    readout = "logits" if cfg.has_decoder else "embedding"
    dec_tokens = [] if dec_c is None else [BOS] + backend._shown(backend.tgt_vocab, dec_c[1:])
    seq = dec_tokens if cfg.has_decoder else src_tokens
    pos = normalise_position(position, len(seq), "decoder input" if cfg.kind ==
                             "encoder-decoder" else "input")
    special = {cfg.pad_id, cfg.bos_id, cfg.eos_id}
    keep = None if src_c is None else torch.tensor([i not in special for i in src_c],
                                                   device=dev)

    def run(which: str, n: int) -> torch.Tensor:
        src, dec = inputs[which]
        src = None if src is None else src.expand(n, -1)
        dec = None if dec is None else dec.expand(n, -1)
        out = model(src, dec)
        if readout == "embedding":
            return _pool(out.float(), keep)
        return out[:, pos].float()  # (n, vocab)

    vocab = backend.tgt_vocab if cfg.has_decoder else backend.src_vocab
    layers = {}
    layer_tokens = {}
    if cfg.has_encoder:
        for i in range(cfg.n_layers):
            layers[f"encoder.{i}"] = len(src_c)
            layer_tokens[f"encoder.{i}"] = src_tokens
    if cfg.has_decoder:
        for i in range(cfg.n_decoder_layers):
            layers[f"decoder.{i}"] = len(dec_c)
            layer_tokens[f"decoder.{i}"] = dec_tokens
    longest = max(layers.values())
    return PatchSubject(
        clean_tokens=list(shown[0]), corrupted_tokens=list(shown[1]), blocks=dict(backend._heads),
        layers=layers, run=run, readout=readout, position=pos, position_tokens=seq,
        token_id=lambda text, what: native_parts.token_id(backend, text, what, vocab),
        token_label=lambda i: vocab.display(vocab.tokens[int(i)]),
        width_per_copy=_width(longest, cfg.d_model, cfg.d_ff, cfg.n_heads,
                              len(vocab) * longest),
        layer_tokens=layer_tokens, warnings=warnings,
        share_prefix=cfg.kind != "encoder-decoder")


def _native_target(backend, target, room: int, warnings) -> list[int]:
    if target is None or not target.strip():
        return []
    ids, _, _ = backend.encode_text(backend.tgt_vocab, target, max(room, 1), warnings,
                                    "target")
    return ids


# ---- Hugging Face models -------------------------------------------------------------------
def _hf(backend, clean, corrupted, target, position) -> PatchSubject:
    arch, warnings = backend.architecture, []
    room = backend.max_tokens
    enc_c = backend.encode_text(clean, N_("clean text"), room, warnings)
    enc_k = backend.encode_text(corrupted, N_("corrupted text"), room, warnings)
    c_ids = list(enc_c["input_ids"])
    c_tok = backend.shown_tokens(c_ids)
    k_tok = backend.shown_tokens(enc_k["input_ids"])
    check_same_length(enc_c["input_ids"], enc_k["input_ids"], c_tok, k_tok)
    forced = target is not None and bool(target.strip())
    decs = None
    if arch == "decoder-only" and forced:
        t = backend.encode_text(target, "target", max(room - len(enc_c["input_ids"]), 1),
                                warnings, special=False)["input_ids"]
        for enc in (enc_c, enc_k):
            enc["input_ids"] = (enc["input_ids"] + t)[:room]
            enc["special"], enc["token_type_ids"] = None, None
    elif arch == "encoder-decoder":
        start = int(backend.hf_model.config.decoder_start_token_id)
        dec_room = backend.adapter.max_positions(backend.hf_model) or room
        if forced:
            t = backend.encode_text(target, "target", dec_room, warnings)["input_ids"]
            if t and t[-1] == backend.eos_id:
                t = t[:-1]  # the decoder reads <start> y1..yn; eos is only predicted
            dec = ([start] + t)[:dec_room]
        else:
            budget = min(dec_room - 1, 2 * len(enc_c["input_ids"]) + 10)
            with torch.inference_mode():
                dec = backend._cut_at_eos(backend.greedy_ids(enc_c["input_ids"],
                                                            max(budget, 1)), 1)
        decs = [dec]
    kw = {"clean": backend._inputs([enc_c], decs), "corrupted": backend._inputs([enc_k], decs)}
    seq_ids = decs[0] if decs else enc_c["input_ids"]
    seq = list(c_tok) if list(seq_ids) == c_ids else backend.shown_tokens(seq_ids)
    pos = normalise_position(position, len(seq), "decoder input" if arch == "encoder-decoder"
                             else "input")
    model = backend.hf_model
    readout = "embedding" if arch == "encoder-only" else "logits"
    keep_logits = {}
    if readout == "logits" and "logits_to_keep" in inspect.signature(model.forward).parameters:
        keep_logits = {"logits_to_keep": len(seq) - pos}  # the last ones, from pos on
    special = enc_c.get("special") or [0] * len(enc_c["input_ids"])
    keep = torch.tensor([not s for s in special], device=backend.device)

    def run(which: str, n: int) -> torch.Tensor:
        kwargs = {k: v.expand(n, *v.shape[1:]) for k, v in kw[which].items()}
        out = model(**kwargs, **keep_logits)
        if readout == "embedding":
            return _pool(out.last_hidden_state.float(), keep)
        return out.logits[:, 0 if keep_logits else pos].float()  # (n, vocab)

    layers, layer_tokens = {}, {}
    for name, _ in backend.adapter.layers(model):
        toks = seq if arch == "decoder-only" or name.startswith("decoder.") else c_tok
        layers[name] = len(toks)
        layer_tokens[name] = toks
    info = backend.info()
    d, d_ff = int(info.get("d_model") or 0), int(info.get("d_ff") or 0)
    vocab_rows = 0
    if readout == "logits":
        vocab_rows = int(getattr(model.config.get_text_config(), "vocab_size", 0) or 0)
        vocab_rows *= (len(seq) - pos) if keep_logits else len(seq)
    return PatchSubject(
        clean_tokens=c_tok, corrupted_tokens=k_tok, blocks=dict(backend._heads), layers=layers,
        run=run, readout=readout, position=pos, position_tokens=seq,
        token_id=lambda text, what: hf_parts.token_id(backend, text, what),
        token_label=lambda i: backend.shown_tokens([int(i)])[0],
        width_per_copy=_width(max(layers.values(), default=len(seq)), d, d_ff or 4 * d,
                              int(info.get("heads") or 0), vocab_rows),
        layer_tokens=layer_tokens, warnings=warnings, share_prefix=arch != "encoder-decoder",
        recorder_args={"names": backend.block_names, "stream_names": backend.stream_names})
