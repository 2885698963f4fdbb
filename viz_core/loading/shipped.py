"""The checkpoints shipped with Attention Lab, and how a folder of ours is told from a Hugging
Face one. Kept apart from ``entry`` so that sizing (``footprint``) can find a shipped model's
weights without importing the loader."""

from __future__ import annotations

import json
from pathlib import Path


def _checkpoints_dir() -> Path:
    """checkpoints/ at the top of a clone; viz_core/checkpoints/ inside an installed wheel."""
    package = Path(__file__).resolve().parents[1]  # viz_core/
    inside = package / "checkpoints"
    return inside if inside.is_dir() else package.parent / "checkpoints"


CHECKPOINTS = _checkpoints_dir()


def shipped_models() -> list[str]:
    """Names of the checkpoints shipped in checkpoints/: our own (config.json + vocab.json)
    and Hugging Face folders (config.json with "model_type" + safetensors weights, e.g. the
    distilled minilm-student)."""
    if not CHECKPOINTS.is_dir():
        return []
    return sorted(p.name for p in CHECKPOINTS.iterdir() if (p / "config.json").is_file()
                  and ((p / "vocab.json").is_file() or is_hf_dir(p)))


def is_hf_dir(path: Path) -> bool:
    """A Hugging Face model folder: a config.json naming its "model_type", safetensors."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(config, dict) and "model_type" in config and any(
        path.glob("*.safetensors"))


def shipped_card(name: str) -> dict | None:
    """The card.json of a shipped checkpoint (None when it has none or it cannot be read)."""
    try:
        card = json.loads((CHECKPOINTS / name / "card.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return card if isinstance(card, dict) else None


def is_native_dir(path: Path) -> bool:
    """config.json + vocab.json, and not a Hugging Face folder (Marian, GPT-2 and BART
    tokenizers also write vocab.json; every HF config.json has "model_type", ours never)."""
    if not ((path / "config.json").is_file() and (path / "vocab.json").is_file()):
        return False
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return True  # let the native loader report the broken file
    return not (isinstance(config, dict) and "model_type" in config)
