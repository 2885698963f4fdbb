"""Corrupt and hostile checkpoint folders (truncated, wrong shapes, absurd sizes, pickles that
would run code) and the message each must give."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import torch

from tests.support.hf_tiny import make_tiny_bert
from viz_core.training.toy import save_toy


class Boom:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def weights_missing(root: Path) -> tuple[Path, str]:
    """A tiny BERT folder whose safetensors lack one weight (transformers starts it at
    random): (folder, the weight's name)."""
    from safetensors.torch import load_file, save_file

    bert = make_tiny_bert(root / "hf_missing_weight")
    weights = load_file(bert / "model.safetensors")
    name = "encoder.layer.0.attention.self.query.weight"
    weights.pop(name)
    save_file(weights, bert / "model.safetensors", metadata={"format": "pt"})
    return bert, name


def hostile_checkpoints(root: Path) -> dict[str, tuple[Path, str]]:
    """name -> (folder, a word the message must contain)."""
    out = {}

    def fresh(name):
        return save_toy(root / name, seed=4)

    p = fresh("truncated")
    data = (p / "model.safetensors").read_bytes()
    (p / "model.safetensors").write_bytes(data[: len(data) // 3])
    out["truncated"] = (p, "safetensors")
    p = fresh("shapes")
    cfg = json.loads((p / "config.json").read_text())
    (p / "config.json").write_text(json.dumps({**cfg, "d_ff": cfg["d_ff"] * 2}))
    out["shapes"] = (p, "shape")
    p = fresh("novocab")
    (p / "vocab.json").unlink()
    out["novocab"] = (p, "config")  # no longer ours: read as a HF folder, which it is not
    p = fresh("noconfig")
    (p / "config.json").unlink()
    out["noconfig"] = (p, "config")
    p = fresh("absurd")
    (p / "config.json").write_text(json.dumps({**cfg, "d_model": 1 << 20, "d_ff": 1 << 24,
                                               "n_layers": 10_000}))
    out["absurd"] = (p, "parameters")
    p = fresh("hugevocab")
    (p / "config.json").write_text(json.dumps({**cfg, "src_vocab_size": 10**12}))
    out["hugevocab"] = (p, "vocab_size")
    p = fresh("pickle")
    (p / "model.safetensors").write_bytes(pickle.dumps({"w": Boom(root / "UNPICKLED")}))
    out["pickle"] = (p, "safetensors")
    p = fresh("torchsave")
    torch.save({"w": Boom(root / "UNPICKLED")}, p / "model.safetensors")
    out["torchsave"] = (p, "safetensors")
    p = fresh("badvocab")
    (p / "vocab.json").write_text(json.dumps({"source": {"tokens": [1, 2]}}))
    out["badvocab"] = (p, "vocab")
    deep = '{"a": ' * 5000 + "1" + "}" * 5000  # deeper than Python's recursion limit
    p = fresh("deepcard")
    (p / "card.json").write_text(deep)
    out["deepcard"] = (p, "nested")
    p = fresh("deepconfig")
    (p / "config.json").write_text(deep)
    out["deepconfig"] = (p, "nested")
    p = root / "hf_deep_config"  # a HF folder whose config.json is nested too deeply
    bert = make_tiny_bert(p)
    (bert / "config.json").write_text(deep)
    out["hf_deep_config"] = (bert, "config")
    for case, key, value, word in (  # a HF config.json that does not fit its weights
            ("hf_layers", "num_hidden_layers", 10**12, "num_hidden_layers"),  # built forever
            ("hf_wide", "intermediate_size", 10**9, "parameters"),  # allocated, then random
            ("hf_shapes", "intermediate_size", 8, "does not match")):  # started at random
        bert = make_tiny_bert(root / case)
        cfg = json.loads((bert / "config.json").read_text())
        (bert / "config.json").write_text(json.dumps({**cfg, key: value}))
        out[case] = (bert, word)
    p = root / "hf_pickle_only"  # a HF folder whose weights are only a pickle
    bert = make_tiny_bert(p)
    (bert / "model.safetensors").unlink()
    torch.save({"w": Boom(root / "UNPICKLED")}, bert / "pytorch_model.bin")
    out["hf_pickle_only"] = (bert, "safetensors")
    return out
