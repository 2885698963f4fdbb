"""The shared sidebar: model, device, input text (and target). Returns a Selection."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from streamlit import config

import viz_core as vc
from viz_core.i18n import N_, _, bound
from viz_core.loading.entry import CHECKPOINTS
from viz_core.loading.policy import BUILTIN_HF, Policy, set_default_policy

from . import state
from .address import FIRST, page_settings
from .charts import IMAGE_FORMATS
from .errors import literal, log, reported, translated
from .generation import new_tokens_control
from .lang import language_switch
from .runs import PRECISIONS, TraceRequest, get_model, model_footprint, run_trace, with_precision

MINILM = "minilm"
CUSTOM = N_("Other (path or Hub id)…")
DEFAULT_ORDER = ("en-fr", "zh-en", "dates", "lm")  # zh-en: the Chinese classroom's translator


@dataclass(frozen=True)
class Selection:
    model_name: str
    device: str
    text: str
    target: str | None
    model: object  # a viz_core backend
    max_new: int | None = None  # New tokens (decoder-only models); None: the model's default

    def trace(self, **options):
        """This selection's trace (options: see ui.runs.TraceRequest), with the spinner."""
        return run_trace(TraceRequest.of(self, **options))


def describe(name: str) -> str:
    card = CHECKPOINTS / name / "card.json"
    if name == MINILM:
        return _("all-MiniLM-L6-v2: a real pretrained BERT (6 layers × 12 heads)")
    try:
        prose = json.loads(card.read_text())["description"]
        return _(prose)  # shipped cards' prose is in the catalogue (viz_core/i18n/cards.py)
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _secrets_files() -> list[Path]:
    """The secrets files this server reads (.streamlit/secrets.toml, ~/.streamlit/...)."""
    files = config.get_option("secrets.files") or []
    return [Path(f) for f in ([files] if isinstance(files, str) else files)]


def secret_settings() -> dict:
    """Deployment settings from the secrets: the [attention_lab] table and top-level
    ATTENTION_LAB_* keys. No secrets file: {} (environment only). A file that exists but
    cannot be read (a TOML typo, a table that is not a table) stops the app with a message:
    carrying on would silently drop the deployment's model restrictions."""
    try:
        secrets = st.secrets
        table = secrets.get("attention_lab", {})
        settings = {str(k): v for k, v in dict(table).items()}
        settings.update({k: v for k, v in secrets.items() if k.startswith("ATTENTION_LAB_")})
        return settings
    except FileNotFoundError:  # Streamlit raises it for a missing *and* an unparsable file
        if not any(f.is_file() or (f.is_dir() and any(f.iterdir())) for f in _secrets_files()):
            return {}  # no secrets file at all: the environment alone decides
        log.exception("the secrets file could not be read")
    except (TypeError, ValueError):
        log.exception("the [attention_lab] settings in the secrets could not be read")
    st.error(_("This deployment's settings file (.streamlit/secrets.toml) could not be read, so "
             "the app stopped rather than run without its model restrictions. Check the "
             "file's TOML syntax (the server log has the details) and that [attention_lab] "
             "is a table."), icon="⚠️")
    state.stop()


def deployment_policy() -> Policy:
    """ATTENTION_LAB_* environment variables, overridden by an [attention_lab] table (or
    top-level ATTENTION_LAB_* keys) in .streamlit/secrets.toml when there is one. Also made
    viz_core's default, so vc.load enforces the same policy (sizes before allocation)."""
    overrides = secret_settings()
    with reported(_("reading the deployment settings")):
        policy = Policy.from_env(overrides=overrides)
    set_default_policy(policy)
    return policy


def model_choices(policy: Policy | None = None) -> list[str]:
    policy = policy or deployment_policy()
    shipped = vc.shipped_models()
    ordered = [n for n in DEFAULT_ORDER if n in shipped] + [n for n in shipped
                                                             if n not in DEFAULT_ORDER]
    return [n for n in [*ordered, MINILM] if policy.permits(n, builtin=True)]


def custom_allowed(policy: Policy) -> bool:
    """Offer the free-text model box only when some non-built-in model could pass."""
    builtin = {*vc.shipped_models(), *BUILTIN_HF}
    if policy.allowed:
        return any(a not in builtin for a in policy.allowed)
    return policy.allow_local_paths or policy.allow_hub


