"""Qwen3 (dense) from GGUF on the CPU against the float64 reference.

The test writes a tiny Qwen3 with random weights (two layers, heads of 32
over a 64-wide stream, so q is wider than the stream, GQA 4 over 2) and the
default model's tokenizer, as llama.cpp's converter lays a Qwen3 out
(architecture "qwen3", per-head attn_q_norm / attn_k_norm, RoPE pairs half a
head apart, tied embeddings). The engine's logits and greedy tokens are
compared with tests/reference/llama_ref.py under the bounds of
test_logits.py; controls show that the reference without the q/k norms or
with the other RoPE pairing is far from the engine, so the comparison can
tell.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.quants import quantize

import llama_ref
from test_logits import ARGMAX_GAP, REL_L2_BOUND, engine_logits

LAYERS, DIM, HEADS, KV_HEADS, HEAD_DIM, FFN = 2, 64, 4, 2, 32, 128
PROMPT = [1, 504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30, 12, 9001, 44, 7, 1000]


def tokenizer_fields(model_path) -> dict:
    fields = GGUFReader(str(model_path)).fields
    return {key: fields[key].contents() for key in
            ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
             "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id")}


def write_qwen3(path, tok: dict, qtype: GGMLQuantizationType, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    vocab = len(tok["tokenizer.ggml.tokens"])
    w = GGUFWriter(str(path), arch="qwen3")
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model(tok["tokenizer.ggml.model"])
    w.add_tokenizer_pre(tok["tokenizer.ggml.pre"])
    w.add_token_list(tok["tokenizer.ggml.tokens"])
    w.add_token_types(tok["tokenizer.ggml.token_type"])
    w.add_token_merges(tok["tokenizer.ggml.merges"])
    w.add_bos_token_id(int(tok["tokenizer.ggml.bos_token_id"]))
    w.add_eos_token_id(int(tok["tokenizer.ggml.eos_token_id"]))

    def matrix(name, rows, cols):
        a = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
        if qtype == GGMLQuantizationType.F32:
            w.add_tensor(name, a)
        else:
            w.add_tensor(name, quantize(a, qtype), raw_dtype=qtype)

    def norm(name, n):
        w.add_tensor(name, (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32))

    w.add_tensor("token_embd.weight", rng.standard_normal((vocab, DIM)).astype(np.float32))
    for layer in range(LAYERS):
        p = f"blk.{layer}."
        norm(p + "attn_norm.weight", DIM)
        matrix(p + "attn_q.weight", HEADS * HEAD_DIM, DIM)
        matrix(p + "attn_k.weight", KV_HEADS * HEAD_DIM, DIM)
        matrix(p + "attn_v.weight", KV_HEADS * HEAD_DIM, DIM)
        matrix(p + "attn_output.weight", DIM, HEADS * HEAD_DIM)
        norm(p + "attn_q_norm.weight", HEAD_DIM)
        norm(p + "attn_k_norm.weight", HEAD_DIM)
        norm(p + "ffn_norm.weight", DIM)
        matrix(p + "ffn_gate.weight", FFN, DIM)
        matrix(p + "ffn_up.weight", FFN, DIM)
        matrix(p + "ffn_down.weight", DIM, FFN)
    norm("output_norm.weight", DIM)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def tokenizer(model_path):
    return tokenizer_fields(model_path)


@pytest.fixture(scope="module", params=[GGMLQuantizationType.F32, GGMLQuantizationType.Q8_0], ids=["f32", "q8_0"])
def qwen3(request, tmp_path_factory, tokenizer):
    path = tmp_path_factory.mktemp("qwen3") / f"qwen3-{request.param.name}.gguf"
    write_qwen3(path, tokenizer, request.param)
    return path, llama_ref.load(str(path))


def relative_errors(got, ref):
    return np.linalg.norm(got - ref, axis=1) / np.linalg.norm(ref, axis=1)


def test_logits_match_the_reference(qwen3, run_exactly, tmp_path):
    path, ref = qwen3
    assert ref.cfg.qk_norm and ref.cfg.rope_half and ref.cfg.n_heads * ref.cfg.head_dim != ref.cfg.dim
    got = engine_logits(run_exactly, path, PROMPT, tmp_path)
    want = ref.logits(PROMPT)
    assert got.shape == want.shape and np.isfinite(got).all()
    rel = relative_errors(got, want)
    assert rel.max() < REL_L2_BOUND, f"position {int(rel.argmax())}: relative L2 error {rel.max():.3e}"
    decided = llama_ref.top2_gap(want) > ARGMAX_GAP
    assert decided.mean() > 0.9
    assert (np.argmax(got, axis=1) == np.argmax(want, axis=1))[decided].all()


@pytest.mark.parametrize("wrong", [{"qk_norm": False}, {"rope_half": False}], ids=["no-qk-norm", "adjacent-rope"])
def test_the_comparison_tells_a_wrong_model(qwen3, run_exactly, tmp_path, wrong):
    path, ref = qwen3
    other = llama_ref.LlamaRef(dataclasses.replace(ref.cfg, **wrong), ref.w)
    got = engine_logits(run_exactly, path, PROMPT, tmp_path)
    assert relative_errors(got, other.logits(PROMPT)).max() > 100 * REL_L2_BOUND


def test_greedy_matches_the_reference(qwen3, run_exactly, tmp_path):
    path, ref = qwen3
    out = tmp_path / "ids.json"
    run_exactly(["run", "-m", path, "--prompt-ids", ",".join(map(str, PROMPT)), "-n", 24, "--temp", 0,
                 "--ids-out", out])
    got = json.loads(out.read_text())["ids"]
    want, gaps = ref.greedy(PROMPT, 24)
    compared = 0
    for g, w, gap in zip(got, want, gaps):
        if gap <= ARGMAX_GAP:
            break
        assert g == w
        compared += 1
    assert compared >= 16, f"only {compared} tokens decided"


def test_the_gpu_refuses_it_by_name(qwen3, exactly_bin):
    path, _ = qwen3
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1", "--device", "cuda"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 64 and "qwen3" in p.stderr and "--device cpu" in p.stderr, p.stderr


def test_an_unknown_architecture_exits_2_naming_it(tmp_path, exactly_bin, tokenizer):
    path = tmp_path / "other.gguf"
    w = GGUFWriter(str(path), arch="qwen3moe")
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "'qwen3moe' is not supported" in p.stderr, p.stderr
