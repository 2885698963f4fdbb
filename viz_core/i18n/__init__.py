"""The interface's language (a layer of its own: the library's figures and the app both speak
through it; it imports nothing of ours): GNU gettext catalogues read with Babel, chosen per
session.

Source strings are English and are the msgids: ``_("Layer")``, ``ngettext("{n} head",
"{n} heads", n).format(n=n)``; a module-level constant is marked with ``N_("...")`` and
translated where it is shown (``_(CONSTANT)``). Values go in as named placeholders
(``_("Layer {layer}").format(layer=3)``), never glued on, so a translation can move them.

The catalogue is ``locale/<locale>/LC_MESSAGES/attention_lab.po``; it is read with Babel's
own reader on first use and kept per process (no compile step: ``make messages`` extracts
and updates it, nothing else needs running). The language is per session, never a process
global: a ContextVar that the UI sets at the start of every script run and fragment rerun
(``use_language``); anything else (the library, a CLI, a test) sees English.
"""

from __future__ import annotations

import io
from contextvars import ContextVar
from functools import cache
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import NullTranslations, Translations

DOMAIN = "attention_lab"


def _locale_dir() -> Path:
    """locale/ at the top of a clone; viz_core/locale/ inside an installed wheel."""
    package = Path(__file__).resolve().parents[1]  # viz_core/
    inside = package / "locale"
    return inside if inside.is_dir() else package.parent / "locale"


LOCALE_DIR = _locale_dir()
# language code (the URL's ?lang=) -> (gettext locale folder, its name in its own language)
LANGUAGES: dict[str, tuple[str, str]] = {"en": ("en", "English"), "zh": ("zh_CN", "简体中文")}
DEFAULT = "en"

_language: ContextVar[str] = ContextVar("attention_lab_language", default=DEFAULT)


def po_path(lang: str) -> Path:
    return LOCALE_DIR / LANGUAGES[lang][0] / "LC_MESSAGES" / f"{DOMAIN}.po"


@cache
def translations(lang: str) -> NullTranslations:
    """The catalogue of `lang`, read once per process (English, or no .po: the msgids)."""
    path = po_path(lang) if lang in LANGUAGES and lang != DEFAULT else None
    if path is None or not path.is_file():
        return NullTranslations()
    with path.open("rb") as f:
        catalog = read_po(f, locale=LANGUAGES[lang][0], domain=DOMAIN)
    buf = io.BytesIO()
    write_mo(buf, catalog)  # fuzzy entries are left out, as msgfmt does
    buf.seek(0)
    return Translations(buf, domain=DOMAIN)


def normalize(code: str | None) -> str | None:
    """'zh', 'zh-CN', 'zh_Hans', 'en-US' -> a code of LANGUAGES, or None."""
    if not code:
        return None
    base = str(code).strip().replace("_", "-").split("-")[0].lower()
    return base if base in LANGUAGES else None


def set_language(lang: str | None) -> str:
    """Make `lang` this context's language (unknown: English); -> the language set."""
    lang = normalize(lang) or DEFAULT
    _language.set(lang)
    return lang


def language() -> str:
    return _language.get()


def _(message: str) -> str:
    """`message` in this context's language."""
    if not message:
        return message
    return translations(_language.get()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form for `n`, in this context's language."""
    return translations(_language.get()).ngettext(singular, plural, n)


def bound(fn):
    """`fn` that always runs in this context's current language: for a widget's format_func,
    which a caller may invoke outside the run that drew the widget (Streamlit's AppTest)."""
    lang = _language.get()

    def call(*args, **kwargs):
        token = _language.set(lang)
        try:
            return fn(*args, **kwargs)
        finally:
            _language.reset(token)

    return call


class Message(str):
    """English text that remembers its catalogue template and values, for a result that is
    built once and shown to many sessions (a trace's warnings, an analysis's note): it reads
    as the English text; the app shows it translated (ui.errors.translated)."""

    def __new__(cls, msgid: str, **values):
        text = super().__new__(cls, msgid.format(**values) if values else msgid)
        text.msgid, text.values, text.parts = msgid, values, ()
        return text

    @classmethod
    def joined(cls, parts, sep: str = " ") -> Message:
        """Messages (or plain strings) side by side: each part is translated on its own."""
        parts = tuple(parts)
        text = cls(sep.join(parts))
        text.parts, text.sep = parts, sep
        return text


def N_(message: str) -> str:
    """Marks a constant for extraction; translate it where it is shown with _()."""
    return message


gettext = _
