"""The en-fr grammar's word alignment (tasks.en_fr.translate_aligned / word_alignment), the
reference alignment in token positions (viz_core.analysis.alignment), the shipped en-fr model's
cross-attention against it, and the Attention page showing the score."""


from tests.support.apptest import no_errors, open_app

# ---- the grammar's word alignment ---------------------------------------------------------


# the generator's and translate()'s output, pinned before the alignment was added: the shipped
# checkpoint was trained on this data (hashes over the same sentences as _pinned below)


# ---- token positions ----------------------------------------------------------------------


# ---- the shipped model --------------------------------------------------------------------


# Measured (predicting convention, the six examples): the best head of each example scores
# 0.83-1.00 against chance 0.12-0.25 (min margin 0.66); the best single head over the
# examples (layer 1 head 3) averages 0.97 against chance 0.18, a
# one-key-shifted alignment 0.29. Over 300 held-out sentences every layer-1
# head averages 0.92-0.95 (chance 0.19); a shuffled alignment gives ~0.2.


# ---- the Attention page -------------------------------------------------------------------
def test_attention_page_shows_en_fr_alignment_score():
    at = open_app("attention", model="en-fr", text="the red car", kind="decoder.cross",
                  layer=1, head=0)
    no_errors(at)
    captions = [c.value for c in at.caption]
    text = next(c for c in captions if "This head" in c)
    assert "word alignment" in text and "chance = 0.25" in text
    assert "This head: **1.00**" in text
    best = next(c for c in captions if c.startswith("Best heads over all cross-attention"))
    assert "layer 1 head 0 (1.00)" in best  # ties: by layer, then head
    at = open_app("attention", model="en-fr", text="the red car zebra", kind="decoder.cross")
    no_errors(at)
    assert any("No reference alignment" in c and "dates" in c and "en-fr" in c
               for c in (c.value for c in at.caption))
