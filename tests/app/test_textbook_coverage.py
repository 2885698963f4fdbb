"""Issue 15's tests, the gaps closed (see also test_pretraining*.py, test_embeddings.py,
test_relative.py, test_bleu.py and test_defects_pages.py):

- every new view (Pretraining, Sentence pairs, Relative positions, BLEU on Beam search) in
  AppTest with each shipped native model, MiniLM and a tiny random T5 and GPT-2: the view, or
  where it does not apply a clear message, never an exception;
- the hostile corpus typed into the new inputs (the second sentence, the XLNet order box, the
  BLEU reference) and sent as the MASS k (URL and widget); malformed factorisation orders;
  markup in any of them shown as text, never rendered;
- the pages draw the hand-computed answers (UniLM's 3 + 2 mask, XLNet's query stream for the
  order 3 1 2 0, exactly round(0.15 n) MLM positions);
- issue 15's item 8 on more models: the Masks page's exact per-sentence lengths with GPT-2,
  a readable model card (no JSON, one "Layers" row for one-stack models) on every kind.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support.apptest import no_errors, open_app, z_of
from tests.support.hostile_inputs import CORPUS, sendable

TEXT = "the cat sat on the mat . the dog saw a red house ."
MODELS = ["dates", "en-fr", "lm", "lm-rope", "minilm", "tiny-t5", "tiny-gpt2"]
ENCODER_DECODERS = {"dates", "en-fr", "tiny-t5"}
SCHEMES = ["BERT masked LM", "RoBERTa dynamic masking", "Whole-word masking",
           "ERNIE entity/phrase masking", "GPT", "UniLM", "XLNet", "MASS",
           "T5 span corruption", "BART noising"]
# what each model adds around a sentence: never a lesson token
SPECIALS = {"[CLS]", "[SEP]", "[PAD]", "</s>", "<s>", "<pad>", "<|endoftext|>", "<bos>",
            "<eos>"}


@pytest.fixture(scope="module")
def model_path(tiny_models):
    def path(name: str) -> str:
        return str(tiny_models.path(name[5:])) if name.startswith("tiny-") else name
    return path


def figs(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def panels(fig: dict) -> dict[str, np.ndarray]:
    """A mask_panels figure's heatmaps by subplot title (z = 1 where blocked)."""
    heatmaps = [t for t in fig["data"] if t["type"] == "heatmap"]
    titles = [a["text"] for a in fig["layout"]["annotations"]][:len(heatmaps)]
    out = {}
    for title, h in zip(titles, heatmaps, strict=True):
        n_rows, n_cols = len(h["y"]), len(h["x"])
        out[title] = z_of(h).reshape(n_rows, n_cols)
    return out


def messages(at) -> list[str]:
    return [m.value for m in (*at.error, *at.warning, *at.info)]


def rendered_text(at) -> list[str]:
    """Everything the page renders as Markdown (where markup would take effect)."""
    return [e.value for e in (*at.markdown, *at.caption, *at.error, *at.warning, *at.info,
                              *at.success, *at.title, *at.header, *at.subheader)]


def assert_markup_not_rendered(at, text: str, where) -> None:
    """User text that holds markup may reach Markdown only escaped (ui.errors.literal)."""
    raw = text.strip()
    if len(raw) < 4 or not any(ch in raw for ch in "<>*_`$[]#|:"):
        return
    for shown in rendered_text(at):
        assert raw not in shown, (where, raw[:40], shown[:120])


# ---- each view with each kind of model ---------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_pretraining_every_scheme_on_every_kind_of_model(model, model_path):
    at = open_app("pretraining", model=model_path(model), text=TEXT)
    no_errors(at)
    # the natives' lessons use simple words whatever the model (test_pretraining_page runs
    # every scheme on a toy native model): en-fr gets every scheme, the others three
    for scheme in SCHEMES if model not in ("dates", "lm", "lm-rope") else SCHEMES[4::2]:
        at.selectbox(key="pt_scheme").set_value(scheme).run()
        no_errors(at)
        assert figs(at), (model, scheme)
        table = at.dataframe[0].value
        column = "original" if "original" in table else "tokens"
        words = " ".join(table[column].astype(str)).split()
        assert not SPECIALS & set(words), (model, scheme, SPECIALS & set(words))
    if model in ("dates", "en-fr", "lm", "lm-rope"):  # simple words, not the model's vocab
        at.selectbox(key="pt_scheme").set_value("BERT masked LM").run()
        assert at.dataframe[0].value["original"].tolist() == TEXT.split()


