"""Head search: which heads link these two tokens? Pure numpy over a trace.

Two ways to ask:
- a pair: one query position and one key position of a block kind; every head of every
  layer of that kind is ranked by its weight on that cell;
- a template: a rule that names, for each query, the keys it "should" attend to
  (TEMPLATES below). Every head is ranked by the weight it puts on those keys, averaged over
  the queries where the template applies (at least one template key, and a choice: two or
  more keys the query may see).

Long inputs are read in row windows of one head at a time (BlockTrace.window), so nothing
N x N per head is kept; a short trace whose patterns were already computed reads those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from viz_core.i18n import N_, Message

from ..errors import InputError
from ..model.choices import BlockKind, Template, options

TEMPLATES = dict(zip(options(Template), (  # the Literal's order: previous, induction, ...
    N_("previous token: the key just before the query"),
    N_("induction: the token after an earlier copy of the query's token"),
    N_("first token: the first key (often a sink: [CLS], <bos>)"),
    N_("same token: other positions holding the query's token"),
), strict=True))
KEYS = dict(zip(options(Template), (  # what each template's query looks at, in a sentence
    N_("the key just before the query"),
    N_("the token after an earlier copy of the query's token"),
    N_("the first key"),
    N_("other positions holding the query's token"),
), strict=True))
PAIR_DESCRIPTION = N_("weight from query {query} ({q_token}) to key {key} ({k_token})")
TEMPLATE_DESCRIPTION = N_("weight on {keys}, averaged over {n} query positions")
TEMPLATE_DESCRIPTION_ONE = N_("weight on {keys}, at the one query position that has such a key")
SELF_ONLY = ("previous", "induction")  # positions of one sequence: self-attention only
COLUMNS = ["block", "kind", "layer", "head", "score", "query", "key"]
ROW_BYTES = 16 << 20  # bytes of one head's rows read at a time

_SPECIAL = re.compile(r"^(<\|?[^<>\s]{1,20}\|?>|\[[A-Z]{2,8}\])$")  # <bos> <|endoftext|> [SEP]


def is_special(token: str) -> bool:
    """A tokenizer's special token ([CLS], <bos>, <|endoftext|>): never a copy of a word."""
    return bool(_SPECIAL.match(token))


@dataclass(frozen=True)
class HeadSearch:
    """Every head of one block kind, best first.

    frame: one row per head: block, kind, layer, head, score (the weight on the cell, or
    the template's mean), query and key (the cell; for a template, the query where the head
    puts most weight on template keys and that query's strongest template key).
    """

    frame: pd.DataFrame
    kind: BlockKind  # the block kind searched
    what: str  # "pair" or a template name
    queries: int  # query positions the score averages over (1 for a pair)
    description: str  # an i18n.Message: reads as English, shown translated

    def top(self, n: int = 10) -> pd.DataFrame:
        return self.frame.head(n)


# ---- templates: bool [q, k] of the cells a template names ------------------------------------
def template_cells(template: Template, query_tokens: list[str], key_tokens: list[str],
                   mask: np.ndarray | None = None, self_attention: bool = True) -> np.ndarray:
    """bool [q, k]: True where `template` names key k for query q (and the mask allows it).

    mask: bool [q, k], True = blocked (None: every key allowed)."""
    if template not in TEMPLATES:
        raise InputError(N_("Unknown template {template!r}; choose one of {list}."),
                            template=template, list=list(TEMPLATES))
    if template in SELF_ONLY and not self_attention:
        raise InputError(N_("The {template} template compares positions of one sequence; pick a "
                           "self-attention block."), template=template)
    n_q, n_k = len(query_tokens), len(key_tokens)
    allowed = np.ones((n_q, n_k), bool) if mask is None else ~np.asarray(mask, bool)
    qi, ki = np.arange(n_q)[:, None], np.arange(n_k)[None, :]
    if template == "previous":
        cells = ki == qi - 1
    elif template == "first":
        cells = np.broadcast_to(ki == 0, (n_q, n_k)).copy()
        if self_attention:
            cells[0] = False  # the first query seeing itself says nothing
    else:
        ids = {t: i for i, t in enumerate(dict.fromkeys([*query_tokens, *key_tokens]))}
        q_ids = np.array([ids[t] for t in query_tokens])[:, None]
        k_ids = np.array([ids[t] for t in key_tokens])[None, :]
        plain = np.array([not is_special(t) for t in key_tokens])[None, :]
        same = (q_ids == k_ids) & plain
        if self_attention:
            same &= ki != qi  # a query is trivially its own token
        if template == "same":
            cells = same
        else:  # induction: key j + 1 for every earlier copy j < q of the query's token
            copy = same & (ki < qi)
            cells = np.zeros((n_q, n_k), bool)
            cells[:, 1:] = copy[:, :-1]
            cells &= ki != qi
    return cells & allowed


