"""Pretraining objectives as masks and inputs/targets: BERT, RoBERTa, whole-word and ERNIE
masking, GPT, UniLM, XLNet, MASS, T5 span corruption and BART noising. Pure numpy.

Every function takes a token list and an explicit ``seed`` (numpy's default_rng), so the same
call always draws the same corruption, and returns an :class:`Objective`: what the model
reads, what it must produce, and the attention masks that make the objective work.

Convention (docs/ARCHITECTURE.md): masks are bool [query, key], True = this query may NOT attend
to this key. ``None`` in a per-position target list means "no loss at this position".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..i18n import N_, _
from ..model.choices import whole

MASK = "[MASK]"
BART_MASK = "<mask>"
DEFAULT_RATE = 0.15  # BERT, RoBERTa, T5: 15% of the tokens are corrupted
SENTENCE_END = {".", "!", "?", "。", "！", "？"}


def sentinel(i: int) -> str:
    """T5's i-th sentinel token."""
    return f"<extra_id_{i}>"


@dataclass
class MaskPanel:
    """One attention mask with its axes: rows are queries, columns keys; True = blocked."""

    title: str
    mask: np.ndarray  # bool [q, k]
    query_tokens: list[str]
    key_tokens: list[str]


@dataclass
class Objective:
    """One pretraining scheme applied to one token list."""

    name: str
    teaches: str  # one line: what this objective makes the model learn
    inputs: list[str]  # what the (encoder) input reads after corruption
    targets: list[str | None]  # per input position (None = no loss) or the output sequence
    panels: list[MaskPanel]
    per_position: bool = True  # targets align with inputs (MLM) or form a sequence (seq2seq)
    details: dict = field(default_factory=dict)


# ---- masks ------------------------------------------------------------------------------
def no_mask(n: int, m: int | None = None) -> np.ndarray:
    """bool [n, m] all False: every query sees every key (bidirectional)."""
    return np.zeros((n, n if m is None else m), dtype=bool)


def causal(n: int) -> np.ndarray:
    """bool [n, n]: True where the key lies after the query (k > q): left-to-right."""
    return np.triu(np.ones((n, n), dtype=bool), k=1)


def anti_causal(n: int) -> np.ndarray:
    """bool [n, n]: True where the key lies before the query (k < q): right-to-left."""
    return np.tril(np.ones((n, n), dtype=bool), k=-1)


def unilm_masks(n_src: int, n_tgt: int = 0) -> dict[str, np.ndarray]:
    """UniLM's four self-attention masks over one sequence of n_src + n_tgt tokens.

    seq2seq: source tokens see the whole source only; target tokens see the whole source and
    the target up to themselves.
    """
    n = n_src + n_tgt
    s2s = np.zeros((n, n), dtype=bool)
    s2s[:n_src, n_src:] = True  # the source never sees the target
    s2s[n_src:, n_src:] = causal(n_tgt)  # the target sees itself left to right
    return {N_("bidirectional"): no_mask(n), N_("left-to-right"): causal(n),
            N_("right-to-left"): anti_causal(n), N_("sequence-to-sequence"): s2s}


def check_order(order, n: int) -> list[int]:
    """A factorisation order must be a permutation of 0..n-1."""
    try:
        order = [whole(i, N_("position")) for i in order]
    except TypeError:  # not a sequence
        order = None
    if order is None or sorted(order) != list(range(n)):
        raise InputError(N_("The order must list every position 0..{value} exactly once."),
                         value=n - 1)
    return order


def xlnet_masks(order) -> tuple[np.ndarray, np.ndarray]:
    """(content stream, query stream) masks, bool [n, n], for a factorisation order.

    rank[i] = where position i comes in the order. The content stream h_i may see every
    position not after it in the order (itself included): blocked where rank[j] > rank[i].
    The query stream g_i must predict token i, so it may not see itself: blocked where
    rank[j] >= rank[i]. Token positions stay in their natural order on both axes.
    """
    n = len(order)
    order = check_order(order, n)
    rank = np.empty(n, dtype=int)
    rank[order] = np.arange(n)
    content = rank[None, :] > rank[:, None]
    query = rank[None, :] >= rank[:, None]
    return content, query


# ---- selecting positions ------------------------------------------------------------------
def n_to_mask(n: int, rate: float = DEFAULT_RATE) -> int:
    """round(rate * n) (half up), at least 1 for a non-empty input."""
    if n <= 0:
        return 0
    return max(1, min(n, int(math.floor(rate * n + 0.5))))