@pytest.mark.parametrize("model", MODELS)
def test_pairs_view_or_a_clear_message(model, model_path):
    at = open_app("pairs", model=model_path(model), text="The cat sat.", pair="It was tired.")
    no_errors(at)
    if model == "minilm":
        fig = figs(at)[0]
        assert len(fig["layout"]["shapes"]) == 4  # segments A and B, on both axes
        table = at.dataframe[0].value
        assert table["token"].tolist()[0] == "[CLS]"
        assert table["token"].tolist().count("[SEP]") == 2
        assert table["segment"].tolist()[-1] == "B"
    else:
        assert not at.get("plotly_chart") and not at.dataframe
        assert any("encoder-only" in m for m in messages(at)), messages(at)


def charts_by_key(at) -> dict[str, dict]:
    """Charts by their widget key (the element id ends with it)."""
    return {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.spec)
            for c in at.get("plotly_chart")}


@pytest.mark.parametrize("model", MODELS)
def test_relative_view_or_a_clear_message(model, model_path):
    at = open_app("relative", model=model_path(model), text="the cat sat on the mat")
    no_errors(at)
    charts = charts_by_key(at)
    assert "a · content–content" in json.dumps(charts["rel_xl"], ensure_ascii=False)
    t5 = {"rel_t5_map", "rel_t5_curves"} & set(charts)
    if model == "tiny-t5":  # the T5 bias heatmap and its curves by distance
        assert t5 == {"rel_t5_map", "rel_t5_curves"}
        assert not any("T5 model" in m for m in messages(at))
    else:
        assert not t5
        assert any("load a T5 model" in m for m in messages(at)), messages(at)


@pytest.mark.parametrize("model", MODELS)
def test_beam_bleu_against_the_sidebar_target(model, model_path):
    from viz_core.lessons.bleu import sentence_bleu

    params = {"target": "le chat"} if model in ENCODER_DECODERS else {}
    at = open_app("beam", model=model_path(model), text="the cat saw the dog", beam=3,
                  max_len=6, **params)
    no_errors(at)
    if model == "minilm":
        assert any("no decoder" in m for m in messages(at))
        assert not at.dataframe
        return
    table = at.dataframe[0].value
    captions = [c.value for c in at.caption]
    if model not in ENCODER_DECODERS:  # no target box: BLEU cannot apply, and says so
        assert "BLEU" not in table
        assert any("applies to encoder-decoder models" in c for c in captions), captions
        return
    assert any(c.startswith("BLEU = BP") for c in captions)
    for text, bleu in zip(table["text"], table["BLEU"], strict=True):
        assert bleu == pytest.approx(sentence_bleu(text, "le chat").score, abs=0.01)
    best = table["text"].iloc[0]
    if best.strip():  # the best hypothesis as the reference: BLEU 100 by definition
        at.text_input(key="target").input(best).run()
        no_errors(at)
        assert at.dataframe[0].value["BLEU"].iloc[0] == pytest.approx(100.0)


# ---- the pages draw the hand-computed answers ---------------------------------------------
def test_unilm_page_draws_the_3_plus_2_mask():
    # "a b": one sentence, so source = its first half; [SOS] a [EOS] | b [EOS]: 3 + 2 tokens
    at = open_app("pretraining", model="en-fr", text="a b", pt_scheme="UniLM")
    no_errors(at)
    got = panels(figs(at)[0])
    np.testing.assert_array_equal(got["sequence-to-sequence"], [
        [0, 0, 0, 1, 1],
        [0, 0, 0, 1, 1],
        [0, 0, 0, 1, 1],
        [0, 0, 0, 0, 1],
        [0, 0, 0, 0, 0],
    ])
    np.testing.assert_array_equal(got["left-to-right"], np.triu(np.ones((5, 5)), 1))
    np.testing.assert_array_equal(got["right-to-left"], np.tril(np.ones((5, 5)), -1))
    np.testing.assert_array_equal(got["bidirectional"], np.zeros((5, 5)))


