"""Errors whose message is meant for the user: the app shows it in the session's language.

A message that carries values is written as its English template with named placeholders
and the values as keywords, ``InputError(N_("The text has {n} tokens; ..."), n=n)``, so the
app can translate the template (viz_core/i18n) and fill in the same values; ``str(err)`` is
the English message, filled in."""


class VizError(Exception):
    """Base class: something the user can act on (bad input, bad model path, ...)."""

    def __init__(self, message="", /, *args, **values):
        self.msgid = str(message)  # the English template (the catalogue's msgid)
        self.values = values
        if values:
            message = self.msgid.format(**values)
        super().__init__(message, *args)


class CheckpointError(VizError):
    """A checkpoint is missing, corrupt, hostile or asks for absurd sizes."""


class ModelLoadError(VizError):
    """A model name, path or Hub id could not be loaded."""


class InputError(VizError):
    """The input text or a setting cannot be used as it is."""


class DecompositionError(VizError):
    """A direct decomposition (logit attribution, QK attribution) does not apply to this
    model (post-norm, or no unembedding); the message says what to use instead."""


class ChoiceError(InputError, ValueError):
    """A string setting is not one of its choices (viz_core.model.choices.choose); a
    ValueError too, as Python's own argument checks are."""