def sidebar() -> Selection:
    language_switch()  # first: everything below speaks the session's language
    policy = deployment_policy()
    choices = model_choices(policy)
    options = [*choices, CUSTOM] if custom_allowed(policy) else choices
    if not options:
        st.error(_("This deployment allows no model (see ATTENTION_LAB_ALLOWED_MODELS)."))
        state.stop()
    url_model = state.url_text("model", options[0] if choices else "")
    picked = url_model if url_model in choices else (CUSTOM if CUSTOM in options
                                                       else options[0])
    if url_model and url_model not in choices and CUSTOM not in options:
        state.notice(_("This deployment does not allow the model '{model}'; showing {shown}.").format(
            model=state.as_typed(url_model, 80), shown=options[0]))
    state.widget_default("model_pick", picked)
    custom = state.widget_default("model_custom", "" if url_model in choices else url_model,
                                  typed=True)
    if st.session_state.model_pick not in options:
        st.session_state.model_pick = options[0]
    state.clean_state("model_custom", N_("model name"))

    main = st.empty()  # the main area's top: a model that cannot load is told there too
    with st.sidebar:
        st.selectbox(_("Model"), options, key="model_pick",
                     format_func=bound(lambda n: _(n) if n == CUSTOM else f"{n} — {describe(n)}"[:80]),
                     help=_("Shipped demo models, the embedded MiniLM, or your own model."))
        name = st.session_state.model_pick
        if name == CUSTOM:
            st.text_input(_("Checkpoint dir, Hugging Face dir or Hub id"), custom, key="model_custom",
                          placeholder=_("e.g. /path/to/model or bert-base-uncased"))
            name = st.session_state.model_custom.strip()
            if not name:
                for place in (st, main):
                    place.info(_("Enter a path or id to load a model of your own."))
                state.stop()
        devices = ["auto", *vc.available_devices()]
        state.widget_default("device", state.url_choice("device", devices, "auto"))
        st.selectbox(_("Device"), devices, key="device",
                     help=_("auto picks a GPU when there is one, else the CPU."))
        state.widget_default("dtype", state.url_choice("dtype", PRECISIONS, "auto"))
        st.selectbox(_("Precision"), PRECISIONS, key="dtype",
                     help=_("Weights and activations: auto is bfloat16 on a GPU and float32 on "
                          "a CPU. Softmax and every pattern shown are float32 whatever this is."))
        device = with_precision(st.session_state.device, st.session_state.dtype)
        size = model_footprint(name, device)
        if size:
            st.caption(_("Weights: {size}").format(size=literal(size)))
        # the spinner ends before a failure is told: a stopped run sends nothing more
        with reported(_("loading the model {name!r}").format(name=name[:80]), also=main), \
                st.spinner(_("Loading {name}…").format(name=literal(name[:80]))):
            policy.check_name(name, builtin=name in choices)
            model = get_model(name, device)
        for message in getattr(model, "notices", []):
            st.warning(literal(translated(message)), icon="⚠️")

        examples = model.examples()
        # a new model brings its own first example unless the URL names a text
        if st.session_state.get("_text_model") != name:
            st.session_state["_text_model"] = name
            st.session_state["text"] = state.url_text("text", examples[0] if examples else "")
        if "_open_text" in st.session_state:  # a page opened on another text (ui.circuits)
            st.session_state["text"] = st.session_state.pop("_open_text")
        state.widget_default("text", state.url_text("text", ""), typed=True)
        state.clean_state("text", N_("input text"))
        st.text_area(_("Input text"), st.session_state.text, key="text",
                     max_chars=state.MAX_TEXT_CHARS, height=90)
        if examples:
            st.selectbox(_("Examples"), ["—", *examples], key="example",
                         on_change=_use_example, help=_("Put an example into the input box."))
        target = None
        if model.architecture == "encoder-decoder":
            state.widget_default("target", state.url_text("target", ""), typed=True)
            state.clean_state("target", N_("target"))
            st.text_input(_("Target (optional)"), st.session_state.target, key="target",
                          help=_("Teacher-force this output; leave empty to see the model's "
                               "own greedy output."))
            target = st.session_state.target.strip() or None
        max_new = new_tokens_control(model)  # decoder-only models; None elsewhere
        state.show_notices()
        state.widget_default("image_format", IMAGE_FORMATS[0])
        st.radio(_("Chart images"), IMAGE_FORMATS, key="image_format", horizontal=True,
                 help=_("Format saved by the camera button of every chart's toolbar."))
        state.to_url(model=name, device=st.session_state.device, text=st.session_state.text,
                     target=target, dtype=st.session_state.dtype)
    return Selection(name, device, st.session_state.text, target, model, max_new)


LINK_TEXT_LIMIT = 2_000  # characters of text a page link carries (16 links on every run)


def link_query() -> dict[str, str]:
    """The sidebar's settings for the page links (ui/navigation.page_links), as this run will
    write them: the session's choices (a text typed just before a click included) over the
    address's. A page opened from a link then has its whole address at once, and the
    browser's history one entry for the visit. A text over LINK_TEXT_LIMIT stays out of the
    links (the page writes it, as a second entry)."""
    from .generation import KEY as NEW_KEY
    from .generation import URL_KEY as NEW_URL_KEY
    from .lang import KEY as LANG_KEY

    ss = st.session_state
    query = {k: v for k in FIRST if (v := state.url_get(k))}
    if isinstance(ss.get("model_pick"), str):
        custom = ss["model_pick"] == CUSTOM
        query["model"] = str(ss.get("model_custom", "")).strip() if custom else ss["model_pick"]
    for key, url_key in (("device", "device"), ("dtype", "dtype"), ("text", "text"),
                         (LANG_KEY, LANG_KEY), (NEW_KEY, NEW_URL_KEY)):
        if key in ss and ss[key] is not None:
            query[url_key] = str(ss[key])
    if len(query.get("text", "")) > LINK_TEXT_LIMIT:
        del query["text"]
    return {k: query[k] for k in FIRST if query.get(k)}


def link_queries(pages: list) -> dict[str, dict[str, str]]:
    """url_path -> what that page's link carries: the sidebar's settings (link_query), then
    the page's own as a revisit shows them (address.page_settings): opening a page this
    session has shown before, with settings it changed, is then one history entry too."""
    shared = link_query()
    return {p.url_path: {**shared, **page_settings(p.url_path)} for p in pages}


def _use_example() -> None:
    if st.session_state.example != "—":
        st.session_state.text = st.session_state.example
    st.session_state.example = "—"

