"""Tensor parallelism on the CPU (`--tensor-parallel-size N`, `-tp N`): the
model split over N ranks (threads), each with its share of the heads, KV
heads and MLP columns; their partial attention and MLP outputs summed in rank
order; each rank computing its slice of the vocabulary's logits.

The bound against one rank: a split changes only where the sums of wo and
w_down are cut (N partial fp32 sums over K / N terms, then added), so the
logits stay within the fp32 error of the same products that
tests/e2e/test_logits.py allows against float64 (REL_L2_BOUND relative L2 per
position), and they are checked against the float64 reference directly too.
They are not bit-equal to one rank's (the split really changes the sums).

Tiny random models written here (llama and qwen3, F32 and Q8_0, heads and MLP
columns that divide into 2 and 3 ranks; Gemma 3, Qwen3-MoE and gpt-oss over
2 ranks, each expert's width split), a Hugging Face checkpoint, and the
default model (9 heads over 3 KV heads: 3 ranks). A request's bits are the same alone, among others and
through chunked prefill at a fixed rank count; shapes that do not divide are
refused with exit 2 naming them.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize

import llama_ref
from test_architectures import PROMPT, add_tokenizer, assert_request_keeps_its_bits, run_batch, tokenizer_fields
from test_logits import ARGMAX_GAP, REL_L2_BOUND, engine_logits

LAYERS, DIM, HEADS, KV_HEADS, HEAD_DIM, FFN = 2, 192, 6, 6, 32, 384


def write_model(path, tok: dict, arch: str, qtype: GGMLQuantizationType, seed: int = 21, heads: int = HEADS,
                kv_heads: int = KV_HEADS) -> None:
    rng = np.random.default_rng(seed)
    vocab = len(tok["tokenizer.ggml.tokens"])
    w = GGUFWriter(str(path), arch=arch)
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(FFN)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    add_tokenizer(w, tok)

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
        matrix(p + "attn_q.weight", heads * HEAD_DIM, DIM)
        matrix(p + "attn_k.weight", kv_heads * HEAD_DIM, DIM)
        matrix(p + "attn_v.weight", kv_heads * HEAD_DIM, DIM)
        matrix(p + "attn_output.weight", DIM, heads * HEAD_DIM)
        if arch == "qwen3":
            norm(p + "attn_q_norm.weight", HEAD_DIM)
            norm(p + "attn_k_norm.weight", HEAD_DIM)
        norm(p + "ffn_norm.weight", DIM)
        matrix(p + "ffn_gate.weight", FFN, DIM)
        matrix(p + "ffn_up.weight", FFN, DIM)
        matrix(p + "ffn_down.weight", DIM, FFN)
    norm("output_norm.weight", DIM)
    matrix("output.weight", vocab, DIM)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def tokenizer(model_path):
    return tokenizer_fields(model_path)


MODELS = [("llama", GGMLQuantizationType.F32), ("llama", GGMLQuantizationType.Q8_0), ("qwen3", GGMLQuantizationType.F32)]


@pytest.fixture(scope="module", params=MODELS, ids=[f"{a}-{q.name.lower()}" for a, q in MODELS])
def model(request, tmp_path_factory, tokenizer):
    arch, qtype = request.param
    path = tmp_path_factory.mktemp("tp") / f"{arch}-{qtype.name}.gguf"
    write_model(path, tokenizer, arch, qtype)
    return path, llama_ref.load(str(path))


def relative_errors(got, ref):
    return np.linalg.norm(got - ref, axis=1) / np.linalg.norm(ref, axis=1)


def test_every_split_matches_the_reference_and_one_rank(model, run_exactly, tmp_path):
    path, ref = model
    want = ref.logits(PROMPT)
    decided = llama_ref.top2_gap(want) > ARGMAX_GAP
    by_ranks = {}
    for ranks in (1, 2, 3):
        got = engine_logits(run_exactly, path, PROMPT, tmp_path / str(ranks), "-tp", ranks)
        assert got.shape == want.shape and np.isfinite(got).all()
        assert relative_errors(got, want).max() < REL_L2_BOUND, f"{ranks} ranks"
        assert (np.argmax(got, axis=1) == np.argmax(want, axis=1))[decided].all(), f"{ranks} ranks"
        by_ranks[ranks] = got
    for ranks in (2, 3):
        assert relative_errors(by_ranks[ranks], by_ranks[1]).max() < REL_L2_BOUND
        assert not np.array_equal(by_ranks[ranks], by_ranks[1]), "the split should change where the sums are cut"


def test_a_request_keeps_its_bits_at_a_fixed_rank_count(model_path, run_exactly, tmp_path):
    """The default model over 3 ranks: alone, among others, through chunked prefill, with a prefix-cache hit;
    one rank's logprobs differ (the split's sums are cut elsewhere, within the bound above)."""
    three = assert_request_keeps_its_bits(run_exactly, model_path, tmp_path / "three", "-tp", 3)
    one = assert_request_keeps_its_bits(run_exactly, model_path, tmp_path / "one")
    assert one["logprobs"] != three["logprobs"]


def test_greedy_over_three_ranks_matches_one(model_path, run_exactly, tmp_path):
    body = {"prompt": "The capital of France is", "max_tokens": 24, "temperature": 0}
    one = run_batch(run_exactly, model_path, [body], tmp_path, "one")[0]["text"]
    three = run_batch(run_exactly, model_path, [body], tmp_path, "three", "--tensor-parallel-size", 3)[0]["text"]
    assert three == one


@pytest.mark.parametrize("args, code, needle", [
    (["-tp", "2"], 2, "9 attention heads and 3 KV heads do not divide into 2 ranks"),
    (["-tp", "0"], 64, "tensor-parallel-size"),
    (["-tp", "3", "--device", "cuda"], 64, "--device cpu only"),
], ids=["heads", "zero", "gpu"])
def test_what_cannot_be_split_is_refused(exactly_bin, model_path, args, code, needle):
    p = subprocess.run([str(exactly_bin), "run", "-m", str(model_path), "-p", "x", "-n", "1", *args],
                       capture_output=True, text=True, timeout=120)
    if "cuda" in args and "no CUDA backend" in p.stderr:
        pytest.skip("a build without CUDA refuses --device cuda first")
    assert p.returncode == code and needle in p.stderr, p.stderr


def test_indivisible_mlp_columns_are_named(tmp_path, exactly_bin, tokenizer):
    path = tmp_path / "odd.gguf"
    write_model(path, tokenizer, "llama", GGMLQuantizationType.F32, heads=4, kv_heads=4)  # 4 heads of 32: 2 ranks x 64
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1", "-tp", "4"],
                       capture_output=True, text=True, timeout=60)
    # 4 ranks: 32 columns of wo each (fine), 96 MLP columns each (fine) -- and 3 ranks cannot split 4 heads.
    assert p.returncode == 0, p.stderr
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1", "-tp", "3"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "4 attention heads and 4 KV heads do not divide into 3 ranks" in p.stderr, p.stderr


def test_the_python_package_splits_as_the_command_line_does(model_path, run_exactly, tmp_path):
    from test_python_package import exactly  # the package as its tests import it
    bodies = [{"prompt": f"Name {i} colours.", "max_tokens": 12, "temperature": 0.9, "seed": 40 + i} for i in range(3)]
    cli = run_batch(run_exactly, model_path, bodies, tmp_path, "cli", "-tp", 3)
    llm = exactly.LLM(model=str(model_path), tensor_parallel_size=3, threads=2)
    outs = llm.generate([b["prompt"] for b in bodies],
                        [exactly.SamplingParams(max_tokens=12, temperature=0.9, seed=b["seed"]) for b in bodies])
    assert [o.outputs[0].text for o in outs] == [c["text"] for c in cli]
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        exactly.LLM(model=str(model_path), tensor_parallel_size=0)


def test_a_hugging_face_checkpoint_splits_as_the_reference_computes_it(run_exactly, tmp_path):
    """A Llama checkpoint (bf16 and f16 matrices as stored, 2 heads over 2 KV heads) over 2 ranks."""
    from test_hf_checkpoint import CONFIG, reference, tensors, write_random_checkpoint
    config = {**CONFIG, "num_key_value_heads": 2}
    t = tensors()
    for i in range(config["num_hidden_layers"]):
        for proj in ("k", "v"):
            t[f"model.layers.{i}.self_attn.{proj}_proj.weight"] = ("BF16", (128, 128))
    ref = reference(write_random_checkpoint(tmp_path / "hf", t, config, seed=5), config)
    ids = [1, 5, 9, 30, 2, 17, 4, 4, 11, 0, 23, 8]
    want = ref.logits(ids)
    one = engine_logits(run_exactly, tmp_path / "hf", ids, tmp_path / "one")
    two = engine_logits(run_exactly, tmp_path / "hf", ids, tmp_path / "two", "-tp", 2)
    assert relative_errors(one, want).max() < REL_L2_BOUND and relative_errors(two, want).max() < REL_L2_BOUND
    assert relative_errors(two, one).max() < REL_L2_BOUND and not np.array_equal(two, one)


@pytest.mark.parametrize("name", ["qwen3moe", "gpt-oss"])
def test_experts_split_by_width(tmp_path, run_exactly, tokenizer, name):
    """Each expert's width over 2 ranks, the router whole: Qwen3-MoE (2 of 4 experts) and gpt-oss (biases, sinks,
    clamped SwiGLU, sliding layers) against float64 and one rank."""
    path = tmp_path / f"{name}.gguf"
    if name == "gpt-oss":
        import gptoss_ref
        from test_gptoss import write_gguf as write_gpt_oss
        write_gpt_oss(path, tokenizer, GGMLQuantizationType.F32, GGMLQuantizationType.F32)
        want = gptoss_ref.load(str(path)).logits(PROMPT)
    else:
        from test_architectures import write_model as write_architecture
        write_architecture(path, name, tokenizer, GGMLQuantizationType.F32, expert_ffn=64)
        want = llama_ref.load(str(path)).logits(PROMPT)
    one = engine_logits(run_exactly, path, PROMPT, tmp_path / "one")
    two = engine_logits(run_exactly, path, PROMPT, tmp_path / "two", "-tp", 2)
    assert relative_errors(two, want).max() < REL_L2_BOUND and relative_errors(two, one).max() < REL_L2_BOUND
    assert not np.array_equal(two, one)


def test_experts_too_narrow_to_split_are_named(tmp_path, exactly_bin, tokenizer):
    from test_architectures import write_model as write_architecture
    path = tmp_path / "moe.gguf"
    write_architecture(path, "qwen3moe", tokenizer, GGMLQuantizationType.F32)  # experts of 32: 16 a rank
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1", "-tp", "2"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "w_down (16) must be a multiple of 32" in p.stderr, p.stderr


@pytest.mark.parametrize("variant", ["plain", "softcap"])
def test_gemma3_splits_with_its_post_norms_and_soft_cap(tmp_path, run_exactly, tokenizer, variant):
    """Gemma 3's post-norms take the whole block output (summed before them); the final soft cap applies to the
    gathered logits. Tiny Gemma 3 (4 heads over 2 KV heads, 5 sliding layers and a global one) over 2 ranks."""
    import gemma3_ref
    from test_gemma3 import VARIANTS, write_gguf
    path = tmp_path / "gemma3.gguf"
    write_gguf(path, tokenizer, GGMLQuantizationType.F32, VARIANTS[variant])
    want = gemma3_ref.load(str(path)).logits(PROMPT)
    one = engine_logits(run_exactly, path, PROMPT, tmp_path / "one")
    two = engine_logits(run_exactly, path, PROMPT, tmp_path / "two", "-tp", 2)
    assert relative_errors(two, want).max() < REL_L2_BOUND and relative_errors(two, one).max() < REL_L2_BOUND
    assert not np.array_equal(two, one)