@pytest.mark.parametrize("order", ["3 1 2 0", "3,1,2,0", " 3  1;2 0 "])
def test_xlnet_page_draws_the_hand_computed_streams(order):
    at = open_app("pretraining", model="lm", text="a b c d", pt_scheme="XLNet", pt_order=order)
    no_errors(at)
    assert not at.warning
    got = panels(figs(at)[0])
    query = next(v for k, v in got.items() if k.startswith("query stream"))
    content = next(v for k, v in got.items() if k.startswith("content stream"))
    np.testing.assert_array_equal(query, [[1, 0, 0, 0],  # 0, predicted last, sees 1 2 3
                                          [1, 1, 1, 0],  # 1 sees only 3
                                          [1, 0, 1, 0],  # 2 sees 3 and 1
                                          [1, 1, 1, 1]])  # 3, first, sees nothing
    np.testing.assert_array_equal(content, [[0, 0, 0, 0],
                                            [1, 0, 1, 0],
                                            [1, 0, 0, 0],
                                            [1, 1, 1, 0]])


def test_mlm_page_masks_exactly_round_15_percent_for_every_seed():
    words = " ".join(f"w{i}" for i in range(20))  # round(0.15 * 20) = 3
    at = open_app("pretraining", model="lm", text=words, pt_scheme="BERT masked LM")
    for seed in range(6):
        at.number_input(key="pt_seed").set_value(seed).run()
        no_errors(at)
        table = at.dataframe[0].value
        assert (table["target"] != "").sum() == 3, seed
        chosen = table[table["target"] != ""]
        assert (chosen["target"] == chosen["original"]).all()


# ---- hostile input on the new inputs -----------------------------------------------------
@pytest.mark.slow
def test_hostile_corpus_typed_as_the_second_sentence():
    at = open_app("pairs", model="minilm", text="the cat sat on the mat")
    no_errors(at)
    for category, text in CORPUS:
        at.text_input(key="pair").set_value(sendable(text)).run()
        where = ("pair", category, text[:30])
        assert not at.exception, (where, [e.message for e in at.exception][:1])
        assert not at.error, (where, [e.value for e in at.error])
        expected = sendable(text).replace("\x00", "")[:20_000]
        assert at.text_input(key="pair").value == expected  # kept literally (cleaned, cut)
        assert at.get("plotly_chart"), where
        assert_markup_not_rendered(at, text, where)
    assert at.query_params["pair"] in (expected, [expected])


MALFORMED_ORDERS = [
    ("empty", ""), ("blank", "   "), ("too short", "0 1 2"), ("too long", "0 1 2 3 4"),
    ("repeated", "0 0 1 2"), ("out of range", "1 2 3 4"), ("negative", "-1 0 1 2"),
    ("letters", "a b c d"), ("a word", "3 1 two 0"), ("emoji", "🐈 1 2 0"),
    ("other digits", "٣ ١ ٢ ٠"), ("superscripts", "³ ¹ ² ⁰"), ("decimals", "3.0 1 2 0"),
    ("hex", "0x3 1 2 0"), ("exponent", "1e309 0 1 2"),
    ("huge", "99999999999999999999999999 1 2 0"), ("thousands of digits", "9" * 5000),
    ("markup", "<script>window.__pwned=1</script>"), ("markdown", "**3** 1 2 0"),
    ("latex", "$3$ 1 2 0"), ("directive", ":red[3] 1 2 0"), ("brackets", "[3, 1, 2, 0]"),
]


@pytest.mark.slow
def test_xlnet_order_box_refuses_malformed_orders_and_the_hostile_corpus():
    at = open_app("pretraining", model="lm", text="a b c d", pt_scheme="XLNet")
    no_errors(at)
    default = at.text_input(key="pt_order").value
    inputs = MALFORMED_ORDERS + [(c, sendable(t)) for c, t in CORPUS]
    for category, order in inputs:
        at.text_input(key="pt_order").set_value(order).run()
        where = ("order", category, order[:30])
        assert not at.exception, (where, [e.message for e in at.exception][:1])
        assert not at.error, where
        assert any(w.value.startswith("Order not used") for w in at.warning), where
        assert f"Showing the seed's order {default}" in at.warning[0].value.replace("\\", "")
        assert figs(at), where  # the seed's order is drawn instead
        assert at.text_input(key="pt_order").value == order.replace("\x00", "")[:20_000]
        assert_markup_not_rendered(at, order, where)
    at.text_input(key="pt_order").set_value("3 1 2 0").run()  # and a good one still works
    no_errors(at)
    assert not at.warning


