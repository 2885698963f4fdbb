"""vc.load: one entry point for shipped checkpoints, checkpoint dirs, MiniLM and HF models."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import ModelLoadError

CHECKPOINTS = Path(__file__).resolve().parent.parent / "checkpoints"


def shipped_models() -> list[str]:
    """Names of the checkpoints shipped in checkpoints/ (each a dir with config.json)."""
    if not CHECKPOINTS.is_dir():
        return []
    return sorted(p.name for p in CHECKPOINTS.iterdir() if (p / "config.json").is_file()
                  and (p / "vocab.json").is_file())


def is_native_dir(path: Path) -> bool:
    """config.json + vocab.json, and not a Hugging Face folder (Marian, GPT-2 and BART
    tokenizers also write vocab.json; every HF config.json has "model_type", ours never)."""
    if not ((path / "config.json").is_file() and (path / "vocab.json").is_file()):
        return False
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return True  # let the native loader report the broken file
    return not (isinstance(config, dict) and "model_type" in config)


def load(name_or_path: str, device: str = "auto"):
    """Load a model by shipped name ("en-fr"), checkpoint dir, "minilm", HF dir or Hub id."""
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ModelLoadError("No model given: pick a shipped model, 'minilm', a path or an id.")
    name = name_or_path.strip()
    from .backends.native import NativeModel

    if name in shipped_models():
        return NativeModel.from_dir(CHECKPOINTS / name, device, name=name)
    path = Path(os.path.expanduser(name))
    if path.is_dir() and is_native_dir(path):
        return NativeModel.from_dir(path, device)
    try:
        from .backends.hf import load_hf
    except ImportError as err:  # the Hugging Face backend is optional at import time
        raise ModelLoadError(f"Cannot load {name!r}: Hugging Face support unavailable ({err})") from None
    return load_hf(name, device)
