"""Tiny random-weight Hugging Face models, built offline, for tests.

Each ``make_tiny_<family>(path, seed=0)`` writes a model folder (config.json, safetensors
weights, generation config where it applies, tokenizer files) to ``path`` and returns it as a
``Path``; load it as a user would: ``viz_core.load(str(path))`` or ``from_pretrained(path)``.
Tokenizers are built from a few sentences (no download): WordPiece for BERT/DistilBERT,
byte-level BPE trained with the ``tokenizers`` library for GPT-2/RoBERTa/BART, a Unigram
vocabulary for T5 and a SentencePiece model trained with ``sentencepiece`` for Marian.

Sizes: hidden 32, 2 layers (2 + 2 for encoder-decoder), 4 heads, max 64 positions (T5: no
absolute limit, model_max_length 64). Special ids are set so ``generate`` works:
GPT-2 bos = eos = pad = "<|endoftext|>"; BART bos 0 / pad 1 / eos 2, decoder_start = eos;
T5 pad 0 / eos 1, decoder_start = pad; Marian eos 0 / unk 1, pad = decoder_start = last id.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

SENTENCES = [
    "the cat sat on the mat because it was tired",
    "the animal did not cross the street because it was too tired",
    "a quick brown fox jumps over the lazy dog",
    "hello world, this is a tiny model for testing attention",
    "walking talking singing dancing playing reading",
    "le chat est assis sur le tapis",
    "where is the train station? i would like a cup of coffee.",
]
MAX_POSITIONS = 64
SIZES = {"hidden": 32, "layers": 2, "heads": 4, "ffn": 37}


def _words() -> list[str]:
    seen: list[str] = []
    for s in SENTENCES:
        for w in s.replace(",", " , ").replace(".", " . ").replace("?", " ? ").split():
            if w not in seen:
                seen.append(w)
    return seen


def _save(model, tokenizer, path) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# ---- tokenizers ------------------------------------------------------------------------
def wordpiece_tokenizer():
    """BERT WordPiece: specials, whole words, '##' continuations and single characters."""
    from transformers import BertTokenizer

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += _words() + ["walk", "talk", "sing", "danc", "play", "read", "##ing", "##s"]
    letters = "abcdefghijklmnopqrstuvwxyz"
    tokens += list(letters) + ["##" + c for c in letters]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
    return BertTokenizer(vocab=vocab, model_max_length=MAX_POSITIONS)


def _byte_level_bpe(specials: list[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """(vocab, merges) of a byte-level BPE trained on SENTENCES; specials take ids 0..n-1."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(SENTENCES * 3, vocab_size=400, min_frequency=1,
                            special_tokens=specials, show_progress=False)
    model = json.loads(bpe._tokenizer.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return model["vocab"], merges


def gpt2_tokenizer():
    from transformers import GPT2Tokenizer

    vocab, merges = _byte_level_bpe(["<|endoftext|>"])
    return GPT2Tokenizer(vocab=vocab, merges=merges, model_max_length=MAX_POSITIONS)


def bart_tokenizer(cls_name: str = "BartTokenizer"):
    import transformers

    vocab, merges = _byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    cls = getattr(transformers, cls_name)
    return cls(vocab=vocab, merges=merges, model_max_length=MAX_POSITIONS)


def t5_tokenizer():
    """A Unigram vocabulary: '▁word' pieces, '▁' and single characters (pad 0, eos 1, unk 2)."""
    from transformers import T5Tokenizer

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    pieces += [("▁" + w, -1.0) for w in _words()]
    pieces += [(c, -4.0) for c in "abcdefghijklmnopqrstuvwxyz,.?:"]
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=MAX_POSITIONS)


