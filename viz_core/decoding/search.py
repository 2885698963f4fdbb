"""Beam search that records its whole search tree, step for step the search of Hugging Face
`generate(num_beams=k)` (transformers 5, `GenerationMixin._beam_search`).

Scoring (what Hugging Face calls `sequences_scores`)
----------------------------------------------------
    cum_logprob(y_1..y_t) = sum_i log P(y_i | source, y_<i)      (after logits processors)
    score(y_1..y_t)       = cum_logprob / t ** length_penalty

where t counts the *generated* tokens including the final EOS: not the decoder start token
(encoder-decoder) and not the prompt (decoder-only), i.e. HF's `cur_len + 1 -
decoder_prompt_len`. Tokens forced with `prefix` count as generated (their log-probs are
in cum_logprob), so a forced search is scored on the same scale as a free one.

Each step, for the k = beam_size live beams (k identical rows at step 1, all but the first
with a score of -1e9, as HF does):
  1. candidates = top 2k (more with several EOS ids) of cum_logprob + log P over k x vocab;
  2. a candidate "hits" when its token is an EOS or the step reaches max_len;
  3. the k best candidates that do not hit become the next beams ("kept");
  4. hitting candidates among the first k ranks compete, by score, with the finished
     hypotheses so far; the k best stay in the finished set ("finished");
  5. the search stops when every candidate hits (max_len), or early_stopping is True and
     k hypotheses are finished, or no beam can improve: k finished and
         best live cum_logprob / L ** length_penalty <= worst finished score,
     with L = max_len if early_stopping == "never" and length_penalty > 0, else the
     current length t (HF's heuristic; only "never" makes it an exact bound).
The n-best are the finished set, best first. All arithmetic that decides choices is done
in float32 tensors with the same operations as HF, so the choices and scores agree.
"""

from __future__ import annotations

import torch

from .beam_tree import BeamNode, BeamTree, Hypothesis
from .steppers import Stepper

NEG = -1.0e9  # HF's "impossible" score


