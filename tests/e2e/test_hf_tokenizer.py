"""Tokenizer::from_hf (through the test tool bin/hf_tokenize) against the
Hugging Face `tokenizers` package reading the same tokenizer.json.

The tokenizer.json files are written here by `tokenizers` itself from the
default model's vocabulary and merges (read out of the GGUF with the `gguf`
package), in the shapes the published checkpoints use: SmolLM2's
Digits + ByteLevel, GPT-2's ByteLevel, Llama 3's, Qwen2's and GPT-4o's Split regexes;
merges both as [left, right] pairs (what tokenizers >= 0.20 writes) and as
"left right" strings (older files).
"""

from __future__ import annotations

import json
import random
import subprocess
import unicodedata
from pathlib import Path

import pytest
from shared_fixtures import built_tool
from tokenizers import normalizers, pre_tokenizers, processors

# Helpers of the GGUF tokenizer test: the same vocabulary, reference
# configurations and corpus.
from test_tokenizer import GGUFVocab, hf_tokenizer, read_corpus, with_digit_merges

EXTRA_TEXTS = ["DON'T We'Re", "1234567 89", "x  \n\n  y", "a\r\n\r\nb", "  \n\t x", "$1,234.56", "end.\n\n",
               "you've it'S", ",hello ...hello", "abc\n  \ndef", "<|im_start|>user\nHi<|im_end|>\n",
               "HelloWorld iPhone XMLHttpRequest DON'Ts", "ÉCOLE naïve Ǆemal ǅemal e\u0301te \u0301x",
               "a/\n/b ./\r\n// x"]


@pytest.fixture(scope="module")
def smol_vocab(model_path) -> GGUFVocab:
    v = GGUFVocab(model_path)
    assert v.pre == "smollm"
    return v


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return read_corpus() + EXTRA_TEXTS


