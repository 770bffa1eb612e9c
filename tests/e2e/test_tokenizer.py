"""`exactly tokenize` against independent tokenizers.

References:
  * byte-level BPE: the Hugging Face `tokenizers` package, configured from the
    SAME vocabulary and merges read out of the GGUF with the `gguf` package and
    with the pre-tokenizer each `tokenizer.ggml.pre` name stands for, written
    with the original regexes (real lookahead, Oniguruma engine) -- so the
    lookahead emulation of the C++ side is checked, not shared.
  * SentencePiece-style vocabularies: a plain quadratic Python implementation
    of the merge rule (below, `spm_reference`), on a small llama-style GGUF
    written here with the `gguf` package.

Documented behaviour for input that is not UTF-8 (JSON cannot carry it, so it
goes through `-f FILE`): every invalid byte is pre-tokenized like a symbol
character (as if it were U+0001), keeps its own byte in the output, and
decode(encode(bytes)) gives the exact bytes back.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path

import gguf
import numpy as np
import pytest
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "tokenizer" / "corpus.jsonl"

GPT2_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
                r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")
# GPT-4o / o200k (gpt-oss's tokenizer.json): case-aware letter runs with the contraction as a suffix.
_UPPER, _LOWER, _CONTRACTION = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
GPT4O_REGEX = (rf"""[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}+{_CONTRACTION}|"""
               rf"""[^\r\n\p{{L}}\p{{N}}]?{_UPPER}+{_LOWER}*{_CONTRACTION}|"""
               r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
# DeepSeek's tokenizer.json Split regexes (LLM and Coder before their Digits step; V3 alone).
DEEPSEEK_LETTERS = (r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄ"
                    r"ῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+")
DEEPSEEK_LLM_REGEXES = [r"[\r\n]", DEEPSEEK_LETTERS, r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$", r"[一-龥ࠀ-一가-퟿]+"]
DEEPSEEK_CODER_REGEXES = [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[一-龥ࠀ-一가-퟿]+"]
DEEPSEEK_V3_REGEXES = [r"\p{N}{1,3}", r"[一-龥぀-ゟ゠-ヿ]+",
                       r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|"""
                       r""" ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""]
# llama.cpp's "default": four isolated splits in sequence.
DEFAULT_REGEXES = [r"[\p{P}\$\+<=>\^~\|]+",
                   r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)""",
                   r"\p{N}+", r"[0-9][0-9][0-9]"]


# ---------------------------------------------------------------- helpers

def exactly_bin() -> Path:
    build = Path(os.environ.get("EXACTLY_BUILD_DIR", REPO / "build"))
    path = build / "bin" / "exactly"
    if not os.access(path, os.X_OK):
        pytest.fail(f"executable not found: {path} (build it or set EXACTLY_BUILD_DIR)")
    return path