def marian_tokenizer(path):
    """Train a tiny SentencePiece model offline; vocab.json: </s> 0, <unk> 1, ..., <pad> last."""
    import sentencepiece as spm
    from transformers import MarianTokenizer

    work = Path(path) / "_spm"
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES * 5), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(work / "sp"), vocab_size=120, model_type="unigram",
        hard_vocab_limit=False, character_coverage=1.0, bos_id=-1, eos_id=0, unk_id=1,
        pad_id=-1, minloglevel=2)
    proc = spm.SentencePieceProcessor(model_file=str(work / "sp.model"))
    vocab = {proc.id_to_piece(i): i for i in range(proc.get_piece_size())}
    vocab["<pad>"] = len(vocab)
    (work / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    return MarianTokenizer(source_spm=str(work / "sp.model"), target_spm=str(work / "sp.model"),
                           vocab=str(work / "vocab.json"), model_max_length=MAX_POSITIONS)


# ---- models ----------------------------------------------------------------------------
def make_tiny_bert(path, seed: int = 0) -> Path:
    from transformers import BertConfig, BertModel

    tok = wordpiece_tokenizer()
    cfg = BertConfig(vocab_size=len(tok), hidden_size=SIZES["hidden"],
                     num_hidden_layers=SIZES["layers"], num_attention_heads=SIZES["heads"],
                     intermediate_size=SIZES["ffn"], max_position_embeddings=MAX_POSITIONS,
                     type_vocab_size=2, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    return _save(BertModel(cfg), tok, path)


def make_tiny_distilbert(path, seed: int = 0) -> Path:
    from transformers import DistilBertConfig, DistilBertModel

    tok = wordpiece_tokenizer()
    cfg = DistilBertConfig(vocab_size=len(tok), dim=SIZES["hidden"], n_layers=SIZES["layers"],
                           n_heads=SIZES["heads"], hidden_dim=SIZES["ffn"],
                           max_position_embeddings=MAX_POSITIONS, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    return _save(DistilBertModel(cfg), tok, path)


def make_tiny_roberta(path, seed: int = 0) -> Path:
    from transformers import RobertaConfig, RobertaModel

    tok = bart_tokenizer("RobertaTokenizer")
    cfg = RobertaConfig(vocab_size=len(tok), hidden_size=SIZES["hidden"],
                        num_hidden_layers=SIZES["layers"], num_attention_heads=SIZES["heads"],
                        intermediate_size=SIZES["ffn"],
                        max_position_embeddings=MAX_POSITIONS + 2,  # positions start at pad+1
                        type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    torch.manual_seed(seed)
    return _save(RobertaModel(cfg), tok, path)


def make_tiny_gpt2(path, seed: int = 0) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = gpt2_tokenizer()
    eos = tok.eos_token_id
    cfg = GPT2Config(vocab_size=len(tok), n_positions=MAX_POSITIONS, n_embd=SIZES["hidden"],
                     n_layer=SIZES["layers"], n_head=SIZES["heads"], n_inner=SIZES["ffn"],
                     bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    torch.manual_seed(seed)
    return _save(GPT2LMHeadModel(cfg), tok, path)


def make_tiny_bart(path, seed: int = 0) -> Path:
    from transformers import BartConfig, BartForConditionalGeneration

    tok = bart_tokenizer()
    cfg = BartConfig(vocab_size=len(tok), d_model=SIZES["hidden"],
                     encoder_layers=SIZES["layers"], decoder_layers=SIZES["layers"],
                     encoder_attention_heads=SIZES["heads"], decoder_attention_heads=SIZES["heads"],
                     encoder_ffn_dim=SIZES["ffn"], decoder_ffn_dim=SIZES["ffn"],
                     max_position_embeddings=MAX_POSITIONS, bos_token_id=0, pad_token_id=1,
                     eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2)
    torch.manual_seed(seed)
    return _save(BartForConditionalGeneration(cfg), tok, path)


def make_tiny_t5(path, seed: int = 0) -> Path:
    from transformers import T5Config, T5ForConditionalGeneration

    tok = t5_tokenizer()
    cfg = T5Config(vocab_size=len(tok), d_model=SIZES["hidden"], d_kv=SIZES["hidden"] // 4,
                   d_ff=SIZES["ffn"], num_layers=SIZES["layers"],
                   num_decoder_layers=SIZES["layers"], num_heads=SIZES["heads"],
                   relative_attention_num_buckets=8, relative_attention_max_distance=16,
                   pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    torch.manual_seed(seed)
    return _save(T5ForConditionalGeneration(cfg), tok, path)


def make_tiny_marian(path, seed: int = 0) -> Path:
    from transformers import MarianConfig, MarianMTModel

    tok = marian_tokenizer(path)
    pad = tok.pad_token_id
    cfg = MarianConfig(vocab_size=len(tok), d_model=SIZES["hidden"],
                       encoder_layers=SIZES["layers"], decoder_layers=SIZES["layers"],
                       encoder_attention_heads=SIZES["heads"],
                       decoder_attention_heads=SIZES["heads"], encoder_ffn_dim=SIZES["ffn"],
                       decoder_ffn_dim=SIZES["ffn"], max_position_embeddings=MAX_POSITIONS,
                       pad_token_id=pad, eos_token_id=tok.eos_token_id,
                       decoder_start_token_id=pad, forced_eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    return _save(MarianMTModel(cfg), tok, path)


BUILDERS = {
    "bert": make_tiny_bert, "distilbert": make_tiny_distilbert, "roberta": make_tiny_roberta,
    "gpt2": make_tiny_gpt2, "bart": make_tiny_bart, "t5": make_tiny_t5,
    "marian": make_tiny_marian,
}


def make_patching_gpt2(path, layers=3, heads=4, d=64):
    """A tiny GPT-2 with weights large enough that the logit differences are not tiny (the
patching tests and bench/bench_patching.py)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = gpt2_tokenizer()
    eos = tok.eos_token_id
    cfg = GPT2Config(vocab_size=len(tok), n_positions=MAX_POSITIONS, n_embd=d, n_layer=layers,
                     n_head=heads, initializer_range=0.2, bos_token_id=eos, eos_token_id=eos,
                     pad_token_id=eos)
    torch.manual_seed(0)
    return _save(GPT2LMHeadModel(cfg), tok, path)


ZH_TRAIN = ["动物没有过马路，因为它太累了。", "动物没有过马路，因为马路太宽了。",
            "我们今天去学校。", "他们没有吃饭，因为太累了。", "猫在马路上。"] * 20
ZH_TEXT = "动物没有过马路，因为它太累了。龘 and 宽"  # 它, 宽 and 龘 come out cut into bytes


def make_tiny_gpt2_zh(path) -> Path:
    """A tiny GPT-2 with a byte-level BPE trained here (the `tokenizers` package) on a few
    Chinese sentences: 256 bytes + the end token + 40 merges, so frequent runs become one
    token and rarer characters stay cut into byte tokens (issue 32 item 2)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=297, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    bpe.train_from_iterator(ZH_TRAIN, trainer)
    tok = GPT2TokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>",
                            bos_token="<|endoftext|>", unk_token="<|endoftext|>")
    end = tok.eos_token_id
    cfg = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=1, n_head=2,
                     bos_token_id=end, eos_token_id=end)
    torch.manual_seed(0)
    GPT2LMHeadModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return Path(path)
