"""Order blindness: attention without positions cannot tell a sentence from its shuffle.

Self-attention is permutation-equivariant: shuffle the tokens and, if nothing tells the
model where each token sits, every head's pattern is the same matrix with its rows and
columns shuffled the same way. Positions (a table added to the embeddings, a rotation of q and
k, a relative bias) are what break that symmetry. A causal mask breaks it too: in a decoder,
which keys a token may see depends on where it is, with or without positions.

The demo traces a sentence and a seeded shuffle of it, with positions on and off
(``Backend.trace(permute=..., positions=...)``), and compares each head after undoing the
shuffle.
"""

from __future__ import annotations

import re

import numpy as np

from viz_core.i18n import N_

from ..errors import InputError


def seeded_order(n: int, seed: int) -> list[int]:
    """A permutation of 0..n-1 drawn from ``seed``; never the identity when n > 1."""
    if n <= 1:
        return list(range(n))
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(n).tolist()
        if order != list(range(n)):
            return order


def parse_order(text: str, n: int) -> list[int]:
    """"2 0 1", "2,0,1" or "2; 0; 1" -> [2, 0, 1], a permutation of 0..n-1 (the Relative
    positions page's shuffle and the Pretraining page's XLNet order); InputError saying why
    not. Only ASCII digits: int() would also read "+1", "1_0" and other scripts' digits."""
    parts = [p for p in re.split(r"[\s,;]+", str(text).strip()) if p]
    if not parts or not all(p.isascii() and p.isdigit() for p in parts):
        raise InputError(N_("Write the order as {n} whole numbers from 0 to {last}, separated "
                            "by spaces or commas."), n=n, last=n - 1)
    order = [int(p) if len(p) <= len(str(n)) else n for p in parts]  # no 4,000-digit int
    if sorted(order) != list(range(n)):
        raise InputError(N_("Give each position from 0 to {last} exactly once ({n} tokens)."),
                         n=n, last=n - 1)
    return order


def unshuffle(matrix: np.ndarray, order: list[int]) -> np.ndarray:
    """A [..., q, k] matrix of the shuffled input, rows and columns put back in the original
    order: position p of the shuffled input held original position order[p]."""
    inverse = np.argsort(np.asarray(order))
    return matrix[..., inverse, :][..., :, inverse]


def head_differences(original: np.ndarray, shuffled: np.ndarray, order: list[int]
                     ) -> np.ndarray:
    """float32 [head]: max |pattern(original) - unshuffled pattern(shuffled)| per head."""
    back = unshuffle(np.asarray(shuffled, dtype=np.float32), order)
    return np.abs(np.asarray(original, dtype=np.float32) - back).reshape(
        back.shape[0], -1).max(-1).astype(np.float32)