MASS_K_URL = [
    ("0", "out of range"), ("-3", "out of range"), ("99", "out of range"),
    (str(10**30), "out of range"), ("1e309", "not a number"), ("nan", "not a number"),
    ("2.5", "not a number"), ("", "not a number"),
    ("9" * 5000, "not a number"), ("**2**", "not a number"),
    (":red[2]", "not a number"), ("<b>2</b>", "not a number"), ("🐈", "not a number"),
    (" 3 ", None), ("+3", None),
]


@pytest.mark.parametrize("raw, message", MASS_K_URL)
def test_mass_k_from_the_url_is_clamped_or_refused_with_a_message(raw, message):
    tokens = TEXT.split()
    at = open_app("pretraining", model="en-fr", text=TEXT, pt_scheme="MASS", pt_k=raw)
    no_errors(at)
    k = at.number_input(key="pt_k").value
    assert 1 <= k <= len(tokens)
    if message is None:
        assert k == 3
    else:
        notes = [i.value for i in at.info if "pt_k" in i.value]
        assert notes and message in notes[0], (raw[:20], notes)
        assert_markup_not_rendered(at, raw, ("pt_k", raw[:20]))
    inputs = at.dataframe[0].value["tokens"].tolist()[1].split()
    assert inputs.count("[MASK]") == k  # the span drawn is the k shown


@pytest.mark.slow
def test_mass_k_hostile_corpus_in_the_url():
    """Every corpus entry as ?pt_k=... with MASS selected (test_pretraining_page sends it with
    XLNet, where k is never read)."""
    for category, text in CORPUS[1::5]:
        at = open_app("pretraining", model="lm", text=TEXT, pt_scheme="MASS",
                      pt_k=sendable(text[:200]))
        where = ("pt_k", category, text[:30])
        assert not at.exception, (where, [e.message for e in at.exception][:1])
        assert not at.error, where
        assert 1 <= at.number_input(key="pt_k").value <= len(TEXT.split())
        assert any("pt_k" in i.value for i in at.info), where
        assert_markup_not_rendered(at, sendable(text[:40]), where)


def test_mass_k_widget_takes_out_of_range_values_and_a_shrinking_text():
    n = len(TEXT.split())
    at = open_app("pretraining", model="en-fr", text=TEXT, pt_scheme="MASS")
    no_errors(at)
    for value in (1, n, 0, -5, n + 1, 2**31, 2**53, -2**40, 4):
        at.number_input(key="pt_k").set_value(value).run()
        assert not at.exception, (value, [e.message for e in at.exception][:1])
        assert not at.error, value
        k = at.number_input(key="pt_k").value
        # in range: used; out of range (only a hostile client can send it): Streamlit resets
        # the widget to its default, the lowest k
        assert k == (value if 1 <= value <= n else 1), (value, k)
        assert at.dataframe[0].value["tokens"].tolist()[1].split().count("[MASK]") == k
    at.number_input(key="pt_k").set_value(n).run()
    at.text_area(key="text").input("a b c").run()  # the range shrinks under the chosen k
    no_errors(at)
    assert at.number_input(key="pt_k").value == 3
    assert at.dataframe[0].value["tokens"].tolist()[1] == "[MASK] [MASK] [MASK]"


@pytest.mark.slow
def test_hostile_corpus_typed_as_the_bleu_reference():
    at = open_app("beam", model="en-fr", text="the cat saw the dog", beam=2, max_len=6)
    no_errors(at)
    for category, text in CORPUS[::2]:
        at.text_input(key="target").set_value(sendable(text)).run()
        where = ("target", category, text[:30])
        assert not at.exception, (where, [e.message for e in at.exception][:1])
        assert not at.error, where
        table = at.dataframe[0].value
        if sendable(text).replace("\x00", "").strip():
            assert table["BLEU"].between(0, 100).all(), where
        else:
            assert "BLEU" not in table, where
        assert_markup_not_rendered(at, text, where)