def model_path() -> Path:
    path = Path(os.environ.get("EXACTLY_MODEL", REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not path.is_absolute():
        path = REPO / path
    if not path.is_file():
        pytest.fail(f"model not found: {path}")
    return path


def run(args: list, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run([str(exactly_bin()), "tokenize", *map(str, args)], input=stdin,
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def read_corpus() -> list[str]:
    # Split on b"\n" only: some strings hold U+2028 / U+0085, which str.splitlines would cut.
    return [json.loads(line) for line in CORPUS.read_bytes().split(b"\n") if line]


def encode_jsonl(model: Path, texts: list[str], tmp_path: Path, *extra: str) -> list[list[int]]:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in texts), encoding="utf-8")
    out = run(["-m", model, "--jsonl", src, *extra]).decode().split("\n")
    assert len(out) == len(texts) + 1 and out[-1] == ""
    return [json.loads(line) for line in out[:-1]]


def decode_jsonl(model: Path, ids: list[list[int]], tmp_path: Path) -> list[str]:
    src = tmp_path / "ids.jsonl"
    src.write_text("".join(json.dumps(i) + "\n" for i in ids), encoding="utf-8")
    out = run(["-m", model, "--jsonl", src, "--decode"]).decode().split("\n")
    assert out[-1] == ""
    return [json.loads(line) for line in out[:-1]]


class GGUFVocab:
    """The tokenizer.ggml.* arrays of a GGUF file, read with the gguf package."""

    def __init__(self, path: Path):
        r = gguf.GGUFReader(str(path))
        f = r.fields
        self.tokens = list(f["tokenizer.ggml.tokens"].contents())
        self.types = [int(t) for t in f["tokenizer.ggml.token_type"].contents()]
        self.merges = list(f["tokenizer.ggml.merges"].contents()) if "tokenizer.ggml.merges" in f else []
        self.pre = f["tokenizer.ggml.pre"].contents() if "tokenizer.ggml.pre" in f else "default"

    def specials(self) -> list[str]:
        return [t for t, ty in zip(self.tokens, self.types) if ty == 3]

    def user_defined(self) -> list[str]:
        return [t for t, ty in zip(self.tokens, self.types) if ty == 4]


def hf_pre_tokenizer(pre: str):
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    isolated = lambda rx: pre_tokenizers.Split(Regex(rx), behavior="isolated", invert=False)
    if pre == "smollm":  # SmolLM2's tokenizer.json
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    if pre in ("gpt2", "gpt-2"):  # "gpt-2": llama.cpp's spelling of GPT-2's ByteLevel regex
        return pre_tokenizers.Sequence([isolated(GPT2_REGEX), byte_level])
    if pre == "llama-bpe":
        return pre_tokenizers.Sequence([isolated(LLAMA3_REGEX), byte_level])
    if pre == "qwen2":
        return pre_tokenizers.Sequence([isolated(QWEN2_REGEX), byte_level])
    if pre == "gpt-4o":
        return pre_tokenizers.Sequence([isolated(GPT4O_REGEX), byte_level])
    if pre in ("deepseek-llm", "deepseek-coder"):
        regexes = DEEPSEEK_LLM_REGEXES if pre == "deepseek-llm" else DEEPSEEK_CODER_REGEXES
        return pre_tokenizers.Sequence([isolated(rx) for rx in regexes] +
                                       [pre_tokenizers.Digits(individual_digits=True), byte_level])
    if pre == "deepseek-v3":
        return pre_tokenizers.Sequence([isolated(rx) for rx in DEEPSEEK_V3_REGEXES] + [byte_level])
    if pre == "falcon":  # Falcon's tokenizer.json: its Digits and three-digit Split run on byte-level text
        return pre_tokenizers.Sequence([pre_tokenizers.Punctuation("contiguous"),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
                                        pre_tokenizers.Digits(individual_digits=False), isolated("[0-9][0-9][0-9]")])
    if pre == "default":
        return pre_tokenizers.Sequence([isolated(rx) for rx in DEFAULT_REGEXES] + [byte_level])
    raise ValueError(pre)


def hf_tokenizer(vocab: GGUFVocab, pre: str, parse_special: bool) -> Tokenizer:
    ids = {t: i for i, t in enumerate(vocab.tokens)}
    merges = [tuple(m.split(" ", 1)) for m in vocab.merges]
    # Llama 3's tokenizer.json sets ignore_merges (a piece that is a token is taken whole).
    tok = Tokenizer(models.BPE(ids, merges, ignore_merges=(pre == "llama-bpe")))
    tok.pre_tokenizer = hf_pre_tokenizer(pre)
    tok.decoder = decoders.ByteLevel()
    # Added tokens that are not special (GGUF's user-defined) are split out of
    # every text; special ones (control) only when the caller parses them.
    tok.add_tokens([AddedToken(t, special=False, normalized=True) for t in vocab.user_defined()])
    if parse_special:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in vocab.specials()])
    return tok


@pytest.fixture(scope="module")
def smol_vocab() -> GGUFVocab:
    v = GGUFVocab(model_path())
    assert v.pre == "smollm"
    return v


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    texts = read_corpus()
    assert len(texts) >= 200
    return texts


