"""Generated demo data: dates, the en-fr grammar, the LM corpus, splits and batched decoding."""

import datetime as dt
import random
import re

import pytest

from viz_core.tasks import dates, en_fr, get_task, lm
from viz_core.tasks.common import (
    Pair,
    greedy_batch,
    is_held_out,
    lm_perplexity,
    normalise,
    translate,
    unigram_perplexity,
)
from viz_core.training.toy import toy_model

WEEKDAY_NAMES = {name.lower(): i for table in (dates.WEEKDAYS,)
                 for names in table.values() for i, name in enumerate(names)}


# ---- dates --------------------------------------------------------------------------------
def test_dates_are_real_with_true_weekdays():
    pairs = dates.dataset("train", 3000, seed=5)
    seen_weekday = 0
    for p in pairs:
        d = dt.date.fromisoformat(p.target)
        assert dates.FIRST <= d <= dates.LAST
        for word in re.findall(r"[^\W\d_]+", p.source.lower()):
            if word in WEEKDAY_NAMES:
                assert WEEKDAY_NAMES[word] == d.weekday(), p
                seen_weekday += 1
            if word in [w.lower() for w in dates.WEEKDAY_ABBR]:
                assert dates.WEEKDAY_ABBR[d.weekday()].lower() == word, p
    assert seen_weekday > 100


@pytest.mark.parametrize("fmt, text", [
    ("{wd} {d} {mon} {y}", "saturday 9 may 2015"), ("{d}/{m}/{yy}", "9/5/18"),
    ("{mon} {dth}, {y}", "may 9th, 2018"), ("le {fd} {fmon} {y}", "le 9 mai 2018"),
    ("{d}. {gmon} {y}", "9. mai 2018"), ("{y}.{mm}.{dd}", "2018.05.09"),
    ("{dd} {mon} {y}", "09 may 2018"), ("{d} {mon} {yy}", "9 may 18"),
    ("{fwd} {fd} {fmon} {y}", "samedi 9 mai 2015"), ("{gwd}, {d}. {gmon} {y}",
                                                    "samstag, 9. mai 2015"),
])
def test_dates_formats(fmt, text):
    day = dt.date.fromisoformat("2015-05-09" if "2015" in text else "2018-05-09")
    assert normalise(dates.render(day, fmt, random.Random(0))) == text


def test_dates_day_first_and_two_digit_pivot():
    assert dates.two_digit_year(18) == 2018 and dates.two_digit_year(49) == 2049
    assert dates.two_digit_year(50) == 1950 and dates.two_digit_year(99) == 1999
    assert dates.render(dt.date(2018, 5, 9), "{d}/{m}/{yy}", random.Random(0)) == "9/5/18"
    with pytest.raises(ValueError):
        dates.render(dt.date(1920, 5, 9), "{d}/{m}/{yy}", random.Random(0))
    for p in dates.dataset("train", 3000, seed=1):
        m = re.fullmatch(r"(\d{1,2})[/.-](\d{1,2})[/.-](\d{2}|\d{4})", p.source)
        if m:  # numeric, day first
            day, month, year = (int(g) for g in m.groups())
            year = dates.two_digit_year(year) if len(m.group(3)) == 2 else year
            assert dt.date(year, month, day).isoformat() == p.target


