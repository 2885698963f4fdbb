"""Head search (viz_core.analysis.head_search): hand-built patterns whose answers follow from
their construction, a lazy trace read in row windows equal to the full pattern, and the
teacher's example on MiniLM checked against the trace's own patterns."""

from __future__ import annotations

import numpy as np
import pytest

import viz_core as vc
from viz_core.analysis import head_search as hs
from viz_core.capture.trace import AttentionTrace, BlockTrace

TOKS = ["<bos>", "a", "b", "c", "a", "b", "c"]  # a repeated sequence: induction is defined


def causal(n: int) -> np.ndarray:
    return np.triu(np.ones((n, n), bool), k=1)  # True = blocked (a key after the query)


def uniform(mask: np.ndarray) -> np.ndarray:
    allowed = (~mask).astype(np.float32)
    return allowed / allowed.sum(axis=1, keepdims=True)


def one_hot_rows(targets: dict[int, int], mask: np.ndarray) -> np.ndarray:
    """Uniform over allowed keys, except rows q in targets: all weight on key targets[q]."""
    p = uniform(mask)
    for q, k in targets.items():
        p[q] = 0.0
        p[q, k] = 1.0
    return p


def hand_trace() -> AttentionTrace:
    """Two causal layers x 3 heads over TOKS:
    L0 h1 = previous-token head, L1 h2 = induction head, L1 h0 = first-token head, the rest
    uniform."""
    n = len(TOKS)
    m = causal(n)
    u = uniform(m)
    prev = one_hot_rows({q: q - 1 for q in range(1, n)}, m)
    # induction: q=4 ('a', earlier copy at 1) -> key 2; q=5 -> 3; q=6 -> 4
    induction = one_hot_rows({4: 2, 5: 3, 6: 4}, m)
    first = one_hot_rows({q: 0 for q in range(n)}, m)
    l0 = BlockTrace("decoder.0.self", np.stack([u, prev, u]), None, m, TOKS, TOKS)
    l1 = BlockTrace("decoder.1.self", np.stack([first, u, induction]), None, m, TOKS, TOKS)
    return AttentionTrace({"decoder.0.self": l0, "decoder.1.self": l1}, None, TOKS,
                          target_tokens=TOKS)


def test_templates_name_the_constructed_cells():
    m = causal(len(TOKS))
    prev = hs.template_cells("previous", TOKS, TOKS, m)
    assert [tuple(c) for c in np.argwhere(prev)] == [(q, q - 1) for q in range(1, 7)]
    ind = hs.template_cells("induction", TOKS, TOKS, m)
    assert [tuple(c) for c in np.argwhere(ind)] == [(4, 2), (5, 3), (6, 4)]
    same = hs.template_cells("same", TOKS, TOKS, m)
    assert [tuple(c) for c in np.argwhere(same)] == [(4, 1), (5, 2), (6, 3)]
    first = hs.template_cells("first", TOKS, TOKS, m)
    assert [tuple(c) for c in np.argwhere(first)] == [(q, 0) for q in range(1, 7)]
    # unmasked (an encoder): "same" looks both ways; specials are never copies
    both = hs.template_cells("same", TOKS, TOKS, None)
    assert (1, 4) in {tuple(c) for c in np.argwhere(both)}
    bos = ["<bos>", "x", "<bos>"]
    assert not hs.template_cells("same", bos, bos, None).any()


def test_induction_skips_the_query_itself():
    # "a a": the token after the earlier copy (position 0) is the query itself
    toks = ["a", "a", "b"]
    cells = hs.template_cells("induction", toks, toks, causal(3))
    assert not cells[1].any()


def test_template_search_ranks_the_constructed_heads_first():
    trace = hand_trace()
    prev = hs.search_template(trace, "previous")
    assert (prev.frame.block[0], prev.frame["head"][0]) == ("decoder.0.self", 1)
    assert prev.frame.score[0] == pytest.approx(1.0)
    assert prev.queries == 6
    ind = hs.search_template(trace, "induction")
    top = ind.frame.iloc[0]
    assert (top.block, top["head"], top.score) == ("decoder.1.self", 2, pytest.approx(1.0))
    assert ind.queries == 3
    # uniform heads score the mean of 1 / (q + 1) over the eligible queries 4, 5, 6
    uni = ind.frame[(ind.frame.block == "decoder.0.self") & (ind.frame["head"] == 0)].score
    assert float(uni.iloc[0]) == pytest.approx(np.mean([1 / 5, 1 / 6, 1 / 7]))
    first = hs.search_template(trace, "first")
    assert (first.frame.block[0], first.frame["head"][0]) == ("decoder.1.self", 0)
    # the peak is an eligible query and its strongest template key
    assert (int(top.query), int(top.key)) in {(4, 2), (5, 3), (6, 4)}


