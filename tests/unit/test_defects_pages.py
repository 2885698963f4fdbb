"""Issue 15's defects, each with a test that would have caught it: the Masks page with
Hugging Face models (pad tokens that are not "<pad>"), the Positional page's whole range,
Marian's half-split sin/cos labels and a readable model card on Home."""


import numpy as np
import pytest

from attention_lab.ui.model_card import model_card_rows, model_metrics
from viz_core.figures.masks import pad_columns, real_length
from viz_core.figures.positional import positional_curves, sinusoidal_table
from viz_core.lessons.positions import (
    find_offset,
    pair_of,
    sin_cos_labels,
    sinusoid_closed_form,
    sinusoid_layout,
    whole_table,
)

T, F = True, False


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return {name: str(tiny_models.path(name, seed=0)) for name in ("gpt2", "marian", "roberta", "bart")}


# ---- masks ----------------------------------------------------------------------------
def test_pad_columns_read_padding_not_causality():
    causal_pad = np.array([[F, T, T, T], [F, F, T, T], [F, F, T, T], [F, F, T, T]])
    np.testing.assert_array_equal(pad_columns(causal_pad), [F, F, T, T])
    assert real_length(causal_pad) == 2
    causal = np.triu(np.ones((3, 3), bool), 1)
    assert real_length(causal) == 3  # the last query sees every key
    assert real_length(np.zeros((2, 5), bool)) == 5


# ---- positional -------------------------------------------------------------------------
def test_sinusoid_layouts_by_closed_form():
    inter = sinusoidal_table(50, 16)
    assert sinusoid_layout(inter) == "interleaved"
    half = sinusoid_closed_form(50, 16, "half")
    assert sinusoid_layout(half) == "half"
    # by hand: PE(1, 0) = sin(1), PE(1, 8) = cos(1) in the half layout; PE(1, 1) = sin(1/10000^(2/16))
    assert half[1, 0] == pytest.approx(np.sin(1.0))
    assert half[1, 8] == pytest.approx(np.cos(1.0))
    assert half[1, 1] == pytest.approx(np.sin(10000 ** (-2 / 16)))
    assert sin_cos_labels(half)[:2] == ["sin", "sin"] and sin_cos_labels(half)[8] == "cos"
    assert sin_cos_labels(inter)[:2] == ["sin", "cos"]
    assert sinusoid_layout(np.random.default_rng(0).normal(size=(50, 16))) is None
    assert pair_of(1, 16, "half") == 9 and pair_of(1, 16, "interleaved") == 0
    odd = sinusoid_closed_form(10, 5, "half")
    assert odd.shape == (10, 5) and sinusoid_layout(odd) == "half"


def test_find_offset():
    table = np.arange(20, dtype=np.float32).reshape(10, 2)
    assert find_offset(table, table[2:5]) == 2
    assert find_offset(table, table[0:3]) == 0
    assert find_offset(table, table[0:3] + 1) is None


def test_curves_label_marian_dims_by_half_and_mark_the_input():
    table = sinusoid_closed_form(40, 8, "half")
    fig = positional_curves(table, [1, 4], sinusoidal=True, start=0, marks=["a", "<b>", "c"])
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names == ["dim 1 (sin)", "dim 4 (cos)"]  # parity would say "dim 1 (cos)"
    marks = [t for t in fig.data if t.mode == "markers"]
    assert list(marks[0].x) == [0, 1, 2] and "&lt;b>" in list(marks[0].text)


@pytest.mark.slow
def test_whole_tables_of_hf_models_with_their_offsets(tiny):
    import viz_core as vc

    for name, offset_word, layout in (("marian", "", "half"), ("roberta", "from row 2", None),
                                      ("bart", "from row 2", None)):
        m = vc.load(tiny[name], dtype="float32")  # the layout test needs float32 values
        tr = m.trace("the cat sat on the mat")
        full, where = whole_table(m, tr.positional)
        assert full.shape[0] == 64, name  # the model's whole range, not the input's 7 rows
        np.testing.assert_allclose(full[: len(tr.positional)], tr.positional, atol=1e-6)
        assert offset_word in where
        assert sinusoid_layout(full) == layout


