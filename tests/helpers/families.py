"""Small BPE tokenizers of the five tokenizer families most served models use, trained here on a given text.

Each family's normaliser, pre-tokenizer and decoder are those of its public ``tokenizer.json`` (meta-llama's Llama 3,
Qwen2/Qwen3, Llama 2 and Mistral, Gemma); the vocabulary is learned in a few seconds from ``corpus``:

- ``gpt2``: byte-level BPE, GPT-2's split rule (GPT-2, SmolLM2);
- ``llama3``: byte-level BPE behind Llama 3's regex (punctuation keeps the newlines after it, digits in 1-3);
- ``qwen2``: byte-level BPE behind Qwen2's regex (as Llama 3's, single digits) after NFC;
- ``llama2``: SentencePiece BPE with byte fallback: ``▁`` prepended, spaces as ``▁``, no pre-tokenizer (Llama 2,
  Mistral), and a decoder that strips the prepended space;
- ``gemma``: SentencePiece BPE with byte fallback: spaces as ``▁``, nothing prepended, no pre-tokenizer.

The SentencePiece families learn their merges as SentencePiece's trainer does (``split_by_whitespace``: a piece
may start with ``▁`` but holds none after its first character) and then tokenize with no pre-tokenizer at all, as the
converted ``tokenizer.json`` files do: a merge may reach across any character the vocabulary spans.
"""

from __future__ import annotations

import json

FAMILIES = ("gpt2", "llama3", "qwen2", "llama2", "gemma")

#: meta-llama/Meta-Llama-3-8B tokenizer.json, pre_tokenizer Split pattern
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
#: Qwen/Qwen2-7B tokenizer.json (and Qwen3's), pre_tokenizer Split pattern
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
#: the specials every family's tokenizer gets (SentencePiece's unknown piece, an end of text)
UNK, EOS = "<unk>", "<|endoftext|>"


def _byte_level(family: str, corpus: list[str], vocab: int):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    if family == "gpt2":
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        pattern = LLAMA3_SPLIT if family == "llama3" else QWEN2_SPLIT
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([split, byte_level])
        if family == "qwen2":
            tokenizer.normalizer = normalizers.NFC()
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.add_special_tokens([EOS])
    return tokenizer


def _sentencepiece(family: str, corpus: list[str], vocab: int):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    learner = Tokenizer(models.BPE(unk_token=UNK))
    # SentencePiece's trainer: the text split before each space (``▁``), so no piece holds a space after its start
    learner.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    learner.train_from_iterator(
        corpus, trainers.BpeTrainer(vocab_size=vocab, show_progress=False, special_tokens=[UNK])
    )
    learned = json.loads(learner.to_str())["model"]
    pieces = {UNK: 0, **{f"<0x{b:02X}>": 1 + b for b in range(256)}}  # byte fallback: every byte has a piece
    for piece in sorted(learned["vocab"], key=learned["vocab"].get):
        pieces.setdefault(piece, len(pieces))
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in learned["merges"]]
    tokenizer = Tokenizer(models.BPE(vocab=pieces, merges=merges, unk_token=UNK, byte_fallback=True, fuse_unk=True))
    spaces = [normalizers.Replace(" ", "▁")]
    tokenizer.normalizer = normalizers.Sequence(([normalizers.Prepend("▁")] if family == "llama2" else []) + spaces)
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    tokenizer.decoder = decoders.Sequence(steps + ([decoders.Strip(" ", 1, 0)] if family == "llama2" else []))
    tokenizer.add_special_tokens([EOS])
    return tokenizer


def family_tokenizer(family: str, corpus: list[str], vocab: int):
    """A ``tokenizers.Tokenizer`` of ``family`` (one of :data:`FAMILIES`) with about ``vocab`` pieces learned from
    ``corpus``, and ``<|endoftext|>`` as a special token."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    build = _byte_level if family in ("gpt2", "llama3", "qwen2") else _sentencepiece
    return build(family, corpus, vocab)


def family_transformers_tokenizer(family: str, corpus: list[str], vocab: int):
    """:func:`family_tokenizer` as a transformers fast tokenizer (end of text: ``<|endoftext|>``)."""
    from transformers import PreTrainedTokenizerFast

    backend = family_tokenizer(family, corpus, vocab)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=EOS, unk_token=UNK if family in ("llama2", "gemma") else None
    )