def assert_same_ids(texts, got, want, what):
    bad = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    detail = "\n".join(f"  {t!r}: exactly {g} reference {w}" for t, g, w in bad[:10])
    assert not bad, f"{len(bad)} of {len(texts)} strings differ ({what}):\n{detail}"


def write_vocab_gguf(path: Path, model: str, tokens, types, *, pre=None, merges=None, scores=None,
                     bos=None, eos=None, add_space_prefix=None) -> Path:
    """A GGUF holding only tokenizer metadata (no tensors)."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if merges is not None:
        w.add_token_merges(merges)
    if scores is not None:
        w.add_token_scores(scores)
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    if add_space_prefix is not None:
        w.add_add_space_prefix(add_space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# ---------------------------------------------------------------- the real model (pre = smollm)

@pytest.mark.parametrize("parse_special", [True, False], ids=["special", "no-parse-special"])
def test_corpus_matches_hugging_face(smol_vocab, corpus, tmp_path, parse_special):
    ref = hf_tokenizer(smol_vocab, "smollm", parse_special)
    want = [ref.encode(t, add_special_tokens=False).ids for t in corpus]
    extra = [] if parse_special else ["--no-parse-special"]
    got = encode_jsonl(model_path(), corpus, tmp_path, *extra)
    assert_same_ids(corpus, got, want, "smollm")
    if parse_special:  # the corpus must actually exercise special tokens
        assert any(1 in ids and 2 in ids for ids in got)
    else:
        assert not any(i < 17 for ids in got for i in ids)


def test_decode_of_encode_is_the_input(smol_vocab, corpus, tmp_path):
    ids = encode_jsonl(model_path(), corpus, tmp_path)
    want = [representable(smol_vocab, t.encode()).decode() for t in corpus]
    assert decode_jsonl(model_path(), ids, tmp_path) == want
    assert sum(w == t for w, t in zip(want, corpus)) >= len(corpus) - 3


def test_plain_json_and_pieces_output_agree(tmp_path):
    text = "Hello world, I'm <|im_start|>user 123"
    plain = run(["-m", model_path(), text]).decode()
    as_json = run(["-m", model_path(), "--json", text]).decode()
    assert as_json.count("\n") == 1 and as_json.endswith("\n")
    ids = json.loads(as_json)
    assert [int(x) for x in plain.split()] == ids
    assert 1 in ids  # <|im_start|>
    pieces = json.loads(run(["-m", model_path(), "--json", "--show-pieces", text]))
    assert [p["id"] for p in pieces] == ids
    assert "".join(p["piece"] for p in pieces) == text
    assert 1 not in json.loads(run(["-m", model_path(), "--json", "--no-parse-special", text]))


def test_file_input_keeps_exact_bytes(smol_vocab, tmp_path):
    text = "line one\n\n  line two\t\n"
    (tmp_path / "t.txt").write_bytes(text.encode())
    ids = json.loads(run(["-m", model_path(), "--json", "-f", tmp_path / "t.txt"]))
    assert ids == hf_tokenizer(smol_vocab, "smollm", True).encode(text, add_special_tokens=False).ids
    assert run(["-m", model_path(), "--decode", json.dumps(ids)]).decode() == text


def documented_invalid_utf8_reference(ref: Tokenizer, data: bytes) -> list[int]:
    """Pre-tokenize with each invalid byte replaced by U+0001, then run the
    reference BPE model on the ORIGINAL bytes of each piece."""
    classified = []  # characters of the text the pre-tokenizer sees
    i = 0
    while i < len(data):
        for n in (1, 2, 3, 4):
            try:
                ch = data[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            classified.append(ch)
            i += n
            break
        else:
            classified.append("\x01")
            i += 1
    seen = "".join(classified).encode()
    assert len(seen) == len(data)
    chars = gpt2_byte_chars()
    byte_of = {c: b for b, c in enumerate(chars)}
    ids, pos = [], 0
    for piece, _ in ref.pre_tokenizer.pre_tokenize_str("".join(classified)):
        piece_bytes = bytes(byte_of[c] for c in piece)  # one mapped character per byte
        assert piece_bytes == seen[pos:pos + len(piece_bytes)]
        raw = data[pos:pos + len(piece_bytes)]
        ids += [t.id for t in ref.model.tokenize("".join(chars[b] for b in raw))]
        pos += len(piece_bytes)
    assert pos == len(data)
    return ids


def representable(vocab: GGUFVocab, data: bytes) -> bytes:
    """`data` without the bytes that have no token at all in the vocabulary
    (SmolLM2 lacks e.g. 0xC0, 0xC1, 0xF5..0xFF, which never occur in UTF-8):
    the reference drops them and so does exactly."""
    tokens = set(vocab.tokens)
    chars = gpt2_byte_chars()
    return bytes(b for b in data if chars[b] in tokens)


def gpt2_byte_chars() -> list[str]:
    """The published GPT-2 bytes_to_unicode table, as a list indexed by byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, shifted = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + shifted))
            shifted += 1
    return out


