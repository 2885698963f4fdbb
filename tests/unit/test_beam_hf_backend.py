"""Beam search through the public path: viz_core.load(tiny HF model dir).beam_search(...),
against the same model's generate() on the same tokens."""

from __future__ import annotations

import logging

import pytest
import torch

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

from viz_core.errors import InputError  # noqa: E402

TEXT = "the cat sat on the mat"


@pytest.fixture(scope="module")
def loaded(tiny_models):
    return lambda family: tiny_models.load(family, seed=1)[0]


def reference(model, k, n, lp, es):
    ids = torch.tensor([model.tokenizer(TEXT)["input_ids"]], device=model.device)
    kwargs = {}
    if model.hf_model.generation_config.pad_token_id is None:
        kwargs["pad_token_id"] = model.pad_id
    out = model.hf_model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=k,
                                  num_return_sequences=k, max_new_tokens=n,
                                  length_penalty=lp, early_stopping=es, do_sample=False,
                                  output_scores=True, return_dict_in_generate=True, **kwargs)
    prompt_len = ids.shape[1] if model.kind == "decoder-only" else 1
    return out, prompt_len


@pytest.mark.parametrize("family,k,lp,es", [
    ("bart", 3, 1.0, False), ("bart", 4, 2.0, True), ("gpt2", 3, 1.0, False),
    ("gpt2", 4, 0.5, "never"), ("t5", 3, 2.0, True), ("marian", 4, 1.0, False)])
def test_public_path_matches_generate(loaded, family, k, lp, es):
    model = loaded(family)
    tree = model.beam_search(TEXT, beam_size=k, max_len=8, length_penalty=lp,
                             early_stopping=es)
    out, plen = reference(model, k, 8, lp, es)
    assert len(tree.hypotheses) == k
    for h, seq, score in zip(tree.hypotheses, out.sequences, out.sequences_scores):
        ours = [n.token_id for n in tree.path(h.node_id)]
        assert seq[plen:plen + len(ours)].tolist() == ours
        assert h.score == pytest.approx(float(score), rel=1e-5, abs=1e-6)
        special = set(tree.settings["eos_ids"]) | set(model.tokenizer.all_special_ids)
        assert h.token_ids == [t for t in ours if t not in special]
        assert h.tokens == model.shown_tokens(h.token_ids)
        assert h.text == model.tokenizer.decode(ours, skip_special_tokens=True)
    assert tree.attention_kind == ("self" if family == "gpt2" else "cross")
    n = next(n for n in tree.nodes if n.status == "kept")
    assert n.attention.shape[-1] == len(tree.attention_keys) + (n.step - 1) * (family == "gpt2")


def test_public_path_prefix_and_ablation(loaded):
    model = loaded("bart")
    tree = model.beam_search(TEXT, beam_size=3, max_len=8, prefix=" the cat")
    prefix_ids = model.tokenizer(" the cat", add_special_tokens=False)["input_ids"]
    for h in tree.hypotheses:
        assert [n.token_id for n in tree.path(h.node_id)][:len(prefix_ids)] == prefix_ids
    plain = model.beam_search(TEXT, beam_size=2, max_len=5)
    ablated = model.beam_search(TEXT, beam_size=2, max_len=5, ablate={"decoder.0.cross": [0, 1]})
    assert ablated.nodes[1].logprob != plain.nodes[1].logprob
    assert model.beam_search(TEXT, beam_size=2, max_len=5).to_json() == plain.to_json()
    with pytest.raises(InputError):
        model.beam_search(TEXT, beam_size=2, ablate={"decoder.9.cross": [0]})


def test_public_path_beam_1_is_greedy(loaded):
    for family in ("bart", "gpt2"):
        model = loaded(family)
        tree = model.beam_search(TEXT, beam_size=1, max_len=10)
        assert tree.hypotheses[0].text == model.trace(TEXT, max_new=10).output_text


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.said: list[str] = []

    def emit(self, record):
        self.said.append(record.getMessage())


@pytest.mark.parametrize("family", ["gpt2", "bart"])
def test_a_beam_of_one_leaves_the_log_quiet(loaded, family):
    """A search of one beam with a length penalty or early stopping set (the Beam search
    page's sliders, or its address) made transformers write "The following generation flags
    are not valid and may be ignored: ['length_penalty']" into the server log at every run:
    the stepper handed the beam's settings to the config of a greedy search. The tree is the
    same with and without them (one beam: they rank nothing)."""
    model = loaded(family)
    plain = model.beam_search(TEXT, beam_size=1, max_len=4)
    records, log = _Records(), logging.getLogger("transformers")
    transformers.logging.set_verbosity_warning()
    logging.Logger.warning_once.cache_clear()  # transformers says each warning once a process
    log.addHandler(records)
    try:
        tree = model.beam_search(TEXT, beam_size=1, max_len=4, length_penalty=2.0,
                                 early_stopping=True)
    finally:
        log.removeHandler(records)
        transformers.logging.set_verbosity_error()
    assert not [m for m in records.said if "not valid" in m], records.said
    assert [n.token_id for n in tree.path(tree.hypotheses[0].node_id)] == \
        [n.token_id for n in plain.path(plain.hypotheses[0].node_id)]