def select_positions(n: int, seed: int, rate: float = DEFAULT_RATE) -> np.ndarray:
    """Exactly n_to_mask(n, rate) distinct positions, sorted, drawn uniformly."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=n_to_mask(n, rate), replace=False)) if n else \
        np.zeros(0, dtype=int)


def replacement_actions(count: int, seed: int, p_mask: float = 0.8,
                        p_random: float = 0.1) -> list[str]:
    """BERT's 80/10/10 rule for each selected position: "mask", "random" or "keep"."""
    u = np.random.default_rng([seed, 1]).random(count)
    return ["mask" if x < p_mask else "random" if x < p_mask + p_random else "keep"
            for x in u]


def _corrupt(tokens: list[str], chosen: np.ndarray, seed: int, vocab: list[str] | None,
             mask_token: str = MASK, use_8010: bool = True):
    """Inputs, per-position targets and the action taken at each chosen position."""
    inputs, targets = list(tokens), [None] * len(tokens)
    actions = replacement_actions(len(chosen), seed) if use_8010 else ["mask"] * len(chosen)
    pool = list(vocab or tokens)
    rng = np.random.default_rng([seed, 2])
    for pos, action in zip(chosen, actions):
        targets[pos] = tokens[pos]
        if action == "mask":
            inputs[pos] = mask_token
        elif action == "random":
            inputs[pos] = pool[int(rng.integers(len(pool)))]
    return inputs, targets, actions


def _bidirectional_panel(tokens: list[str], title: str = N_("self-attention (bidirectional)")):
    return MaskPanel(_(title), no_mask(len(tokens)), list(tokens), list(tokens))


# ---- BERT family -------------------------------------------------------------------------
def bert_mlm(tokens: list[str], seed: int = 0, rate: float = DEFAULT_RATE,
             vocab: list[str] | None = None, name: str = N_("BERT masked LM")) -> Objective:
    """Choose round(15% n) positions; replace 80% of them by [MASK], 10% by a random token
    (from `vocab`, default the sentence's own tokens), keep 10%; predict the originals."""
    chosen = select_positions(len(tokens), seed, rate)
    inputs, targets, actions = _corrupt(tokens, chosen, seed, vocab)
    return Objective(_(name), _("Fill in hidden tokens from both sides: a bidirectional encoder "
                     "(the random/kept 20% stop it from trusting only [MASK] slots)."),
                     inputs, targets, [_bidirectional_panel(inputs)],
                     details={"positions": [int(p) for p in chosen], "actions": actions})


def roberta_dynamic(tokens: list[str], epochs: int = 3, seed: int = 0,
                    rate: float = DEFAULT_RATE, vocab: list[str] | None = None
                    ) -> list[Objective]:
    """RoBERTa's dynamic masking: a fresh draw of the BERT corruption every epoch (static
    masking would reuse epoch 0's draw)."""
    return [bert_mlm(tokens, seed * 1000 + e, rate, vocab, name=_("RoBERTa epoch {e}").format(e=e))
            for e in range(epochs)]


def word_ids(tokens: list[str]) -> list[int]:
    """Which word each sub-word token belongs to. WordPiece marks continuations with "##";
    SentencePiece ("▁") and byte-level BPE ("Ġ") mark word starts. Otherwise one token is
    one word."""
    starts_marked = any(t.startswith(("▁", "Ġ")) for t in tokens)
    ids, w = [], -1
    for i, t in enumerate(tokens):
        if i == 0:
            new = True
        elif t.startswith("##"):
            new = False
        elif starts_marked:
            new = t.startswith(("▁", "Ġ")) or not t.strip("▁Ġ").isalnum()
        else:
            new = True
        w += new
        ids.append(w)
    return ids


def spans_from_ids(ids: list[int]) -> list[tuple[int, int]]:
    """[start, end) of each run of equal ids."""
    spans, start = [], 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[start]:
            spans.append((start, i))
            start = i
    return spans