def test_ordinals():
    assert [dates.ordinal(d) for d in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st"]


# ---- en-fr --------------------------------------------------------------------------------
@pytest.mark.parametrize("english, french", [
    ("the red car", "la voiture rouge"), ("I see it", "je le vois"),
    ("I do not see the cat", "je ne vois pas le chat"),
    ("the small red cars", "les petites voitures rouges"),
    ("some small cats", "de petits chats"), ("a beautiful white house", "une belle maison blanche"),
    ("the horses", "les chevaux"), ("she sees them", "elle les voit"),
    ("he watches her", "il la regarde"), ("we do not finish the soup",
                                          "nous ne finissons pas la soupe"),
    ("you all eat", "vous mangez"), ("we eat", "nous mangeons"), ("you sleep", "tu dors"),
    ("they do not sell any old books", "ils ne vendent pas de vieux livres"),
    ("I do not see a cat", "je ne vois pas de chat"),
    ("the girls do not look for you", "les filles ne te cherchent pas"),
    ("my old dog finishes his soup", "mon vieux chien finit sa soupe"),
    ("an old woman", "une vieille femme"),
])
def test_en_fr_grammar(english, french):
    assert en_fr.translate(english) == french


def test_en_fr_generated_pairs_follow_the_grammar():
    """Each generated pair is the grammar's one translation: translation is a function."""
    seen = {}
    for p in en_fr.dataset("train", 5000, seed=3):
        assert en_fr.translate(p.source) == p.target
        assert seen.setdefault(p.source, p.target) == p.target


@pytest.mark.parametrize("bad", ["the cat see", "he see it", "cat the", "a cats", "i fly"])
def test_en_fr_rejects_non_sentences(bad):
    with pytest.raises(ValueError):
        en_fr.translate(bad)


def test_en_fr_vocab_covers_grammar_and_marks_unknown_words():
    pairs = en_fr.dataset("train", 3000, seed=0)
    vocabs = en_fr.build_vocabs(pairs)
    for p in pairs:
        assert not vocabs["source"].encode(p.source)[2]
        assert not vocabs["target"].encode(p.target)[2]
    ids, shown, unknown = vocabs["source"].encode("the zebra sees it")
    assert unknown == ["zebra"] and shown[1] == "<unk>"


def test_en_fr_aligned_examples_point_at_noun_and_adjective():
    for pair, spans in en_fr.aligned_examples(100, seed=0):
        en, fr = pair.source.split(), pair.target.split()
        assert is_held_out(pair.source)
        for fr_noun, en_noun, fr_adj, en_adj in spans:
            noun, plural = en_fr._EN_NOUNS[en[en_noun]]
            assert fr[fr_noun] == (noun.fr_pl if plural else noun.fr)
            adj = en_fr._EN_ADJ[en[en_adj]]
            assert not adj.before and fr[fr_adj] == adj.agree(noun.gender, plural)
            assert fr_adj == fr_noun + 1 and en_adj == en_noun - 1


# ---- splits -------------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["dates", "en-fr", "zh-en", "lm"])
def test_held_out_never_in_training_and_deterministic(task):
    mod = get_task(task)
    key = {"lm": lambda p: p.target, "zh-en": lambda p: mod.split_key(p)}.get(
        task, lambda p: p.source)  # zh-en: the source without "，" and "。"
    train = mod.dataset("train", 4000, seed=0)
    test = mod.dataset("test", 300, seed=0)
    train_keys = {normalise(key(p)) for p in train}
    test_keys = [normalise(key(p)) for p in test]
    assert len(set(test_keys)) == len(test_keys)
    assert not train_keys & set(test_keys)
    assert all(is_held_out(k) for k in test_keys)
    assert not any(is_held_out(k) for k in train_keys)
    assert mod.dataset("train", 50, seed=0) == train[:50]
    assert mod.dataset("train", 50, seed=1) != train[:50]
    assert mod.GENERATOR_VERSION and mod.DESCRIPTION and 4 <= len(mod.EXAMPLES) <= 6


def test_lm_corpus_is_english_side_of_en_fr():
    for p in lm.dataset("train", 500, seed=0):
        assert p.source == "" and en_fr.translate(p.target)


def test_unknown_task():
    with pytest.raises(ValueError):
        get_task("de-en")


# ---- batched decoding and metrics ---------------------------------------------------------
def test_batched_greedy_matches_native_backend():
    model = toy_model("encoder-decoder", seed=4)
    texts = ["the cat sat on the mat", "i see it", "a big dog saw the small cat on the red mat",
             "we do not see the house"]
    batched = translate(model.model, model.src_vocab, model.tgt_vocab, texts, batch_size=3)
    for text, out in zip(texts, batched):
        one = model.trace(text, capture=("pattern",)).output_text.split()
        assert out.split()[: len(one)] == one


def test_greedy_batch_decoder_only_matches_native():
    model = toy_model("decoder-only", seed=2)
    ids = model.tgt_vocab.encode("the cat sat")[0]
    out = greedy_batch(model.model, None, [[1, *ids]] * 2, 5)
    native = model.trace("the cat sat", max_new=5, capture=("pattern",)).output_text.split()
    assert out[0] == out[1]
    assert [model.tgt_vocab.tokens[i] for i in out[0]][: len(native)] == native


def test_perplexities():
    model = toy_model("decoder-only", seed=0)
    texts = ["the cat sat", "i see it"]
    ppl = lm_perplexity(model.model, model.tgt_vocab, texts)
    assert 1 < ppl < 10 * len(model.tgt_vocab)
    uni = unigram_perplexity(model.tgt_vocab, ["the cat the cat"] * 10, ["the cat"])
    assert 1 < uni < len(model.tgt_vocab)
    assert Pair("a", "b").target == "b"
