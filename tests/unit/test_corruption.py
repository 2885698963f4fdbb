"""The suggested corruption keeps the token count (a tokenizer given as a callable) and
changes exactly one word."""

from __future__ import annotations

import viz_core as vc
from viz_core.analysis.corruption import suggest_corruption


def chars(text: str) -> int:  # a "tokenizer" with one token per character
    return len(text)


def test_one_word_replaced_by_one_of_the_same_token_count():
    text = "the animal crossed the street"
    c = suggest_corruption(text, chars)
    assert c is not None and chars(c.text) == chars(text) and c.text != text
    assert c.replaced == "street" and len(c.by) == 6  # the last word, by one of 6 chars
    assert c.text == text[:c.start] + c.by + text[c.start + len(c.replaced):]


def test_capitalisation_follows_the_word_and_nothing_to_replace_gives_none():
    c = suggest_corruption("Mary gave it to John", lambda t: len(t.split()))
    assert c is not None and c.by[0].isupper() == c.replaced[0].isupper()
    assert suggest_corruption("", chars) is None
    assert suggest_corruption("1 2 3 !!", chars) is None


def test_real_tokenizer_counts_match():
    model = vc.load("lm")
    text = "the cat sat on the mat"
    c = suggest_corruption(text, model.count_tokens, model.examples())
    assert c is not None
    assert model.count_tokens(c.text) == model.count_tokens(text)
    assert c.text != text


def test_words_past_the_models_cut_are_never_replaced():
    def cut(text: str) -> int:  # a model that keeps the first 12 characters
        return min(len(text), 12)

    text = "the cat sat on the mat and the dog sat on the rug"
    c = suggest_corruption(text, cut)
    assert c is not None and c.start < 12
    assert c.text[:12] != text[:12]


def test_a_long_text_costs_few_tokenisations():
    calls = []

    def cut(text: str) -> int:  # a model that keeps the first 40 characters
        calls.append(len(text))
        return min(len(text), 40)

    text = "the cat sat on the mat and the dog saw a red house " * 400
    c = suggest_corruption(text, cut)
    assert c is not None and c.start < 40
    assert len(calls) < 60  # a binary search over ~4,800 words, not one call per word


def test_the_suggestion_fits_the_text_boxs_limit():
    """A text at the box's limit: a longer replacement word would be cut by the box and
    change the token count, so it is not suggested."""
    words = lambda t: len(t.split())  # noqa: E731 - a word-count "tokenizer"
    text = "the elephants crossed a road"
    longer = suggest_corruption(text, words)
    assert longer is not None and len(longer.text) > len(text)  # without a limit
    c = suggest_corruption(text, words, max_chars=len(text))
    assert c is not None and len(c.text) <= len(text) and words(c.text) == words(text)
    assert suggest_corruption("ab cd", words, max_chars=4) is None


def test_chinese_gets_a_han_character_of_the_same_token_count():
    """Chinese has no spaces: one Han character is replaced by another (a common noun
    first), never a particle or a measure word; zh-en's own segmentation keeps the count."""
    from viz_core.analysis.corruption import HAN_FUNCTION

    model = vc.load("zh-en")
    for text in ("两只黑色的猫", "动物没有过马路，因为它太累了"):
        c = suggest_corruption(text, model.count_tokens, model.examples())
        assert c is not None and model.count_tokens(c.text) == model.count_tokens(text)
        assert len(c.replaced) == len(c.by) == 1 and c.replaced not in HAN_FUNCTION
        assert "\u4e00" <= c.by <= "\u9fff" and c.text != text
        assert not model.trace(c.text, max_new=0).unknown_words  # words the model knows
    c = suggest_corruption("两只黑色的猫", model.count_tokens, model.examples())
    assert c.text == "两只黑色的狗"  # the classic swap: another noun


def test_the_textbook_adjective_turns_into_one_of_the_other_kind():
    """"...because it was too tired" -> an adjective that makes "it" the street: the grammar
    reads the pair as the two referents; capitals and the full stop stay."""
    from viz_core.tasks.en_fr import because_parts

    model = vc.load("en-fr")
    clean = "the animal didn't cross the street because it was too tired"
    c = suggest_corruption(clean, model.count_tokens, model.examples())
    assert c.replaced == "tired" and model.count_tokens(c.text) == model.count_tokens(clean)
    assert (because_parts(clean).referent, because_parts(c.text).referent) == ("animate", "thing")
    back = suggest_corruption(c.text, model.count_tokens, model.examples())
    assert because_parts(back.text).referent == "animate"
    textbook = "The animal didn't cross the street because it was too tired."
    c = suggest_corruption(textbook, chars)
    assert c.text == textbook.replace("tired", c.by) and c.text.endswith(".")
    assert because_parts(c.text.lower().rstrip(".")).referent == "thing"


def test_chinese_prefers_characters_that_are_words():
    """The textbook sentence in Chinese turns 累 (tired) into a thing's adjective, and a
    one-character noun goes before characters that are half of a longer word (垫子, 蛋糕)."""
    from viz_core.tasks import zh_en

    model = vc.load("zh-en")
    c = suggest_corruption("动物没有过马路，因为它太累了", model.count_tokens, model.examples())
    thing = {pair.split("|")[1] for pair in zh_en.ADJECTIVES
             if pair.split("|")[0] in zh_en.BECAUSE_VERBS["cross"][1].split()}
    assert c.replaced == "累" and c.by in thing
    for text, word in (("这只狗没有吃一块蛋糕", "狗"), ("两只黑色的猫坐在垫子上", "猫")):
        c = suggest_corruption(text, model.count_tokens, model.examples())
        assert c.replaced == word and model.count_tokens(c.text) == model.count_tokens(text)


def test_a_repeated_text_gets_the_induction_corruption():
    """The last two words occurred together before: their earlier last word is replaced (by a
    word the text does not have) and the last word stays; a last word seen before after
    another word ("went to ... a drink to") is still the one replaced."""
    text = "cat sees the red king cat sees the red king"
    c = suggest_corruption(text, lambda t: len(t.split()), ["a dog and a bird"])
    assert (c.replaced, c.start) == ("king", text.index("king"))
    assert c.text.endswith("red king") and c.by not in text.split()
    ioi = "When Mary and John went to the store, John gave a drink to"
    c = suggest_corruption(ioi, lambda t: len(t.split()))
    assert c.replaced == "to" and c.start == ioi.rindex("to")


def test_a_tokenizer_that_counts_a_trailing_space_still_reaches_the_last_word(tiny_models):
    """A byte-level BPE makes the space before a word a token of its own when nothing
    follows it, so "...because it " has as many tokens as "...because it was": the last word
    was taken for one past the model's cut, and "it" was replaced instead."""
    def bpe(text: str) -> int:  # one token a word, and a trailing space one more
        return len(text.split()) + text.endswith(" ")

    text = "the cat sat on the mat because it was"
    assert suggest_corruption(text, bpe).replaced == "was"
    gpt2 = vc.load(str(tiny_models.path("gpt2")), device="cpu")  # the real tokenizer
    assert gpt2.count_tokens(text[:text.rindex(" ") + 1]) == gpt2.count_tokens(text)
    c = suggest_corruption(text, gpt2.count_tokens, gpt2.examples())
    assert c.replaced == "was" and gpt2.count_tokens(c.text) == gpt2.count_tokens(text)
