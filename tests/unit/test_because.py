"""The textbook sentence in en-fr (issue 31 item 1): "the X did not VERB the Y because it was
too ADJ", where the adjective decides what "it" is and the French shows it (il/elle and the
adjective's ending). The grammar (tasks.en_fr.because_*), its held-out split, and the shipped
checkpoint on it."""

import random

import numpy as np
import pytest

import viz_core as vc
from viz_core.tasks import en_fr
from viz_core.tasks.common import Pair

SEEDS = ["the animal didn't cross the street because it was too tired",
         "the animal didn't cross the street because it was too wide"]


# ---- the grammar --------------------------------------------------------------------------
@pytest.mark.parametrize("english, french", [
    (SEEDS[0], "l'animal n'a pas traversé la rue parce qu'il était trop fatigué"),
    (SEEDS[1], "l'animal n'a pas traversé la rue parce qu'elle était trop large"),
    ("the animal did not cross the street because it was too wide",
     "l'animal n'a pas traversé la rue parce qu'elle était trop large"),
    ("the cow did not climb the wall because it was too tired",
     "la vache n'a pas escaladé le mur parce qu'elle était trop fatiguée"),
    ("the cow didn't climb the wall because it was too high",
     "la vache n'a pas escaladé le mur parce qu'il était trop haut"),
    ("the dog didn't eat the soup because it was too hot",
     "le chien n'a pas mangé la soupe parce qu'elle était trop chaude"),
    ("the girl did not carry the tree because it was too nervous",
     "la fille n'a pas porté l'arbre parce qu'elle était trop nerveuse"),
    ("the animal was too tired", "l'animal était trop fatigué"),
    ("the street was too wide", "la rue était trop large"),
])
def test_hand_worked_translations(english, french):
    assert en_fr.translate(english) == french


def test_seed_sentences_have_no_unknown_tokens():
    vocabs = en_fr.build_vocabs([])
    shipped = vc.load("en-fr")
    for text in SEEDS:
        ids, shown, unknown = vocabs["source"].encode(text)
        assert not unknown and "didn'" in shown and "t" in shown, shown
        assert not shipped.src_vocab.encode(text)[2]
        assert not vocabs["target"].encode(en_fr.translate(text))[2]


def test_alignment_of_the_seed_sentence():
    fr, links = en_fr.translate_aligned(SEEDS[0])
    en = en_fr.split_words(SEEDS[0])
    named = [(fr[f], en[e]) for f, e in links]
    assert named == [("l'", "the"), ("animal", "animal"), ("n'", "t"), ("a", "didn'"),
                     ("pas", "t"), ("traversé", "cross"), ("la", "the"), ("rue", "street"),
                     ("parce", "because"), ("qu'", "because"), ("il", "it"), ("était", "was"),
                     ("trop", "too"), ("fatigué", "tired")]
    assert en_fr.word_alignment(Pair(SEEDS[0], en_fr.translate(SEEDS[0]))) == links


def test_generated_agreement_by_construction():
    """The pronoun is the gender of the adjective's noun class (the lexicon's French gender),
    the adjective agrees with it, X and Y differ in gender, and translation is a function."""
    pairs = en_fr.because_dataset("train", 3000, seed=3) + en_fr.because_dataset("test", 300, 3)
    seen = {}
    n_because = 0
    for p in pairs:
        assert en_fr.translate(p.source) == p.target
        assert seen.setdefault(p.source, p.target) == p.target
        fr = en_fr.split_words(p.target)
        if "because" not in p.source:  # the N was too ADJ
            continue
        n_because += 1
        parts = en_fr.because_parts(p.source)
        assert parts.x.animate and not parts.y.animate and parts.x.gender != parts.y.gender
        noun = parts.x if parts.adj in en_fr.ANIMATE_ADJ else parts.y
        assert fr[fr.index("qu'") + 1] == {"m": "il", "f": "elle"}[noun.gender], p
        assert fr[-1] == parts.adj.forms[noun.gender == "f"], p
        assert noun.fr in fr
    # the rest are "the N was too ADJ" and "the X saw the Y and it was too ADJ"
    assert n_because > 0.9 * 3000 * (1 - en_fr.SIMPLE_SHARE - en_fr.BRIDGE_SHARE)


