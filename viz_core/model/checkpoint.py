"""Checkpoints: model.safetensors + config.json + vocab.json (+ card.json).

Loading never unpickles anything: weights come only through safetensors, whose header is
checked against the config (names and shapes) before any tensor is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from viz_core.i18n import N_

from ..errors import CheckpointError
from .config import TransformerConfig
from .tokenizer import Vocab
from .transformer import Transformer

WEIGHTS, CONFIG, VOCAB, CARD = "model.safetensors", "config.json", "vocab.json", "card.json"
MAX_JSON_BYTES = 50_000_000


def save_checkpoint(model: Transformer, vocabs: dict[str, Vocab], path: str | Path,
                    card: dict | None = None) -> Path:
    """Write a checkpoint dir. vocabs: {"source": Vocab, "target": Vocab} (as the kind needs)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    if model.cfg.share_embeddings:
        state.pop("generator.weight", None)  # tied: stored once, as tgt_embed.weight
    save_file(state, str(path / WEIGHTS))
    (path / CONFIG).write_text(json.dumps(model.cfg.to_dict(), indent=2))
    (path / VOCAB).write_text(json.dumps({k: v.to_dict() for k, v in vocabs.items()}))
    if card is not None:
        (path / CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False))
    return path


def read_json(path: Path, what: str):
    """The JSON file of a checkpoint (``what`` names it in errors), size-capped; a
    CheckpointError when it is missing, too large or not JSON."""
    if not path.is_file():
        raise CheckpointError(N_("{parent}: missing {name} ({what})"),
                                 parent=path.parent, name=path.name, what=what)
    if path.stat().st_size > MAX_JSON_BYTES:
        raise CheckpointError(N_("{path}: {what} is too large"), path=path, what=what)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(N_("{path}: {what} is not valid JSON ({err})"),
                                 path=path, what=what, err=err) from None
    except RecursionError:  # brackets nested thousands deep
        raise CheckpointError(N_("{path}: {what} is nested too deeply to read"),
                              path=path, what=what) from None


def read_vocabs(path: Path, cfg: TransformerConfig) -> dict[str, Vocab]:
    raw = read_json(path / VOCAB, N_("vocabulary"))
    if not isinstance(raw, dict):
        raise CheckpointError(N_("{value}: expected an object"), value=path / VOCAB)
    vocabs = {k: Vocab.from_dict(v) for k, v in raw.items() if k in ("source", "target")}
    need = {"source": cfg.src_vocab_size if cfg.has_encoder else 0,
            "target": cfg.tgt_vocab_size if cfg.has_decoder else 0}
    for side, size in need.items():
        if size and side not in vocabs:
            raise CheckpointError(N_("{value}: missing the {side} vocabulary"), value=path / VOCAB, side=side)
        if size and len(vocabs[side]) != size:
            raise CheckpointError(N_("{value}: {side} vocabulary has {len} tokens but the config "
                                    "says {size}"), value=path / VOCAB, side=side, len=len(vocabs[side]),
                                      size=size)
    return vocabs


def load_checkpoint(path: str | Path, device: torch.device | str = "cpu"
                    ) -> tuple[Transformer, dict[str, Vocab], dict]:
    """-> (model in eval mode on device, vocabularies, card). Raises CheckpointError."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(N_("checkpoint directory not found: {path}"), path=path)
    cfg = TransformerConfig.from_dict(read_json(path / CONFIG, N_("model config")))
    vocabs = read_vocabs(path, cfg)
    card = read_json(path / CARD, N_("model card")) if (path / CARD).is_file() else {}
    if not isinstance(card, dict):
        card = {}
    weights = path / WEIGHTS
    if not weights.is_file():
        raise CheckpointError(N_("{path}: missing {WEIGHTS} (weights)"), path=path, WEIGHTS=WEIGHTS)

    model = Transformer(cfg)
    expected = model.state_dict()
    if cfg.share_embeddings:
        expected = {k: v for k, v in expected.items() if k != "generator.weight"}
    try:
        with safe_open(str(weights), framework="pt") as f:
            names = set(f.keys())
            missing, unexpected = sorted(set(expected) - names), sorted(names - set(expected))
            if missing or unexpected:
                raise CheckpointError(N_("{weights}: weights do not match the config (missing "
                                        "{value}, unexpected {value2})"), weights=weights, value=missing[:5],
                                          value2=unexpected[:5])
            for name in expected:
                shape = tuple(f.get_slice(name).get_shape())
                if shape != tuple(expected[name].shape):
                    raise CheckpointError(N_("{weights}: {name} has shape {shape}, the config "
                                            "needs {tuple}"), weights=weights, name=name, shape=shape,
                                              tuple=tuple(expected[name].shape))
            state = {name: f.get_tensor(name) for name in expected}
    except CheckpointError:
        raise
    except Exception as err:  # safetensors raises its own error types for corrupt files
        raise CheckpointError(N_("{weights}: not a readable safetensors file ({err})"),
                                 weights=weights, err=err) from None
    model.load_state_dict(state, strict=not cfg.share_embeddings)
    return model.to(device).eval(), vocabs, card
