"""Every string choice of a public viz_core signature, as a ``Literal`` type, defined once,
and ``whole``, the one reader of a whole number a caller gives (a head, a position, a count).

The type is the list: ``choose(value, Over, "over")`` accepts exactly ``typing.get_args(Over)``
and raises ``viz_core.errors.ChoiceError`` (an InputError, and a ValueError) naming them
otherwise, so the annotation and the boundary check cannot drift apart. They sit in the bottom
layer (model) so that every layer, figures included, may import them.
"""

from __future__ import annotations

from typing import Literal, TypeVar, get_args

from viz_core.i18n import N_

from ..errors import ChoiceError, InputError

# ---- models ----------------------------------------------------------------------------
Architecture = Literal["encoder-decoder", "decoder-only", "encoder-only"]
Positional = Literal["sinusoidal", "learned", "rope"]  # our checkpoints' config.positional
PositionalKind = Literal["sinusoidal", "learned", "rotary", "relative", "none"]  # a trace's
Norm = Literal["layernorm", "rmsnorm"]  # our checkpoints' config.norm
# post: x = Norm(x + f(x)); pre: x = x + f(Norm(x)); pre+post: x = x + Norm2(f(Norm1(x)));
# output: x = x + Norm(f(x))
NormPlacement = Literal["post", "pre", "pre+post", "output"]
Dtype = Literal["auto", "float32", "bfloat16", "float16"]
VocabLevel = Literal["word", "char"]

# ---- traces ----------------------------------------------------------------------------
Stack = Literal["encoder", "decoder"]
Attention = Literal["self", "cross"]  # a block name's last part
BlockKind = Literal["encoder.self", "decoder.self", "decoder.cross"]  # a block name less its layer
What = Literal["pattern", "scores"]  # what a BlockTrace read returns
View = Literal["weights", "scores"]  # what a heatmap shows
Pooling = Literal["mean", "max"]  # how cells are pooled or heads aggregated

# ---- analyses --------------------------------------------------------------------------
Over = Literal["heads", "layers", "positions"]  # the units patching replaces
PatchMethod = Literal["activation", "attribution"]
EdgeMethod = Literal["eap", "eap-ig", "exact"]  # edge attribution: gradients, integrated, patched
Readout = Literal["logits", "embedding"]  # what a patching metric reads
Template = Literal["previous", "induction", "first", "same"]  # head search templates
Side = Literal["query", "key"]
Sublayer = Literal["self", "cross", "ffn"]  # what a layer adds to the stream
CompositionKind = Literal["Q", "K", "V"]
EntropyMeasure = Literal["entropy", "normalised"]  # head_entropy's columns: nats, or / log n

# ---- lessons, figures, tasks -----------------------------------------------------------
SinusoidLayout = Literal["interleaved", "half"]  # sin/cos interleaved, or sin half then cos
GridScale = Literal["fixed", "thumbnail"]
Split = Literal["train", "test"]
AtlasEngine = Literal["auto", "ray", "local"]  # local: in-process
AtlasTask = Literal["roles", "patching", "circuit"]  # the head atlas; patching or edges over pairs
YearDigits = Literal["decade", "all"]

T = TypeVar("T")


def options(choices) -> tuple[str, ...]:
    """The strings a Literal type allows."""
    return get_args(choices)


def choose(value: object, choices: type[T] | object, what: str) -> T:
    """``value`` when it is one of ``choices`` (a Literal type); ChoiceError otherwise, naming
    the setting and every allowed value."""
    allowed = get_args(choices)
    if isinstance(value, str) and value in allowed:
        return value  # type: ignore[return-value]
    names = [repr(a) for a in allowed]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    raise ChoiceError(N_("{what!r} must be {listed}, not {value!r}."),
                         what=what, listed=listed, value=str(value)[:40])


def whole(value, what: str) -> int:
    """An int from an int, an integral float or a numeric string (URL values); InputError
    for anything else (2.5, "x", nan, inf, True)."""
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(N_("The {what} must be a whole number, not {value!r}."),
                            what=what, value=value) from None
