"""Shared pieces of the demo tasks: held-out split, batched greedy decoding, metrics.

Every task generates its examples from a seed. The held-out split is decided by a hash of
the (normalised) source text, so a test example can never appear in the training data,
whatever the seeds or sizes used.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..decoding.greedy import greedy_batch, pad_batch  # noqa: F401  (tasks re-export)
from ..model.choices import Split, choose
from ..model.tokenizer import Vocab
from ..model.transformer import Transformer

TEST_PERCENT = 5  # share of all possible sources reserved for the held-out set


@dataclass(frozen=True)
class Pair:
    source: str  # model input ("" for a language model)
    target: str  # expected output (the sentence itself for a language model)


def normalise(text: str) -> str:
    """What the model sees of a text: lowercased, whitespace collapsed (Vocab.split)."""
    return " ".join(text.lower().split())


def is_held_out(text: str, percent: int = TEST_PERCENT) -> bool:
    """True for the sources reserved for evaluation (a fixed ~percent% of all sources)."""
    digest = hashlib.blake2b(normalise(text).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 100 < percent


def make_split(sample: Callable[[random.Random], Pair], split: Split, n: int, seed: int,
               key: Callable[[Pair], str] = lambda p: p.source) -> list[Pair]:
    """n examples of one split ("train" or "test"); test examples are unique by key."""
    split = choose(split, Split, "split")
    rng = random.Random(f"{seed}:{split}")
    want_test = split == "test"
    out: list[Pair] = []
    seen: set[str] = set()
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 200 * n + 10_000:
            raise RuntimeError(f"could not draw {n} distinct {split} examples")
        pair = sample(rng)
        k = normalise(key(pair))
        if is_held_out(k) != want_test:
            continue
        if want_test:
            if k in seen:
                continue
            seen.add(k)
        out.append(pair)
    return out


# ---- batched decoding ---------------------------------------------------------------------
def translate(model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, texts: list[str],
              batch_size: int = 256) -> list[str]:
    """Greedy outputs of an encoder-decoder model for many inputs, as text."""
    cfg = model.cfg
    order = sorted(range(len(texts)), key=lambda i: len(src_vocab.split(texts[i])))
    by_index: dict[int, str] = {}
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        sources = [src_vocab.encode(texts[i])[0][: cfg.max_len - 1] + [cfg.eos_id] for i in idx]
        max_new = 2 * max(len(s) for s in sources) + 10
        ids = greedy_batch(model, sources, [[cfg.bos_id]] * len(idx), max_new)
        for i, row in zip(idx, ids):
            by_index[i] = tgt_vocab.decode(row)
    return [by_index[i] for i in range(len(texts))]


def exact_match(hypotheses: list[str], references: list[str]) -> float:
    if not references:
        return 0.0
    return sum(normalise(h) == normalise(r) for h, r in zip(hypotheses, references)) / len(
        references)


def evaluate_translation(model: Transformer, vocabs: dict[str, Vocab], pairs: list[Pair],
                         bleu: bool = False) -> dict:
    """Exact match (and corpus BLEU via sacrebleu) of greedy outputs on pairs."""
    was_training = model.training
    model.eval()
    hyps = translate(model, vocabs["source"], vocabs["target"], [p.source for p in pairs])
    model.train(was_training)
    refs = [p.target for p in pairs]
    metrics = {"n": len(pairs), "exact_match": round(exact_match(hyps, refs), 4)}
    if bleu:
        import sacrebleu

        metrics["bleu"] = round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    errors = [(p.source, h, p.target) for p, h in zip(pairs, hyps) if normalise(h) !=
              normalise(p.target)]
    metrics["errors"] = errors[:5]
    return metrics


# ---- language-model metrics ---------------------------------------------------------------
def lm_sequences(vocab: Vocab, texts: list[str], bos: int = 1, eos: int = 2) -> list[list[int]]:
    return [[bos, *vocab.encode(t)[0], eos] for t in texts]


@torch.inference_mode()
def lm_perplexity(model: Transformer, vocab: Vocab, texts: list[str],
                  batch_size: int = 256) -> float:
    """Per-token perplexity (every word and the final <eos>) of a decoder-only model."""
    was_training = model.training
    model.eval()
    cfg = model.cfg
    total_nll, total_tokens = 0.0, 0
    seqs = lm_sequences(vocab, texts, cfg.bos_id, cfg.eos_id)
    for start in range(0, len(seqs), batch_size):
        batch = pad_batch(seqs[start:start + batch_size], cfg.pad_id)
        batch = batch.to(next(model.parameters()).device)
        logits = model.decode(batch[:, :-1])
        nll = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), batch[:, 1:].reshape(-1),
            ignore_index=cfg.pad_id, reduction="sum")
        total_nll += float(nll)
        total_tokens += int((batch[:, 1:] != cfg.pad_id).sum())
    model.train(was_training)
    return math.exp(total_nll / max(total_tokens, 1))


def unigram_perplexity(vocab: Vocab, train_texts: list[str], test_texts: list[str]) -> float:
    """Perplexity of an add-one unigram model over the words and <eos> of train_texts."""
    counts = Counter()
    for seq in lm_sequences(vocab, train_texts):
        counts.update(seq[1:])
    total = sum(counts.values()) + len(vocab)
    nll, n = 0.0, 0
    for seq in lm_sequences(vocab, test_texts):
        for tok in seq[1:]:
            nll -= math.log((counts[tok] + 1) / total)
            n += 1
    return math.exp(nll / max(n, 1))


# ---- alignment heads ----------------------------------------------------------------------
# A case: (source, target, [(target position, source position), ...]); the case counts for a
# head when, for every pair, the head's largest cross-attention weight in the target token's
# row falls on the paired source token. Rows of decoder.{i}.cross are decoder *input*
# positions (<bos> y1 .. yn): "input" reads y_t in row t+1 (the row holding the token),
# "predicting" reads row t (the row whose output is y_t).
CONVENTIONS = {"input": 1, "predicting": 0}


def alignment_head_scores(model, cases: list[tuple[str, str, list[tuple[int, int]]]]
                          ) -> list[dict]:
    """Score every cross-attention head of a NativeModel on cases; best first."""
    hits: dict[tuple[str, int, str], int] = {}
    patterns: dict[tuple[str, str], dict] = {}  # one trace per sentence, whatever its cases
    for source, target, pairs in cases:
        if (source, target) not in patterns:
            trace = model.trace(source, target=target, capture=("pattern",),
                                blocks=["decoder.cross"])
            patterns[source, target] = {b: trace[b].pattern for b in trace.blocks}
        for name, pattern in patterns[source, target].items():  # pattern (H, T, S)
            for conv, shift in CONVENTIONS.items():
                rows = [t + shift for t, _ in pairs]
                best = pattern[:, rows].argmax(-1)  # (H, n_pairs)
                want = [s for _, s in pairs]
                for h in range(pattern.shape[0]):
                    key = (name, h, conv)
                    hits[key] = hits.get(key, 0) + int(list(best[h]) == want)
    scores = [{"block": b, "head": h, "convention": c, "score": n / max(len(cases), 1)}
              for (b, h, c), n in hits.items()]
    return sorted(scores, key=lambda s: -s["score"])
