"""Small beam trees built by hand or from random log-probs, for the beam and BLEU tests."""

import numpy as np

from viz_core.decoding.beam_tree import BeamNode, BeamTree, Hypothesis


def small_beam_tree():
    nodes = [BeamNode(0, None, 0, "<bos>", 1, 0.0, 0.0, 0.0, "root"),
             BeamNode(1, 0, 1, "le", 5, -0.1, -0.1, -0.1, "kept"),
             BeamNode(2, 1, 2, "chat", 6, -0.2, -0.3, -0.15, "finished"),
             BeamNode(3, 0, 1, "un", 7, -1.0, -1.0, -1.0, "kept"),
             BeamNode(4, 3, 2, "chat", 6, -0.5, -1.5, -0.75, "finished")]
    hyps = [Hypothesis(["le", "chat"], [5, 6], "le chat", -0.15, 2),
            Hypothesis(["un", "chat"], [7, 6], "un chat", -0.75, 4)]
    return BeamTree(nodes, hyps)


def synthetic_tree(beam=3, steps=6, seed=0) -> BeamTree:
    """A beam search over random log-probs: each beam proposes 2*beam candidates."""
    rng = np.random.default_rng(seed)
    nodes = [BeamNode(0, None, 0, "<bos>", 0, 0.0, 0.0, 0.0, "root")]
    beams = [0]
    finished = []
    for step in range(1, steps + 1):
        cands = []
        for b in beams:
            lp = np.log(rng.dirichlet(np.ones(2 * beam)))
            for j in range(2 * beam):
                cum = nodes[b].cum_logprob + lp[j]
                nid = len(nodes)
                nodes.append(BeamNode(nid, b, step, f"w{j}", j, float(lp[j]), float(cum),
                                      float(cum / step), "pruned"))
                cands.append(nid)
        cands.sort(key=lambda i: -nodes[i].score)
        beams = []
        for i in cands[:beam]:
            if step == steps or (nodes[i].token == "w0" and step > 2):
                nodes[i].status = "finished"
                finished.append(i)
            else:
                nodes[i].status = "kept"
                beams.append(i)
        if not beams:
            break
    finished.sort(key=lambda i: -nodes[i].score)
    hyps = [Hypothesis([], [], "", nodes[i].score, i) for i in finished[:beam]]
    return BeamTree(nodes, hyps)
