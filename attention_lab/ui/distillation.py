"""The Compare page's "Teacher and student" mode: which student layer learned from which
teacher layer, and how close their attention is (viz_core.analysis.distillation).

The teacher is the sidebar's model; the student is picked here (by default the shipped
minilm-student, distilled from MiniLM). Every choice is in the URL: student (student_path
for a folder or Hub id), dist_on, dist_measure, dist_map, dist_layers, dist_pair, dist_head.
"""

from __future__ import annotations

import io
import json

import numpy as np
import streamlit as st

import viz_core as vc
from viz_core.figures.distillation import layer_map_figure, pair_maps_figure
from viz_core.i18n import N_, _

from . import state
from .charts import chart, download, download_csv, table
from .controls import url_select, url_text_box
from .errors import literal, reported, translated
from .runs import get_model
from .sidebar import custom_allowed, deployment_policy, model_choices

STUDENT = "minilm-student"
OTHER = N_("Other (path or Hub id)…")
ON_INPUT, ON_HELD_OUT = N_("the input text"), N_("32 sentences the shipped student never saw")
MAPPINGS = {"uniform": N_("uniform (TinyBERT: student layer m ← teacher layer m·k)"),
            "last": N_("last layer only (MiniLM)"), "custom": N_("my own list")}

EXPLANATION = N_("""
**What a student learns from its teacher.** A distilled model (the *student*) is trained to
reproduce what a larger model (the *teacher*) computes inside, not only its answers. The two
recipes this view reads differ in *what* is copied and *from where*:

- **Embeddings.** TinyBERT makes the student's embedding layer match the teacher's, through a
  learned matrix when the widths differ. MiniLM leaves the embeddings alone.
- **Attention: scores or distributions.** TinyBERT copies every head's *scores* (QKᵀ/√d,
  before the softmax) with a squared error, layer by layer: student layer *m* learns from
  teacher layer *m·k* (k = teacher layers ÷ student layers), the *uniform* map. MiniLM copies
  only the *distributions* (after the softmax) of the **last** layer, with a KL divergence, so
  the student's lower layers are free to find their own way there.
- **Value relations.** MiniLM also copies how the values relate to one another in that last
  layer: softmax(V Vᵀ/√d) per head, again with a KL divergence. It needs no equal widths.
- **Hidden states.** TinyBERT copies each mapped layer's output through a learned matrix;
  MiniLM does not.
- **Prediction layer.** TinyBERT's second, task-specific stage copies the teacher's soft
  predictions on the task; MiniLM's distillation is task-agnostic and has none.

Both papers compare head with head, so their students keep the teacher's head count. Here,
models with different head counts are compared through the average of their heads. The
heatmap measures **every** student layer against **every** teacher layer; the red frames are
the pairs the chosen map matches. On a well-distilled student the framed cells are the low ones
of their row.
""")


@st.cache_resource(max_entries=16, show_spinner=False)
def _compare(teacher: str, student: str, device: str, texts: tuple[str, ...], mapping):
    """The Distillation of two models on these texts (shared, read-only)."""
    return vc.distillation.compare(get_model(teacher, device), get_model(student, device),
                                   list(texts), mapping=list(mapping) if isinstance(
                                       mapping, tuple) else mapping)


@st.cache_resource(max_entries=32, show_spinner=False)
def _maps(teacher: str, student: str, device: str, text: str, pair: tuple[int, int],
          head: int | None):
    return vc.distillation.attention_maps(get_model(teacher, device),
                                          get_model(student, device), text, *pair, head=head)


def held_out_sentences() -> tuple[str, ...]:
    """16 toy-grammar and (in a clone) 16 documentation sentences minilm-student never saw."""
    from viz_core.training.distil import held_out

    sets = held_out(16)
    return tuple(sets["toy"][:16] + sets["prose"][:16])


def _student(teacher: str) -> str:
    policy = deployment_policy()
    choices = [m for m in model_choices(policy) if m != teacher]
    if custom_allowed(policy):
        choices.append(OTHER)
    if not choices:
        st.info(_("This deployment allows no second model to compare with."))
        state.stop()
    default = STUDENT if STUDENT in choices else choices[0]
    name = url_select(_("Student"), "student", choices, default,
                      format_func=lambda n: _(n) if n == OTHER else n,
                      help=_("The distilled model. The teacher is the sidebar's model."))
    if name == OTHER:
        name = url_text_box(_("Student folder or Hub id"), "student_path", strip=True,
                            help=_("A Hugging Face folder or Hub id sharing the teacher's "
                                 "tokenizer."))
        if not name:
            st.info(_("Enter the student's folder or Hub id."))
            state.stop()
        with reported(_("loading the student {value!r}").format(value=name[:80])):
            policy.check_name(name, builtin=False)
    return name


def _mapping(n_student: int | None):
    """The mapping choice: "uniform", "last" or a tuple of teacher layers."""
    c1, c2 = st.columns([2, 3])
    name = url_select(_("Layer map"), "dist_map", list(MAPPINGS), format_func=lambda m: _(MAPPINGS[m]),
                      container=c1)
    if name != "custom":
        return name
    raw = url_text_box(_("Teacher layer for each student layer"), "dist_layers", limit=80,
                       strip=True, container=c2, default=",".join(
                           str(i) for i in range(n_student or 1)),
                       help=_("Comma-separated, from student layer 0 up, e.g. 1,3,5."))
    try:
        layers = tuple(int(x) for x in raw.replace(" ", "").split(",") if x)
    except ValueError:
        st.error(_("Write teacher layers as numbers separated by commas, not {literal}.").format(
                     literal=literal(raw[:40])), icon="⚠️")
        state.stop()
    return layers or "uniform"