# ---- home -------------------------------------------------------------------------------
def test_model_card_rows_are_readable():
    info = {"name": "x", "kind": "encoder-only", "parameters": 22713216, "scores": True,
            "heads": 12, "layers": 6, "decoder_layers": 0, "d_model": 384, "path": None}
    rows = {r["field"]: r["value"] for r in model_card_rows(info, {"trained_steps": 3422})}
    assert rows["Parameters"] == "22,713,216"
    assert rows["Pre-softmax scores"] == "yes"
    assert rows["Kind"].startswith("encoder only")
    assert rows["Loaded from"] == "—"
    assert rows["Trained steps"] == "3422"
    card = {"metrics": {"top": [{"block": "encoder.1.self", "head": 0}, {"head": 1000}]}}
    rows = {r["field"]: r["value"] for r in model_card_rows(info, card)}  # en-fr's heads
    assert rows["Metrics"] == "top: (block: encoder.1.self, head: 0), (head: 1,000)"
    assert model_metrics(info) == [("Layers", "6"), ("Heads", "12"), ("d_model", "384"),
                                   ("Parameters", "22.7 M")]
    assert model_metrics({"kind": "encoder-decoder", "layers": 2, "decoder_layers": 2,
                          "parameters": 908381})[0] == ("Layers", "2 + 2")


# Names and notation a card keeps in every language: model and family names, the device,
# the norms' names, and the terms of art the recipe cites.
CARD_TERMS = {"native", "bert", "cpu", "LayerNorm", "RMSNorm", "RoPE", "BLEU", "MSE", "GloVe",
              "Jiao", "dropout", "Python", "README", "dtype", "because", "SVD", "Adam",
              "wpe"}  # GPT-2's position table


def test_model_cards_read_in_chinese(tiny):
    """Home's card in 简体中文, for every shipped model, MiniLM and tiny Hugging Face models:
    its rows "Norm placement", "Dtype"..., their values ("pre", "layernorm", a family's
    "learned absolute position embeddings (wpe)"), every key of the metrics and training
    ("perplexity", "exact match", "label smoothing") and the cards' nested sentences (a
    recipe's steps, a metric's definition) were English. Model output (the zh-en card's
    translations of the seed sentences), names and identifiers stay as they are."""
    import json
    import re
    from pathlib import Path

    import viz_core as vc
    from tests.support.chinese_text import english_words, option_words
    from tests.support.language import speaking

    root = Path(__file__).resolve().parents[2] / "checkpoints"
    subjects = [(p.parent.name, json.loads(p.read_text())) for p in sorted(root.glob("*/card.json"))]
    subjects += [("minilm", None), (tiny["gpt2"], None), (tiny["roberta"], None),
                 (tiny["bart"], None), (tiny["marian"], None)]
    from attention_lab.ui.errors import translated

    for name, card in subjects:
        model = vc.load(name, device="cpu")
        info = model.info()
        kept = set(re.findall(r"[a-z]+", f"{info.get('name')} {info.get('family')}".lower()))
        kept |= {w.lower() for w in CARD_TERMS}
        for output in ((card or {}).get("metrics") or {}).get("seed_sentences", {}).values():
            kept |= set(re.findall(r"[a-z]+", output.lower()))
        with speaking("zh"):
            rows = model_card_rows(info, card)
            # the description Home shows above the table: an HF model's was an English
            # f-string ("gpt2 decoder-only model (2 layers x 4 heads)"); the shipped
            # cards' prose is read by the zh page sweep
            about = translated(model.card.get("description", "")) if card is None else ""
        assert len(rows) >= 10, name
        assert not english_words(re.sub(r"\S*[._/\d]\S*", " ", about), kept), (name, about)
        for row in rows:
            assert not option_words(row["field"], kept), (name, row)
            value = re.sub(r"\S*[._/\d]\S*", " ", row["value"])  # identifiers, paths, numbers
            assert not english_words(value, kept), (name, row["field"], row["value"][:200])