@pytest.mark.parametrize("data", [b"abc\xff", b"caf\xc3 latte", b"\xe2\x82 euro \xe2\x82\xac", b"\xed\xa0\x80x",
                                  b"hi \xf0\x9f\x98 there\xc0\xaf", b"\x80\x80\x80", b"12\xfe34"])
def test_invalid_utf8(smol_vocab, tmp_path, data):
    (tmp_path / "bad.txt").write_bytes(data)
    ids = json.loads(run(["-m", model_path(), "--json", "-f", tmp_path / "bad.txt"]))
    ref = hf_tokenizer(smol_vocab, "smollm", False)
    assert ids == documented_invalid_utf8_reference(ref, data)
    assert run(["-m", model_path(), "--decode", json.dumps(ids)]) == representable(smol_vocab, data)


def test_encoding_speed(tmp_path):
    """About 1,000 tokens of fresh text: the whole process (load + build + encode)
    bounds the encode time from above."""
    words = [f"word{i} alpha{i * 7} " for i in range(200)]
    text = "".join(words)
    (tmp_path / "long.txt").write_text(text)
    start = time.perf_counter()
    ids = json.loads(run(["-m", model_path(), "--json", "-f", tmp_path / "long.txt"]))
    elapsed = time.perf_counter() - start
    assert len(ids) >= 1000
    print(f"tokenize of {len(ids)} tokens including model load: {elapsed * 1e3:.1f} ms")
    assert elapsed < 5.0


def test_bad_files_exit_2(tmp_path):
    missing = subprocess.run([str(exactly_bin()), "tokenize", "-m", tmp_path / "none.gguf", "x"], capture_output=True)
    assert missing.returncode == 2
    v = GGUFVocab(model_path())
    path = write_vocab_gguf(tmp_path / "bad_pre.gguf", "gpt2", v.tokens, v.types, pre="no-such-pre", merges=v.merges)
    proc = subprocess.run([str(exactly_bin()), "tokenize", "-m", path, "x"], capture_output=True)
    assert proc.returncode == 2
    assert b"tokenizer.ggml.pre" in proc.stderr


# ---------------------------------------------------------------- other pre-tokenizers, same vocabulary

def with_digit_merges(vocab: GGUFVocab) -> GGUFVocab:
    """SmolLM2's vocabulary has no multi-digit tokens (its pre-tokenizer splits
    digits), so the digit rules of the other regexes would not show in the ids.
    Appends two- and three-digit tokens with their merges."""
    out = GGUFVocab.__new__(GGUFVocab)
    out.tokens, out.types, out.merges, out.pre = list(vocab.tokens), list(vocab.types), list(vocab.merges), vocab.pre
    known = set(out.tokens)
    for left, right in ([(a, b) for a in "0123456789" for b in "0123456789"] +
                        [(a + b, c) for a in "0123456789" for b in "0123456789" for c in "0123456789"]):
        if left + right not in known:
            out.tokens.append(left + right)
            out.types.append(1)
            out.merges.append(f"{left} {right}")
            known.add(left + right)
    return out


