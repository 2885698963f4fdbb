"""What a user types into a box, checked the same way for every family: a token (logit
attribution's and patching's target and contrast; the checks hf_parts.token_id and
native_parts.token_id share, so the same typing gets the same answer and message on every
page) and a text that may be left out (a target, a second sentence)."""

from __future__ import annotations

import numbers

from viz_core.i18n import N_

from ..errors import InputError

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
