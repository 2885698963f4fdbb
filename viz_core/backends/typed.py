"""What a user gives a backend, checked the same way for every family, each refusal one
line: a token typed in a box (logit attribution's and patching's target and contrast; the
checks hf_parts.token_id and native_parts.token_id share, so the same typing gets the same
answer and message on every page), a text that may be left out (a target, a second
sentence), a count (max_new), a list of texts (a batch), names (blocks, capture) and token
ids. Whole numbers are read by model.choices.whole, as everywhere."""

from __future__ import annotations

import numbers

from viz_core.i18n import N_

from ..errors import InputError
from ..model.choices import whole

MAX_TOKEN_CHARS = 100  # a token box holds one token: a longer text is a mistake


def vocabulary_id(token, size: int) -> int | None:
    """``token`` when it is an integer id (checked against ``size``), None for anything else."""
    if not isinstance(token, numbers.Integral) or isinstance(token, bool):
        return None
    if not 0 <= token < size:
        raise InputError(N_("Token id {token} is out of range: the vocabulary has {size} "
                            "tokens (0..{value})."), token=token, size=size, value=size - 1)
    return int(token)


def typed_text(token, what: str) -> str:
    """The text of a token box, refused in one line when it is empty or far too long."""
    if not isinstance(token, str) or not token.strip():
        raise InputError(N_("The {what} is empty: give one token of the vocabulary."), what=what)
    if len(token) > MAX_TOKEN_CHARS:
        raise InputError(N_("The {what} is {n_text} characters long: give a single token."),
                         what=what, n_text=len(token))
    return token


def quote(text: str) -> str:
    return repr(text if len(text) <= 30 else text[:29] + "…")


def not_in_vocabulary(text: str, what: str) -> InputError:
    return InputError(N_("The {what} {quote} is not in this model's vocabulary."), what=what,
                      quote=quote(text))


def not_one_token(text: str, what: str, pieces: list[str]) -> InputError:
    """``pieces``: the tokens the text is, as shown."""
    return InputError(N_("The {what} {quote} is not one token for this model: it is {n_ids} "
                         "tokens ({join}); give a single token."), what=what, quote=quote(text),
                      n_ids=len(pieces), join=", ".join(quote(p) for p in pieces[:5]))


def check_text_or_none(value, what: str) -> None:
    """A text argument that may be left out (a target, a second sentence): None or a str."""
    if value is not None and not isinstance(value, str):
        raise InputError(N_("The {what} must be text, not {kind}."), what=what,
                         kind=type(value).__name__)


def check_count(value, what: str) -> int | None:
    """None, or a whole number from 0 (max_new, max_tokens): InputError for 2.5, -1, "x"."""
    if value is None:
        return None
    n = whole(value, what)
    if n < 0:
        raise InputError(N_("The {what} must be 0 or more, not {value}."), what=what, value=n)
    return n


def check_texts(texts, what: str, optional: bool = False) -> None:
    """A list (or tuple) of texts, e.g. a batch's sources or targets (None if optional)."""
    if optional and texts is None:
        return
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or \
            not all(isinstance(t, str) for t in texts):
        raise InputError(N_("The {what} must be a list of texts."), what=what)


def check_names(value, what: str) -> None:
    """A block's name, or a list of names (a str; or a list, tuple or set of str)."""
    if isinstance(value, str):
        return
    if not isinstance(value, (list, tuple, set, frozenset)) or \
            not all(isinstance(v, str) for v in value):
        raise InputError(N_("The {what} must be a name or a list of names, not {kind}."),
                         what=what, kind=type(value).__name__)


def vocabulary_ids(ids, size: int) -> list[int]:
    """A list of token ids below ``size`` (token_strings' argument)."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple, range)) and \
            not hasattr(ids, "tolist"):
        raise InputError(N_("Token ids must be a list of whole numbers, not {kind}."),
                         kind=type(ids).__name__)
    ids = ids.tolist() if hasattr(ids, "tolist") else ids
    out = []
    for i in ids:
        v = vocabulary_id(i, size)
        if v is None:
            raise InputError(N_("Token ids must be a list of whole numbers, not {kind}."),
                             kind=f"a list holding {i!r:.20}")
        out.append(v)
    return out
