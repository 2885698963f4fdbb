"""Deployment policy: which models users may load, and how big they may be.

A public deployment sets these environment variables (the Streamlit layer may also pass the
same keys from .streamlit/secrets.toml; viz_core itself never reads Streamlit):

    ATTENTION_LAB_ALLOWED_MODELS     comma list of names, paths or Hub ids; empty = any
    ATTENTION_LAB_ALLOW_LOCAL_PATHS  0/1 (default 1): may users name folders on the server?
    ATTENTION_LAB_ALLOW_HUB          0/1 (default 1): may users name Hugging Face Hub ids?
    ATTENTION_LAB_MAX_MODEL_MB       largest weights file(s) in MB; empty = no cap
    ATTENTION_LAB_MAX_PARAMETERS     most parameters (e.g. 200e6); empty = no cap

Every check runs before any file is read (names) or any tensor is allocated (sizes), and a
refusal is a ModelLoadError whose message says which setting refused it. Hugging Face models
are always loaded with trust_remote_code=False whatever the policy says.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from viz_core.i18n import N_

from ..errors import ModelLoadError

ENV_PREFIX = "ATTENTION_LAB_"
KEYS = ("ALLOWED_MODELS", "ALLOW_LOCAL_PATHS", "ALLOW_HUB", "MAX_MODEL_MB", "MAX_PARAMETERS")
BUILTIN_HF = ("minilm",)
TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


def _flag(raw, key: str, default: bool) -> bool:
    if raw is None:
        return default
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise ModelLoadError(N_("Deployment setting {ENV_PREFIX}{key}={raw!r} must be 0 or 1."),
                            ENV_PREFIX=ENV_PREFIX, key=key, raw=raw)


def _number(raw, key: str) -> float | None:
    if raw is None or str(raw).strip() == "":
        return None
    try:
        value = float(str(raw).replace("_", ""))
    except ValueError:
        raise ModelLoadError(N_("Deployment setting {ENV_PREFIX}{key}={raw!r} is not a number."),
                                ENV_PREFIX=ENV_PREFIX, key=key, raw=raw
                             ) from None
    if not value > 0:
        raise ModelLoadError(N_("Deployment setting {ENV_PREFIX}{key} must be positive."),
                                ENV_PREFIX=ENV_PREFIX, key=key)
    return value


@dataclass(frozen=True)
class Policy:
    allowed: tuple[str, ...] = ()  # names / paths / Hub ids users may load; () = any
    allow_local_paths: bool = True  # folders on the server named by the user
    allow_hub: bool = True  # Hugging Face Hub ids
    max_model_mb: float | None = None  # cap on the weights file(s), in MB (10**6 bytes)
    max_parameters: float | None = None  # cap on the parameter count

    @classmethod
    def from_mapping(cls, values: Mapping) -> Policy:
        """From {"ATTENTION_LAB_ALLOW_HUB": "0", ...} or {"allow_hub": "0", ...}."""
        def get(key: str):
            for k in (ENV_PREFIX + key, key, key.lower()):
                if k in values:
                    return values[k]
            return None

        raw_allowed = get("ALLOWED_MODELS")
        if isinstance(raw_allowed, (list, tuple)):
            allowed = tuple(str(x).strip() for x in raw_allowed if str(x).strip())
        else:
            allowed = tuple(x.strip() for x in str(raw_allowed or "").split(",") if x.strip())
        return cls(allowed=allowed,
                   allow_local_paths=_flag(get("ALLOW_LOCAL_PATHS"), "ALLOW_LOCAL_PATHS", True),
                   allow_hub=_flag(get("ALLOW_HUB"), "ALLOW_HUB", True),
                   max_model_mb=_number(get("MAX_MODEL_MB"), "MAX_MODEL_MB"),
                   max_parameters=_number(get("MAX_PARAMETERS"), "MAX_PARAMETERS"))

    @classmethod
    def from_env(cls, env: Mapping | None = None, overrides: Mapping | None = None) -> Policy:
        """Environment variables, then overrides (e.g. Streamlit secrets) on top."""
        env = os.environ if env is None else env
        merged = {k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}
        for key, value in (overrides or {}).items():
            key = str(key).upper()
            merged[key if key.startswith(ENV_PREFIX) else ENV_PREFIX + key] = value
        return cls.from_mapping(merged)

    @property
    def restricted(self) -> bool:
        return bool(self.allowed) or not (self.allow_local_paths and self.allow_hub) or \
            self.max_model_mb is not None or self.max_parameters is not None

    # ---- names --------------------------------------------------------------------------
    def _listed(self, name: str) -> bool:
        if not self.allowed:
            return True
        if name in self.allowed:
            return True
        resolved = _resolved(name)
        return resolved is not None and any(_resolved(a) == resolved for a in self.allowed)

    def permits(self, name: str, builtin: bool) -> bool:
        try:
            self.check_name(name, builtin)
        except ModelLoadError:
            return False
        return True

    def check_name(self, name: str, builtin: bool) -> None:
        """Refuse a model name before anything is read. builtin: a shipped name or MiniLM."""
        if not self._listed(name):
            raise ModelLoadError(N_("{name!r} is not one of the models this deployment allows "
                                   "({join})."), name=name, join=', '.join(self.allowed))
        if builtin:
            return
        if looks_local(name):
            if not self.allow_local_paths:
                raise ModelLoadError(N_("Loading models from folders on the server is switched "
                                     "off in this deployment."))
        elif not self.allow_hub:
            raise ModelLoadError(N_("Loading models from the Hugging Face Hub is switched off in "
                                 "this deployment."))

    # ---- sizes --------------------------------------------------------------------------
    def check_size(self, name: str, n_bytes: int | None = None,
                   n_params: int | None = None) -> None:
        if self.max_model_mb is not None and n_bytes is not None \
                and n_bytes > self.max_model_mb * 1e6:
            raise ModelLoadError(N_("{name!r} has {value:,.1f} MB of weights; this deployment "
                                   "allows at most {max_model_mb:,.0f} MB."), name=name, value=n_bytes / 1e6,
                                     max_model_mb=self.max_model_mb)
        if self.max_parameters is not None and n_params is not None \
                and n_params > self.max_parameters:
            raise ModelLoadError(N_("{name!r} has {n_params:,} parameters; this deployment allows "
                                   "at most {max_parameters:,}."), name=name, n_params=n_params,
                                     max_parameters=int(self.max_parameters))

    def check_folder(self, name: str, folder: Path) -> None:
        """Weights size and parameter count of a folder, from file sizes and safetensors
        headers only (nothing is loaded)."""
        if self.max_model_mb is None and self.max_parameters is None:
            return
        files = sorted(folder.glob("*.safetensors"))
        n_bytes = sum(f.stat().st_size for f in files)
        n_params = None
        if self.max_parameters is not None:
            n_params = sum(safetensors_parameters(f) for f in files)
        self.check_size(name, n_bytes, n_params)


def looks_local(name: str) -> bool:
    """A folder path rather than a Hub id ("org/model" or "model"); a name the file system
    refuses to look up (too long) is taken as a path."""
    try:
        if Path(os.path.expanduser(name)).exists():
            return True
    except OSError:
        return True
    return (name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1
            or not re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", name))


def _resolved(name: str) -> str | None:
    try:
        path = Path(os.path.expanduser(name))
        return str(path.resolve()) if path.exists() else None
    except (OSError, RuntimeError, ValueError):
        return None


def safetensors_parameters(path: Path) -> int:
    """Parameter count from a safetensors header (8-byte length + JSON), reading nothing else."""
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= 100_000_000:
                raise ValueError(f"header size {size}")
            header = json.loads(f.read(size))
        total = 0
        for key, entry in header.items():
            if key == "__metadata__":
                continue
            n = 1
            for dim in entry["shape"]:
                n *= int(dim)
            total += n
        return total
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:
        raise ModelLoadError(N_("{path}: not a readable safetensors file ({err})"),
                                path=path, err=err) from None


_default: Policy | None = None


def set_default_policy(policy: Policy | None) -> None:
    """What vc.load uses when called without a policy (None: read the environment)."""
    global _default
    _default = policy


def current_policy() -> Policy:
    return _default if _default is not None else Policy.from_env()