def span_mlm(tokens: list[str], spans: list[tuple[int, int]], seed: int = 0,
             rate: float = DEFAULT_RATE, vocab: list[str] | None = None,
             name: str = N_("Whole-word masking"),
             teaches: str = N_("Predict whole words, not pieces a neighbour gives away.")
             ) -> Objective:
    """Masking by whole spans (words, entities, phrases): spans are drawn in random order
    until at least round(rate * n) tokens are chosen; every token of a chosen span is
    corrupted with the same 80/10/10 decision."""
    rng = np.random.default_rng(seed)
    goal = n_to_mask(len(tokens), rate)
    chosen_spans, covered = [], 0
    for s in rng.permutation(len(spans)):
        if covered >= goal:
            break
        chosen_spans.append(spans[int(s)])
        covered += spans[int(s)][1] - spans[int(s)][0]
    chosen_spans.sort()
    actions = replacement_actions(len(chosen_spans), seed)
    inputs, targets = list(tokens), [None] * len(tokens)
    pool = list(vocab or tokens)
    rng2 = np.random.default_rng([seed, 2])
    for (a, b), action in zip(chosen_spans, actions):
        for p in range(a, b):
            targets[p] = tokens[p]
            if action == "mask":
                inputs[p] = MASK
            elif action == "random":
                inputs[p] = pool[int(rng2.integers(len(pool)))]
    return Objective(_(name), _(teaches), inputs, targets, [_bidirectional_panel(inputs)],
                     details={"spans": chosen_spans, "actions": actions})


def phrase_spans(tokens: list[str], words: list[int] | None = None) -> list[tuple[int, int]]:
    """ERNIE-style knowledge units, by a simple rule (no tagger here): a run of capitalised
    words is one entity; the other words are grouped in phrases of two words."""
    ids = words or word_ids(tokens)
    word_spans = spans_from_ids(ids)
    caps = [tokens[a].lstrip("▁Ġ#")[:1].isupper() for a, _ in word_spans]
    out, i = [], 0
    while i < len(word_spans):
        j = i + 1
        if caps[i]:
            while j < len(word_spans) and caps[j]:
                j += 1
        elif j < len(word_spans) and not caps[j]:
            j += 1  # two ordinary words make one phrase
        out.append((word_spans[i][0], word_spans[j - 1][1]))
        i = j
    return out


# ---- GPT and UniLM -------------------------------------------------------------------------
def gpt(tokens: list[str]) -> Objective:
    """Causal language modelling: predict token i + 1 from tokens 0..i."""
    targets = list(tokens[1:]) + [None]
    return Objective(_("GPT causal LM"), _("Predict the next token from the left context only: "
                     "a generator."), list(tokens), targets,
                     [MaskPanel(_("causal (k > q blocked)"), causal(len(tokens)), list(tokens),
                                list(tokens))])


def unilm(source: list[str], target: list[str]) -> Objective:
    """One shared Transformer, four masks. The input is [SOS] source [EOS] target [EOS]."""
    seq = ["[SOS]", *source, "[EOS]", *target, "[EOS]"]
    n_src = len(source) + 2
    masks = unilm_masks(n_src, len(target) + 1)
    return Objective("UniLM", _("One network, four self-attention masks: the mask alone makes "
                     "it an encoder, a left-to-right or right-to-left LM, or a seq2seq model."),
                     seq, [None] * len(seq),
                     [MaskPanel(_(k), m, seq, seq) for k, m in masks.items()],
                     details={"n_source": n_src})


# ---- XLNet ------------------------------------------------------------------------------
def xlnet(tokens: list[str], order) -> Objective:
    """Permutation LM: predict tokens in the factorisation order; the model reads the
    positions in their natural order, only the masks change."""
    content, query = xlnet_masks(order)
    return Objective(_("XLNet permutation LM"), _("Every token is predicted from every context "
                     "over all factorisation orders: bidirectional context without [MASK]."),
                     list(tokens), list(tokens),
                     [MaskPanel(_("content stream h (sees itself)"), content, tokens, tokens),
                      MaskPanel(_("query stream g (position, not content, of itself)"), query,
                                tokens, tokens)],
                     details={"order": [int(i) for i in order]})


def random_order(n: int, seed: int) -> list[int]:
    return [int(i) for i in np.random.default_rng(seed).permutation(n)]


# ---- MASS -------------------------------------------------------------------------------
def mass(tokens: list[str], k: int, start: int | None = None, seed: int = 0) -> Objective:
    """Mask a span of k tokens in the encoder; the decoder predicts exactly that span.

    The decoder input is the span shifted right ("[MASK]" first, then the span without its
    last token); its self-attention is causal over the span. k = 1 is BERT-like (one token
    from a bidirectional context), k = n is GPT-like (the encoder sees nothing)."""
    n = len(tokens)
    k = whole(k, N_("span length k"))
    if not 1 <= k <= n:
        raise InputError(N_("The span length k must be from 1 to {n}, not {k}."), n=n, k=k)
    if start is None:
        start = int(np.random.default_rng(seed).integers(0, n - k + 1))
    start = whole(start, N_("span start"))
    if not 0 <= start <= n - k:
        raise InputError(N_("The span start must be from 0 to {value}, not {start}."),
                         value=n - k, start=start)
    span = list(tokens[start:start + k])
    enc = [MASK if start <= i < start + k else t for i, t in enumerate(tokens)]
    dec = [MASK, *span[:-1]]
    return Objective(
        _("MASS (k = {k})").format(k=k), _("Encoder reads the sentence with a span hidden; "
                                           "decoder writes the span, so the decoder must lean "
                                           "on the encoder."), enc, span,
        [MaskPanel(_("encoder self (bidirectional)"), no_mask(n), enc, enc),
         MaskPanel(_("decoder self (causal over the span)"), causal(k), dec, dec),
         MaskPanel(_("cross: decoder → encoder"), no_mask(k, n), dec, enc)],
        per_position=False, details={"start": start, "k": k, "decoder_input": dec})


