"""Head-role scores on hand-built attention patterns whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from viz_core.atlas.roles import ROLES, block_roles, dominant_role, is_delimiter, is_special

TOKENS = ["<bos>", "A", "B", "C", "D", "A", "B", "C", "D"]  # [A B C D] twice after <bos>
N = len(TOKENS)
CAUSAL = np.triu(np.ones((N, N), bool), k=1)
VALID = np.ones(N, bool)


def head(rows: dict[int, int] | None = None, fill=None) -> np.ndarray:
    """One causal head: row i puts all its weight on key rows[i] (default: key 0)."""
    p = np.zeros((N, N), np.float32)
    for i in range(N):
        if fill is not None:
            p[i, : i + 1] = fill(i)
        else:
            p[i, (rows or {}).get(i, 0)] = 1.0
    return p


def scores(*heads: np.ndarray, tokens=TOKENS, mask=CAUSAL, valid=VALID, self_attn=True):
    out = block_roles(np.stack(heads), mask, tokens, tokens, valid, valid, self_attn)
    return {k: v.tolist() for k, v in out.items()}


PREVIOUS = head({i: max(i - 1, 0) for i in range(N)})
INDUCTION = head({i: i - 3 for i in range(5, N)})  # after the earlier copy of my token
DUPLICATE = head({i: i - 4 for i in range(5, N)})
CURRENT = head({i: i for i in range(N)})
SINK = head()
UNIFORM = head(fill=lambda i: 1.0 / (i + 1))


def test_pure_previous_token_head():
    s = scores(PREVIOUS)
    assert s["previous"][0] == pytest.approx(1.0)
    assert s["induction"][0] == pytest.approx(0.0)
    assert s["duplicate"][0] == pytest.approx(0.0)
    assert s["current"][0] == pytest.approx(0.0)
    assert dominant_role({r: s[r][0] for r in ROLES}) == "previous"


def test_planted_induction_head():
    s = scores(INDUCTION)
    assert s["induction"][0] == pytest.approx(1.0)
    assert s["duplicate"][0] == pytest.approx(0.0)
    assert s["peak_induction"][0] == 5  # the first query with an earlier copy
    assert dominant_role({r: s[r][0] for r in ROLES}) == "induction"


def test_duplicate_token_head():
    s = scores(DUPLICATE)
    assert s["duplicate"][0] == pytest.approx(1.0)
    assert s["induction"][0] == pytest.approx(0.0)


def test_current_and_sink_heads():
    s = scores(CURRENT, SINK)
    assert s["current"] == pytest.approx([1.0, 0.0])
    assert s["local"][0] == pytest.approx(1.0)  # distance 0 everywhere
    assert s["distance"][0] == pytest.approx(0.0)
    # sink: every query from 1 on looks at key 0; query 0 sees one key only (excluded)
    assert s["first"] == pytest.approx([0.0, 1.0])
    assert s["current"][1] == pytest.approx(0.0)


def test_uniform_head_is_broad_and_not_specific():
    s = scores(UNIFORM)
    assert s["broad"][0] == pytest.approx(1.0)
    assert s["previous"][0] < 0.5 and s["induction"][0] < 0.5
    assert dominant_role({r: s[r][0] for r in ROLES}) == "broad"


def test_delimiter_head():
    toks = ["[CLS]", "a", "b", ".", "c", "d", ".", "e", "[SEP]"]
    p = np.zeros((N, N), np.float32)
    p[:, 3] = 1.0  # everything on the first "."
    no_mask = np.zeros((N, N), bool)
    s = scores(p, tokens=toks, mask=no_mask)
    assert s["delimiter"][0] == pytest.approx(1.0)
    assert s["first"][0] == pytest.approx(0.0)


def test_padding_is_ignored():
    """Right padding (pad keys blocked for every row) changes nothing."""
    pad = 3
    n = N + pad
    toks = TOKENS + ["<pad>"] * pad
    mask = np.triu(np.ones((n, n), bool), k=1)
    mask[:, N:] = True
    valid = np.arange(n) < N
    p = np.zeros((1, n, n), np.float32)
    p[0, :N, :N] = PREVIOUS
    p[0, N:, 0] = 1.0  # garbage in pad rows must not count
    padded = block_roles(p, mask, toks, toks, valid, valid, True)
    plain = block_roles(PREVIOUS[None], CAUSAL, TOKENS, TOKENS, VALID, VALID, True)
    for k in plain:
        np.testing.assert_array_equal(padded[k], plain[k], err_msg=k)


def test_cross_attention_leaves_position_roles_undefined():
    q = ["<bos>", "x", "y"]
    k = ["a", "b", "c", "<eos>"]
    p = np.full((2, 3, 4), 0.25, np.float32)
    out = block_roles(p, np.zeros((3, 4), bool), q, k, np.ones(3, bool), np.ones(4, bool),
                      False)
    for role in ("previous", "duplicate", "induction", "current", "local"):
        assert np.isnan(out[role]).all() and (out[f"peak_{role}"] == -1).all()
    assert out["broad"] == pytest.approx([1.0, 1.0])
    assert out["first"] == pytest.approx([0.25, 0.25])
    assert out["delimiter"] == pytest.approx([0.25, 0.25])  # <eos>


def test_no_repeat_means_no_duplicate_or_induction_score():
    toks = ["<bos>", "a", "b", "c"]
    n = len(toks)
    p = np.tril(np.ones((n, n), np.float32))
    p /= p.sum(axis=1, keepdims=True)
    mask = np.triu(np.ones((n, n), bool), k=1)
    out = block_roles(p[None], mask, toks, toks, np.ones(n, bool), np.ones(n, bool), True)
    assert np.isnan(out["duplicate"][0]) and np.isnan(out["induction"][0])


def test_scores_stay_in_unit_interval_on_random_patterns():
    rng = np.random.default_rng(0)
    toks = [str(t) for t in rng.integers(0, 4, N)]
    logits = rng.normal(size=(6, N, N))
    logits[:, CAUSAL] = -np.inf
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p = (p / p.sum(-1, keepdims=True)).astype(np.float32)
    out = block_roles(p, CAUSAL, toks, toks, VALID, VALID, True)
    for role in ROLES:
        v = out[role][np.isfinite(out[role])]
        assert ((v >= 0) & (v <= 1)).all(), role


def test_token_classes():
    assert is_special("<eos>") and is_special("[SEP]") and is_special("<|endoftext|>")
    assert not is_special("<b") and not is_special("cat")
    assert is_delimiter(".") and is_delimiter("Ġ,") and is_delimiter("␣")
    assert is_delimiter("[SEP]") and not is_delimiter("cat") and not is_delimiter("##ing")


def test_dominant_role_fallbacks():
    base = {r: 0.1 for r in ROLES}
    assert dominant_role({**base, "broad": 0.9}) == "broad"
    assert dominant_role({**base, "local": 0.9}) == "local"
    assert dominant_role(base) == "mixed"
    assert dominant_role({**base, "first": 0.8, "broad": 0.9}) == "first"
    assert dominant_role({**base, "induction": float("nan")}) == "mixed"