def teacher_and_student(sel) -> None:
    """The whole mode, below the Compare page's mode switch."""
    with st.expander(_("What TinyBERT and MiniLM transfer"), expanded=False):
        st.markdown(_(EXPLANATION))
    teacher = sel.model_name
    student = _student(teacher)
    on = url_select(_("Measure on"), "dist_on", [ON_HELD_OUT, ON_INPUT], widget="radio",
                    horizontal=True, format_func=_)
    texts = held_out_sentences() if on == ON_HELD_OUT else (sel.text,)
    with reported(_("loading the student {value!r}").format(value=student[:80])), \
            st.spinner(_("Loading {literal}…").format(literal=literal(student[:80]))):
        depth = len([b for b in get_model(student, sel.device).block_heads
                     if b.endswith(".self")])
    mapping = _mapping(depth)
    measures = list(vc.distillation.MEASURES)
    measure = url_select(_("Measure"), "dist_measure", measures,
                         format_func=lambda m: _(vc.distillation.MEASURE_LABELS[m]))
    with reported(_("comparing the teacher and the student")), \
            st.spinner(_("Comparing every student layer with every teacher layer…")):
        result = _compare(teacher, student, sel.device, tuple(texts), mapping)
    state.show_notices()
    for note in result.notes():
        st.caption(literal(translated(note)))
    label = _(vc.distillation.MEASURE_LABELS[measure])
    chart(layer_map_figure(
        result.matrix(measure), result.mapping, measure=label, teacher=teacher,
        student=student, title=_("{label}, {n_texts} text(s): student × teacher layers").format(
                                   label=label, n_texts=result.n_texts)),
        key="dist_map_chart", name="teacher-student-layers")
    st.markdown(_("**Losses of the mapped pairs** (lower is closer)"))
    shown = result.mapped.drop(columns="mapped")
    table(shown, hide_index=True, width="stretch")
    d1, d2 = st.columns(2)
    with d1:
        download_csv(_("Every pair (CSV)"), result.pairs, "teacher-student-pairs.csv",
                     "dl_dist_pairs")
    with d2:
        download(_("Summary (JSON)"), lambda: json.dumps(_summary(result), indent=2),
                 "teacher-student.json", "application/json", "dl_dist_json")
    _pair_view(sel, teacher, student, result)


def _summary(result) -> dict:
    return {"teacher": result.teacher, "student": result.student,
            "mapping": [list(p) for p in result.mapping], "mapping_name": result.mapping_name,
            "texts": result.n_texts, "tokens": result.n_tokens, "notes": result.notes(),
            "mapped": result.mapped.to_dict(orient="records")}


def _pair_view(sel, teacher: str, student: str, result) -> None:
    """One pair's two attention maps on the sidebar's input, and their difference."""
    n_t = result.teacher_layers
    pairs = [i * n_t + j for i in range(result.student_layers) for j in range(n_t)]
    mapped = {s * n_t + t for s, t in result.mapping}

    def name(p: int) -> str:
        s, t = divmod(p, n_t)
        return (_("student {s} ↔ teacher {t}").format(s=s, t=t)
                + (_(" (mapped)") if p in mapped else ""))
    st.markdown(_("**One pair, on the input text**"))
    c1, c2 = st.columns([3, 2])
    pick = url_select(_("Pair"), "dist_pair", pairs, min(mapped), format_func=name, container=c1)
    heads = ["mean"] + ([str(h) for h in range(result.teacher_heads)]
                        if result.heads_matched else [])
    head = url_select(_("Heads"), "dist_head", heads, container=c2,
                      format_func=lambda h: _("mean of the heads") if h == "mean" else
                      _("head {head}").format(head=h),
                      help=_("One head needs equal head counts."))
    pair = divmod(pick, n_t)
    with reported(_("drawing the pair's attention maps")), st.spinner(_("Tracing the pair…")):
        tokens, t_map, s_map = _maps(teacher, student, sel.device, sel.text, pair,
                                     None if head == "mean" else int(head))
    s, t = pair
    chart(pair_maps_figure(
        tokens, t_map, s_map,
        teacher_label=_("teacher {name} · layer {layer}").format(name=teacher, layer=t),
        student_label=_("student {name} · layer {layer}").format(name=student, layer=s),
        title=_("Attention of the pair ({heads}) and the difference").format(
            heads=_("head mean") if head == "mean" else _("head {head}").format(head=head))),
        key="dist_pair_chart", name="teacher-student-pair")
    kl = vc.distillation.kl_rows(t_map[None], s_map[None]).mean()
    st.caption(_("On this input: KL(teacher ‖ student) = {kl:.4f} nats a query position, largest "
                 "|difference| = {float:.3f}.").format(
                   kl=kl, float=float(np.abs(s_map - t_map).max())))
    download(_("The two maps (NPZ)"), lambda: _npz(tokens, t_map, s_map), "teacher-student-pair.npz",
             "application/octet-stream", "dl_dist_pair")


def _npz(tokens, t_map, s_map) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, tokens=np.array(tokens), teacher=t_map, student=s_map,
                        difference=s_map - t_map)
    return buffer.getvalue()
