"""WordPiece vocabularies (BERT, bge, nomic-embed) against the Hugging Face
`tokenizers` package reading the same tokenizer.json: Tokenizer::from_hf
through the test tool bin/hf_tokenize, and Tokenizer::from_gguf through
`exactly tokenize` on the same vocabulary written as a GGUF "bert" tokenizer
the way llama.cpp's converter writes it (a word's first token marked with a
leading U+2581, continuing tokens without their "##").

The vocabularies are trained here with the tokenizers package's WordPiece
trainer on the tokenizer test corpus, with a small alphabet so that rarer
characters are unknown; lowercased and cased, accents stripped or kept. A
second, synthetic vocabulary holds every code point below U+30000 as a token,
so that the normalizer's and pre-tokenizer's character classes (control,
whitespace, punctuation, nonspacing marks, lowercase, CJK) are compared for
every character.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import gguf
import pytest
from shared_fixtures import built_tool
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from test_hf_spm_tokenizer import hf_decode
from test_hf_tokenizer import assert_same_ids, hf_tokenize, spec_of
from test_tokenizer import decode_jsonl, encode_jsonl, exactly_bin, read_corpus

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORD_START = "\u2581"
LONG_WORD = "pneumonoultramicroscopicsilicovolcanoconiosis" * 3  # 135 characters
EXTRA_TEXTS = [
    "Hello, World! HELLO world.", "Café naïve Ångström résumé ÉCOLE über", "e\u0301te\u0301 cafe\u0301 A\u030a",
    "日本語のテキスト 中文字符 한국어 텍스트", "\u4e00\u4e01x\u4e02 \U00020000\U0002b820\U0002b920 \uf900",
    "don't it's I'm we're you've do not", "hello , world . what ? yes ! ' quoted '",
    "$1,234.56 100% a+b=c <tag> [x] {y} a|b ~z `q` ^", "3.14159 2024-01-31 12:30:45 v2.0.1 0x1F",
    LONG_WORD, "x " + LONG_WORD + " y", "a" * 99 + " " + "b" * 100 + " " + "c" * 101,
    "emoji \U0001F600\U0001F44D\U0001F3FD ok \u2603", "ctrl\x00a\x07b\x1bc\u200bd\u200ee\ufffdf\x85g\x0bh\x0ci",
    "tabs\tand\nnew\r\nlines   and\u3000ideographic\u2003em\u00a0nbsp", "   leading and trailing   ", "", " ", "\n\t",
    "[CLS] inside [SEP] text [MASK] and [UNK] [PAD]", "a[CLS]b[SEP]c", "İstanbul ΟΔΟΣ Σίσυφος ǅemal ﬁne ß",
    "\u07fd\u0898a\u1734b\U00011938c\u166dd\ua7cbe\u2e43f\u061dg", "naïve\u0301\u0316 \u1e0b\u0323 \u0344",
    "Ω Å K µ ½ ² ℌ", "mixed CASE MiXeD", "123abc ABC123 a1b2c3", "under_score hy-phen dot.ted sl/ash",
]


def trained_vocab(lowercase: bool, strip_accents: bool | None) -> dict[str, int]:
    t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    t.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents)
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=500, special_tokens=SPECIALS, limit_alphabet=120,
                                        show_progress=False)
    t.train_from_iterator(read_corpus() * 3 + EXTRA_TEXTS, trainer)
    vocab = t.get_vocab()
    assert [vocab[s] for s in SPECIALS] == list(range(len(SPECIALS)))
    assert sum(1 for k in vocab if k.startswith("##")) > 150
    return vocab


def bert_tokenizer(vocab: dict[str, int], lowercase: bool, strip_accents: bool | None, max_chars: int = 100,
                   bert_processing: bool = False) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=max_chars))
    tok.add_special_tokens(SPECIALS)
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=strip_accents, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = ("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])
    if bert_processing:
        tok.post_processor = processors.BertProcessing(sep, cls)
    else:
        tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                           special_tokens=[cls, sep])
    tok.decoder = decoders.WordPiece()
    return tok


def save(tok: Tokenizer, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    return directory


def write_bert_gguf(path: Path, vocab: dict[str, int], *, model: str | None = "bert", unk: bool = True) -> Path:
    """The vocabulary as llama.cpp's converter writes a BERT tokenizer."""
    def phantom(t: str) -> str:
        if t.startswith("[") and t.endswith("]"):
            return t
        return t[2:] if t.startswith("##") else WORD_START + t
    texts = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    w = gguf.GGUFWriter(str(path), "bert")
    if model is not None:
        w.add_tokenizer_model(model)
    w.add_token_list([phantom(t) for t in texts])
    w.add_token_types([3 if t in SPECIALS else 1 for t in texts])
    w.add_bos_token_id(vocab["[CLS]"])
    w.add_eos_token_id(vocab["[SEP]"])
    if unk:
        w.add_unk_token_id(vocab["[UNK]"])
    w.add_sep_token_id(vocab["[SEP]"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return read_corpus() + EXTRA_TEXTS


# (case id, lowercase, strip_accents, max_input_chars_per_word, BertProcessing)
# The options of the ids with bert_tokenizer's arguments.
CASES = [
    ("uncased", True, None, 100, False),
    ("cased", False, None, 100, True),
    ("uncased-accents-kept", True, False, 100, False),
    ("cased-accents-stripped", False, True, 12, False),
]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def case(request):
    name, lowercase, strip_accents, max_chars, bert_processing = request.param
    vocab = trained_vocab(lowercase, strip_accents)
    return request.param, vocab, bert_tokenizer(vocab, lowercase, strip_accents, max_chars, bert_processing)


def test_ids_match_tokenizers(case, texts, tmp_path):
    (name, lowercase, strip_accents, max_chars, _), vocab, ref = case
    directory = save(ref, tmp_path / name)
    spec = spec_of(directory)
    assert (spec["model"], spec["unk"], spec["bos"], spec["eos"], spec["add_bos"], spec["add_eos"]) == \
        ("bert", 1, 2, 3, True, True)

    want = [ref.encode(t, add_special_tokens=False).ids for t in texts]
    got = hf_tokenize(directory, texts)
    assert_same_ids(texts, got, want, name)
    # With special tokens the caller adds [CLS] and [SEP], as the spec says.
    assert all(ref.encode(t).ids == [2] + w + [3] for t, w in zip(texts, want))
    # The comparison has teeth: words continue with "##" tokens, unknown
    # characters and overlong words give [UNK], special texts become tokens.
    continuing = {i for t, i in vocab.items() if t.startswith("##")}
    assert sum(1 for ids in got for i in ids if i in continuing) > 200
    assert sum(ids.count(1) for ids in got) > 10
    assert ref.encode(LONG_WORD, add_special_tokens=False).ids == [1]
    assert got[texts.index("a[CLS]b[SEP]c")][1::2] == [2, 3]
    # ... and each option changes ids: casing, accents and the word length limit.
    strip = lowercase if strip_accents is None else strip_accents
    for other in [bert_tokenizer(vocab, not lowercase, strip, max_chars),
                  bert_tokenizer(vocab, lowercase, not strip, max_chars),
                  bert_tokenizer(vocab, lowercase, strip, 100 if max_chars != 100 else 40)]:
        assert sum(other.encode(t, add_special_tokens=False).ids != g for t, g in zip(texts, got)) >= 3

    ref.encode_special_tokens = True  # special texts tokenized as ordinary characters
    want_plain = [ref.encode(t, add_special_tokens=False).ids for t in texts]
    got_plain = hf_tokenize(directory, texts, "--no-parse-special")
    assert_same_ids(texts, got_plain, want_plain, name + " without special tokens")
    assert not any(i in (0, 2, 3, 4) for ids in got_plain for i in ids)

    # Decoding: "##" joined, spaces between words, the decoder's cleanup, special tokens skipped.
    ref.encode_special_tokens = False
    assert hf_decode(directory, got) == [ref.decode(ids) for ids in got]
    assert any(ref.decode(ids) != " ".join(ref.id_to_token(i) for i in ids if i > 4) for ids in got)


@pytest.mark.parametrize("name,lowercase", [("uncased", True), ("cased", False)])
def test_gguf_gives_the_same_ids(texts, tmp_path, name, lowercase):
    vocab = trained_vocab(lowercase, None)
    ref = bert_tokenizer(vocab, lowercase, None)
    path = write_bert_gguf(tmp_path / f"{name}.gguf", vocab)
    want = [ref.encode(t, add_special_tokens=False).ids for t in texts]
    got = encode_jsonl(path, texts, tmp_path)
    assert_same_ids(texts, got, want, name + " from GGUF")
    # `exactly tokenize --decode` renders special tokens.
    assert decode_jsonl(path, got, tmp_path) == [ref.decode(ids, skip_special_tokens=False) for ids in got]


def every_character_vocab() -> dict[str, int]:
    """Specials, "a", "##a" and every code point below U+30000 but the
    surrogates and whitespace, each a token of its own."""
    vocab = {t: i for i, t in enumerate(SPECIALS + ["a", "##a"])}
    for cp in range(0x30000):
        c = chr(cp)
        if not 0xD800 <= cp <= 0xDFFF and not c.isspace():
            vocab.setdefault(c, len(vocab))
    return vocab


def every_character_texts() -> list[str]:
    """Each code point below U+30000 (surrogates excepted) alone as a word
    and followed by "a": a removed character leaves "a", a punctuation or CJK
    character stands apart from it, any other continues into "##a"."""
    cps = [cp for cp in range(0x30000) if not 0xD800 <= cp <= 0xDFFF]
    return [" ".join(chr(cp) + " " + chr(cp) + "a" for cp in cps[i:i + 150]) for i in range(0, len(cps), 150)]


@pytest.mark.parametrize("lowercase,strip_accents", [(True, None), (False, False), (True, False), (False, True)])
def test_every_character_class(tmp_path, lowercase, strip_accents):
    vocab = every_character_vocab()
    ref = bert_tokenizer(vocab, lowercase, strip_accents)
    texts = every_character_texts()
    directory = save(ref, tmp_path / "every")
    want = [ref.encode(t, add_special_tokens=False).ids for t in texts]
    got = hf_tokenize(directory, texts, "--no-parse-special")
    assert_same_ids(texts, got, want, f"every character, lowercase={lowercase} strip_accents={strip_accents}")
    assert sum(ids.count(vocab["##a"]) for ids in got) > 80000
    assert sum(ids.count(vocab["a"]) for ids in got) > 1000


def test_bad_vocabularies_exit_2(tmp_path):
    vocab = trained_vocab(True, None)

    # A tokenizer.json whose unknown token is not in the vocabulary.
    ref = bert_tokenizer(vocab, True, None)
    data = json.loads(ref.to_str())
    data["model"]["unk_token"] = "[NOPE]"
    (tmp_path / "nounk").mkdir()
    (tmp_path / "nounk" / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    proc = subprocess.run([str(built_tool("hf_tokenize")), str(tmp_path / "nounk")], input="", capture_output=True,
                          text=True)
    assert proc.returncode == 2
    assert "key 'model.unk_token' is '[NOPE]', which is not in the vocabulary" in proc.stderr

    # Normalizers and pre-tokenizers other than BERT's are refused, by name.
    for key, step, message in [("normalizer", normalizers.Lowercase(), "key 'normalizer.type' is the normalizer"),
                               ("pre_tokenizer", pre_tokenizers.Whitespace(), "key 'pre_tokenizer' is 'Whitespace'")]:
        tok = bert_tokenizer(vocab, True, None)
        setattr(tok, key, step)
        directory = save(tok, tmp_path / key)
        proc = subprocess.run([str(built_tool("hf_tokenize")), str(directory)], input="", capture_output=True,
                              text=True)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr

    # A GGUF without [UNK] nor tokenizer.ggml.unknown_token_id.
    no_unk = {t: i for t, i in vocab.items() if t != "[UNK]"}
    no_unk = {t: i for i, t in enumerate(sorted(no_unk, key=no_unk.get))}
    for path, message in [
        (write_bert_gguf(tmp_path / "nounk.gguf", no_unk, unk=False),
         "tokenizer.ggml.unknown_token_id: missing, and the vocabulary has no '[UNK]' token"),
        (write_bert_gguf(tmp_path / "nomodel.gguf", vocab, model=None), "tokenizer.ggml.model"),
    ]:
        proc = subprocess.run([str(exactly_bin()), "tokenize", "-m", str(path), "x"], capture_output=True, text=True)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
