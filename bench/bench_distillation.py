"""Teacher against student, every layer pair (issue 33).

Row: ``vc.distillation.compare(minilm, minilm-student, 32 sentences)``: every (student
layer, teacher layer) pair (3 x 6), every measure, on 32 held-out sentences, against a 5 s
budget on the CPU. A plain ``trace_batch`` of MiniLM on the same sentences is timed beside it
(the one forward pass compare cannot avoid), for reference.
"""

from __future__ import annotations

import viz_core as vc
from viz_core.training.distil import held_out

from .common import budget_row, paired

BUDGET_S = 5.0


def run(quick: bool = False) -> list[dict]:
    if "minilm-student" not in vc.shipped_models():
        return [{"name": "distillation compare", "skipped": "no checkpoints/minilm-student "
                 "(make checkpoints)"}]
    sets = held_out(32)
    texts = (sets["toy"][:16] + sets["prose"][:16] + sets["toy"][16:])[:32]
    teacher, student = vc.load("minilm", "cpu"), vc.load("minilm-student", "cpu")

    def compare():
        return vc.distillation.compare(teacher, student, texts)

    def forward():
        return teacher.trace_batch(texts, capture=("v",))

    ours, plain = paired(compare, forward, 2 if quick else 5, "cpu")
    pairs = len(compare().pairs)
    return [budget_row(f"distillation compare: minilm vs minilm-student, {pairs} pairs, "
                       f"{len(texts)} sentences", ours, BUDGET_S, "cpu",
                       plain_trace_batch_s=plain["median"])]
