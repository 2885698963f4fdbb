"""viz_core.lessons.pretraining against masks and corruptions worked out by hand."""

import re

import numpy as np
import pytest

from viz_core.errors import InputError
from viz_core.lessons import pretraining as pt

T, F = True, False
TOKENS = "the cat sat on the mat and the dog saw a red house".split()


def test_unilm_seq2seq_mask_for_3_plus_2_tokens():
    # rows = queries s0 s1 s2 t0 t1; True = blocked
    expected = np.array([
        [F, F, F, T, T],
        [F, F, F, T, T],
        [F, F, F, T, T],
        [F, F, F, F, T],
        [F, F, F, F, F],
    ])
    masks = pt.unilm_masks(3, 2)
    np.testing.assert_array_equal(masks["sequence-to-sequence"], expected)
    np.testing.assert_array_equal(masks["bidirectional"], np.zeros((5, 5), bool))
    np.testing.assert_array_equal(masks["left-to-right"][1], [F, F, T, T, T])
    np.testing.assert_array_equal(masks["right-to-left"][1], [T, F, F, F, F])
    assert all(m.dtype == bool for m in masks.values())


def test_xlnet_streams_for_order_3_1_2_0():
    content, query = pt.xlnet_masks([3, 1, 2, 0])
    # rank: position 3 first, then 1, then 2, then 0
    np.testing.assert_array_equal(query, np.array([
        [T, F, F, F],  # 0 (last) sees 1, 2, 3 but not itself
        [T, T, T, F],  # 1 sees only 3
        [T, F, T, F],  # 2 sees 3 and 1
        [T, T, T, T],  # 3 (first) sees nothing
    ]))
    np.testing.assert_array_equal(content, np.array([
        [F, F, F, F],
        [T, F, T, F],
        [T, F, F, F],
        [T, T, T, F],
    ]))
    # content = query stream plus the diagonal
    np.testing.assert_array_equal(content, query & ~np.eye(4, dtype=bool))


def test_xlnet_natural_order_is_causal_and_bad_orders_are_refused():
    content, query = pt.xlnet_masks([0, 1, 2])
    np.testing.assert_array_equal(content, pt.causal(3))
    np.testing.assert_array_equal(query, pt.causal(3) | np.eye(3, dtype=bool))
    # one line a caller can act on (InputError), the position that is not a whole number named
    for bad, says in (([0, 0, 1], "0..2 exactly once"), ([0, 1.5, 2], "not 1.5"),
                      (5, "0..2 exactly once")):
        with pytest.raises(InputError, match=re.escape(says)):
            pt.xlnet_masks(bad) if not isinstance(bad, int) else pt.check_order(bad, 3)


@pytest.mark.parametrize("n, expected", [(1, 1), (7, 1), (10, 2), (20, 3), (100, 15)])
def test_mlm_chooses_exactly_round_15_percent(n, expected):
    assert pt.n_to_mask(n) == expected
    for seed in range(20):
        chosen = pt.select_positions(n, seed)
        assert len(chosen) == expected == len(set(chosen.tolist()))
    obj = pt.bert_mlm([f"w{i}" for i in range(n)], seed=3)
    assert sum(t is not None for t in obj.targets) == expected


def test_mlm_replacement_split_is_80_10_10_over_many_seeds():
    tokens = [f"w{i}" for i in range(100)]
    actions = []
    for seed in range(400):
        obj = pt.bert_mlm(tokens, seed=seed, vocab=["zz"])
        actions += obj.details["actions"]
        for p, a in zip(obj.details["positions"], obj.details["actions"]):
            assert obj.targets[p] == tokens[p]
            assert obj.inputs[p] == {"mask": pt.MASK, "random": "zz", "keep": tokens[p]}[a]
        unchosen = set(range(100)) - set(obj.details["positions"])
        assert all(obj.inputs[i] == tokens[i] and obj.targets[i] is None for i in unchosen)
    frac = {a: actions.count(a) / len(actions) for a in ("mask", "random", "keep")}
    assert len(actions) == 400 * 15
    assert abs(frac["mask"] - 0.8) < 0.02
    assert abs(frac["random"] - 0.1) < 0.015
    assert abs(frac["keep"] - 0.1) < 0.015


def test_mlm_is_reproducible_and_roberta_redraws_each_epoch():
    a, b = pt.bert_mlm(TOKENS, seed=5), pt.bert_mlm(TOKENS, seed=5)
    assert a.inputs == b.inputs and a.targets == b.targets
    epochs = pt.roberta_dynamic([f"w{i}" for i in range(60)], epochs=4, seed=1)
    assert len({tuple(e.details["positions"]) for e in epochs}) > 1
    assert not epochs[0].panels[0].mask.any()  # an encoder: nothing blocked


def test_word_ids_for_wordpiece_and_sentencepiece():
    assert pt.word_ids(["the", "un", "##happy", "cat"]) == [0, 1, 1, 2]
    assert pt.word_ids(["▁the", "▁un", "happy", "▁cat", "."]) == [0, 1, 1, 2, 3]
    assert pt.word_ids(["Ġthe", "Ġun", "happy"]) == [0, 1, 1]
    assert pt.spans_from_ids([0, 1, 1, 2]) == [(0, 1), (1, 3), (3, 4)]


