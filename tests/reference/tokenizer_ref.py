"""Reference byte-level BPE tokenizer built from a GGUF's vocabulary.

Built with the PyPI `tokenizers` package, independent of the engine's own
tokenizer, so tests can turn text into ids without trusting the engine.
The pre-tokenizer matches the "smollm" pre-tokenizer of GGUF files: every
digit is its own word, then the GPT-2 byte-level split.

    tok = load_tokenizer(path)
    ids = encode(tok, "Hello", bos_id=1)   # [1, ...]
    text = tok.decode(ids[1:])
"""

from __future__ import annotations

import sys

from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

# llama.cpp token types: 1 normal, 2 unknown, 3 control, 4 user-defined,
# 5 unused, 6 byte. Control tokens are never produced by splitting text
# into words; they match literally, as special tokens.
TOKEN_TYPE_CONTROL = 3


def _contents(reader: GGUFReader, key: str):
    field = reader.fields.get(key)
    if field is None:
        raise KeyError(f"GGUF metadata key {key!r} is missing")
    return field.contents()


def load_tokenizer(path: str) -> Tokenizer:
    reader = GGUFReader(path)
    model_kind = _contents(reader, "tokenizer.ggml.model")
    if model_kind != "gpt2":
        raise ValueError(f"tokenizer.ggml.model is {model_kind!r}; only byte-level BPE ('gpt2') is supported")
    tokens = _contents(reader, "tokenizer.ggml.tokens")
    token_types = _contents(reader, "tokenizer.ggml.token_type")
    # GGUF stores merges as "left right" with the pieces in byte-level
    # alphabet, which never contains a plain space, so splitting is safe.
    merges = [tuple(m.split(" ", 1)) for m in _contents(reader, "tokenizer.ggml.merges")]

    vocab = {tok: i for i, tok in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, special=True, normalized=False)
                for t, kind in zip(tokens, token_types) if kind == TOKEN_TYPE_CONTROL]
    tok.add_special_tokens(specials)
    return tok


def encode(tok: Tokenizer, text: str, bos_id: int | None = 1) -> list[int]:
    """Ids of text, with bos_id prepended when it is not None."""
    ids = tok.encode(text, add_special_tokens=False).ids
    return ([bos_id] if bos_id is not None else []) + ids


if __name__ == "__main__":
    # python tokenizer_ref.py MODEL TEXT  -> prints comma-separated ids (no BOS)
    t = load_tokenizer(sys.argv[1])
    print(",".join(map(str, encode(t, sys.argv[2], bos_id=None))))