# ---- issue 15, item 8, on more models -----------------------------------------------------
def test_masks_page_gpt2_lengths_are_each_sentences_own(model_path):
    import viz_core as vc

    path = model_path("tiny-gpt2")
    sentences = ["the cat sat on the mat", "the dog"]
    # each sentence's own tokens, tokenised alone (no padding, no generated continuation)
    lengths = [len(vc.load(path).trace(s).source_tokens) for s in sentences]
    assert lengths[1] < lengths[0]
    at = open_app("masks", model=path, text=sentences[0], mask_batch="\n".join(sentences))
    no_errors(at)
    fig = figs(at)[0]
    titles = [a["text"] for a in fig["layout"]["annotations"] if "sentence" in a["text"]]
    n = lengths[0]
    assert titles == [f"sentence 0 (len {n} of {n})",
                      f"sentence 1 (len {lengths[1]} of {n})"]


@pytest.mark.parametrize("model", ["en-fr", "lm", "minilm", "tiny-gpt2", "tiny-t5"])
def test_home_model_card_is_readable_on_every_kind(model, model_path):
    at = open_app("home", model=model_path(model), text="the cat")
    no_errors(at)
    assert not at.json
    rows = dict(zip(*(at.dataframe[0].value[c].tolist() for c in ("field", "value")),
                    strict=True))
    for field, value in rows.items():
        assert "{" not in value and '"' not in value, (field, value)  # never JSON
    assert "," in rows["Parameters"] or int(rows["Parameters"]) < 1000
    kind = rows["Kind"]
    if kind.startswith("encoder–decoder"):
        assert rows["Encoder layers"] != "0" and rows["Decoder layers"] != "0"
    else:  # one stack: one "Layers" row, its true depth
        assert "Decoder layers" not in rows and "Encoder layers" not in rows
        assert rows["Layers"] != "0"
        assert [m.value for m in at.metric if m.label == "Layers"] == [rows["Layers"]]


@pytest.mark.parametrize(("model", "word"), [("en-fr", "pronoun accuracy"),
                                           ("lm", "perplexity")])
def test_home_card_shows_its_metrics_as_a_list(model, word, model_path):
    """A card's structured fields (metrics, training, data sizes) were one table cell each,
    cut off at the cell's width: each is now a nested list of its own, the metrics open."""
    at = open_app("home", model=model_path(model), text="the cat")
    no_errors(at)
    fields = at.dataframe[0].value["field"].tolist()
    assert "Parameters" in fields and "Metrics" not in fields and "Training" not in fields
    sections = {e.label: e for e in at.expander}
    assert {"Metrics", "Training", "Data sizes"} <= set(sections), list(sections)
    metrics = " ".join(m.value for m in sections["Metrics"].markdown)
    assert f"**{word}**" in metrics and "**n**: 1,000" in metrics
    assert sections["Metrics"].proto.expanded and not sections["Training"].proto.expanded


@pytest.mark.parametrize("model", ["zh-en", "minilm-student", "induction"])
def test_home_card_lists_read_in_chinese(model):
    """The card's lists in 简体中文: keys, a recipe's sentences and a metric's definition
    translated; zh-en's own translations of the seed sentences shown as code."""
    from tests.support.chinese_text import english_runs, shown_texts, user_words

    at = open_app("home", model=model, text="the cat", lang="zh")
    no_errors(at)
    assert "指标" in [e.label for e in at.expander]
    words = user_words(at)
    left = [(k, r) for k, t in shown_texts(at) for r in english_runs(t, words)]
    assert left == [], left[:5]


def test_url_values_quoted_in_notices_are_shown_as_typed(monkeypatch):
    """Every notice that quotes a URL value (int, choice, float, a refused model) escapes it:
    st.info renders Markdown, so '**x**' would turn bold and ':red[x]' red."""
    hostile = "**x** :red[y] $z$"
    escaped = "\\*\\*x\\*\\* \\:red\\[y\\] \\$z\\$"
    at = open_app("pretraining", model="lm", text=TEXT, pt_scheme=hostile)  # url_choice
    assert not at.exception
    assert any(escaped in i.value for i in at.info), [i.value for i in at.info]
    at = open_app("beam", model="lm", text="the cat", lp=hostile, max_len=2)  # url_number (float)
    assert not at.exception
    assert any(escaped in i.value for i in at.info), [i.value for i in at.info]
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_MODELS", "lm")  # a model the policy refuses
    at = open_app("home", model=hostile, text="the cat")
    assert not at.exception
    assert any("does not allow" in i.value and escaped in i.value for i in at.info), \
        [i.value for i in at.info]
    for shown in rendered_text(at):
        assert hostile not in shown
