"""The Backend contract (everything pages and decoding may use) and the one trace builder.

A backend is a loaded model. One instance serves every session: methods keep no per-call
state. Pages, ui/ and viz_core.decoding use only what ``Backend`` declares here; see
docs/ARCHITECTURE.md for how to add a model family. The analyses (logit_attribution, patch,
...) are free functions of viz_core.analysis; Backend gets them as methods from one table
(viz_core/analysis/registry.py), never written by hand.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import torch

from viz_core.i18n import N_

from ..analysis.registry import attach
from ..capture.recorder import Recorder, recording
from ..capture.residency import DeviceBudget
from ..capture.trace import AttentionTrace, BlockTrace, HeadSource, to_numpy
from ..errors import InputError
from ..model.choices import Architecture, NormPlacement, PositionalKind, options, whole
from .typed import check_count, check_names, check_text_or_none

__all__ = ["Backend", "block_filter", "block_layout", "blocks_from_records", "record",
           "permuted", "right_pad", "stream_from_records", "to_numpy"]

ARCHITECTURES = options(Architecture)
# What a trace can keep besides q and k (always kept: every pattern and score needs them).
CAPTURE_ALL = ("q", "k", "v", "scores", "pattern", "z")
# Asked for by name only (not in CAPTURE_ALL): the residual stream and every sublayer's
# output and norms, [T, d_model] per point and layer (viz_core.capture.recorder.STREAM_POINTS).
STREAM = "stream"
AUTO_CHECK_TOKENS = 1024  # the automatic faithfulness check reads at most this much input


class Backend:
    """A loaded model. Subclasses fill the attributes and implement the methods below."""

    name: str = ""
    architecture: Architecture = "encoder-decoder"
    family: str = "native"  # native | bert | gpt2 | bart | t5 | marian | llama | ...
    device: Any = None
    card: dict = {}
    _heads: dict[str, int]  # {block: query heads}, set by each subclass (block_heads)

    def __init__(self) -> None:
        self.device_budget = DeviceBudget()
        self._faith_lock = threading.Lock()
        self._faith: tuple[float, int] | None = None  # (largest difference, its input length)

    # ---- capabilities --------------------------------------------------------------------
    @property
    def kind(self) -> Architecture:
        """Alias of ``architecture`` (the name pages have always used)."""
        return self.architecture

    @property
    def can_generate(self) -> bool:
        return self.architecture != "encoder-only"

    @property
    def has_scores(self) -> bool:
        """Whether traces carry pre-softmax scores and q/k/v/z (every capture-path model)."""
        return True

    @property
    def kv_heads(self) -> int:
        """Key/value heads per block (== heads for plain multi-head attention)."""
        return int(self.info()["heads"])

    @property
    def positional_kind(self) -> PositionalKind:
        """sinusoidal | learned | rotary | relative | none."""
        raise NotImplementedError

    @property
    def max_tokens(self) -> int:
        """Longest input (in tokens, specials included) the model accepts."""
        raise NotImplementedError

    def examples(self) -> list[str]:
        """The card's example texts: a card.json is a file anyone can write, so only its
        entries that are text are examples (one string counts as one)."""
        found = self.card.get("examples") if isinstance(self.card, dict) else None
        found = [found] if isinstance(found, str) else found
        if not isinstance(found, list):
            return []
        return [e for e in found if isinstance(e, str) and e.strip()]

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.architecture, "family": self.family,
                "device": str(self.device), "scores": self.has_scores}

    def special_token_mask(self, tokens_ids: list[int]) -> list[bool]:
        """True for ids that are special tokens ([CLS], <bos>, <pad> ...)."""
        raise NotImplementedError

    @property
    def norm_placement(self) -> NormPlacement:
        """Where the norms sit around each sublayer f: "post" (x = Norm(x + f(x))), "pre"
        (x = x + f(Norm(x))), "pre+post" (x = x + Norm2(f(Norm1(x)))) or "output"
        (x = x + Norm(f(x)))."""
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        """How many ordinary (non-special) tokens the input has after any cut: the length
        of a ``permute`` order for trace()."""
        raise NotImplementedError

    def output_projection(self, block: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(W_O as [d_model, heads * d_v], its bias or None) of one attention block: the
        block's output is concat(z_1 .. z_h) @ W_O^T + b."""
        raise NotImplementedError

    # ---- contribution analysis: the model's linear pieces (viz_core.analysis.parts) -----
    def final_norm(self, stack: str = "decoder"):
        """NormSpec of the norm before the unembedding (None: there is none); ``stack=
        "encoder"``: the encoder's final norm (what cross-attention reads)."""
        raise NotImplementedError

    def unembedding(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(W_U [vocab, d_model], b_U [vocab] or None): logits = final_norm(x) @ W_U^T + b_U
        (any fixed output scaling, e.g. T5's d_model^-0.5, folded into W_U)."""
        raise NotImplementedError

    def logit_softcap(self) -> float | None:
        """The cap of a final tanh logit softcap (Gemma 2), or None."""
        return None

    def position_rows(self, n: int) -> torch.Tensor | None:
        """[n, d_model]: what the decoder stack adds to its embeddings for positions
        0..n-1, or None (rotary, relative)."""
        raise NotImplementedError

    def head_weights(self, block: str):
        """HeadWeights of one attention block (viz_core.analysis.parts)."""
        raise NotImplementedError

    def token_id(self, token, what: str = N_("token")) -> int:
        """The vocabulary id of one token (a string of exactly one token, or an id);
        InputError otherwise, naming the box as ``what`` (an N_() word: "target token")."""
        raise NotImplementedError

    def token_strings(self, ids) -> list[str]:
        """Vocabulary ids -> tokens as shown."""
        raise NotImplementedError

    # ---- runs ------------------------------------------------------------------------------
    def trace(self, source: str, target: str | None = None, **options) -> AttentionTrace:
        """Run the model once on ``source`` (``target`` teacher-forced; none: the model's own
        greedy output) and return a fresh, lazy AttentionTrace. Options: capture (what to
        keep besides q and k: "v", "z", "stream"), blocks, ablate ({block: [heads]}),
        max_new, permute, positions (False: no position information)."""
        raise NotImplementedError

    def trace_batch(self, sources: list[str], targets: list[str] | None = None,
                    **options) -> list[AttentionTrace]:
        """One trace per source, run as one right-padded batch (options as ``trace``)."""
        raise NotImplementedError

    def make_stepper(self, source: str, prefix: str | None, *, beams: int, max_new: int,
                     length_penalty: float, early_stopping, ablate: dict | None,
                     warnings: list[str]):
        """A viz_core.decoding Stepper for one search over this model."""
        raise NotImplementedError

    def beam_search(self, source: str, beam_size: int = 4, max_len: int = 32, **options):
        """Beam search on ``source``, the whole tree recorded: a BeamTree (viz_core.decoding;
        options: length_penalty, early_stopping, num_return, prefix, ablate)."""
        from ..decoding import beam_search

        return beam_search(self, source, beam_size=beam_size, max_len=max_len, **options)

    # ---- what analyses read (viz_core.analysis; their methods come from its registry) -----
    @property
    def block_heads(self) -> dict[str, int]:
        """{block name: query heads} of every attention block, in model order."""
        return dict(self._heads)

    def patching_subject(self, clean: str, corrupted: str, target: str | None = None,
                         position: int = -1):
        """The (clean, corrupted) pair ready for viz_core.analysis.patching: a PatchSubject
        (tokens checked for equal length, how to run n copies, what the metric reads)."""
        from .patching import subject_for

        return subject_for(self, clean, corrupted, target, position)

    # ---- faithfulness ----------------------------------------------------------------------
    def _reference_outputs(self, source: str, target: str | None, max_tokens: int | None = None
                           ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(outputs of the traced run, of the reference run, input length in tokens); the
        input cut to its first max_tokens tokens (None: all of it)."""
        raise NotImplementedError

    def check_faithfulness(self, source: str, target: str | None = None,
                           max_tokens: int | None = None) -> float:
        """max |logits(traced run) - logits(reference attention)| on this input (cut to
        max_tokens); the model keeps the largest difference seen (``faithfulness``)."""
        check_text_or_none(target, N_("target"))
        traced, reference, n = self._reference_outputs(source, target,
                                                      check_count(max_tokens, N_("max_tokens")))
        diff = float((traced.float() - reference.float()).abs().max()) if traced.numel() else 0.0
        with self._faith_lock:
            if self._faith is None or diff >= self._faith[0]:
                self._faith = (diff, n)
        return diff

    @property
    def faithfulness(self) -> tuple[float, int] | None:
        """(largest difference found, token count of the input it was found on), or None."""
        return self._faith

    def _stamp(self, trace: AttentionTrace, source: str, target: str | None) -> AttentionTrace:
        """Check faithfulness on the first trace after load; admit the trace to the budget."""
        if self._faith is None:
            try:
                # bounded, so the first trace of a long input does not pay twice
                self.check_faithfulness(source, target, AUTO_CHECK_TOKENS)
            except Exception:  # noqa: BLE001 - the check must never break a trace
                pass
        if self._faith is not None:
            trace.faithfulness, trace.faithfulness_tokens = self._faith
        self.device_budget.admit(trace)
        return trace


# model.logit_attribution(...), model.patch(...), ...: one method per row of the analysis table
# (viz_core/analysis/registry.py), the function itself bound to the model.
attach(Backend)


# ---- the one trace builder -------------------------------------------------------------
def block_filter(blocks) -> Callable[[str], bool] | None:
    """None -> all; callable -> itself; list of names or kinds ("decoder.cross") -> membership."""
    if blocks is None or callable(blocks):
        return blocks
    check_names(blocks, N_("blocks"))
    wanted = {blocks} if isinstance(blocks, str) else set(blocks)

    def keep(name: str) -> bool:
        stack, _, kind = name.split(".")
        return name in wanted or f"{stack}.{kind}" in wanted

    return keep


def block_layout(architecture: Architecture, n_encoder: int, n_decoder: int, source_tokens: list[str],
                 decoder_tokens: list[str]) -> list[tuple[str, list[str], list[str]]]:
    """(block name, query tokens, key tokens) in model order: encoder self-attention layers,
    then per decoder layer its self-attention and (encoder-decoder) cross-attention."""
    out = []
    if architecture != "decoder-only":
        out += [(f"encoder.{i}.self", source_tokens, source_tokens) for i in range(n_encoder)]
    if architecture != "encoder-only":
        for i in range(n_decoder):
            out.append((f"decoder.{i}.self", decoder_tokens, decoder_tokens))
            if architecture == "encoder-decoder":
                out.append((f"decoder.{i}.cross", decoder_tokens, source_tokens))
    return out


def record(run: Callable[[], Any], *, blocks=None, capture=CAPTURE_ALL,
           ablate: dict[str, list[int]] | None = None, names: dict[int, str] | None = None,
           reference: str | None = None, stream_names: dict | None = None,
           positions: bool = True) -> tuple[Any, Recorder]:
    """Call ``run()`` with a fresh recorder: (its result, the recorder with the records).
    The stream points are kept when ``capture`` names STREAM."""
    if capture is not None:
        check_names(capture, N_("capture"))
        capture = (capture,) if isinstance(capture, str) else tuple(capture)
    keep = block_filter(blocks) or (lambda name: True)
    rec = Recorder(keep=keep if capture else None,
                   points=frozenset(p for p in capture or () if p in ("v", "z")),
                   ablate=dict(ablate or {}), names=names or {}, reference=reference,
                   stream=STREAM in (capture or ()), stream_names=stream_names or {},
                   positions=positions)
    with recording(rec):
        out = run()
    return out, rec


def blocks_from_records(rec: Recorder, layout: list[tuple[str, list[str], list[str]]],
                        b: int = 0) -> dict[str, BlockTrace]:
    """Lazy BlockTraces of batch row b for the recorded blocks of ``layout`` (last call)."""
    out = {}
    for name, q_tokens, k_tokens in layout:
        calls = rec.records.get(name)
        if not calls:
            continue
        source = HeadSource.from_record(calls[-1], b)
        out[name] = BlockTrace.lazy(name, source, list(q_tokens), list(k_tokens))
    return out


def permuted(ids: list, order, special: list | None = None) -> tuple[list, list[int]]:
    """Reorder the ordinary (non-special) tokens of ``ids`` by ``order``, a permutation of
    0..n-1 over them; specials stay where they are. Returns (new ids, source position of
    each new position), for the order-blindness demo."""
    special = special or [False] * len(ids)
    slots = [i for i, s in enumerate(special) if not s]
    try:
        order = [int(o) for o in order]
    except (TypeError, ValueError):
        raise InputError(N_("The token order must be whole numbers.")) from None
    if sorted(order) != list(range(len(slots))):
        raise InputError(N_("The token order must be a permutation of 0..{value} (this input has "
                           "{n_slots} ordinary tokens)."), value=len(slots) - 1, n_slots=len(slots))
    where = list(range(len(ids)))
    for slot, o in zip(slots, order):
        where[slot] = slots[o]
    return [ids[w] for w in where], where


def stream_from_records(rec: Recorder, b: int = 0) -> dict[str, dict[str, torch.Tensor]]:
    """Batch row b of the recorded stream: {layer: {point: (T, d_model)}}, views."""
    return {layer: {point: x[b] for point, x in points.items()}
            for layer, points in rec.states.items()}


def right_pad(seqs: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists: ids (B, T) and attention_mask (B, T) with 1 = real token."""
    width = max(len(s) for s in seqs)
    ids = [list(s) + [pad_id] * (width - len(s)) for s in seqs]
    att = [[1] * len(s) + [0] * (width - len(s)) for s in seqs]
    return (torch.tensor(ids, dtype=torch.long, device=device),
            torch.tensor(att, dtype=torch.long, device=device))


def check_ablation(ablate: dict | None, heads: dict[str, int]) -> dict[str, list[int]] | None:
    """Validate {block: [heads]} against {block: n_heads}; clean sorted lists, or None."""
    if ablate is None:
        return None
    if not isinstance(ablate, Mapping):
        raise InputError(N_("ablate must map blocks to heads ({{block: [heads]}}), not {kind}."),
                         kind=type(ablate).__name__)
    spec = {}
    for block, hs in ablate.items():
        if not isinstance(block, str) or block not in heads:
            raise InputError(N_("Cannot ablate {block!r}: this model's blocks are {list}."),
                                block=block, list=list(heads))
        try:
            idx = sorted({whole(h, N_("head")) for h in hs})
        except TypeError:  # not a list
            raise InputError(N_("ablate[{block!r}] must be a list of heads, not {kind}."),
                             block=block, kind=type(hs).__name__) from None
        bad = [h for h in idx if not 0 <= h < heads[block]]
        if bad:
            raise InputError(N_("{block!r} has heads 0..{value}; no head {value2}."),
                                block=block, value=heads[block] - 1, value2=bad[0])
        if idx:
            spec[block] = idx
    return spec or None
