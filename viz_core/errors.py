"""Errors whose message is meant for the user: the app shows ``str(err)`` as it is."""


class VizError(Exception):
    """Base class: something the user can act on (bad input, bad model path, ...)."""


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
