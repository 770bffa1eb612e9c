"""Tokenizer::from_hf on SentencePiece-style tokenizer.json files (Llama 2,
Mistral 7B v0.1, TinyLlama: BPE with byte_fallback) against the Hugging Face
`tokenizers` package reading the same file.

The files are built here with `tokenizers`: a BPE vocabulary trained on the
tokenizer test corpus with a small alphabet (so CJK, emoji and many accented
letters fall back to <0xNN> byte tokens), laid out as Llama 2's is (<unk> <s>
</s>, the 256 byte tokens, then the pieces), with Llama 2's normalizer,
decoder and "<s> $A" post-processor, or a Metaspace pre-tokenizer as newer
files have.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from shared_fixtures import built_tool
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from test_hf_tokenizer import assert_same_ids, hf_tokenize, spec_of
from test_tokenizer import read_corpus

MARK = "\u2581"
SPECIALS = ["<unk>", "<s>", "</s>"]
EXTRA_TEXTS = ["hello", " hello", "  hello  world  ", "\tx\n\n y", "a<s>b</s>c", "<s> leading", "x <unk> y",
               "<unk><unk>", "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
               "emoji \U0001F600\U0001F44D\U0001F3FD ok", "\u2581already marked", "", " ", "   ", "\n"]


def trained_pieces(split_words: bool) -> tuple[list[str], list[tuple[str, str]]]:
    """Pieces and merges of a BPE trained on the corpus, spaces as "▁"."""
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.Sequence([normalizers.Prepend(MARK), normalizers.Replace(" ", MARK)])
    # Words split before each "▁" (what SentencePiece trains on), or whole lines
    # so that merges also cross spaces ("e▁t").
    t.pre_tokenizer = pre_tokenizers.Split(MARK, "merged_with_next") if split_words else None
    trainer = trainers.BpeTrainer(vocab_size=1200, limit_alphabet=90, show_progress=False)
    t.train_from_iterator(read_corpus() * 3 + EXTRA_TEXTS, trainer)
    model = json.loads(t.to_str())["model"]
    pieces = [p for p, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"]]
    assert len(merges) > 500
    return pieces, merges


def spm_tokenizer(pieces, merges, layout: str) -> Tokenizer:
    vocab = {t: i for i, t in enumerate(SPECIALS + [f"<0x{b:02X}>" for b in range(256)])}
    for p in pieces:
        vocab.setdefault(p, len(vocab))
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.add_special_tokens(SPECIALS)
    if layout == "prepend":  # Llama 2, Mistral 7B v0.1, TinyLlama
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(MARK), normalizers.Replace(" ", MARK)])
        tok.decoder = decoders.Sequence([decoders.Replace(MARK, " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    else:  # newer files: Metaspace, prepend_scheme first or always
        scheme = layout.split("-")[1]
        tok.pre_tokenizer = pre_tokenizers.Metaspace(MARK, prepend_scheme=scheme, split=False)
        tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(MARK, prepend_scheme=scheme,
                                                                                     split=False)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return read_corpus() + EXTRA_TEXTS


@pytest.fixture(scope="module", params=[True, False], ids=["words", "lines"])
def pieces_and_merges(request):
    return trained_pieces(request.param)


def hf_decode(directory, ids: list[list[int]]) -> list[str]:
    stdin = "".join(json.dumps(i) + "\n" for i in ids)
    proc = subprocess.run([str(built_tool("hf_tokenize")), str(directory), "--decode"], input=stdin,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # Split on "\n" only: decoded texts may hold U+2028, which str.splitlines would cut.
    return [json.loads(line) for line in proc.stdout.split("\n")[:-1]]


@pytest.mark.parametrize("layout", ["prepend", "metaspace-first", "metaspace-always"])
def test_ids_match_tokenizers(pieces_and_merges, texts, tmp_path, layout):
    ref = spm_tokenizer(*pieces_and_merges, layout)
    directory = tmp_path / layout
    directory.mkdir()
    ref.save(str(directory / "tokenizer.json"))

    spec = spec_of(directory)
    assert (spec["model"], spec["bos"], spec["add_bos"], spec["add_eos"], spec["unk"]) == ("llama", 1, True, False, 0)
    assert spec["add_space_prefix"] is True
    assert ref.encode("hi").ids[0] == 1  # the template adds <s>; hf_tokenize's ids do not have it

    want = [ref.encode(t, add_special_tokens=False).ids for t in texts]
    got = hf_tokenize(directory, texts)
    assert_same_ids(texts, got, want, layout)
    # The comparison has teeth: merges join characters, bytes stand in for
    # missing characters, special texts become tokens.
    assert sum(map(len, got)) < 0.6 * sum(len(t.encode()) for t in texts)
    assert sum(1 for ids in got for i in ids if 3 <= i < 259) > 100
    assert any(1 in ids and 2 in ids for ids in got)

    ref.encode_special_tokens = True  # special texts tokenized as ordinary characters
    want = [ref.encode(t, add_special_tokens=False).ids for t in texts]
    got_plain = hf_tokenize(directory, texts, "--no-parse-special")
    assert_same_ids(texts, got_plain, want, layout + " without special tokens")
    assert not any(i < 3 for ids in got_plain for i in ids)

    # decode(encode(s)) gives s back wherever it does with `tokenizers`.
    ref.encode_special_tokens = False
    decoded = hf_decode(directory, got)
    round_trips = [i for i, t in enumerate(texts) if ref.decode(ref.encode(t, add_special_tokens=False).ids) == t]
    # (Metaspace's decoder drops the first space of a text that starts with one.)
    assert len(round_trips) > (0.95 if layout == "prepend" else 0.75) * len(texts)
    bad = [(texts[i], decoded[i]) for i in round_trips if decoded[i] != texts[i]]
    assert not bad, f"{len(bad)} texts do not round-trip: {bad[:5]}"


def test_unigram_is_refused(pieces_and_merges, tmp_path):
    pieces, _ = pieces_and_merges
    vocab = [(t, 0.0) for t in SPECIALS + [f"<0x{b:02X}>" for b in range(256)]] + [(p, -1.0) for p in pieces]
    ref = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=True))
    ref.pre_tokenizer = pre_tokenizers.Metaspace(MARK, prepend_scheme="first", split=False)
    ref.save(str(tmp_path / "tokenizer.json"))
    proc = subprocess.run([str(built_tool("hf_tokenize")), str(tmp_path)], input="", capture_output=True, text=True)
    assert proc.returncode == 2
    assert "tokenizer.json: key 'model.type' is 'Unigram'" in proc.stderr
