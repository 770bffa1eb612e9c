"""Checks of the reference itself, so that the engine is judged by a trusted
oracle. None of these use the engine.

    .venv/bin/python -m pytest tests/reference -q
"""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

import llama_ref
import tokenizer_ref

CHAT_FRANCE = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


def _tensor(model_path, name):
    return next(t for t in GGUFReader(str(model_path)).tensors if t.name == name)


def _decode_block_q4_1(block: np.ndarray) -> np.ndarray:
    # ggml block_q4_1: fp16 scale d, fp16 minimum m, then 16 bytes whose low
    # nibbles are elements 0..15 and high nibbles elements 16..31.
    d, m = block[0:4].view("<f2").astype(np.float64)
    qs = block[4:20]
    q = np.concatenate([qs & 0x0F, qs >> 4]).astype(np.float64)
    return d * q + m


def _decode_block_q8_0(block: np.ndarray) -> np.ndarray:
    # ggml block_q8_0: fp16 scale d, then 32 signed bytes.
    d = block[0:2].view("<f2").astype(np.float64)[0]
    return d * block[2:34].view(np.int8).astype(np.float64)


@pytest.mark.parametrize("name, qtype, block_bytes, decode", [
    ("blk.0.attn_q.weight", GGMLQuantizationType.Q4_1, 20, _decode_block_q4_1),
    ("token_embd.weight", GGMLQuantizationType.Q8_0, 34, _decode_block_q8_0),
])
def test_package_dequantisation_matches_block_format(model_path, name, qtype, block_bytes, decode):
    """The gguf package's dequantisation agrees with a decoding written from
    the block layout, on every block of a few rows."""
    t = _tensor(model_path, name)
    assert t.tensor_type == qtype
    rows = np.asarray(t.data[:7])  # [7, row_bytes]
    want = np.stack([np.concatenate([decode(b) for b in row.reshape(-1, block_bytes)]) for row in rows])
    got = dequantize(rows, qtype).astype(np.float64)
    assert got.shape == (7, int(t.shape[0]))
    # The package works in float32: allow its rounding, nothing more.
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_rope_is_a_rotation_depending_on_relative_position(ref_model):
    """Norms are kept and q.k depends only on the distance of positions,
    which is what rotary embeddings exist to give."""
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 1, 1, ref_model.cfg.head_dim))
    def rot(x, p):
        return ref_model.rope(x, np.array([p]))[0, 0]
    assert np.linalg.norm(rot(q, 37)) == pytest.approx(np.linalg.norm(q), rel=1e-12)
    base = rot(q, 10) @ rot(k, 3)
    assert rot(q, 1007) @ rot(k, 1000) == pytest.approx(base, rel=1e-9)
    assert abs(rot(q, 11) @ rot(k, 3) - base) > 1e-3  # a different distance does change it


def test_incremental_decoding_equals_full_forward(ref_model):
    """The KV-cache path (used for greedy decoding) and the one-shot path
    agree, and appending tokens never changes earlier positions (causality)."""
    ids = [1, 504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767]
    full = ref_model.logits(ids)
    cache = ref_model.new_cache()
    parts = [ref_model.forward(ids[:6], cache)] + [ref_model.forward([t], cache) for t in ids[6:]]
    np.testing.assert_allclose(np.vstack(parts), full, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ref_model.logits(ids[:4]), full[:4], rtol=0, atol=1e-9)


def test_greedy_answer_is_coherent(ref_model, ref_tokenizer):
    """End-to-end evidence for the layout choices (rope pairs, GQA mapping,
    tied head): with any of them wrong the model does not answer this."""
    ids = tokenizer_ref.encode(ref_tokenizer, CHAT_FRANCE, bos_id=1)
    gen, gaps = ref_model.greedy(ids, 8)
    text = ref_tokenizer.decode(gen)
    assert text.startswith("The capital of France is Paris."), text
    assert min(gaps) > 1e-3


def test_tokenizer_round_trip_and_specials(ref_tokenizer, model_path):
    text = "Hello world 2024! Ça va? 北京 Москва\n\tdef f(x): return x**2"
    ids = tokenizer_ref.encode(ref_tokenizer, text, bos_id=None)
    assert ref_tokenizer.decode(ids) == text
    # Digits are split one by one by the smollm pre-tokenizer.
    assert [ref_tokenizer.id_to_token(i) for i in tokenizer_ref.encode(ref_tokenizer, "2024", None)] == list("2024")
    # Control tokens are matched literally as single ids.
    tokens = GGUFReader(str(model_path)).fields["tokenizer.ggml.tokens"].contents()
    ids = tokenizer_ref.encode(ref_tokenizer, "<|im_start|>user<|im_end|>", None)
    assert [tokens[i] for i in ids] == ["<|im_start|>", "user", "<|im_end|>"]
