"""Train a demo model on one of our generated tasks and write a checkpoint dir.

    python -m viz_core.training.train --task dates --out checkpoints/dates
    python -m viz_core.training.train --task en-fr --out checkpoints/en-fr --steps 6000
    python -m viz_core.training.train --task zh-en --out checkpoints/zh-en --steps 6000
    python -m viz_core.training.train --task lm --out checkpoints/lm
    python -m viz_core.training.train --task lm --out checkpoints/lm-rope --name lm-rope \
        --positional rope --kv-heads 2 --norm rmsnorm --compare checkpoints/lm

AdamW with linear warm-up then cosine decay (over the steps, or over --max-minutes when
that comes first), label smoothing, padding masks, teacher forcing. At the end: evaluation
on the held-out set and a checkpoint (model.safetensors, config.json, vocab.json, card.json).
--compare evaluates other checkpoints of the same task with the same code on the same held-out
set and writes their metrics into the card beside this model's.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import time
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from ..model.checkpoint import load_checkpoint, save_checkpoint
from ..model.config import TransformerConfig
from ..model.transformer import Transformer
from ..tasks import get_task
from ..tasks.common import pad_batch

MODEL_FIELDS = ("d_model", "n_heads", "n_layers", "n_decoder_layers", "d_ff", "dropout",
                "max_len", "norm_first", "positional", "n_kv_heads", "norm", "rope_base")


def encode_pairs(task, vocabs, pairs, cfg: TransformerConfig):
    """-> list of (source ids + <eos> or None, decoder input, decoder output)."""
    out = []
    tgt = vocabs["target"]
    for p in pairs:
        y = tgt.encode(p.target)[0][: cfg.max_len - 1]
        if cfg.kind == "decoder-only":
            out.append((None, [cfg.bos_id, *y], [*y, cfg.eos_id]))
        else:
            x = vocabs["source"].encode(p.source)[0][: cfg.max_len - 1]
            out.append(([*x, cfg.eos_id], [cfg.bos_id, *y], [*y, cfg.eos_id]))
    return out


def make_batch(examples, pad_id: int):
    src = None if examples[0][0] is None else pad_batch([e[0] for e in examples], pad_id)
    return src, pad_batch([e[1] for e in examples], pad_id), pad_batch([e[2] for e in examples],
                                                                     pad_id)


def lr_factor(step: int, warmup: int, progress: float, floor: float = 0.05) -> float:
    """Linear warm-up over `warmup` steps, then cosine from 1 down to `floor` as progress -> 1."""
    if step < warmup:
        return (step + 1) / warmup
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def train(task: str, out: str | Path | None = None, *, steps: int | None = None,
          batch_size: int | None = None, lr: float | None = None, warmup: int | None = None,
          seed: int = 0, max_minutes: float | None = None,
          label_smoothing: float | None = None,
          n_train: int | None = None, n_test: int | None = None, evaluate: bool = True,
          progress: bool = True, threads: int | None = 1, log_every: int = 50,
          init: str | Path | None = None, name: str | None = None,
          compare: list[str | Path] | None = None, curriculum: bool = False,
          eval_every: int | None = None, **model_overrides) -> dict:
    """Train one task; returns {"model", "vocabs", "losses", "metrics", "card"}.

    model_overrides: any of MODEL_FIELDS (d_model, n_heads, n_layers, ...).
    init: a checkpoint dir of this task to continue training from (its config and
    vocabularies are kept; steps and seconds add up in the card).
    name: the model's name in its card (default: the task's).
    compare: checkpoint dirs of the same task evaluated on the same held-out set with the
    same code; their metrics go into the card under "compared" ({dir name: metrics}).
    curriculum: each step's batch comes from the task's ``curriculum_batch(rng, progress,
    vocabs)`` (fresh sequences, lengths that grow with progress) instead of batch_size pairs
    of its training set (induction's second stage). With init, a ``rope_base`` given here
    replaces the checkpoint's (the weights are kept: nothing of the rotation is learned).
    eval_every: every that many steps, print the task's ``progress(model, vocabs)`` (a quick
    held-out measure; it changes nothing of the training).
    """
    mod = get_task(task)
    d = dict(mod.DEFAULTS)
    steps = steps or d["steps"]
    batch_size = batch_size or d["batch_size"]
    lr = lr or d["lr"]
    warmup = d["warmup"] if warmup is None else warmup
    n_train = n_train or d["n_train"]
    n_test = d["n_test"] if n_test is None else n_test
    if label_smoothing is None:  # the task's own (induction: 0), else 0.1
        label_smoothing = d.get("label_smoothing", 0.1)
    previous_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    random.seed(seed)
    torch.manual_seed(seed)

    # a task may add training data beyond its held-out split's kind (en-fr: the textbook sentence)
    train_pairs = (mod.train_dataset(n_train, seed) if hasattr(mod, "train_dataset")
                   else mod.dataset("train", n_train, seed))
    test_pairs = mod.dataset("test", n_test, seed) if n_test else []
    vocabs = mod.build_vocabs(train_pairs)
    settings = {k: d[k] for k in MODEL_FIELDS if k in d}
    settings.update({k: v for k, v in model_overrides.items() if v is not None})
    unknown = set(settings) - set(MODEL_FIELDS)
    if unknown:
        raise TypeError(f"unknown model options {sorted(unknown)}")
    if mod.KIND == "decoder-only":
        settings.update(src_vocab_size=0, n_layers=0)  # --layers sets the decoder
    else:
        settings["src_vocab_size"] = len(vocabs["source"])
    cfg = TransformerConfig(kind=mod.KIND, tgt_vocab_size=len(vocabs["target"]),
                            **settings).validate()
    before = {"train_steps": 0, "train_seconds": 0.0}
    init_card = None
    if init is not None:
        model, vocabs, init_card = load_checkpoint(init)
        base = model_overrides.get("rope_base")
        if base is not None and model.cfg.positional == "rope" and base != model.cfg.rope_base:
            state = model.state_dict()
            model = Transformer(dataclasses.replace(model.cfg, rope_base=float(base)).validate())
            model.load_state_dict(state)
        cfg = model.cfg
        before = {k: init_card.get(k, 0) for k in before}
    else:
        model = Transformer(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    examples = encode_pairs(mod, vocabs, train_pairs, cfg)

    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=cfg.pad_id, label_smoothing=label_smoothing)
    # the task's set-up of a curriculum, and the rows it keeps as they are (induction: the
    # previous-token head's query and key), put back after every step (AdamW's weight decay
    # moves them even without a gradient)
    params = dict(model.named_parameters())
    kept_names = (mod.curriculum_start(model, vocabs)
                  if curriculum and hasattr(mod, "curriculum_start") else [])
    kept = [(params[name], rows, params[name].detach()[rows].clone())
            for name, rows in kept_names]
    # batches: fresh ones when continuing from a checkpoint
    rng = random.Random(f"{seed}:{before['train_steps']}" if before["train_steps"] else seed)
    losses: list[float] = []
    model.train()
    start = time.time()
    budget = None if not max_minutes else max_minutes * 60
    tokens = 0
    bar = tqdm(range(steps), desc=f"train {task}", disable=not progress, mininterval=2)
    step = 0
    for step in bar:
        elapsed = time.time() - start
        if budget is not None and elapsed > budget:
            bar.write(f"time budget of {max_minutes} min reached at step {step}")
            break
        frac = max(step / steps, elapsed / budget if budget else 0.0)
        for group in opt.param_groups:
            group["lr"] = lr * lr_factor(step, warmup, frac)
        batch = (mod.curriculum_batch(rng, frac, vocabs) if curriculum
                 else rng.sample(examples, batch_size))
        src, dec_in, dec_out = make_batch(batch, cfg.pad_id)
        logits = model(src, dec_in)  # (B, T, V)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), dec_out.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for param, rows, value in kept:
                param[rows] = value
        losses.append(loss.item())
        tokens += int((dec_out != cfg.pad_id).sum()) + (0 if src is None else int(
            (src != cfg.pad_id).sum()))
        if eval_every and (step + 1) % eval_every == 0 and hasattr(mod, "progress"):
            bar.write(f"step {step + 1}: {mod.progress(model, vocabs)}")
            model.train()
        if step % log_every == 0:
            recent = losses[-log_every:]
            bar.set_postfix(loss=f"{sum(recent) / len(recent):.3f}",
                            tok_s=f"{tokens / max(time.time() - start, 1e-6):,.0f}")
    else:
        step = steps
    train_seconds = round(time.time() - start, 1)
    model.eval()

    metrics, compared = {}, {}
    if evaluate and test_pairs:
        metrics = mod.evaluate(model, vocabs, test_pairs, train_pairs)
        if task == "en-fr":  # the heads behind il / elle in the textbook sentence
            from .because_report import referent_report

            texts = [p.source for p in mod.because_dataset("test", mod.N_BECAUSE_TEST, 0)]
            metrics["because"].update(referent_report(model, vocabs, texts))
        if task == "zh-en":  # the Attention page's alignment score on held-out sentences
            from .alignment_report import alignment_report

            metrics["alignment"] = alignment_report(model, vocabs, task, test_pairs)
        if hasattr(mod, "SEED_SENTENCES"):  # the textbook sentence's outputs (zh-en)
            from ..tasks.common import translate

            outputs = translate(model, vocabs["source"], vocabs["target"], mod.SEED_SENTENCES)
            metrics["seed_sentences"] = dict(zip(mod.SEED_SENTENCES, outputs))
        for other in compare or []:
            o_model, o_vocabs, o_card = load_checkpoint(other)
            if o_card.get("task", task) != task:
                raise ValueError(f"{other} is a {o_card.get('task')} model, not {task}")
            o_metrics = mod.evaluate(o_model, o_vocabs, test_pairs, train_pairs)
            compared[Path(other).name] = {k: v for k, v in o_metrics.items() if k != "errors"}
    description = mod.DESCRIPTION
    modern = [f"RoPE (base {cfg.rope_base:g})" if cfg.positional == "rope" else "",
              f"grouped-query attention ({cfg.n_heads} query heads over {cfg.kv_heads} "
              f"key/value heads)" if cfg.kv_heads != cfg.n_heads else "",
              "RMSNorm" if cfg.norm == "rmsnorm" else ""]
    if any(modern):
        description += "; with " + ", ".join(m for m in modern if m)
    card = {
        "name": name or task, "description": description, "task": task,
        "examples": list(mod.EXAMPLES), "generator_version": mod.GENERATOR_VERSION,
        "metrics": {k: v for k, v in metrics.items() if k != "errors"},
        "train_steps": before["train_steps"] + step,
        "train_seconds": round(before["train_seconds"] + train_seconds, 1), "device": "cpu",
        "threads": torch.get_num_threads(), "parameters": n_params, "seed": seed,
        "data_sizes": {"train": len(train_pairs), "test": len(test_pairs)},
        "training": {"batch_size": batch_size, "lr": lr, "warmup": warmup,
                     "label_smoothing": label_smoothing, "final_loss": round(
                         sum(losses[-100:]) / max(len(losses[-100:]), 1), 4)},
    }
    if hasattr(mod, "SEGMENTATION"):
        card["segmentation"] = mod.SEGMENTATION
    if cfg.positional == "rope" or cfg.kv_heads != cfg.n_heads or cfg.norm != "layernorm":
        card["architecture"] = {"positional": cfg.positional, "rope_base": cfg.rope_base,
                                "heads": cfg.n_heads, "kv_heads": cfg.kv_heads,
                                "norm": cfg.norm}
    if compared:
        card["compared"] = compared
    if curriculum:
        card["training"]["curriculum"] = dict(getattr(mod, "CURRICULUM", {}))
        if kept_names:
            card["training"]["kept_rows"] = {name: [int(rows[0]), int(rows[-1]) + 1]
                                             for name, rows in kept_names}
        card["training"].pop("batch_size")  # the curriculum's batches are its own
    if init_card is not None:  # keep the history: the run this one continued
        card["training"]["continued_from"] = {
            "train_steps": before["train_steps"], "training": init_card.get("training")}
    if out is not None:
        save_checkpoint(model, vocabs, out, card)
    torch.set_num_threads(previous_threads)
    return {"model": model, "vocabs": vocabs, "losses": losses, "metrics": metrics,
            "card": card, "test": test_pairs}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", required=True, choices=["en-fr", "zh-en", "dates", "lm",
                                                             "induction"])
    ap.add_argument("--out", help="checkpoint dir to write (e.g. checkpoints/dates)")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--d-model", type=int)
    ap.add_argument("--layers", type=int, help="encoder and decoder layers")
    ap.add_argument("--decoder-layers", type=int, help="decoder layers (default: --layers)")
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int, help="key/value heads (GQA; default: --heads)")
    ap.add_argument("--positional", choices=["sinusoidal", "learned", "rope"])
    ap.add_argument("--rope-base", type=float)
    ap.add_argument("--norm", choices=["layernorm", "rmsnorm"])
    ap.add_argument("--name", help="the model's name in its card (default: the task's)")
    ap.add_argument("--compare", nargs="*", default=[],
                    help="checkpoint dirs of the same task to evaluate beside this one")
    ap.add_argument("--d-ff", type=int)
    ap.add_argument("--dropout", type=float)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--label-smoothing", type=float, help="default: the task's (0.1 for most)")
    ap.add_argument("--n-train", type=int)
    ap.add_argument("--n-test", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", help="checkpoint dir to continue training from")
    ap.add_argument("--curriculum", action="store_true",
                    help="batches from the task's length curriculum (induction's second stage)")
    ap.add_argument("--eval-every", type=int,
                    help="print the task's quick held-out measure every N steps (induction)")
    ap.add_argument("--max-minutes", type=float)
    # One thread by default: on a shared 2-core machine, 2 threads spin-wait on each other
    # and run these small models up to 20x slower.
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    result = train(
        a.task, a.out, steps=a.steps, batch_size=a.batch_size, lr=a.lr, warmup=a.warmup,
        seed=a.seed, max_minutes=a.max_minutes, label_smoothing=a.label_smoothing,
        n_train=a.n_train, n_test=a.n_test, threads=a.threads, d_model=a.d_model,
        n_heads=a.heads, n_layers=a.layers, n_decoder_layers=a.decoder_layers or a.layers,
        d_ff=a.d_ff, dropout=a.dropout, init=a.init, name=a.name, compare=a.compare,
        n_kv_heads=a.kv_heads, positional=a.positional, rope_base=a.rope_base, norm=a.norm,
        curriculum=a.curriculum, eval_every=a.eval_every)
    metrics = result["metrics"]
    for src, hyp, ref in metrics.get("errors", []):
        print(f"  error: {src!r} -> {hyp!r} (expected {ref!r})")
    print("metrics:", {k: v for k, v in metrics.items() if k != "errors"})
    for other, m in result["card"].get("compared", {}).items():
        print(f"  {other} on the same held-out set: {m}")
    print(f"{result['card']['train_steps']} steps in {result['card']['train_seconds']} s, "
          f"{result['card']['parameters']:,} parameters" + (f", wrote {a.out}" if a.out else ""))


if __name__ == "__main__":
    main()
