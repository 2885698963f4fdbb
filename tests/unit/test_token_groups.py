"""Chinese characters cut into byte tokens (issue 32 item 2): a byte-level BPE we train here
on Chinese text (the `tokenizers` package) cuts the characters it rarely saw; the labels
("累¹/₂", "累²/₂") agree with the fast tokenizer's own offsets; grouping by character / word
and the grouped attention (mean over query rows, sum over key columns) against loops."""

from __future__ import annotations

import numpy as np
import pytest

import viz_core as vc
from tests.support.hf_tiny import ZH_TEXT, make_tiny_gpt2_zh
from viz_core.analysis.token_groups import (
    PART,
    group_label,
    grouped_attention,
    token_groups,
)
from viz_core.errors import InputError

# the BPE learns whole words (动物没有过马路) and cuts rarer characters (它, 宽, and 龘, never
# seen in training) into byte tokens
TEXT = ZH_TEXT


@pytest.fixture(scope="module")
def zh_gpt2(tmp_path_factory):
    folder = make_tiny_gpt2_zh(tmp_path_factory.mktemp("zh_gpt2") / "m")
    from transformers import AutoTokenizer

    return vc.load(str(folder), "cpu", dtype="float32"), AutoTokenizer.from_pretrained(folder)


def test_cut_characters_are_labelled_as_the_fast_tokenizers_offsets_say(zh_gpt2):
    model, tok = zh_gpt2
    enc = tok(TEXT, return_offsets_mapping=True)
    labels = model.trace(TEXT, max_new=0).target_tokens
    assert len(labels) == len(enc["input_ids"])
    cut = {}  # character position -> the tokens the offsets give it
    for i, (s, e) in enumerate(enc["offset_mapping"]):
        for pos in range(s, e):
            cut.setdefault(pos, []).append(i)
    cut = {pos: toks for pos, toks in cut.items() if len(toks) > 1}
    assert {TEXT[p] for p in cut} >= {"龘"}  # the tokenizer did cut characters
    marked = {}
    for i, label in enumerate(labels):
        for m in PART.finditer(label):
            marked.setdefault(m[1], []).append((i, m[0]))
    for pos, toks in cut.items():
        ch, n = TEXT[pos], len(toks)
        got = [i for i, _m in marked[ch]]
        assert toks == [i for i in got if i in toks]  # the same tokens carry its parts
        sub = "₀₁₂₃₄₅₆₇₈₉"
        assert [m for i, m in marked[ch] if i in toks] == [
            f"{ch}{'⁰¹²³⁴⁵⁶⁷⁸⁹'[k]}/{sub[n]}" for k in range(1, n + 1)]
    # the labels read back as the text (spaces shown as ▁), each character once
    groups = token_groups(labels, "character")
    assert "".join(group_label([labels[i] for i in g]) for g in groups) == \
        TEXT.replace(" ", "▁")
    for g in groups:  # a group is one character's tokens, or one token
        assert len(g) == 1 or len({labels[i] for i in g}) == len(g)


def test_word_groups_keep_cut_characters_whole_and_cjk_characters_apart(zh_gpt2):
    model, _tok = zh_gpt2
    labels = model.trace(TEXT, max_new=0).target_tokens
    groups = token_groups(labels, "word")
    words = [group_label([labels[i] for i in g]) for g in groups]
    assert {"龘", "▁and", "宽"} <= set(words)  # a cut character whole; letters joined
    cjk = [c for c in TEXT if ord(c) >= 0x2e80 and c not in "，。"]
    for g, w in zip(groups, words):  # tokens are joined into one CJK character, never two
        assert len(g) == 1 or sum(c in cjk for c in w) <= 1, (g, w)
    assert token_groups(["[CLS]", "play", "##ing", "is", "[SEP]"], "word") == \
        [[0], [1, 2], [3], [4]]
    assert token_groups(["<s>", "▁play", "ing", "▁is", "</s>"], "word") == \
        [[0], [1, 2], [3], [4]]
    assert token_groups(["a", "b"], "token") == [[0], [1]]
    with pytest.raises(InputError, match="Group tokens by"):
        token_groups(["a"], "sentence")


def test_grouped_attention_is_the_mean_of_rows_and_the_sum_of_columns(zh_gpt2):
    model, _tok = zh_gpt2
    trace = model.trace(TEXT, max_new=0)
    labels = trace.target_tokens
    a = trace["decoder.0.self"].pattern  # [head, N, N]
    groups = token_groups(labels, "word")
    got = grouped_attention(a, groups)
    want = np.zeros((a.shape[0], len(groups), len(groups)))
    for h in range(a.shape[0]):  # by hand, one cell at a time
        for gi, qg in enumerate(groups):
            for gj, kg in enumerate(groups):
                want[h, gi, gj] = sum(sum(float(a[h, q, k]) for k in kg) for q in qg) / len(qg)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-6)  # rows still sum to 1
    with pytest.raises(InputError, match="cover"):
        grouped_attention(a, groups[:-1])
