"""The trained demo models shipped in checkpoints/: quality on held-out data, and heads whose
attention means something. Models are loaded as the app loads them: vc.load(name)."""

import json

import pytest

import viz_core as vc
from viz_core.loading.entry import CHECKPOINTS
from viz_core.tasks import dates, en_fr, lm, zh_en
from viz_core.tasks.common import (
    alignment_head_scores,
    evaluate_translation,
    lm_perplexity,
    unigram_perplexity,
)

N_EVAL = 400  # held-out examples per model: enough for the thresholds, a few seconds each
SEED = 11  # any seed draws held-out examples (the split is by hash), this one is not training's
CARD_KEYS = ("name", "description", "task", "examples", "generator_version", "metrics",
             "train_steps", "train_seconds", "device", "parameters", "seed", "data_sizes")


@pytest.fixture(scope="module")
def models():
    return {}


def load(models, name):
    if name not in models:
        models[name] = vc.load(name, device="cpu")
    return models[name]


def vocabs(model):
    return {"source": model.src_vocab, "target": model.tgt_vocab}


def report_best(scores, what):
    best = scores[0]
    print(f"\n{what}: best head {best['block']} head {best['head']} ({best['convention']} row "
          f"convention) score {best['score']:.3f}; next: "
          + ", ".join(f"{s['block']}/{s['head']}/{s['convention']}={s['score']:.2f}"
                      for s in scores[1:4]))
    return best


@pytest.mark.parametrize("name, module", [("dates", dates), ("en-fr", en_fr), ("zh-en", zh_en),
                                          ("lm", lm)])
def test_shipped_files(name, module):
    path = CHECKPOINTS / name
    assert name in vc.shipped_models()
    card = json.loads((path / "card.json").read_text())
    assert all(key in card for key in CARD_KEYS)
    assert card["task"] == name and card["generator_version"] == module.GENERATOR_VERSION
    assert 4 <= len(card["examples"]) <= 6
    total = sum(f.stat().st_size for n in ("dates", "en-fr", "zh-en", "lm") if (CHECKPOINTS / n).is_dir()
                for f in (CHECKPOINTS / n).iterdir())
    assert total < 20 * 2**20


def test_dates_exact_match(models):
    model = load(models, "dates")
    metrics = evaluate_translation(model.model, vocabs(model), dates.dataset("test", N_EVAL, SEED))
    print(f"\ndates held-out: {metrics}")
    assert metrics["exact_match"] >= 0.99


def test_dates_examples(models):
    model = load(models, "dates")
    assert model.trace("saturday 9 may 2015").output_text == "2015-05-09"
    assert model.trace("9/5/18").output_text == "2018-05-09"
    assert model.trace("Samstag, 9. Mai 2015").output_text == "2015-05-09"


def test_en_fr_exact_match_and_bleu(models):
    model = load(models, "en-fr")
    metrics = evaluate_translation(model.model, vocabs(model), en_fr.dataset("test", N_EVAL, SEED),
                                   bleu=True)
    print(f"\nen-fr held-out: {metrics}")
    assert metrics["exact_match"] >= 0.95
    assert metrics["bleu"] >= 95


@pytest.mark.parametrize("english, french", [
    ("the red car", "la voiture rouge"), ("I see it", "je le vois"),
    ("I do not see the cat", "je ne vois pas le chat")])
def test_en_fr_examples(models, english, french):
    assert load(models, "en-fr").trace(english).output_text == french


def test_en_fr_alignment_head(models):
    """Some cross-attention head looks at the English noun for the French noun and at the
    English adjective for the French adjective, although their order is swapped."""
    model = load(models, "en-fr")
    cases = []
    for pair, spans in en_fr.aligned_examples(100, seed=SEED):
        for fr_noun, en_noun, fr_adj, en_adj in spans:
            cases.append((pair.source, pair.target, [(fr_noun, en_noun), (fr_adj, en_adj)]))
    best = report_best(alignment_head_scores(model, cases), "en-fr noun/adjective alignment")
    assert best["score"] >= 0.8


def test_dates_year_alignment_head(models):
    """Some head reads the year's decade digits from where the input writes them (the
    century digits are mostly inferred, so heads need not look at them: printed only)."""
    model = load(models, "dates")
    pairs = dates.dataset("test", 100, SEED)
    cases = [(p.source, p.target, dates.year_alignment(p)) for p in pairs]
    best = report_best(alignment_head_scores(model, cases), "dates year (decade) alignment")
    per_digit = [(p.source, p.target, [pair]) for p in pairs[:40]
                 for pair in dates.year_alignment(p, "all")]
    same = [s for s in alignment_head_scores(model, per_digit)
            if (s["block"], s["head"], s["convention"]) ==
            (best["block"], best["head"], best["convention"])]
    print(f"same head, any single year digit written in the input: {same[0]['score']:.3f}")
    assert best["score"] >= 0.8


def test_lm_beats_unigram(models):
    model = load(models, "lm")
    card = model.card
    train = [p.target for p in lm.dataset("train", 20_000, card["seed"])]
    test = [p.target for p in lm.dataset("test", N_EVAL, SEED)]
    ppl = lm_perplexity(model.model, model.tgt_vocab, test)
    unigram = unigram_perplexity(model.tgt_vocab, train, test)
    print(f"\nlm held-out perplexity {ppl:.2f}, unigram {unigram:.2f}")
    assert ppl < unigram / 2


def test_lm_continues_a_prompt(models):
    model = load(models, "lm")
    out = model.trace("the red", max_new=8).output_text
    assert out and all(w in model.tgt_vocab.index for w in out.split())
