"""The training loop itself: a tiny run learns, writes a loadable checkpoint with its card."""

import json
import math

import pytest

import viz_core as vc
from viz_core.training.train import lr_factor, main, train

TINY = dict(d_model=32, n_heads=2, n_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0)


def test_tiny_run_halves_the_loss(tmp_path):
    result = train("dates", tmp_path / "dates", steps=250, batch_size=32, lr=3e-3, warmup=20,
                   n_train=3000, n_test=50, label_smoothing=0.0, progress=False, **TINY)
    losses = result["losses"]
    first, last = sum(losses[:10]) / 10, sum(losses[-20:]) / 20
    assert last <= first / 2, (first, last)
    card = json.loads((tmp_path / "dates" / "card.json").read_text())
    for key in ("name", "description", "task", "examples", "generator_version", "metrics",
                "train_steps", "train_seconds", "device", "parameters", "seed", "data_sizes"):
        assert key in card
    assert card["train_steps"] == 250 and card["data_sizes"] == {"train": 3000, "test": 50}
    assert 0.0 <= card["metrics"]["exact_match"] <= 1.0
    model = vc.load(str(tmp_path / "dates"))
    assert model.card["task"] == "dates"
    out = model.trace("9 may 2018").output_text
    assert isinstance(out, str)


def test_cli_decoder_only(tmp_path, capsys):
    main(["--task", "lm", "--out", str(tmp_path / "lm"), "--steps", "5", "--batch-size", "8",
          "--n-train", "200", "--n-test", "20", "--d-model", "16", "--layers", "1",
          "--heads", "2", "--d-ff", "32"])
    assert "perplexity" in capsys.readouterr().out
    model = vc.load(str(tmp_path / "lm"))
    assert model.kind == "decoder-only" and model.cfg.n_decoder_layers == 1
    assert model.trace("the red").output_text is not None


def test_time_budget_stops_early():
    result = train("en-fr", None, steps=10_000, batch_size=4, n_train=200, n_test=0,
                   max_minutes=0.02, progress=False, **TINY)
    assert result["card"]["train_steps"] < 10_000


def test_lr_schedule():
    assert lr_factor(0, 10, 0.0) == pytest.approx(0.1)
    assert lr_factor(9, 10, 0.0) == pytest.approx(1.0)
    assert lr_factor(10, 10, 0.0) == pytest.approx(1.0)
    assert lr_factor(500, 10, 0.5) == pytest.approx(0.05 + 0.95 * 0.5)
    assert lr_factor(1000, 10, 1.0) == pytest.approx(0.05)
    assert not math.isnan(lr_factor(5, 10, 2.0))


def test_unknown_model_option():
    with pytest.raises(TypeError):
        train("dates", None, steps=1, n_train=10, n_test=0, progress=False, colour="red")


def test_continue_from_checkpoint(tmp_path):
    first = train("dates", tmp_path / "a", steps=5, batch_size=8, n_train=200, n_test=0,
                  progress=False, **TINY)
    again = train("dates", tmp_path / "b", steps=7, batch_size=8, n_train=200, n_test=0,
                  progress=False, init=tmp_path / "a")
    assert again["card"]["train_steps"] == 12
    assert again["card"]["training"]["continued_from"]["train_steps"] == 5
    assert again["model"].cfg == first["model"].cfg
