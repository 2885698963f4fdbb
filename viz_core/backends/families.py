"""One adapter per Hugging Face model family, registered by ``config.model_type``.

An adapter holds everything that differs between families: where the attention modules are
(their calls become blocks ``encoder.{i}.self``, ``decoder.{i}.self``, ``decoder.{i}.cross``),
the architecture, the positional scheme and table, the longest input, tokenizer quirks and
example texts. Capture itself is the same for all (viz_core.capture.recorder). An unknown model_type
fails with a message naming the supported ones; nothing is guessed.

Adding a family: write an adapter (usually a few lines, subclassing the closest one),
register it in FAMILIES, and add a tiny random model to tests/support/hf_tiny.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from viz_core.i18n import N_, Message

from ..errors import ModelLoadError
from ..model.choices import Architecture, NormPlacement, PositionalKind, choose

ENGLISH = ("The cat sat on the mat because it was tired.",
           "The animal didn't cross the street because it was too tired.",
           "The bank raised interest rates, so we walked along the river bank.")
PROMPTS = ("The quick brown fox", "Once upon a time, there was a", "The capital of France is")


@dataclass(frozen=True)
class Family:
    """The defaults are those of a BERT-like encoder; subclasses override what differs."""

    model_type: str
    architecture: Architecture = "encoder-only"
    examples: tuple[str, ...] = ENGLISH
    byte_level: bool = False  # byte-level BPE: token strings need decoding for display
    positional_kind: PositionalKind = "learned"
    token_types: bool = False  # the model takes token_type_ids (BERT's segment embeddings)
    # Where the norms sit around each sublayer f (attention, feed-forward):
    # "post": x = Norm(x + f(x)) (the paper, BERT, BART); "pre": x = x + f(Norm(x)) (GPT-2,
    # T5, Llama); "pre+post": x = x + Norm2(f(Norm1(x))) (Gemma 2/3); "output":
    # x = x + Norm(f(x)) (OLMo 2).
    norm_placement: NormPlacement = "post"

    # Stream points (viz_core.capture.recorder.STREAM_POINTS) -> module path inside one layer.
    STREAM = {"self": "attention.output.dense", "self.norm": "attention.output.LayerNorm",
              "ffn": "output.dense", "ffn.norm": "output.LayerNorm"}

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

    # where the layers are, and the modules whose outputs are the stream points
    def layers(self, model) -> list[tuple[str, torch.nn.Module]]:
        """("encoder.0" / "decoder.0", layer module) in model order."""
        return [(f"encoder.{i}", m) for i, m in enumerate(model.base_model.encoder.layer)]

    def stream_paths(self, stack: str) -> dict[str, str]:
        """{stream point: module path inside a layer of this stack ("encoder"/"decoder")}."""
        return dict(self.STREAM)

    def stream_modules(self, model) -> list[tuple[str, str, torch.nn.Module]]:
        """(layer, point, module) for every stream point this model has: the layer module
        itself gives "in" (its input) and "out"; the others give their output."""
        out = []
        for layer, module in self.layers(model):
            out += [(layer, "in", module), (layer, "out", module)]
            for point, path in self.stream_paths(layer.split(".")[0]).items():
                try:
                    out.append((layer, point, module.get_submodule(path)))
                except AttributeError:  # e.g. an encoder layer has no cross-attention
                    pass
        return out

    def positional_table(self, model, n: int) -> tuple[torch.Tensor | None, str]:
        """(rows [n, d_model] the model adds for positions 0..n-1, or None; a note)."""
        w = model.base_model.embeddings.position_embeddings.weight
        return w[:n], Message(N_("learned absolute position embeddings"))

    def max_positions(self, model) -> int | None:
        """Longest sequence the architecture takes (None: no absolute limit)."""
        return int(model.config.max_position_embeddings)


class RobertaFamily(Family):
    def positional_table(self, model, n):
        start = model.config.pad_token_id + 1  # RoBERTa numbers positions from padding_idx + 1
        w = model.base_model.embeddings.position_embeddings.weight
        return w[start:start + n], Message(N_(
            "learned absolute position embeddings (rows {start}.. : RoBERTa offsets position "
            "ids by padding_idx + 1)"), start=start)

    def max_positions(self, model):
        return int(model.config.max_position_embeddings) - int(model.config.pad_token_id) - 1


class DistilBertFamily(Family):
    STREAM = {"self": "attention.out_lin", "self.norm": "sa_layer_norm", "ffn": "ffn.lin2",
              "ffn.norm": "output_layer_norm"}

    def encoder_attention(self, model):
        return [layer.attention for layer in model.base_model.transformer.layer]

    def layers(self, model):
        return [(f"encoder.{i}", m) for i, m in enumerate(model.base_model.transformer.layer)]


class AlbertFamily(Family):
    """ALBERT shares one layer's weights across all layers: the same attention module is
    called once per layer, so its blocks are named by call order."""

    STREAM = {"self": "attention.dense", "self.norm": "attention.LayerNorm",
              "ffn": "ffn_output", "ffn.norm": "full_layer_layer_norm"}

    def _albert_layers(self, model) -> list[torch.nn.Module]:
        enc = model.base_model.encoder
        cfg = model.config
        groups = enc.albert_layer_groups
        out = []
        for i in range(cfg.num_hidden_layers):
            group = groups[int(i / (cfg.num_hidden_layers / cfg.num_hidden_groups))]
            out += list(group.albert_layers)
        return out

    def encoder_attention(self, model):
        return [layer.attention for layer in self._albert_layers(model)]

    def layers(self, model):
        return [(f"encoder.{i}", m) for i, m in enumerate(self._albert_layers(model))]


class GPT2Family(Family):
    STREAM = {"self.norm": "ln_1", "self": "attn.c_proj", "ffn.norm": "ln_2",
              "ffn": "mlp.c_proj"}

    def decoder_attention(self, model):
        return [(block.attn, None) for block in model.base_model.h]

    def layers(self, model):
        return [(f"decoder.{i}", m) for i, m in enumerate(model.base_model.h)]

    def positional_table(self, model, n):
        return model.base_model.wpe.weight[:n], Message(N_(
            "learned absolute position embeddings (wpe)"))

    def max_positions(self, model):
        return int(model.config.n_positions)


class BartFamily(Family):
    STREAM = {"self": "self_attn.out_proj", "self.norm": "self_attn_layer_norm",
              "cross": "encoder_attn.out_proj", "cross.norm": "encoder_attn_layer_norm",
              "ffn": "fc2", "ffn.norm": "final_layer_norm"}

    def layers(self, model):
        base = model.base_model
        return ([(f"encoder.{i}", m) for i, m in enumerate(base.encoder.layers)]
                + [(f"decoder.{i}", m) for i, m in enumerate(base.decoder.layers)])

    def encoder_attention(self, model):
        return [layer.self_attn for layer in model.base_model.encoder.layers]

    def decoder_attention(self, model):
        return [(layer.self_attn, layer.encoder_attn) for layer in model.base_model.decoder.layers]

    def positional_table(self, model, n):
        emb = model.base_model.encoder.embed_positions
        off = int(getattr(emb, "offset", 2))
        return emb.weight[off:off + n], Message(N_(
            "encoder's learned position embeddings (rows {off}.. : BART offsets positions by "
            "{off}); the decoder has its own table"), off=off)


class MarianFamily(BartFamily):
    def positional_table(self, model, n):
        w = model.base_model.encoder.embed_positions.weight
        return w[:n], Message(N_("fixed sinusoidal table, sin in the first half of the "
                                 "dimensions and cos in the second (not interleaved)"))


class T5Family(Family):
    def layers(self, model):
        return ([(f"encoder.{i}", m) for i, m in enumerate(model.encoder.block)]
                + [(f"decoder.{i}", m) for i, m in enumerate(model.decoder.block)])

    def stream_paths(self, stack):
        ffn = 1 if stack == "encoder" else 2  # the decoder's layer.1 is cross-attention
        out = {"self.norm": "layer.0.layer_norm", "self": "layer.0.SelfAttention.o",
               "ffn.norm": f"layer.{ffn}.layer_norm", "ffn": f"layer.{ffn}.DenseReluDense.wo"}
        if stack == "decoder":
            out.update({"cross.norm": "layer.1.layer_norm", "cross": "layer.1.EncDecAttention.o"})
        return out

    def encoder_attention(self, model):
        return [block.layer[0].SelfAttention for block in model.encoder.block]

    def decoder_attention(self, model):
        return [(b.layer[0].SelfAttention, b.layer[1].EncDecAttention)
                for b in model.decoder.block]

    def positional_table(self, model, n):
        return None, Message(N_("relative position bias: a learned scalar per head and distance "
                                "bucket, added to the scores of every layer; no absolute "
                                "encoding"))

    def max_positions(self, model):
        return None


class RotaryDecoderFamily(Family):
    """Llama-style decoders (Llama, Mistral, Qwen, Gemma, Phi-3, OLMo 2): RoPE applied to q
    and k inside every layer, often grouped-query attention, some sliding-window layers."""

    STREAM = {"self.norm": "input_layernorm", "self": "self_attn.o_proj",
              "ffn.norm": "post_attention_layernorm", "ffn": "mlp.down_proj"}

    def decoder_attention(self, model):
        return [(layer.self_attn, None) for layer in model.base_model.layers]

    def layers(self, model):
        return [(f"decoder.{i}", m) for i, m in enumerate(model.base_model.layers)]

    def positional_table(self, model, n):
        cfg = model.config
        base = getattr(cfg, "rope_theta", None)
        params = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None)
        if base is None and isinstance(params, dict):
            base = params.get("rope_theta")
        parts = [Message(N_("rotary position embeddings (RoPE): q and k rotated in every layer"))]
        if base is not None:
            parts.append(Message(N_(", base {base:g}"), base=float(base)))
        if isinstance(params, dict) and params.get("rope_type") not in (None, "default"):
            parts.append(Message(N_(", scaling {kind}"), kind=params.get("rope_type")))
        return None, Message.joined(parts, sep="")

    def max_positions(self, model):
        return int(model.config.max_position_embeddings)


class SandwichFamily(RotaryDecoderFamily):
    """Gemma 2/3: a norm before and after each sublayer, x = x + Norm2(f(Norm1(x)))."""

    STREAM = {"self.norm": "input_layernorm", "self": "self_attn.o_proj",
              "self.post_norm": "post_attention_layernorm",
              "ffn.norm": "pre_feedforward_layernorm", "ffn": "mlp.down_proj",
              "ffn.post_norm": "post_feedforward_layernorm"}


class OutputNormFamily(RotaryDecoderFamily):
    """OLMo 2: the norm on each sublayer's output, before the add: x = x + Norm(f(x))."""

    STREAM = {"self": "self_attn.o_proj", "self.post_norm": "post_attention_layernorm",
              "ffn": "mlp.down_proj", "ffn.post_norm": "post_feedforward_layernorm"}