def test_model_card_names_the_norm_and_positions():
    info = {"kind": "decoder-only", "layers": 2, "norm_placement": "pre", "norm": "rmsnorm",
            "positional": "rope", "positional_kind": "rotary", "dtype": "float32", "d_ff": 256,
            "rope_base": 10000.0}
    card = {"metrics": {"by_length": {"1,024 tokens": {"repeated_half_accuracy": 0.9}}},
            "training": {"kept_rows": {"decoder.0.self_attn.W_Q.weight": [0, 48]}}}
    rows = {r["field"]: r["value"] for r in model_card_rows(info, card)}
    assert rows["Norm placement"] == "pre-norm (before each sublayer)"
    assert rows["Norm"] == "RMSNorm" and rows["Positions"] == "rotary (RoPE)"
    assert rows["Kind of positions"] == "rotary" and rows["Number format (dtype)"] == "float32"
    assert rows["Feed-forward width d_ff"] == "256" and rows["RoPE base"] == "10000.0"
    assert rows["Metrics"] == "by length: 1,024 tokens: repeated-half accuracy: 0.9"
    # a weight's name is kept as it is (it read "decoder.0.self attn.W Q.weight")
    assert rows["Training"] == "kept rows: decoder.0.self_attn.W_Q.weight: 0, 48"


def test_card_sections_nest_and_show_text_as_typed():
    """A card's structured fields as nested Markdown lists; a user's own card's keys and
    values are shown as typed (Markdown, HTML and LaTeX escaped, as everywhere); the model's
    own output (zh-en's translations of the seed sentences) as code."""
    from attention_lab.ui.errors import literal
    from attention_lab.ui.model_card import card_sections

    card = {"task": "x", "metrics": {"n": 1000, "by_half": {"32 words": {"ratio": 0.5}},
                                     "top": [{"head": 3}, {"head": 1}],
                                     "seed_sentences": {"猫": "the *cat*"}},
            "recipe": {"a*b": "<b>x</b> $y$ :red[z]"}}
    sections = dict(card_sections(card))
    assert set(sections) == {"Metrics", "Recipe"}
    assert sections["Metrics"].split("\n") == [
        "- **n**: 1,000", "- **by half length**", "  - **32 words**: ratio\\: 0\\.5",
        "- **top**", "  - **1**: head\\: 3", "  - **2**: head\\: 1",
        "- **seed sentences**", "  - **猫**: `the *cat*`"]  # model output: as code
    assert sections["Recipe"] == (f"- **{literal('a*b')}**: "
                                  f"{literal('<b>x</b> $y$ :red[z]')}")
    assert "<b>" not in sections["Recipe"] and "$y$" not in sections["Recipe"]


def test_a_deep_or_wide_card_is_shown_cut():
    """A user's card can nest anything: 900 levels (json reads it, below the recursion limit)
    crashed Home with a RecursionError; 100,000 entries or a million characters would have
    been one huge cell."""
    from attention_lab.ui.model_card import MAX_CHARS, MAX_DEPTH, MAX_ITEMS, card_sections

    deep = 1
    for _level in range(900):
        deep = {"a": deep}
    wide = {f"k{i}": i for i in range(100_000)}
    card = {"metrics": deep, "training": wide, "text": list(range(250)), "task": "x" * 10**6}
    rows = {r["field"]: r["value"] for r in model_card_rows({}, card)}
    assert rows["Metrics"] == "a: " * MAX_DEPTH + "…"
    assert rows["Training"].endswith(f"k99: 99, … ({100_000 - MAX_ITEMS:,} more)")
    assert rows["Task"] == "x" * MAX_CHARS + "…"
    sections = dict(card_sections(card))
    lines = sections["Metrics"].split("\n")
    assert len(lines) == MAX_DEPTH and lines[-1].endswith("**a**: …")
    assert sections["Training"].count("\n") == MAX_ITEMS  # 100 entries and the rest's count
    assert sections["Text"].endswith("- … \\(150 more\\)")


def test_backends_count_layers_alike(tiny):
    """info()'s layers: the encoder's, or the one stack's; decoder_layers: the decoder's. The
    native backend once gave a decoder-only model 0 and N where the HF backend gave N and N.
    Checked against the blocks a trace captures, per stack."""
    import viz_core as vc

    for name in ("lm", "en-fr", tiny["gpt2"], tiny["bart"], tiny["roberta"]):
        model = vc.load(name, device="cpu")
        info = model.info()
        blocks = model.trace("the cat sat", max_new=0).blocks
        count = {s: len({b.split(".")[1] for b in blocks if b.startswith(f"{s}.")})
                 for s in ("encoder", "decoder")}
        one_stack = count["encoder"] or count["decoder"]
        assert info["layers"] == (count["encoder"] if info["kind"] == "encoder-decoder"
                                  else one_stack), name
        assert info["decoder_layers"] == count["decoder"], name