@pytest.mark.parametrize("pre", ["gpt2", "gpt-2", "llama-bpe", "qwen2", "gpt-4o", "deepseek-llm", "deepseek-coder",
                                 "deepseek-v3", "falcon", "default"])
def test_pre_tokenizers_match_hugging_face(smol_vocab, corpus, tmp_path, pre):
    vocab = with_digit_merges(smol_vocab)
    path = write_vocab_gguf(tmp_path / f"{pre}.gguf", "gpt2", vocab.tokens, vocab.types, pre=pre,
                            merges=vocab.merges, bos=1, eos=2)
    extra_texts = ["DON'T We'Re", "1234567 89", "x  \n\n  y", "a\r\n\r\nb", "  \n\t x", "$1,234.56", "end.\n\n",
                   "you've it'S", ",hello ...hello", "abc\n  \ndef", "HelloWorld iPhone XMLHttpRequest DON'Ts",
                   "ÉCOLE naïve Ǆemal ǅemal e\u0301te \u0301x", "a/\n/b ./\r\n// x", "12345678901 x1y22",
                   "β² ½ ٣٤ 1234 x`y`z $+<=>^~| 中文字 かなカナ 한국어 ‘q’ ！？", "tail  ", "a\u3000b　 "]
    texts = corpus + extra_texts
    for parse_special in (True, False):
        ref = hf_tokenizer(vocab, pre, parse_special)
        want = [ref.encode(t, add_special_tokens=False).ids for t in texts]
        got = encode_jsonl(path, texts, tmp_path, *([] if parse_special else ["--no-parse-special"]))
        assert_same_ids(texts, got, want, pre)


def test_user_defined_tokens_split_out_of_every_text(smol_vocab, corpus, tmp_path):
    """GPT-NeoX-style vocabularies (mpt, olmo, stablelm) hold runs of spaces as
    added tokens that are not special: Hugging Face splits them out before the
    pre-tokenizer whether or not special tokens are parsed."""
    vocab = GGUFVocab.__new__(GGUFVocab)
    vocab.tokens, vocab.types, vocab.merges = list(smol_vocab.tokens), list(smol_vocab.types), list(smol_vocab.merges)
    for n in range(2, 25):
        vocab.tokens.append(" " * n)
        vocab.types.append(4)
    vocab.tokens.append("\t\t")
    vocab.types.append(4)
    path = write_vocab_gguf(tmp_path / "mpt.gguf", "gpt2", vocab.tokens, vocab.types, pre="mpt",
                            merges=vocab.merges, bos=1, eos=2)
    texts = corpus + ["def f(x):\n    return x  +  1", "a" + " " * 30 + "b", "  lead and tail  ", "\t\t\tx\t\t",
                      "<|im_start|>  user", "x \n  y", " " * 24 + "z", "one two  three   four    five"]
    for parse_special in (True, False):
        ref = hf_tokenizer(vocab, "gpt2", parse_special)
        want = [ref.encode(t, add_special_tokens=False).ids for t in texts]
        got = encode_jsonl(path, texts, tmp_path, *([] if parse_special else ["--no-parse-special"]))
        assert_same_ids(texts, got, want, f"user-defined, parse_special={parse_special}")
        assert sum(i >= len(smol_vocab.tokens) for ids in got for i in ids) >= 20  # the added tokens are used


# ---------------------------------------------------------------- SentencePiece-style vocabularies

SPACE = "\u2581"