# ---- T5 --------------------------------------------------------------------------------
def _random_partition(total: int, parts: int, rng) -> list[int]:
    """`parts` positive integers summing to `total`, uniformly among compositions."""
    cuts = np.sort(rng.choice(np.arange(1, total), size=parts - 1, replace=False))
    return list(np.diff(np.concatenate([[0], cuts, [total]])).astype(int))


def t5_noise_spans(n: int, seed: int = 0, rate: float = DEFAULT_RATE,
                   mean_span: float = 3.0) -> list[tuple[int, int]]:
    """[start, end) of T5's noise spans: round(rate * n) noise tokens in
    round(noise / mean_span) spans; noise and kept runs alternate, starting with a kept run
    (as in T5's random_spans_noise_mask)."""
    n_noise = n_to_mask(n, rate)
    n_spans = max(1, int(math.floor(n_noise / mean_span + 0.5)))
    n_spans = min(n_spans, n_noise, max(1, n - n_noise))
    if n - n_noise < n_spans:  # too short for a kept run before every span: one span at 0..
        return [(n - n_noise, n)]
    rng = np.random.default_rng(seed)
    noise = _random_partition(n_noise, n_spans, rng)
    kept = _random_partition(n - n_noise, n_spans, rng)
    spans, pos = [], 0
    for keep, length in zip(kept, noise):
        pos += keep
        spans.append((pos, pos + length))
        pos += length
    return spans


def t5_span_corruption(tokens: list[str], seed: int = 0, rate: float = DEFAULT_RATE,
                       mean_span: float = 3.0, spans: list[tuple[int, int]] | None = None
                       ) -> Objective:
    """Each noise span becomes one sentinel in the input; the target lists each sentinel
    followed by the span it hides, and ends with one more sentinel. `spans` (sorted,
    non-overlapping [start, end)) overrides the random draw."""
    if spans is None:
        spans = t5_noise_spans(len(tokens), seed, rate, mean_span)
    inputs, targets, prev = [], [], 0
    for i, (a, b) in enumerate(spans):
        inputs += [*tokens[prev:a], sentinel(i)]
        targets += [sentinel(i), *tokens[a:b]]
        prev = b
    inputs += tokens[prev:]
    targets.append(sentinel(len(spans)))
    dec = ["<pad>", *targets[:-1]]  # decoder input: targets shifted right
    return Objective(
        _("T5 span corruption"), _("Text-to-text denoising: short inputs and targets, spans of "
        "tokens replaced by sentinels."), inputs, targets,
        [MaskPanel(_("encoder self (bidirectional)"), no_mask(len(inputs)), inputs, inputs),
         MaskPanel(_("decoder self (causal)"), causal(len(dec)), dec, dec)],
        per_position=False, details={"spans": spans})


# ---- BART --------------------------------------------------------------------------------
def _seq2seq_panels(inputs: list[str], tokens: list[str]) -> list[MaskPanel]:
    dec = ["</s>", *tokens[:-1]] if tokens else ["</s>"]
    return [MaskPanel(_("encoder self (bidirectional)"), no_mask(len(inputs)), inputs, inputs),
            MaskPanel(_("decoder self (causal)"), causal(len(dec)), dec, dec)]


def bart_token_masking(tokens: list[str], seed: int = 0, rate: float = DEFAULT_RATE):
    chosen = set(select_positions(len(tokens), seed, rate).tolist())
    inputs = [BART_MASK if i in chosen else t for i, t in enumerate(tokens)]
    return _bart(_("token masking"), _("Like BERT, but the decoder rewrites the whole text."),
                 inputs, tokens, positions=sorted(chosen))


def bart_token_deletion(tokens: list[str], seed: int = 0, rate: float = DEFAULT_RATE):
    chosen = set(select_positions(len(tokens), seed, rate).tolist())
    inputs = [t for i, t in enumerate(tokens) if i not in chosen]
    return _bart(_("token deletion"), _("No placeholder: the model must also find where tokens "
                 "are missing."), inputs, tokens, positions=sorted(chosen))