def eligible_queries(cells: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """bool [q]: queries with a template key and a choice (two or more allowed keys)."""
    n_allowed = cells.shape[1] if mask is None else (~np.asarray(mask, bool)).sum(axis=1)
    return cells.any(axis=1) & (np.asarray(n_allowed) >= 2)


def _rows(block, h: int, r0: int, r1: int) -> np.ndarray:
    return block.window(h, (r0, r1), (0, block.shape[2]))


def template_scores(block, cells: np.ndarray, eligible: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per head of one block: (mean over eligible queries of the weight on template keys,
    the eligible query where that weight peaks, that query's strongest template key)."""
    n_heads, n_q, n_k = block.shape
    rows = np.flatnonzero(eligible)
    score = np.full(n_heads, np.nan)
    peak_q = np.full(n_heads, -1)
    peak_k = np.full(n_heads, -1)
    if not len(rows):
        return score, peak_q, peak_k
    step = max(1, ROW_BYTES // (4 * max(1, n_k)))
    for h in range(n_heads):
        per_row = np.zeros(n_q)
        for r0 in range(int(rows[0]), int(rows[-1]) + 1, step):
            r1 = min(int(rows[-1]) + 1, r0 + step)
            w = _rows(block, h, r0, r1)  # (r, k)
            per_row[r0:r1] = np.where(cells[r0:r1], w, 0.0).sum(axis=1, dtype=np.float64)
        sel = per_row[rows]
        score[h] = float(sel.mean())
        best = int(rows[int(np.argmax(sel))])
        peak_q[h] = best
        w = _rows(block, h, best, best + 1)[0]
        peak_k[h] = int(np.argmax(np.where(cells[best], w, -1.0)))
    return score, peak_q, peak_k


# ---- searches over a trace -------------------------------------------------------------------
def _layers(trace, kind: BlockKind | None):
    kinds = trace.kinds()
    if not kinds:
        raise InputError(N_("This trace has no attention blocks to search."))
    kind = kind or kinds[0]
    if kind not in kinds:
        raise InputError(N_("This model has no {kind!r} blocks; it has {kinds}."), kind=kind, kinds=kinds)
    return kind, trace.layers(kind)


def _frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=COLUMNS)
    # best first; ties (and NaN: not measured) keep model order
    return frame.sort_values("score", ascending=False, kind="stable",
                             na_position="last").reset_index(drop=True)


def search_pair(trace, query: int, key: int, kind: BlockKind | None = None) -> HeadSearch:
    """Every head of one block kind ranked by its weight from `query` to `key` (positions in
    that kind's query and key tokens)."""
    kind, layers = _layers(trace, kind)
    first = layers[0]
    n_q, n_k = len(first.query_tokens), len(first.key_tokens)
    if not (0 <= int(query) < n_q and 0 <= int(key) < n_k):
        raise InputError(N_("Pick a query position in 0–{value} and a key position in 0–{value2} "
                           "(got query {query}, key {key})."),
                             value=n_q - 1, value2=n_k - 1, query=query, key=key)
    query, key = int(query), int(key)
    if first.mask_window((query, query + 1), (key, key + 1))[0, 0]:
        window = first.window_size
        if window and query - key >= window:
            raise InputError(N_("Query {query} may not attend to key {key} in these blocks: "
                                "their sliding window lets a query see only itself and the "
                                "{n} keys before it. Pick a key from {first} to {query}."),
                             query=query, key=key, n=window - 1, first=query - window + 1)
        raise InputError(N_("Query {query} may not attend to key {key} in these blocks (the mask "
                           "blocks it: a causal query sees only itself and earlier keys)."),
                             query=query, key=key)
    rows = []
    for b in layers:
        for h in range(b.n_heads):
            w = float(b.window(h, (query, query + 1), (key, key + 1))[0, 0])
            rows.append({"block": b.name, "kind": kind, "layer": b.layer, "head": h,
                         "score": w, "query": query, "key": key})
    q_tok, k_tok = first.query_tokens[query], first.key_tokens[key]
    return HeadSearch(_frame(rows), kind, "pair", 1,
                      Message(PAIR_DESCRIPTION, query=query, q_token=repr(q_tok), key=key,
                              k_token=repr(k_tok)))


def search_template(trace, template: Template, kind: BlockKind | None = None) -> HeadSearch:
    """Every head of one block kind ranked by the template's mean weight (see TEMPLATES)."""
    kind, layers = _layers(trace, kind)
    rows, n_eligible = [], 0
    for b in layers:
        _, n_q, n_k = b.shape
        mask = b.mask_window((0, n_q), (0, n_k))
        cells = template_cells(template, b.query_tokens, b.key_tokens, mask,
                               self_attention=kind.endswith(".self"))
        eligible = eligible_queries(cells, mask)
        n_eligible = int(eligible.sum())
        score, peak_q, peak_k = template_scores(b, cells, eligible)
        for h in range(b.n_heads):
            rows.append({"block": b.name, "kind": kind, "layer": b.layer, "head": h,
                         "score": score[h], "query": int(peak_q[h]), "key": int(peak_k[h])})
    return HeadSearch(_frame(rows), kind, template, n_eligible,
                      Message(TEMPLATE_DESCRIPTION_ONE if n_eligible == 1 else TEMPLATE_DESCRIPTION,
                              keys=Message(KEYS[template]), n=n_eligible))


def search_heads(trace, *, kind: BlockKind | None = None, query: int | None = None,
                 key: int | None = None, template: Template | None = None) -> HeadSearch:
    """search_pair when query and key are given, else search_template."""
    if template is not None:
        return search_template(trace, template, kind)
    if query is None or key is None:
        raise InputError(N_("Give a query and a key position, or a template."))
    return search_pair(trace, query, key, kind)