def _family(cls, model_type: str, **kw) -> Family:
    family = cls(model_type=model_type, **kw)
    choose(family.architecture, Architecture, "architecture")  # a typo fails at import
    choose(family.positional_kind, PositionalKind, "positional_kind")
    choose(family.norm_placement, NormPlacement, "norm_placement")
    return family


FAMILIES: dict[str, Family] = {f.model_type: f for f in [
    _family(Family, "bert", token_types=True),
    _family(RobertaFamily, "roberta", byte_level=True),
    _family(DistilBertFamily, "distilbert"),
    _family(Family, "electra", token_types=True),
    _family(AlbertFamily, "albert", token_types=True),
    _family(GPT2Family, "gpt2", architecture="decoder-only", examples=PROMPTS, byte_level=True,
            norm_placement="pre"),
    _family(BartFamily, "bart", architecture="encoder-decoder", byte_level=True, examples=(
        "The tower is 324 metres tall, about the same height as an 81-storey building.",
        "My friends are cool but they eat too many carbs.",
        "UN Chief says there is no military solution in Syria.")),
    _family(T5Family, "t5", architecture="encoder-decoder", positional_kind="relative",
            norm_placement="pre",
            examples=("translate English to German: The house is wonderful.",
                      "translate English to French: The weather is nice today.",
                      "summarize: The tower is 324 metres tall, about the same height as an "
                      "81-storey building, and the tallest structure in Paris.")),
    _family(MarianFamily, "marian", architecture="encoder-decoder",
            positional_kind="sinusoidal", examples=(
                "The cat sat on the mat.", "I would like a cup of coffee, please.",
                "Where is the train station?")),
    *[_family(RotaryDecoderFamily, t, architecture="decoder-only", examples=PROMPTS,
              positional_kind="rotary", norm_placement="pre")
      for t in ("llama", "mistral", "qwen2", "qwen3", "gemma", "phi3")],
    *[_family(SandwichFamily, t, architecture="decoder-only", examples=PROMPTS,
              positional_kind="rotary", norm_placement="pre+post")
      for t in ("gemma2", "gemma3_text")],
    _family(OutputNormFamily, "olmo2", architecture="decoder-only", examples=PROMPTS,
            positional_kind="rotary", norm_placement="output"),
]}


def supported_text() -> str:
    return ", ".join(sorted(FAMILIES))


def family_for(model_type: str | None, name: str = "") -> Family:
    """The adapter of a model_type, or a ModelLoadError naming the supported families."""
    family = FAMILIES.get(model_type or "")
    if family is None:
        raise ModelLoadError(
            N_("{name!r} is a {value!r} model, which Attention Lab does not support. Supported "
              "model types: {supported_text}."),
                name=name, value=model_type or 'unknown', supported_text=supported_text())
    return family
