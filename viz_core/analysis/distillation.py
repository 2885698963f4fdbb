"""Teacher and student: how close a distilled model's attention is to its teacher's, layer by layer.

    import viz_core as vc
    d = vc.distillation.compare(vc.load("minilm"), vc.load("minilm-student"), texts)
    d.pairs          # one row per (student layer, teacher layer): the measures below
    d.mapping        # [(student layer, teacher layer), ...]: the pairs a distillation matches
    d.matrix("attention_kl")   # float [student layers, teacher layers]

Layers are numbered from 0, as the block names ("encoder.0.self") are. Each measure is a
distillation loss of a published recipe, read here as a distance between one student layer
and one teacher layer, averaged over every query position of every text:

- ``attention_kl``: MiniLM's attention transfer (Wang et al. 2020): KL(A_teacher || A_student)
  of the self-attention distributions, here of the head-averaged distributions, so that
  models with different head counts compare; ``attention_kl_heads`` is MiniLM's own per-head
  form (the mean of the heads' KLs), where the head counts match (NaN otherwise).
- ``score_mse``: TinyBERT's attention loss (Jiao et al. 2020): the MSE between the
  pre-softmax scores QK^T/sqrt(d_k), per head. Blocked cells (a causal model's future keys)
  are set to 0 in both, as TinyBERT's code does with its masked -10000 entries, and count in
  the mean as there. Where the head counts differ, the head-averaged scores are compared.
- ``value_relation_kl``: MiniLM's value-relation transfer: per head VR = softmax(V V^T /
  sqrt(d_k)) over the keys the head may attend to, KL(VR_teacher || VR_student); the
  head-averaged relations where the head counts differ.
- ``hidden_mse``: TinyBERT's hidden-state loss without its learned map W_h: the MSE between
  the two layers' outputs, where the widths (d_model) match (NaN otherwise).

Mappings (TinyBERT's g(m), 1-based with 0 the embeddings, written 0-based here):
``"uniform"``: student layer i learns from teacher layer (i + 1) * N // M - 1 for M student
and N teacher layers (k = N / M; the last student layer meets the last teacher layer);
``"last"``: MiniLM's, the last student layer and the last teacher layer only; or a list, of
teacher layers (one per student layer, in order) or of (student layer, teacher layer) pairs.

The models must share a tokenizer (the measures compare position with position), be of the
same architecture (encoder-only or decoder-only: their self-attention stacks are compared)
and the student must not be deeper than the teacher; each failure is one InputError line.
Texts run in one right-padded batch per model; every map is cut to the text's own tokens, so
padding changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from viz_core.i18n import N_, Message

from ..errors import InputError

MEASURES = ("attention_kl", "attention_kl_heads", "score_mse", "value_relation_kl",
            "hidden_mse")
MAPPINGS = ("uniform", "last")
# What a measure means, for tables and figure titles.
MEASURE_LABELS = {  # msgids: shown through _()
    "attention_kl": N_("attention KL (head mean)"),
    "attention_kl_heads": N_("attention KL (per head)"),
    "score_mse": N_("score MSE"),
    "value_relation_kl": N_("value-relation KL"),
    "hidden_mse": N_("hidden-state MSE"),
}
STACKS = {"encoder-only": "encoder", "decoder-only": "decoder"}
MAX_TEXTS = 256


# ---- mappings ------------------------------------------------------------------------------
def uniform_mapping(n_student: int, n_teacher: int) -> list[tuple[int, int]]:
    """TinyBERT's g(m) = m * N / M (m = 1..M, 1-based), as 0-based (student, teacher) pairs:
    student layer i -> teacher layer (i + 1) * N // M - 1; the last meets the last."""
    return [(i, (i + 1) * n_teacher // n_student - 1) for i in range(n_student)]


def resolve_mapping(mapping, n_student: int, n_teacher: int) -> list[tuple[int, int]]:
    """The chosen map as sorted (student layer, teacher layer) pairs; InputError if invalid."""
    if isinstance(mapping, str):
        if mapping == "uniform":
            return uniform_mapping(n_student, n_teacher)
        if mapping == "last":
            return [(n_student - 1, n_teacher - 1)]
        raise InputError(N_("Unknown mapping {value!r}: use 'uniform', 'last' or a list of "
                           "teacher layers."), value=mapping[:40])
    try:
        items = list(mapping)
    except TypeError:
        raise InputError(N_("The mapping must be 'uniform', 'last' or a list of layers.")) from None
    if not items:
        raise InputError(N_("The mapping list is empty: give at least one teacher layer."))
    pairs: list[tuple[int, int]] = []
    for i, item in enumerate(items):
        pair = (i, item) if _is_int(item) else tuple(item) if isinstance(item, (list, tuple)) \
            else None
        if pair is None or len(pair) != 2 or not all(_is_int(x) for x in pair):
            raise InputError(N_("A mapping list holds teacher layers (one per student layer) or "
                               "(student layer, teacher layer) pairs; {value!r} is neither."),
                                 value=str(item)[:40])
        s, t = int(pair[0]), int(pair[1])
        if not 0 <= s < n_student:
            raise InputError(N_("Student layer {s} does not exist: the student has layers "
                               "0..{value}."), s=s, value=n_student - 1)
        if not 0 <= t < n_teacher:
            raise InputError(N_("Teacher layer {t} does not exist: the teacher has layers "
                               "0..{value}."), t=t, value=n_teacher - 1)
        pairs.append((s, t))
    return sorted(set(pairs))


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


# ---- the closed forms ----------------------------------------------------------------------
def kl_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL(p || q) of each row (last axis) of two stacks of distributions, float64; cells where
    p is 0 add nothing (blocked keys are 0 in both)."""
    p = p.astype(np.float64, copy=False)
    q = q.astype(np.float64, copy=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(p) - np.log(np.maximum(q, 1e-300))), 0.0)
    return terms.sum(axis=-1)


def _log(x: np.ndarray) -> np.ndarray:
    """log x with 0 -> log(1e-300): finite, so p * (log p - log q) is exactly 0 where p is 0."""
    return np.log(np.maximum(x, 1e-300))


def _softmax_allowed(scores: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """softmax over the allowed keys (blocked cells exactly 0), float64."""
    logits = np.where(blocked[None], -np.inf, scores)
    top = np.max(logits, axis=-1, keepdims=True)
    e = np.exp(logits - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def value_relation(v: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """MiniLM's value relation of each head: softmax(V V^T / sqrt(d_k)) over the allowed keys.
    v: [head, T, d_k]; blocked: bool [T, T] (True = blocked). float64 [head, T, T]."""
    v = v.astype(np.float64, copy=False)
    return _softmax_allowed(v @ v.transpose(0, 2, 1) / np.sqrt(v.shape[-1]), blocked)


# ---- what one layer of one model shows about one text -------------------------------------
@dataclass
class _Layer:
    """One layer of one text, float64, with what every pair reuses (means and logs)."""

    pattern: np.ndarray  # [head, n, n]
    scores: np.ndarray  # [head, n, n], blocked cells 0 (TinyBERT)
    relation: np.ndarray  # [head, n, n]
    hidden: np.ndarray | None  # [n, d_model]

    def __post_init__(self):
        self.pattern_mean = self.pattern.mean(axis=0)
        self.scores_mean = self.scores.mean(axis=0)
        self.relation_mean = self.relation.mean(axis=0)
        self.logs = {k: _log(getattr(self, k)) for k in
                     ("pattern", "pattern_mean", "relation", "relation_mean")}


def _layers(trace, stack: str, want_hidden: bool) -> tuple[list[str], list[_Layer], int]:
    """(tokens, per-layer views, query rows that attend somewhere) of one text's trace, cut
    to the text's own tokens (a batch pads the right end; pad keys are blocked in every row).
    The pattern is the softmax of the recorded scores over the allowed keys: the trace's own
    definition, computed here once instead of a second pass over q and k."""
    blocks = trace.layers(f"{stack}.self")
    mask = blocks[0].mask
    n = int((~mask).any(axis=0).sum())
    blocked = mask[:n, :n]
    out = []
    for b in blocks:
        raw = b.scores[:, :n, :n].astype(np.float64)
        hidden = None
        if want_hidden:
            x = trace.stream[f"{stack}.{b.layer}"]["out"]
            hidden = x.detach().double().cpu().numpy()[:n]
        out.append(_Layer(_softmax_allowed(raw, blocked), np.where(blocked[None], 0.0, raw),
                          value_relation(b.v[:, :n], blocked), hidden))
    rows = int((~blocked).any(axis=1).sum())
    tokens = list(trace.target_tokens if stack == "decoder" else trace.source_tokens)[:n]
    return tokens, out, rows


class _Sums:
    """Running sums and counts of every measure for every (student, teacher) pair."""

    def __init__(self, m: int, n: int):
        self.total = {k: np.zeros((m, n)) for k in MEASURES}
        self.count = {k: np.zeros((m, n)) for k in MEASURES}

    def add(self, key: str, i: int, j: int, total: float, count: float) -> None:
        self.total[key][i, j] += total
        self.count[key][i, j] += count

    def means(self, key: str) -> np.ndarray:
        c = self.count[key]
        return np.divide(self.total[key], c, out=np.full_like(c, np.nan), where=c > 0)


def _kl_sum(t: _Layer, s: _Layer, what: str) -> float:
    """Sum over rows (and heads) of KL(teacher || student) of one view ("pattern", ...)."""
    p = getattr(t, what)
    return float((p * (t.logs[what] - s.logs[what])).sum())


def _add_pair(sums: _Sums, i: int, j: int, s: _Layer, t: _Layer, rows: int,
              same_heads: bool) -> None:
    """One text's share of every measure between student layer i and teacher layer j."""
    sums.add("attention_kl", i, j, _kl_sum(t, s, "pattern_mean"), rows)
    if same_heads:
        h = s.pattern.shape[0]
        sums.add("attention_kl_heads", i, j, _kl_sum(t, s, "pattern") / h, rows)
        sums.add("value_relation_kl", i, j, _kl_sum(t, s, "relation") / h, rows)
        diff = s.scores - t.scores
    else:
        sums.add("value_relation_kl", i, j, _kl_sum(t, s, "relation_mean"), rows)
        diff = s.scores_mean - t.scores_mean
    sums.add("score_mse", i, j, float(np.square(diff).sum()), diff.size)
    if s.hidden is not None and t.hidden is not None:
        d = s.hidden - t.hidden
        sums.add("hidden_mse", i, j, float(np.square(d).sum()), d.size)


# ---- the result --------------------------------------------------------------------------
@dataclass
class Distillation:
    """Every (student layer, teacher layer) pair, measured (see the module docstring)."""

    pairs: pd.DataFrame  # student_layer, teacher_layer, mapped, the MEASURES
    mapping: list[tuple[int, int]]
    mapping_name: str  # "uniform", "last" or "custom"
    teacher: str
    student: str
    teacher_layers: int
    student_layers: int
    teacher_heads: int
    student_heads: int
    teacher_width: int | None
    student_width: int | None
    n_texts: int
    n_tokens: int

    @property
    def heads_matched(self) -> bool:
        return self.teacher_heads == self.student_heads

    @property
    def widths_matched(self) -> bool:
        return self.teacher_width is not None and self.teacher_width == self.student_width

    @property
    def mapped(self) -> pd.DataFrame:
        """The rows of the mapped pairs, in student-layer order."""
        return self.pairs[self.pairs["mapped"]].reset_index(drop=True)

    def matrix(self, measure: str = "attention_kl") -> np.ndarray:
        """float64 [student layers, teacher layers] of one measure (NaN where undefined)."""
        if measure not in MEASURES:
            raise InputError(N_("Unknown measure {value!r}; the measures are {join}."),
                                value=str(measure)[:40], join=', '.join(MEASURES))
        grid = np.full((self.student_layers, self.teacher_layers), np.nan)
        grid[self.pairs["student_layer"], self.pairs["teacher_layer"]] = self.pairs[measure]
        return grid

    def notes(self) -> list[str]:
        """What the table cannot show for these two models, in words."""
        out = []
        if not self.heads_matched:
            out.append(Message(N_("The teacher has {teacher} heads a layer and the student "
                                  "{student}: heads are compared through their average (no "
                                  "per-head KL; scores and value relations are head means)."),
                               teacher=self.teacher_heads, student=self.student_heads))
        if not self.widths_matched:
            out.append(Message(N_("The widths differ (teacher d_model {teacher}, student "
                                  "{student}): no hidden-state MSE without a learned map."),
                               teacher=self.teacher_width, student=self.student_width))
        return out


# ---- the entry point ---------------------------------------------------------------------
def _check_texts(texts) -> list[str]:
    if isinstance(texts, str):
        texts = [texts]
    try:
        texts = list(texts)
    except TypeError:
        raise InputError(N_("Give the texts as a list of strings.")) from None
    if not texts:
        raise InputError(N_("No text given: compare needs at least one sentence."))
    if len(texts) > MAX_TEXTS:
        raise InputError(N_("{n_texts} texts given; compare reads at most {MAX_TEXTS}."),
                            n_texts=len(texts), MAX_TEXTS=MAX_TEXTS)
    for i, t in enumerate(texts, start=1):
        if not isinstance(t, str) or not t.strip():
            raise InputError(N_("Text {i} is empty: every text needs some words."), i=i)
    return texts


def _shape(model, role: str) -> tuple[str, int, int, int | None]:
    """(stack, layers, heads, d_model) of a model's self-attention stack."""
    stack = STACKS.get(getattr(model, "architecture", None))
    if stack is None:
        raise InputError(N_("The {role} is an {architecture} model; teacher and student are "
                           "compared on encoder-only or decoder-only models."),
                             role=role, architecture=model.architecture)
    heads = [h for name, h in model.block_heads.items()
             if name.split(".")[0] == stack and name.endswith(".self")]
    width = model.info().get("d_model")
    return stack, len(heads), int(heads[0]) if heads else 0, \
        None if width is None else int(width)


def _check_tokens(texts: list[str], teacher_tokens, student_tokens) -> None:
    for text, a, b in zip(texts, teacher_tokens, student_tokens, strict=True):
        if a != b:
            shown = text if len(text) <= 40 else text[:40] + "..."
            raise InputError(
                N_("Teacher and student must share a tokenizer: they split {shown!r} differently "
                  "({n_a} tokens, {join}... vs {n_b} tokens, {join2}...)."),
                    shown=shown, n_a=len(a), join=' '.join(a[:6]), n_b=len(b),
                    join2=' '.join(b[:6]))


def compare(teacher, student, texts, *, mapping="uniform") -> Distillation:
    """Measure every (student layer, teacher layer) pair on these texts (module docstring)."""
    texts = _check_texts(texts)
    t_stack, n_t, h_t, w_t = _shape(teacher, "teacher")
    s_stack, n_s, h_s, w_s = _shape(student, "student")
    if teacher.architecture != student.architecture:
        raise InputError(N_("The teacher is {architecture} and the student {architecture2}: "
                           "compare two models of one architecture."),
                             architecture=teacher.architecture, architecture2=student.architecture)
    if n_s > n_t:
        raise InputError(N_("The student ({n_s} layers) is deeper than the teacher ({n_t} "
                           "layers): a student learns from a deeper teacher. Swap them?"), n_s=n_s, n_t=n_t)
    pairs = resolve_mapping(mapping, n_s, n_t)
    name = mapping if isinstance(mapping, str) else "custom"
    hidden = w_t is not None and w_t == w_s
    capture = ("v", "stream") if hidden else ("v",)
    t_traces = teacher.trace_batch(texts, capture=capture, blocks=[f"{t_stack}.self"])
    s_traces = student.trace_batch(texts, capture=capture, blocks=[f"{s_stack}.self"])
    t_views = [_layers(tr, t_stack, hidden) for tr in t_traces]
    s_views = [_layers(tr, s_stack, hidden) for tr in s_traces]
    _check_tokens(texts, [v[0] for v in t_views], [v[0] for v in s_views])
    sums = _Sums(n_s, n_t)
    n_tokens = 0
    for (_, t_layers, rows), (_, s_layers, _) in zip(t_views, s_views, strict=True):
        n_tokens += len(t_layers[0].pattern[0])
        for i, s in enumerate(s_layers):
            for j, t in enumerate(t_layers):
                _add_pair(sums, i, j, s, t, rows, h_s == h_t)
    grid = {k: sums.means(k) for k in MEASURES}
    mapped = set(pairs)
    table = pd.DataFrame([
        {"student_layer": i, "teacher_layer": j, "mapped": (i, j) in mapped,
         **{k: float(grid[k][i, j]) for k in MEASURES}}
        for i in range(n_s) for j in range(n_t)])
    return Distillation(pairs=table, mapping=pairs, mapping_name=name,
                        teacher=str(getattr(teacher, "name", "teacher")),
                        student=str(getattr(student, "name", "student")),
                        teacher_layers=n_t, student_layers=n_s, teacher_heads=h_t,
                        student_heads=h_s, teacher_width=w_t, student_width=w_s,
                        n_texts=len(texts), n_tokens=n_tokens)


def attention_maps(teacher, student, text: str, student_layer: int, teacher_layer: int,
                   head: int | None = None) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(tokens, teacher map, student map) of one pair on one text: float32 [query, key], the
    head average (head=None) or one head (head counts must match)."""
    (text,) = _check_texts([text])
    t_stack, n_t, h_t, _ = _shape(teacher, "teacher")
    s_stack, n_s, h_s, _ = _shape(student, "student")
    resolve_mapping([(student_layer, teacher_layer)], n_s, n_t)
    if head is not None and (h_t != h_s or not 0 <= int(head) < h_t):
        raise InputError(N_("Head {head} cannot be compared: the teacher has {h_t} heads and the "
                           "student {h_s}."), head=head, h_t=h_t, h_s=h_s)
    t_block = _one_block(teacher, t_stack, teacher_layer, text)
    s_block = _one_block(student, s_stack, student_layer, text)
    _check_tokens([text], [t_block.query_tokens], [s_block.query_tokens])

    def one(block):
        m = block.pattern.mean(axis=0) if head is None else block.head(int(head))
        return np.asarray(m, dtype=np.float32)
    return list(t_block.query_tokens), one(t_block), one(s_block)


def _one_block(model, stack: str, layer: int, text: str):
    """One self-attention block of one text's trace (a decoder-only model: the text alone)."""
    name = f"{stack}.{layer}.self"
    extra = {"max_new": 0} if model.architecture == "decoder-only" else {}
    return model.trace(text, blocks=[name], capture=("pattern",), **extra)[name]