def test_bridge_sentences_show_every_adjectives_class():
    """'the X saw the Y and it was too ADJ' (en-fr-3): il/elle is the gender of the
    adjective's noun class as in the because-construction, the held-out adjectives are among
    them (their only sentences where the class decides something) and the held-out noun
    pairs never are."""
    pairs = [p for p in en_fr.because_dataset("train", 3000, seed=5) if " saw " in p.source]
    assert len(pairs) > 0.9 * 3000 * en_fr.BRIDGE_SHARE
    adjectives = set()
    for p in pairs:
        assert en_fr.translate(p.source) == p.target
        w, fr = p.source.split(), en_fr.split_words(p.target)
        x, y = en_fr._B_NOUN[w[1]], en_fr._B_NOUN[w[4]]
        adj = en_fr._B_ADJ[w[-1]]
        adjectives.add(adj.en)
        assert x.animate and not y.animate and x.gender != y.gender
        assert not en_fr.held_out_pair(x.en, y.en)
        noun = x if adj in en_fr.ANIMATE_ADJ else y
        assert fr[fr.index("et") + 1] == {"m": "il", "f": "elle"}[noun.gender], p
        assert fr[-1] == adj.forms[noun.gender == "f"] and noun.fr in fr
    assert set(en_fr.HELD_OUT_ADJ) <= adjectives
    assert en_fr.translate("the cat saw the street and it was too narrow") == (
        "le chat a vu la rue et elle était trop étroite")
    with pytest.raises(ValueError):  # X must be animate
        en_fr.translate("the street saw the cat and it was too narrow")


def test_both_classes_and_every_verb_are_generated():
    parts = [en_fr.because_parts(p.source) for p in en_fr.because_dataset("test", 400, seed=0)]
    assert {p.referent for p in parts} == {"animate", "thing"}
    assert {p.held_out for p in parts} == {"pair", "adjective"}
    words = {w for p in en_fr.because_dataset("train", 2000, seed=0) for w in p.source.split()}
    assert set(en_fr.BECAUSE_VERBS) <= words and {"did", "didn't"} <= words


def test_held_out_pairs_and_adjectives_never_in_training():
    train = en_fr.train_dataset(2000, seed=0)
    test = en_fr.because_dataset("test", 300, seed=0)
    train_sources = {p.source for p in train}
    assert not train_sources & {p.source for p in test}
    assert len({p.source for p in test}) == len(test)
    assert all(en_fr.because_parts(p.source).held_out for p in test)
    for p in train:
        if "because" in p.source:
            parts = en_fr.because_parts(p.source)
            assert not parts.held_out
            assert parts.adj.en not in en_fr.HELD_OUT_ADJ
            assert not en_fr.held_out_pair(parts.x.en, parts.y.en)
    # the held-out adjectives are still taught, in "the N was too ADJ"
    simple = {p.source.split()[-1] for p in en_fr.because_dataset("train", 3000, seed=0)
              if "because" not in p.source}
    assert set(en_fr.HELD_OUT_ADJ) <= simple
    # the everyday part is the everyday grammar's training set, unchanged
    assert train[:2000] == en_fr.dataset("train", 2000, seed=0)
    assert len(train) == 2000 + round(2000 * en_fr.BECAUSE_SHARE)


@pytest.mark.parametrize("bad", [
    "the street didn't cross the animal because it was too tired",  # X must be animate
    "the animal didn't cross the street because it was too red",  # not a class adjective
    "the animal didn't fly the street because it was too wide",
    "the animal didn't cross the street because it is too wide",
])
def test_rejects_non_sentences(bad):
    with pytest.raises(ValueError):
        en_fr.translate(bad)


def test_pronoun_of():
    assert en_fr.pronoun_of("l'animal n'a pas traversé la rue parce qu'il était trop fatigué") == "il"
    assert en_fr.pronoun_of("la rue") is None


def test_random_draws_are_deterministic():
    a = [en_fr.because_sentence(random.Random(4)) for _ in range(3)]
    assert a == [en_fr.because_sentence(random.Random(4)) for _ in range(3)]
    assert en_fr.because_dataset("train", 50, seed=1) == en_fr.because_dataset("train", 80, 1)[:50]


# ---- the shipped checkpoint ---------------------------------------------------------------
@pytest.fixture(scope="module")
def shipped():
    return vc.load("en-fr", device="cpu")


def test_shipped_translates_the_seed_pair_with_il_elle(shipped):
    assert shipped.trace(SEEDS[0]).output_text == (
        "l'animal n'a pas traversé la rue parce qu'il était trop fatigué")
    assert shipped.trace(SEEDS[1]).output_text == (
        "l'animal n'a pas traversé la rue parce qu'elle était trop large")
    assert set(SEEDS) <= set(shipped.examples())  # the sidebar's examples


def test_shipped_held_out_pronoun_accuracy(shipped):
    """Held-out noun pairs drawn with a seed training never used (the split is by content,
    so any seed's test sentences are held out): il/elle right in >= 95%."""
    pairs = [p for p in en_fr.because_dataset("test", 80, seed=11)
             if en_fr.because_parts(p.source).held_out == "pair"][:40]
    vocabs = {"source": shipped.src_vocab, "target": shipped.tgt_vocab}
    m = en_fr.because_metrics(shipped.model, vocabs, pairs)
    print(f"\nheld-out pairs, seed 11: {m['held_out_pairs']}")
    assert m["n"] == len(pairs) >= 30
    assert m["held_out_pairs"]["pronoun_accuracy"] >= 0.95
    assert m["held_out_pairs"]["animate"] >= 0.9 and m["held_out_pairs"]["thing"] >= 0.9


