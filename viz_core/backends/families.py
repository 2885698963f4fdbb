"""One adapter per Hugging Face model family, registered by ``config.model_type``.

An adapter holds everything that differs between families: where the attention modules are
(their calls become blocks ``encoder.{i}.self``, ``decoder.{i}.self``, ``decoder.{i}.cross``),
the architecture, the positional scheme and table, the longest input, tokenizer quirks and
example texts. Capture itself is the same for all (viz_core.capture). An unknown model_type
fails with a message naming the supported ones; nothing is guessed.

Adding a family: write an adapter (usually a few lines, subclassing the closest one),
register it in FAMILIES, and add a tiny random model to tests/hf_tiny.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ModelLoadError

ENGLISH = ("The cat sat on the mat because it was tired.",
           "The animal didn't cross the street because it was too tired.",
           "The bank raised interest rates, so we walked along the river bank.")
PROMPTS = ("The quick brown fox", "Once upon a time, there was a", "The capital of France is")


@dataclass(frozen=True)
class Family:
    """The defaults are those of a BERT-like encoder; subclasses override what differs."""

    model_type: str
    architecture: str = "encoder-only"  # encoder-only | decoder-only | encoder-decoder
    examples: tuple[str, ...] = ENGLISH
    byte_level: bool = False  # byte-level BPE: token strings need decoding for display
    positional_kind: str = "learned"  # learned | sinusoidal | rotary | relative
    token_types: bool = False  # the model takes token_type_ids (BERT's segment embeddings)

    # where the attention modules are: lists of modules, one per layer
    def encoder_attention(self, model) -> list[torch.nn.Module]:
        return [layer.attention.self for layer in model.base_model.encoder.layer]

    def decoder_attention(self, model) -> list[tuple[torch.nn.Module, torch.nn.Module | None]]:
        """(self-attention, cross-attention or None) per decoder layer."""
        return []

    def block_modules(self, model) -> dict[str, torch.nn.Module]:
        """{block name: attention module} in model order."""
        out = {}
        if self.architecture != "decoder-only":
            for i, m in enumerate(self.encoder_attention(model)):
                out[f"encoder.{i}.self"] = m
        for i, (s, c) in enumerate(self.decoder_attention(model)):
            out[f"decoder.{i}.self"] = s
            if c is not None:
                out[f"decoder.{i}.cross"] = c
        return out

    def positional_table(self, model, n: int) -> tuple[torch.Tensor | None, str]:
        """(rows [n, d_model] the model adds for positions 0..n-1, or None; a note)."""
        w = model.base_model.embeddings.position_embeddings.weight
        return w[:n], "learned absolute position embeddings"

    def max_positions(self, model) -> int | None:
        """Longest sequence the architecture takes (None: no absolute limit)."""
        return int(model.config.max_position_embeddings)


class RobertaFamily(Family):
    def positional_table(self, model, n):
        start = model.config.pad_token_id + 1  # RoBERTa numbers positions from padding_idx + 1
        w = model.base_model.embeddings.position_embeddings.weight
        return w[start:start + n], (f"learned absolute position embeddings (rows {start}.. : "
                                    f"RoBERTa offsets position ids by padding_idx + 1)")

    def max_positions(self, model):
        return int(model.config.max_position_embeddings) - int(model.config.pad_token_id) - 1


class DistilBertFamily(Family):
    def encoder_attention(self, model):
        return [layer.attention for layer in model.base_model.transformer.layer]


class AlbertFamily(Family):
    """ALBERT shares one layer's weights across all layers: the same attention module is
    called once per layer, so its blocks are named by call order."""

    def encoder_attention(self, model):
        enc = model.base_model.encoder
        cfg = model.config
        groups = enc.albert_layer_groups
        out = []
        for i in range(cfg.num_hidden_layers):
            group = groups[int(i / (cfg.num_hidden_layers / cfg.num_hidden_groups))]
            out += [layer.attention for layer in group.albert_layers]
        return out


class GPT2Family(Family):
    def decoder_attention(self, model):
        return [(block.attn, None) for block in model.base_model.h]

    def positional_table(self, model, n):
        return model.base_model.wpe.weight[:n], "learned absolute position embeddings (wpe)"

    def max_positions(self, model):
        return int(model.config.n_positions)


class BartFamily(Family):
    def encoder_attention(self, model):
        return [layer.self_attn for layer in model.base_model.encoder.layers]

    def decoder_attention(self, model):
        return [(layer.self_attn, layer.encoder_attn) for layer in model.base_model.decoder.layers]

    def positional_table(self, model, n):
        emb = model.base_model.encoder.embed_positions
        off = int(getattr(emb, "offset", 2))
        return emb.weight[off:off + n], (
            f"encoder's learned position embeddings (rows {off}.. : BART offsets positions by "
            f"{off}); the decoder has its own table")


class MarianFamily(BartFamily):
    def positional_table(self, model, n):
        w = model.base_model.encoder.embed_positions.weight
        return w[:n], ("fixed sinusoidal table, sin in the first half of the dimensions and "
                       "cos in the second (not interleaved)")


class T5Family(Family):
    def encoder_attention(self, model):
        return [block.layer[0].SelfAttention for block in model.encoder.block]

    def decoder_attention(self, model):
        return [(b.layer[0].SelfAttention, b.layer[1].EncDecAttention)
                for b in model.decoder.block]

    def positional_table(self, model, n):
        return None, ("relative position bias: a learned scalar per head and distance bucket, "
                      "added to the scores of every layer; no absolute encoding")

    def max_positions(self, model):
        return None


class RotaryDecoderFamily(Family):
    """Llama-style decoders (Llama, Mistral, Qwen, Gemma, Phi-3, OLMo 2): RoPE applied to q
    and k inside every layer, often grouped-query attention, some sliding-window layers."""

    def decoder_attention(self, model):
        return [(layer.self_attn, None) for layer in model.base_model.layers]

    def positional_table(self, model, n):
        cfg = model.config
        base = getattr(cfg, "rope_theta", None)
        params = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None)
        if base is None and isinstance(params, dict):
            base = params.get("rope_theta")
        note = "rotary position embeddings (RoPE): q and k rotated in every layer"
        if base is not None:
            note += f", base {float(base):g}"
        if isinstance(params, dict) and params.get("rope_type") not in (None, "default"):
            note += f", scaling {params.get('rope_type')}"
        return None, note

    def max_positions(self, model):
        return int(model.config.max_position_embeddings)


def _family(cls, model_type: str, **kw) -> Family:
    return cls(model_type=model_type, **kw)


FAMILIES: dict[str, Family] = {f.model_type: f for f in [
    _family(Family, "bert", token_types=True),
    _family(RobertaFamily, "roberta", byte_level=True),
    _family(DistilBertFamily, "distilbert"),
    _family(Family, "electra", token_types=True),
    _family(AlbertFamily, "albert", token_types=True),
    _family(GPT2Family, "gpt2", architecture="decoder-only", examples=PROMPTS, byte_level=True),
    _family(BartFamily, "bart", architecture="encoder-decoder", byte_level=True, examples=(
        "The tower is 324 metres tall, about the same height as an 81-storey building.",
        "My friends are cool but they eat too many carbs.",
        "UN Chief says there is no military solution in Syria.")),
    _family(T5Family, "t5", architecture="encoder-decoder", positional_kind="relative",
            examples=("translate English to German: The house is wonderful.",
                      "translate English to French: The weather is nice today.",
                      "summarize: The tower is 324 metres tall, about the same height as an "
                      "81-storey building, and the tallest structure in Paris.")),
    _family(MarianFamily, "marian", architecture="encoder-decoder",
            positional_kind="sinusoidal", examples=(
                "The cat sat on the mat.", "I would like a cup of coffee, please.",
                "Where is the train station?")),
    *[_family(RotaryDecoderFamily, t, architecture="decoder-only", examples=PROMPTS,
              positional_kind="rotary")
      for t in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text",
                "phi3", "olmo2")],
]}


def supported_text() -> str:
    return ", ".join(sorted(FAMILIES))


def family_for(model_type: str | None, name: str = "") -> Family:
    """The adapter of a model_type, or a ModelLoadError naming the supported families."""
    family = FAMILIES.get(model_type or "")
    if family is None:
        raise ModelLoadError(
            f"{name!r} is a {model_type or 'unknown'!r} model, which Attention Lab does not "
            f"support. Supported model types: {supported_text()}.")
    return family