def infilling_spans(n: int, seed: int = 0, rate: float = 0.3, lam: float = 3.0
                    ) -> list[tuple[int, int]]:
    """BART text infilling: span lengths ~ Poisson(lam) until round(rate * n) tokens are
    covered; spans do not overlap; a length-0 span (start == end) inserts a <mask>."""
    rng = np.random.default_rng(seed)
    goal, covered, spans = n_to_mask(n, rate), 0, []
    taken = np.zeros(n + 1, dtype=bool)
    for _attempt in range(10 * n + 10):
        if covered >= goal:
            break
        length = min(int(rng.poisson(lam)), goal - covered)
        start = int(rng.integers(0, n - length + 1))
        if taken[start:start + max(length, 1)].any():
            continue
        taken[start:start + max(length, 1)] = True
        spans.append((start, start + length))
        covered += length
    return sorted(spans)


def bart_text_infilling(tokens: list[str], seed: int = 0, rate: float = 0.3, lam: float = 3.0,
                        spans: list[tuple[int, int]] | None = None):
    if spans is None:
        spans = infilling_spans(len(tokens), seed, rate, lam)
    inputs, prev = [], 0
    for a, b in spans:
        inputs += [*tokens[prev:a], BART_MASK]
        prev = b
    inputs += tokens[prev:]
    return _bart(_("text infilling"), _("One <mask> per span, of any length (even 0): the model "
                 "learns how much is missing."), inputs, tokens, spans=spans)


def sentences_of(tokens: list[str]) -> list[list[str]]:
    """Split at sentence-final punctuation tokens (kept with their sentence)."""
    out, cur = [], []
    for t in tokens:
        cur.append(t)
        if t.strip("▁Ġ") in SENTENCE_END:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def bart_sentence_permutation(tokens: list[str], seed: int = 0):
    sents = sentences_of(tokens)
    perm = [int(i) for i in np.random.default_rng(seed).permutation(len(sents))]
    inputs = [t for i in perm for t in sents[i]]
    return _bart(_("sentence permutation"), _("Restore the sentence order (needs two or more "
                 "sentences: end them with . ! or ?)."), inputs, tokens, order=perm)


def bart_document_rotation(tokens: list[str], seed: int = 0):
    start = int(np.random.default_rng(seed).integers(len(tokens))) if tokens else 0
    inputs = tokens[start:] + tokens[:start]
    return _bart(_("document rotation"), _("Find where the document really starts."), inputs,
                 tokens, start=start)


def _bart(kind: str, teaches: str, inputs: list[str], tokens: list[str], **details):
    return Objective(_("BART {kind}").format(kind=kind), teaches, list(inputs), list(tokens),
                     _seq2seq_panels(list(inputs), list(tokens)), per_position=False,
                     details=details)


def bart_all(tokens: list[str], seed: int = 0) -> list[Objective]:
    """The five BART noising functions on one input."""
    return [bart_token_masking(tokens, seed), bart_token_deletion(tokens, seed),
            bart_text_infilling(tokens, seed), bart_sentence_permutation(tokens, seed),
            bart_document_rotation(tokens, seed)]


# ---- the page's input -------------------------------------------------------------------
SPECIAL_TOKENS = {"[CLS]", "[SEP]", "[PAD]", "<s>", "</s>", "<pad>", "<bos>", "<eos>",
                  "<|endoftext|>"}
MAX_LESSON_TOKENS = 32


def simple_words(text: str) -> list[str]:
    """Words and punctuation marks, for models whose own tokens would be <unk>."""
    import re

    return re.findall(r"\w+|[^\w\s]", text)


def lesson_tokens(text: str, model_tokens: list[str] | None = None,
                  limit: int = MAX_LESSON_TOKENS) -> tuple[list[str], int]:
    """(tokens to corrupt, how many there were before the cut): the model's own sub-word
    tokens without its special tokens when given, else simple_words(text)."""
    if model_tokens is not None:
        tokens = [t for t in model_tokens if t not in SPECIAL_TOKENS]
    else:
        tokens = simple_words(text)
    return tokens[:limit], len(tokens)


def split_source_target(tokens: list[str]) -> tuple[list[str], list[str]]:
    """First sentence as the source and the rest as the target; one sentence: halves."""
    sents = sentences_of(tokens)
    if len(sents) > 1:
        return sents[0], [t for s in sents[1:] for t in s]
    half = max(1, len(tokens) // 2)
    return tokens[:half], tokens[half:]