def write_checkpoint(tok, vocab: GGUFVocab, model_path: Path, out: Path, string_merges: bool = False) -> Path:
    """tokenizer.json saved by `tokenizers`, and a tokenizer_config.json with
    the GGUF's BOS/EOS and chat template, as a checkpoint directory."""
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    if string_merges:
        data = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
        assert isinstance(data["model"]["merges"][0], list)
        data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
        (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    import gguf
    template = gguf.GGUFReader(str(model_path)).fields["tokenizer.chat_template"].contents()
    config = {"bos_token": vocab.tokens[1], "eos_token": {"content": vocab.tokens[2], "special": True},
              "chat_template": template}
    (out / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return out


def hf_tokenize(directory: Path, texts: list[str], *extra: str) -> list[list[int]]:
    stdin = "".join(json.dumps(t) + "\n" for t in texts)
    proc = subprocess.run([str(built_tool("hf_tokenize")), str(directory), *extra], input=stdin,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def spec_of(directory: Path) -> dict:
    proc = subprocess.run([str(built_tool("hf_tokenize")), str(directory), "--spec"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def nfc_texts() -> list[str]:
    """Texts that NFC changes: every character with a canonical
    decomposition written decomposed (a sample of the Hangul syllables),
    and random marks in random order after letters, jamo and composites."""
    rng = random.Random(15)
    decomposable = [c for c in map(chr, range(0x30000)) if not 0xD800 <= ord(c) <= 0xDFFF and
                    unicodedata.decomposition(c) and not unicodedata.decomposition(c).startswith("<")]
    hangul = [chr(cp) for cp in range(0xAC00, 0xD7A4, 37)]
    pieces = [unicodedata.normalize("NFD", c) for c in decomposable + hangul]
    texts = [" ".join(pieces[i:i + 40]) for i in range(0, len(pieces), 40)]
    marks = [chr(cp) for cp in list(range(0x300, 0x370)) + list(range(0x591, 0x5C8)) + list(range(0x1DC0, 0x1E00)) +
             list(range(0x20D0, 0x20F1)) + [0x93C, 0x94D, 0x9BC, 0x9BE, 0x9D7, 0xB3E, 0xB56, 0xB57, 0x3099, 0x309A]]
    bases = list("aeiouyAEIOUYcdghknrsuwzLO") + [chr(0x1100 + i) for i in range(19)] + \
        [chr(0x1161 + i) for i in range(21)] + [chr(0x11A8 + i) for i in range(27)] + \
        ["\u00e9", "\u0915", "\u09c7", "\u0b47", "\u304b", "\u30cf", "\uac00", "\u1e0d", "\u03b1", "\u0436"]
    for _ in range(400):
        words = []
        for _ in range(12):
            word = rng.choice(bases) + "".join(rng.choice(marks) for _ in range(rng.randint(0, 4)))
            if rng.random() < 0.3:  # a starter that may compose with the previous one (jamo, Indic vowel signs)
                word += rng.choice(bases + ["\u0bbe", "\u0cd5", "\u0dcf", "\u102e"])
            words.append(word)
        texts.append(rng.choice(["", " "]).join(words))
    return texts


def assert_same_ids(texts, got, want, what):
    assert len(got) == len(texts)
    bad = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    detail = "\n".join(f"  {t!r}: exactly {g} tokenizers {w}" for t, g, w in bad[:10])
    assert not bad, f"{len(bad)} of {len(texts)} strings differ ({what}):\n{detail}"


# (case id, pre-tokenizer family, merges written as strings, how the
# pre-tokenizer is spelled when it differs from test_tokenizer.hf_tokenizer's)
CASES = [
    ("smollm", "smollm", False, None),
    ("smollm-string-merges", "smollm", True, None),
    ("gpt2-split", "gpt2", False, None),
    ("gpt2-bytelevel", "gpt2", True, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)),
    ("llama3", "llama-bpe", False, None),
    ("qwen2", "qwen2", True, None),
    ("gpt-4o", "gpt-4o", False, None),
    ("deepseek-llm", "deepseek-llm", False, None),
    ("deepseek-coder", "deepseek-coder", True, None),
    ("deepseek-v3", "deepseek-v3", False, None),
]


@pytest.mark.parametrize("case,pre,string_merges,pre_tokenizer", CASES, ids=[c[0] for c in CASES])
def test_ids_match_tokenizers(smol_vocab, model_path, texts, tmp_path, case, pre, string_merges, pre_tokenizer):
    vocab = smol_vocab if pre == "smollm" else with_digit_merges(smol_vocab)
    ref = hf_tokenizer(vocab, pre, parse_special=True)
    if pre_tokenizer is not None:
        ref.pre_tokenizer = pre_tokenizer
    checked = texts
    if pre == "qwen2":
        # Qwen2's tokenizer.json normalizes to NFC: the corpus has 3 texts
        # that NFC changes, and nfc_texts() many more.
        ref.normalizer = normalizers.NFC()
        checked = texts + nfc_texts()
        assert sum(unicodedata.normalize("NFC", t) != t for t in checked) > 400
    directory = write_checkpoint(ref, vocab, model_path, tmp_path / case, string_merges)
    assert spec_of(directory)["pre"] == pre

    want = [ref.encode(t, add_special_tokens=False).ids for t in checked]
    if pre == "qwen2":
        # The tokenizers package's Unicode tables predate a few combining
        # marks (U+1DF6-U+1DFA, class 218-232 since Unicode 14), which it
        # treats as starters; where its NFC and Python's differ, the tokens
        # of Python's NFC without normalizer are the reference.
        nfc, raw = normalizers.NFC(), hf_tokenizer(vocab, pre, parse_special=True)
        older = [i for i, t in enumerate(checked) if nfc.normalize_str(t) != unicodedata.normalize("NFC", t)]
        assert len(older) < 0.25 * len(checked)
        for i in older:
            want[i] = raw.encode(unicodedata.normalize("NFC", checked[i]), add_special_tokens=False).ids
    got = hf_tokenize(directory, checked)
    assert_same_ids(checked, got, want, case)
    # The comparison has teeth: merges join bytes, special texts become tokens.
    corpus = got[:len(texts)]
    assert sum(map(len, corpus)) < 0.6 * sum(len(t.encode()) for t in texts)
    assert any(1 in ids and 2 in ids for ids in corpus)
    if pre == "qwen2":  # and without NFC, the decomposed texts would differ
        raw = hf_tokenizer(vocab, pre, parse_special=True)
        assert sum(raw.encode(t, add_special_tokens=False).ids != w for t, w in zip(checked, want)) > 400

    ref.encode_special_tokens = True  # special texts tokenized as ordinary characters
    checked = texts  # (the NFC texts have no special tokens)
    want = [ref.encode(t, add_special_tokens=False).ids for t in checked]
    got = hf_tokenize(directory, checked, "--no-parse-special")
    assert_same_ids(checked, got, want, case + " without special tokens")
    assert not any(i < 17 for ids in got for i in ids)


def test_same_ids_as_the_gguf(smol_vocab, model_path, texts, tmp_path, run_exactly):
    directory = write_checkpoint(hf_tokenizer(smol_vocab, "smollm", True), smol_vocab, model_path, tmp_path / "hf")
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in texts), encoding="utf-8")
    from_gguf = [json.loads(line) for line in run_exactly(["tokenize", "-m", model_path, "--jsonl", src]).stdout.splitlines()]
    assert_same_ids(texts, hf_tokenize(directory, texts), from_gguf, "from_hf vs from_gguf")


def test_spec_wiring(smol_vocab, model_path, tmp_path):
    ref = hf_tokenizer(smol_vocab, "smollm", True)
    spec = spec_of(write_checkpoint(ref, smol_vocab, model_path, tmp_path / "plain"))
    assert spec["vocab_size"] == len(smol_vocab.tokens) == 49152
    assert spec["merges"] == len(smol_vocab.merges)
    assert (spec["bos"], spec["eos"], spec["add_bos"], spec["add_eos"]) == (1, 2, False, False)
    assert spec["chat_template"].startswith("{% for message in messages %}")

    # A template post-processor (as Llama 3's) makes encoding add BOS.
    ref.post_processor = processors.TemplateProcessing(single="<|im_start|> $A",
                                                       special_tokens=[("<|im_start|>", 1)])
    assert ref.encode("hi").ids[0] == 1
    spec = spec_of(write_checkpoint(ref, smol_vocab, model_path, tmp_path / "templated"))
    assert (spec["bos"], spec["add_bos"]) == (1, True)


def test_unsupported_tokenizer_exits_2(smol_vocab, model_path, tmp_path):
    ref = hf_tokenizer(smol_vocab, "smollm", True)
    ref.pre_tokenizer = pre_tokenizers.Metaspace()
    directory = write_checkpoint(ref, smol_vocab, model_path, tmp_path / "metaspace")
    proc = subprocess.run([str(built_tool("hf_tokenize")), str(directory)], input="", capture_output=True, text=True)
    assert proc.returncode == 2
    assert "tokenizer.json: key 'pre_tokenizer.type' is the pre-tokenizer 'Metaspace'" in proc.stderr