def test_shipped_held_out_adjectives_pronoun_accuracy(shipped):
    """The adjectives held out of the construction (their class taught only by the bridge
    sentences), with a seed training never used: il/elle right in >= 95% for each class."""
    pairs = [p for p in en_fr.because_dataset("test", 200, seed=11)
             if en_fr.because_parts(p.source).held_out == "adjective"][:40]
    vocabs = {"source": shipped.src_vocab, "target": shipped.tgt_vocab}
    m = en_fr.because_metrics(shipped.model, vocabs, pairs)
    print(f"\nheld-out adjectives, seed 11: {m['held_out_adjectives']}")
    assert m["n"] == len(pairs) >= 30
    assert m["held_out_adjectives"]["pronoun_accuracy"] >= 0.95
    assert m["held_out_adjectives"]["animate"] >= 0.95 and m["held_out_adjectives"]["thing"] >= 0.95


def test_shipped_card_reports_the_targets():
    import json

    from viz_core.loading.entry import CHECKPOINTS

    card = json.loads((CHECKPOINTS / "en-fr" / "card.json").read_text())
    metrics = card["metrics"]
    assert card["generator_version"] == en_fr.GENERATOR_VERSION
    assert metrics["exact_match"] >= 0.99  # the everyday held-out set, 1.0 before (en-fr-1)
    because = metrics["because"]
    assert because["held_out_pairs"]["pronoun_accuracy"] >= 0.95
    assert because["held_out_adjectives"]["pronoun_accuracy"] >= 0.95  # issue 31's target
    assert because["heads"]["top"] and because["patching"]["top"]


# ---- head search and patching on the pronoun (analysis.referent) --------------------------
def test_referent_heads_read_the_models_own_patterns(shipped):
    from viz_core.analysis.referent import referent_of

    res = shipped.referent_heads(SEEDS)  # registered: analysis.referent.referent_heads
    s = res.sentences
    for text in SEEDS:
        ref = referent_of(text)
        tr = shipped.trace(text, ref.target)
        for kind, q in (("encoder.self", ref.it), ("decoder.cross", ref.pronoun_row)):
            for b in tr.layers(kind):
                for h in range(b.n_heads):
                    row = s[(s.text == text) & (s.block == b.name) & (s["head"] == h)]
                    assert row.right.item() == pytest.approx(b.pattern[h, q, ref.right], abs=1e-6)
                    assert row.wrong.item() == pytest.approx(b.pattern[h, q, ref.wrong], abs=1e-6)
    for r in res.frame.itertuples():  # one sentence per class: a share is 0 or 1
        mine = s[(s.block == r.block) & (s["head"] == r.head)].set_index("referent").right
        assert r.animate == float(mine["animate"] >= 0.5)
        assert r.thing == float(mine["thing"] >= 0.5)
        assert r.score == min(r.animate, r.thing)


def test_referent_patching_averages_patch(shipped):
    from viz_core.analysis.referent import contrast, referent_of, referent_patching

    assert contrast(SEEDS[0]) == SEEDS[1]  # tired -> wide (and wide -> an animate one)
    assert referent_of(contrast(SEEDS[1])).referent == "animate"
    out = referent_patching(shipped, [SEEDS[0]])
    p = shipped.patch(SEEDS[0], SEEDS[1], target="l'animal n'a pas traversé la rue parce qu'",
                      token="il", against="elle", position=-1, over="heads").frame
    merged = out.merge(p, left_on=["block", "head"], right_on=["row", "index"])
    assert len(merged) == len(p) == len(out)
    np.testing.assert_allclose(merged.effect_x, merged.effect_y, atol=1e-6)


@pytest.mark.parametrize("bad", [[], ["the red car"]])
def test_referent_bad_input_is_one_line(shipped, bad):
    from viz_core import InputError

    with pytest.raises(InputError, match=r"^[^\n]+$"):
        shipped.referent_heads(bad)


def test_referent_panels_draw_the_rows_given():
    from viz_core.figures.referent import OTHER_COLOR, RIGHT_COLOR, WRONG_COLOR, referent_panels

    tokens = ["the", "animal", "it", "<b>"]
    rows = [np.array([0.1, 0.7, 0.1, 0.1]), np.array([0.25, 0.25, 0.25, 0.25])]
    fig = referent_panels([{"title": "a", "tokens": tokens, "weights": rows[0], "right": 1,
                            "wrong": 3},
                           {"title": "b", "tokens": tokens, "weights": rows[1], "right": 3,
                            "wrong": 1}], title="t")
    assert len(fig.data) == 2
    for bar, row in zip(fig.data, rows):
        np.testing.assert_array_equal(np.asarray(bar.y, float), row.astype(np.float32))
    assert list(fig.data[0].marker.color) == [OTHER_COLOR, RIGHT_COLOR, OTHER_COLOR, WRONG_COLOR]
    assert list(fig.data[0].x)[3] == "3·&lt;b>"  # a token shows as typed
    with pytest.raises(ValueError):
        referent_panels([{"title": "a", "tokens": tokens, "weights": rows[0][:2], "right": 0,
                          "wrong": 1}])
