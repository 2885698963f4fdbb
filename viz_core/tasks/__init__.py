"""Demo tasks whose data our own code generates: en-fr and zh-en translation, dates, a small
LM, and repeated random words for an induction model.

Each task module has NAME, KIND, GENERATOR_VERSION, DESCRIPTION, EXAMPLES, DEFAULTS,
dataset(split, n, seed) -> list[Pair], build_vocabs(pairs) and evaluate(model, vocabs,
test, train) -> metrics; optionally train_dataset(n, seed), the training pairs when they are
more than dataset("train", n, seed) (en-fr adds its "because it was too ADJ" sentences).
"""

from __future__ import annotations

from importlib import import_module

TASKS = {"en-fr": "en_fr", "zh-en": "zh_en", "dates": "dates", "lm": "lm", "induction": "induction"}


def get_task(name: str):
    """The task module for a name ("en-fr", "zh-en", "dates", "lm", "induction")."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return import_module(f"{__name__}.{TASKS[name]}")