def test_whole_word_masking_never_splits_a_word():
    tokens = ["the", "un", "##happy", "cat", "play", "##ing", "##s", "on", "a", "mat"] * 3
    spans = pt.spans_from_ids(pt.word_ids(tokens))
    for seed in range(50):
        obj = pt.span_mlm(tokens, spans, seed=seed)
        chosen = [t is not None for t in obj.targets]
        assert sum(chosen) >= pt.n_to_mask(len(tokens))
        for a, b in spans:
            assert len(set(chosen[a:b])) == 1  # all or nothing


def test_phrase_spans_group_entities_and_word_pairs():
    tokens = ["I", "met", "Ada", "Love", "##lace", "in", "old", "London"]
    spans = pt.phrase_spans(tokens)
    # "I" is capitalised: an entity on its own; "Ada Love##lace" one entity
    assert spans == [(0, 1), (1, 2), (2, 5), (5, 7), (7, 8)]


def test_gpt_targets_are_the_next_tokens():
    obj = pt.gpt(["a", "b", "c"])
    assert obj.targets == ["b", "c", None]
    np.testing.assert_array_equal(obj.panels[0].mask, [[F, T, T], [F, F, T], [F, F, F]])


def test_mass_span_by_hand_and_its_two_limits():
    obj = pt.mass(list("abcde"), k=2, start=1)
    assert obj.inputs == ["a", pt.MASK, pt.MASK, "d", "e"]
    assert obj.targets == ["b", "c"]
    assert obj.details["decoder_input"] == [pt.MASK, "b"]
    np.testing.assert_array_equal(obj.panels[1].mask, [[F, T], [F, F]])
    assert obj.panels[2].mask.shape == (2, 5) and not obj.panels[2].mask.any()
    bert_like = pt.mass(list("abcde"), k=1, start=2)
    assert bert_like.inputs.count(pt.MASK) == 1 and bert_like.targets == ["c"]
    gpt_like = pt.mass(list("abcde"), k=5)
    assert gpt_like.inputs == [pt.MASK] * 5 and gpt_like.targets == list("abcde")
    np.testing.assert_array_equal(gpt_like.panels[1].mask, pt.causal(5))
    for k, start, says in ((4, None, "from 1 to 3, not 4"), (2.5, 0, "not 2.5"),
                           (2, 9, "from 0 to 1, not 9")):
        with pytest.raises(InputError, match=re.escape(says)):
            pt.mass(list("abc"), k=k, start=start)


def test_t5_span_corruption_the_papers_example():
    tokens = "Thank you for inviting me to your party last week .".split()
    obj = pt.t5_span_corruption(tokens, spans=[(2, 4), (8, 9)])
    assert obj.inputs == ["Thank", "you", "<extra_id_0>", "me", "to", "your", "party",
                          "<extra_id_1>", "week", "."]
    assert obj.targets == ["<extra_id_0>", "for", "inviting", "<extra_id_1>", "last",
                           "<extra_id_2>"]


def _t5_restore(inputs, targets):
    pieces, cur = {}, None
    for t in targets:
        if t.startswith("<extra_id_"):
            cur = t
            pieces[cur] = []
        else:
            pieces[cur].append(t)
    return [w for t in inputs for w in (pieces[t] if t in pieces else [t])]


@pytest.mark.parametrize("n", [1, 2, 5, 13, 40, 100])
def test_t5_random_spans_restore_the_text(n):
    tokens = [f"w{i}" for i in range(n)]
    for seed in range(10):
        spans = pt.t5_noise_spans(n, seed)
        assert sum(b - a for a, b in spans) == pt.n_to_mask(n)
        assert all(b > a for a, b in spans)
        obj = pt.t5_span_corruption(tokens, seed=seed)
        assert _t5_restore(obj.inputs, obj.targets) == tokens
    if n == 100:  # 15 noise tokens in round(15 / 3) = 5 spans
        assert len(pt.t5_noise_spans(100, 0)) == 5


def test_bart_noising_by_hand():
    tokens = "a b c . d e f . g h".split()
    infill = pt.bart_text_infilling(tokens, spans=[(1, 3), (5, 5), (8, 10)])
    assert infill.inputs == ["a", "<mask>", ".", "d", "<mask>", "e", "f", ".", "<mask>"]
    assert infill.targets == tokens
    deletion = pt.bart_token_deletion(tokens, seed=0)
    kept = [t for i, t in enumerate(tokens) if i not in deletion.details["positions"]]
    assert deletion.inputs == kept and len(kept) == len(tokens) - 2
    masking = pt.bart_token_masking(tokens, seed=0)
    assert masking.inputs.count("<mask>") == 2
    perm = pt.bart_sentence_permutation(tokens, seed=1)
    sents = [["a", "b", "c", "."], ["d", "e", "f", "."], ["g", "h"]]
    assert pt.sentences_of(tokens) == sents
    assert perm.inputs == [t for i in perm.details["order"] for t in sents[i]]
    rot = pt.bart_document_rotation(tokens, seed=2)
    s = rot.details["start"]
    assert rot.inputs == tokens[s:] + tokens[:s]
    for obj in pt.bart_all(tokens, seed=3):
        assert obj.targets == tokens
        np.testing.assert_array_equal(obj.panels[1].mask, pt.causal(len(tokens)))


def test_infilling_spans_cover_30_percent_without_overlap():
    for seed in range(30):
        spans = pt.infilling_spans(40, seed)
        assert sum(b - a for a, b in spans) == 12
        ends = [b for _, b in spans]
        assert all(spans[i + 1][0] >= ends[i] for i in range(len(spans) - 1))