def spm_reference(text: str, pieces: dict, byte_ids: list, specials: dict, add_space_prefix: bool,
                  parse_special: bool) -> list[int]:
    """Independent reference for tokenizer.ggml.model = "llama", written from
    the rule, quadratic and string-based: special texts are split out first
    (leftmost, longest); each other fragment has spaces turned into U+2581 and,
    only when it starts the whole text, one U+2581 put in front; then the
    adjacent pair whose concatenation is a piece with the highest score is
    merged (leftmost on ties) until none is; symbols that are not pieces
    become <0xNN> byte tokens."""
    fragments = []  # (text, offset) or (token id, offset)
    pos = raw = 0
    while parse_special and pos < len(text):
        hit = max((s for s in specials if text.startswith(s, pos)), key=len, default=None)
        if hit is None:
            pos += 1
            continue
        if raw < pos:
            fragments.append((text[raw:pos], raw))
        fragments.append((specials[hit], pos))
        pos += len(hit)
        raw = pos
    if raw < len(text):
        fragments.append((text[raw:], raw))
    ids = []
    for frag, offset in fragments:
        if isinstance(frag, int):
            ids.append(frag)
            continue
        norm = (SPACE if add_space_prefix and offset == 0 else "") + frag.replace(" ", SPACE)
        symbols = list(norm)
        while True:
            best = None
            for i in range(len(symbols) - 1):
                cand = symbols[i] + symbols[i + 1]
                if cand in pieces and (best is None or pieces[cand][1] > best[0]):
                    best = (pieces[cand][1], i)
            if best is None:
                break
            i = best[1]
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
        for s in symbols:
            ids += [pieces[s][0]] if s in pieces else [byte_ids[b] for b in s.encode()]
    return ids


def make_spm_vocab(seed: int):
    """<unk>, <s>, </s>, 256 byte tokens, single characters and substrings of a
    few sentences with random scores (on a coarse grid, so ties happen)."""
    rng = random.Random(seed)
    tokens, types, scores = ["<unk>", "<s>", "</s>"], [2, 3, 3], [0.0, 0.0, 0.0]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>"), types.append(6), scores.append(0.0)
    sample = ("the quick brown fox jumps over the lazy dog. hello world, hello there! "
              "it's a test of the tokenizer; привет мир. numbers 123 and 4567?")
    pieces = set(sample.replace(" ", SPACE)) | {SPACE}
    words = (SPACE + sample.replace(" ", " " + SPACE)).split(" ")
    for w in words:
        for n in range(2, 7):
            for i in range(len(w) - n + 1):
                if rng.random() < 0.5:
                    pieces.add(w[i:i + n])
    for p in sorted(pieces):
        tokens.append(p), types.append(1), scores.append(float(np.float32(-rng.randrange(0, 40) / 2)))
    return tokens, types, scores


@pytest.mark.parametrize("add_space_prefix", [True, False])
def test_spm_matches_python_reference(tmp_path, corpus, add_space_prefix):
    tokens, types, scores = make_spm_vocab(seed=5)
    path = write_vocab_gguf(tmp_path / "spm.gguf", "llama", tokens, types, scores=scores, bos=1, eos=2,
                            add_space_prefix=add_space_prefix)
    pieces = {t: (i, s) for i, (t, ty, s) in enumerate(zip(tokens, types, scores)) if ty == 1}
    byte_ids = [tokens.index(f"<0x{b:02X}>") for b in range(256)]
    specials = {"<s>": 1, "</s>": 2}
    rng = random.Random(11)
    alphabet = "the quick brown fox hello world lazy dog привет мир 123 éü中😀<s>'\n\t"
    texts = ["", " ", "hello", " hello", "hello  world ", "the lazy dog.", "<s>hello</s>", "hello</s><s>", "</s>",
             "héllo wörld 😀", "\n\n", "привет, мир!"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40))) for _ in range(150)]
    texts += [t for t in corpus if SPACE not in t][:100]
    for parse_special in (True, False):
        want = [spm_reference(t, pieces, byte_ids, specials, add_space_prefix, parse_special) for t in texts]
        got = encode_jsonl(path, texts, tmp_path, *([] if parse_special else ["--no-parse-special"]))
        assert_same_ids(texts, got, want, f"spm add_space_prefix={add_space_prefix}")
    # Without special parsing nothing is dropped, so decoding gives the text back.
    assert decode_jsonl(path, got, tmp_path) == texts