@torch.inference_mode()
def run_search(stepper: Stepper, *, beam_size: int, max_new: int, length_penalty: float,
               early_stopping: bool | str, num_return: int, prefix_ids: list[int] = (),
               ) -> tuple[list[BeamNode], list[Hypothesis], dict]:
    """The search loop; returns (nodes, hypotheses, info)."""
    k = beam_size
    lp = length_penalty
    dev = stepper.device
    eos = torch.tensor(stepper.eos_ids or (-1,), device=dev)
    n_cand = max(2, 1 + len(stepper.eos_ids)) * k
    top_k_mask = torch.arange(n_cand, device=dev) < k  # only these ranks may finish

    nodes = [BeamNode(0, None, 0, stepper.root_token, stepper.start_ids[-1], 0.0, 0.0, 0.0,
                      "root")]
    seqs = torch.tensor([stepper.start_ids] * k, dtype=torch.long, device=dev)  # (k, T)
    state = stepper.start(k)
    running = torch.full((k,), NEG, device=dev)  # cum logprob per live row, float32
    running[0] = 0.0
    row_node: list[int | None] = [0] + [None] * (k - 1)  # node of each live row
    fin_scores = torch.full((k,), NEG, device=dev)
    fin_nodes: list[int | None] = [None] * k
    fin_flags = [False] * k  # HF's is_sent_finished (a placeholder row can finish too)
    t = 0
    stop = "max_len"

    # forced prefix: one kept node per token, every row fed the same token
    for tok in prefix_ids[:max_new]:
        logprobs, attention, state = stepper.step(state, seqs)
        t += 1
        parent = nodes[row_node[0]]
        lp_tok = float(logprobs[0, tok])
        running[0] = running[0] + logprobs[0, tok]
        cum = parent.cum_logprob + lp_tok
        nodes.append(BeamNode(len(nodes), parent.id, t, stepper.token_strings([tok])[0], tok,
                              lp_tok, cum, float(running[0] / (t ** lp)), "kept",
                              attention[0].cpu().numpy()))
        row_node[0] = len(nodes) - 1
        seqs = torch.cat([seqs, torch.full((k, 1), tok, device=dev)], dim=1)
    forced = t

    while t < max_new:
        logprobs, attention, state = stepper.step(state, seqs)  # (k, V), (k, L, H, K)
        t += 1
        V = logprobs.shape[-1]
        acc = (logprobs + running[:, None]).reshape(-1)  # (k * V)
        vals, idx = torch.topk(acc, n_cand)  # (n_cand)
        rows = idx // V
        toks = idx % V
        tok_lp = logprobs.reshape(-1)[idx]
        hits = torch.isin(toks, eos) | (t >= max_new)
        masked = vals + hits.float() * NEG
        nxt = torch.topk(masked, k).indices  # the next live rows, best first
        cand_scores = vals / (t ** lp)
        did_finish = hits & top_k_mask
        merged = torch.cat([fin_scores, cand_scores + (~did_finish).float() * NEG])
        sel = torch.topk(merged, k).indices

        # --- bookkeeping in Python, one transfer per tensor per step ---
        rows_l, toks_l, lp_l = rows.tolist(), toks.tolist(), tok_lp.tolist()
        score_l, hits_l, nxt_l, sel_l = cand_scores.tolist(), hits.tolist(), nxt.tolist(), sel.tolist()
        did_l = did_finish.tolist()
        kept = {c for c in nxt_l if not hits_l[c]}
        finished = {s - k for s in sel_l if s >= k and did_l[s - k]}
        need_att = sorted({rows_l[c] for c in kept | finished})
        att_np = {}
        if need_att:
            rows_t = torch.tensor(need_att, device=dev)
            arr = attention.index_select(0, rows_t).cpu().numpy()
            att_np = {r: arr[j] for j, r in enumerate(need_att)}
        strings = stepper.token_strings(toks_l)
        cand_node: list[int | None] = [None] * n_cand
        for c in range(n_cand):
            parent_id = row_node[rows_l[c]]
            if parent_id is None or lp_l[c] == float("-inf"):
                continue  # a placeholder row or an impossible token: nothing to show
            parent = nodes[parent_id]
            status = "kept" if c in kept else "finished" if c in finished else "pruned"
            node = BeamNode(len(nodes), parent_id, t, strings[c], toks_l[c], lp_l[c],
                            parent.cum_logprob + lp_l[c], score_l[c], status,
                            att_np[rows_l[c]] if status != "pruned" else None)
            cand_node[c] = node.id
            nodes.append(node)
        fin_nodes = [fin_nodes[s] if s < k else cand_node[s - k] for s in sel_l]
        fin_flags = [fin_flags[s] if s < k else did_l[s - k] for s in sel_l]
        fin_scores = merged[sel]

        # --- next live beams ---
        running = masked[nxt]
        row_node = [cand_node[c] for c in nxt_l]
        parent_rows = rows[nxt]
        seqs = torch.cat([seqs.index_select(0, parent_rows), toks[nxt][:, None]], dim=1)
        if all(hits_l):
            stop = "max_len"
            break
        state = stepper.reorder(state, parent_rows)
        all_done = all(fin_flags)
        if early_stopping is True and all_done:
            stop = "all_finished"
            break
        L = max_new if (early_stopping == "never" and lp > 0.0) else t
        best_possible = running[0] / (L ** lp)
        if all_done and not bool(best_possible > fin_scores.min()):
            stop = "no_improvement"
            break

    hyps = []
    for s, nid in zip(fin_scores.tolist()[:num_return], fin_nodes[:num_return]):
        if nid is None:
            continue
        path = _path_ids(nodes, nid)
        shown = [i for i in path if i not in stepper.special_ids]
        hyps.append(Hypothesis(tokens=stepper.token_strings(shown), token_ids=shown,
                               text=stepper.decode(path), score=float(s), node_id=nid))
    info = {"steps": t, "forced_steps": forced, "stopped": stop, "candidates_per_step": n_cand}
    return nodes, hyps, info


def _path_ids(nodes: list[BeamNode], node_id: int) -> list[int]:
    out = []
    cur = nodes[node_id]
    while cur.parent is not None:
        out.append(cur.token_id)
        cur = nodes[cur.parent]
    return out[::-1]


def make_tree(stepper: Stepper, nodes, hyps, settings: dict) -> BeamTree:
    return BeamTree(nodes=nodes, hypotheses=hyps, settings=settings,
                    source_tokens=list(stepper.source_tokens),
                    attention_keys=list(stepper.attention_keys),
                    attention_kind=stepper.attention_kind)


def attention_key_labels(tree: BeamTree, node_id: int) -> list[str]:
    """Labels of the key axis of node_id's attention. "cross": the source tokens. "self"
    (decoder-only): the prompt, then the tokens of the path before this node, one more key
    per step."""
    if tree.attention_kind != "self":
        return list(tree.attention_keys)
    return list(tree.attention_keys) + [n.token for n in tree.path(node_id)[:-1]]