def test_pair_search_reads_the_cell_of_every_head():
    trace = hand_trace()
    res = hs.search_pair(trace, 5, 3)
    assert len(res.frame) == 6
    # L1 h2 (induction: 5 -> 3) puts all its weight there; the next are uniform over 6 keys
    assert list(res.frame.score[:2]) == [1.0, pytest.approx(1 / 6)]
    assert res.frame.iloc[0]["head"] == 2 and res.frame.iloc[0].block == "decoder.1.self"
    expected = {(b, h): float(trace[b].pattern[h, 5, 3]) for b in trace.blocks
                for h in range(3)}
    got = {(r.block, r.head): r.score for r in res.frame.itertuples()}
    assert got == expected
    assert list(res.frame.score) == sorted(res.frame.score, reverse=True)


def test_bad_requests_give_clear_messages():
    trace = hand_trace()
    with pytest.raises(vc.InputError, match="mask blocks it"):
        hs.search_pair(trace, 1, 5)
    with pytest.raises(vc.InputError, match="0–6"):
        hs.search_pair(trace, 99, 0)
    with pytest.raises(vc.InputError, match="Unknown template"):
        hs.search_template(trace, "nope")
    with pytest.raises(vc.InputError, match="no 'encoder.self'"):
        hs.search_template(trace, "previous", kind="encoder.self")
    cross = BlockTrace("decoder.0.cross", np.full((1, 2, 3), 1 / 3, np.float32), None,
                       np.zeros((2, 3), bool), ["x", "y"], ["p", "q", "r"])
    with pytest.raises(vc.InputError, match="self-attention"):
        hs.search_template(AttentionTrace({cross.name: cross}, None, ["p", "q", "r"]),
                           "induction")


def test_no_eligible_query_scores_nan():
    toks = ["a", "b", "c"]
    b = BlockTrace("decoder.0.self", uniform(causal(3))[None], None, causal(3), toks, toks)
    res = hs.search_template(AttentionTrace({b.name: b}, None, toks), "induction")
    assert res.queries == 0 and np.isnan(res.frame.score[0])


def test_lazy_trace_windows_equal_the_full_patterns(monkeypatch):
    """A real (lazy) trace read in small row windows gives what the full patterns give."""
    model = vc.load("lm")
    text = "the cat sat on the mat and the cat sat on the mat"
    trace = model.trace(text, capture=("pattern",))
    monkeypatch.setattr(hs, "ROW_BYTES", 64)  # a few rows per window
    res = hs.search_template(trace, "same")
    for r in res.frame.itertuples():
        b = trace[r.block]
        cells = hs.template_cells("same", b.query_tokens, b.key_tokens, b.mask)
        ok = hs.eligible_queries(cells, b.mask)
        want = (b.pattern[r.head] * cells).sum(axis=1)[ok].mean()
        assert r.score == pytest.approx(float(want), abs=1e-6)


@pytest.mark.slow
def test_minilm_it_attends_to_animal():
    """The teacher's example: the heads where 'it' attends to 'animal' in MiniLM, checked
    against the trace's own patterns (two heads near 0.65)."""
    model = vc.load("minilm")
    trace = model.trace("The animal didn't cross the street because it was too tired",
                        capture=("pattern",))
    toks = trace.source_tokens
    q, k = toks.index("it"), toks.index("animal")
    res = hs.search_pair(trace, q, k)
    every = [(b.name, h, float(b.pattern[h, q, k])) for b in trace.layers("encoder.self")
             for h in range(b.n_heads)]
    best = sorted(every, key=lambda t: -t[2])
    assert [(r.block, r.head) for r in res.frame.iloc[:5].itertuples()] == [
        (n, h) for n, h, _ in best[:5]]
    assert res.frame.score[0] == pytest.approx(best[0][2])
    strong = res.frame[res.frame.score > 0.5]
    assert len(strong) == 2 and strong.block.nunique() == 2


def test_a_templates_description_reads_as_one_sentence_in_both_languages():
    """"ranked by its weight on <what the template's query looks at>, averaged over n query
    positions" (one query: said so); in 简体中文 the sentence after 排序依据 has no colon of
    its own (the template's name, "induction:", stays in the picker)."""
    from attention_lab.ui.errors import translated
    from tests.support.language import speaking

    trace = hand_trace()
    ind = hs.search_template(trace, "induction")
    assert str(ind.description) == ("weight on the token after an earlier copy of the query's "
                                    "token, averaged over 3 query positions")
    toks = ["a", "b", "a", "c"]
    b = BlockTrace("decoder.0.self", uniform(causal(4))[None], None, causal(4), toks, toks)
    one = hs.search_template(AttentionTrace({b.name: b}, None, toks), "induction")
    assert one.queries == 1 and "at the one query position" in one.description
    with speaking("zh"):
        for found in (ind, one, hs.search_template(trace, "previous")):
            text = translated(found.description)
            assert "：" not in text and ":" not in text and "权重" in text, text
