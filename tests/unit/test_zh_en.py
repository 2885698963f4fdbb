"""The zh-en task (issue 31 item 2): toy Chinese -> English from en-fr's lexicon. The grammar
(measure words, number, one translation per sentence), the source's segmentation into the
lexicon's words, the reference word alignment, and the shipped checkpoint."""

import collections
import json
import random

import pytest

import viz_core as vc
from viz_core.analysis.alignment import chance_score, head_scores, reference_alignment
from viz_core.loading.entry import CHECKPOINTS
from viz_core.model.tokenizer import UNK, Vocab, max_match
from viz_core.tasks import en_fr, zh_en
from viz_core.tasks.common import evaluate_translation, is_held_out

SEED_TIRED = "动物没有过马路，因为它太累了"
SEEDS = [SEED_TIRED, "动物没有过马路因为它太累了", "动物没有过马路，因为它太累了。",
         "动物没有过马路因为它太累了。", "动物没有过马路，因为它太宽了", "动物没有过马路，因为它太宽了。"]
TIRED = "the animal did not cross the street because it was too tired"
WIDE = "the animal did not cross the street because it was too wide"
EVAL_SEED = 11  # training drew its data with seed 0; the split is by hash, any seed is held out


# ---- the grammar --------------------------------------------------------------------------
@pytest.mark.parametrize("chinese, english", [
    (SEED_TIRED, TIRED), ("动物没有过马路，因为它太宽了。", WIDE),
    ("两只黑色的猫", "two black cats"), ("一只猫", "a cat"), ("两本书", "two books"),
    ("三个老师", "three teachers"), ("一个苹果", "an apple"),
    ("一个老的老师", "an old teacher"), ("猫", "the cat"), ("一些狗", "some dogs"),
    ("这辆车", "this car"), ("那些老鼠", "those mice"), ("这两只狼", "these two wolves"),
    ("我的两把刀", "my two knives"), ("她的书", "her book"), ("他们的五本书", "their five books"),
    ("我不认识这个老师", "i do not know this teacher"), ("猫吃一块蛋糕", "the cat eats a cake"),
    ("两只猫不吃汤", "two cats do not eat the soup"), ("她没有找它。", "she did not look for it"),
    ("你们跑", "you all run"), ("他看见你们", "he sees you all"),
    ("这只狗没有吃一块蛋糕", "this dog did not eat a cake"),
    ("马路太宽了", "the street was too wide"), ("两只猫太累了", "two cats were too tired"),
])
def test_grammar_translates(chinese, english):
    assert zh_en.translate(chinese) == english


@pytest.mark.parametrize("bad", [
    "两本猫",  # 猫 takes 只, not 本
    "一本车", "这猫", "两猫", "我的一只猫", "猫吃", "猫过马路", "它吃一块蛋糕", "猫猫",
    "动物没有过马路，因为它太累", "动物不过马路，因为它太累了", "", "。", "cat",
])
def test_grammar_rejects_non_sentences(bad):
    with pytest.raises(ValueError):
        zh_en.translate(bad)


def test_measure_words_agree_and_numbers_are_marked():
    rng = random.Random(5)
    seen_measures = set()
    for _ in range(3000):
        words = zh_en.sentence_words(rng)
        english = zh_en.translate_aligned(words)[0]
        for k, w in enumerate(words):
            if w in zh_en.MEASURES and words[k - 1] in zh_en.NUMBERS | zh_en.DEMONSTRATIVES:
                noun = next(zh_en._ZH_NOUN[x] for x in words[k + 1:] if x in zh_en._ZH_NOUN)
                assert noun.measure == w, words
                seen_measures.add(w)
            if w in zh_en.NUMBERS and words[k + 1] in zh_en.MEASURES:
                noun = next(zh_en._ZH_NOUN[x] for x in words[k + 1:] if x in zh_en._ZH_NOUN)
                want = noun.en if w == "一" else noun.en_pl
                assert want in english, (words, english)
                marks = {"a", "an"} if w == "一" else {zh_en.NUMBERS[w]}
                assert marks & set(english), (words, english)
    assert len(seen_measures) >= 15


def test_every_chinese_sentence_has_one_translation_and_segments_back():
    """A sample: each source text (what the model reads, without spaces) has one English
    target, and maximum matching over the lexicon gives back the generator's words."""
    targets = collections.defaultdict(set)
    rng = random.Random(2)
    for _ in range(20_000):
        words = zh_en.sentence_words(rng)
        source = "".join(words)
        assert zh_en.split_words(source) == words
        targets[source].add(zh_en.translate(source))
    assert all(len(t) == 1 for t in targets.values())
    assert len(targets) > 10_000


def test_max_match_and_the_segmenting_vocab():
    assert max_match("动物没有过马路", {"动物", "没有", "过", "马路", "马"}, 2) == [
        "动物", "没有", "过", "马路"]
    assert max_match("马路", {"马"}, 2) == ["马", "路"]  # no word: one character
    src = zh_en.build_vocabs([])["source"]
    assert src.segment and Vocab.from_dict(src.to_dict()).split(SEED_TIRED) == src.split(SEED_TIRED)
    assert src.split("我的猫 cat，🐈") == ["我", "的", "猫", "cat", "，", "🐈"]
    assert src.encode("猫吃鑫")[1] == ["猫", "吃", UNK]  # a character outside the lexicon
    assert src.decode(src.encode(SEED_TIRED)[0]) == SEED_TIRED
    # en-fr's vocabularies are not segmenting ones, and their files do not change
    assert "segment" not in en_fr.build_vocabs([])["source"].to_dict()


def test_seed_sentences_have_no_unknown_words():
    vocabs = zh_en.build_vocabs([])
    shipped = vc.load("zh-en").src_vocab
    for text in SEEDS:
        for vocab in (vocabs["source"], shipped):
            assert not vocab.encode(text)[2], text
        assert not vocabs["target"].encode(zh_en.translate(text))[2]


def test_held_out_split_ignores_punctuation():
    test = zh_en.dataset("test", 300, seed=3)
    assert all(is_held_out(zh_en.split_key(p)) for p in test)
    train = zh_en.dataset("train", 3000, seed=3)
    assert not {zh_en.split_key(p) for p in train} & {zh_en.split_key(p) for p in test}
    assert sum("因为" in p.source for p in train) > 300  # the textbook construction is trained


# ---- the reference alignment --------------------------------------------------------------
def test_seed_alignment_by_hand():
    # 动物 没有 过 马路 ， 因为 它 太 累 了
    # the animal did not cross the street because it was too tired
    gold = reference_alignment("zh-en", SEED_TIRED, TIRED)
    assert gold == [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 3), (6, 3), (7, 5), (8, 6),
                    (9, 9), (10, 7), (11, 8)]
    assert reference_alignment("zh-en", SEED_TIRED, TIRED, "input")[0] == (1, 0)
    # ASCII punctuation is skipped (its own token, as in en-fr); the output must be the
    # grammar's translation and the input a sentence of the grammar
    assert reference_alignment("zh-en", "!两只猫", "two cats") == [(0, 1), (0, 2), (1, 3)]
    assert reference_alignment("zh-en", "两只猫", "two dogs") is None
    assert reference_alignment("zh-en", "两只猫鑫", "two cats") is None
    assert reference_alignment("en-fr", SEED_TIRED, TIRED) is None


def test_every_english_word_is_linked():
    for p in zh_en.dataset("train", 500, seed=9):
        english, links = zh_en.translate_aligned(p.source)
        assert {t for t, _ in links} == set(range(len(english)))
        assert zh_en.word_alignment(p) == links


# ---- the shipped checkpoint ---------------------------------------------------------------
@pytest.fixture(scope="module")
def shipped():
    return vc.load("zh-en", device="cpu")


def test_card(shipped):
    card = json.loads((CHECKPOINTS / "zh-en" / "card.json").read_text())
    assert card["task"] == "zh-en" and card["generator_version"] == zh_en.GENERATOR_VERSION
    assert card["examples"] == zh_en.EXAMPLES and SEED_TIRED in card["examples"]
    metrics = card["metrics"]
    assert metrics["exact_match"] >= zh_en.TARGETS["exact_match"]
    assert metrics["bleu"] >= zh_en.TARGETS["bleu"]
    assert metrics["alignment"]["best"]["score"] >= zh_en.TARGETS["alignment"]
    assert shipped.src_vocab.segment
    assert "maximum matching" in card["segmentation"]
    assert card["metrics"]["seed_sentences"] == {
        text: WIDE if "宽" in text else TIRED for text in zh_en.SEED_SENTENCES}


def test_shipped_model_translates_held_out_sentences(shipped):
    """Exact match recomputed on held-out sentences drawn with a seed training did not use,
    against the card's target (the everyday grammar and the textbook construction)."""
    vocabs = {"source": shipped.src_vocab, "target": shipped.tgt_vocab}
    test = zh_en.dataset("test", 300, seed=EVAL_SEED)
    metrics = evaluate_translation(shipped.model, vocabs, test, bleu=True)
    print(f"\nzh-en held-out: {metrics}")
    assert metrics["exact_match"] >= zh_en.TARGETS["exact_match"]
    because = evaluate_translation(shipped.model, vocabs,
                                   zh_en.because_dataset("test", 100, seed=EVAL_SEED))
    print(f"zh-en held-out textbook sentences: {because}")
    assert because["exact_match"] >= zh_en.TARGETS["exact_match"]


def test_shipped_model_translates_the_seed_sentence(shipped):
    for text in SEEDS:
        trace = shipped.trace(text)
        assert trace.output_text == (WIDE if "宽" in text else TIRED), text
        assert not trace.unknown_words


def test_alignment_score_on_the_seed_sentence(shipped):
    """The Attention page's score (analysis.alignment) works for zh-en: the card's best head
    scores well above chance on the seed sentence."""
    trace = shipped.trace(SEED_TIRED)
    gold = reference_alignment("zh-en", SEED_TIRED, trace.output_text)
    best = json.loads((CHECKPOINTS / "zh-en" / "card.json").read_text())["metrics"][
        "alignment"]["best"]
    block = trace[best["block"]]
    scores = head_scores(block.pattern, gold)
    chance = chance_score(gold, block.pattern.shape[-1])
    print(f"\nseed sentence: {best['block']} head {best['head']} scores "
          f"{scores[best['head']]:.2f}, chance {chance:.2f}")
    assert scores[best["head"]] >= 0.8 > 3 * chance


def test_bad_input_is_clear(shipped):
    """Mixed scripts, emoji, full-width punctuation and a 10,000-character Chinese text: an
    answer with <unk> for what the lexicon lacks, and a warning when the input is cut."""
    trace = shipped.trace("动物didn't过马路🐈！因为它太累了？")
    assert "didn'" in trace.unknown_words and "🐈" in trace.unknown_words
    assert "！" in trace.unknown_words and "？" in trace.unknown_words
    long = "动物没有过马路，因为它太累了。" * 700
    assert len(long) >= 10_000
    trace = shipped.trace(long)
    assert trace.warnings and len(trace.source_tokens) == shipped.cfg.max_len
