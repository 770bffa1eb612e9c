"""Architectures beyond Llama, from GGUF on the CPU, against the float64 reference.

The test writes tiny models with random weights (two layers, heads of 32 over
a 64-wide stream, GQA 4 over 2) and the default model's tokenizer, laid out
as llama.cpp's converter lays them out:
  * qwen3: per-head attn_q_norm / attn_k_norm, RoPE pairs half a head apart,
    q wider than the stream, tied embeddings;
  * qwen3moe: the same with 4 experts (ffn_{gate,up,down}_exps, router
    ffn_gate_inp), 2 per token;
  * mixtral: architecture "llama" with llama.expert_count, adjacent RoPE pairs;
  * llama-rope-factors: a dense llama with Llama 3.1's RoPE frequency factors
    (rope_freqs.weight).
The engine's logits and greedy tokens are compared with
tests/reference/llama_ref.py under the bounds of test_logits.py; controls
show that the reference with a piece changed (no q/k norms, the other RoPE
pairing, one expert per token instead of two) is far from the engine, so the
comparison can tell. A request's tokens and logprobs are the same alone and
among others (routing is per token).
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
EXPERTS, EXPERTS_USED, EXPERT_FFN = 4, 2, 32
ARCHS = {  # name: (general.architecture, experts, head_dim from key_length)
    "qwen3": ("qwen3", False, True),
    "qwen3moe": ("qwen3moe", True, True),
    "mixtral": ("llama", True, False),
    "llama-rope-factors": ("llama", False, False),  # Llama 3.1's rope_freqs.weight
    "qwen3-yarn": ("qwen3", False, True),  # YaRN RoPE scaling
    "smollm3": ("smollm3", False, False),  # the llama body, RoPE on all but every fourth layer
    "phi3": ("phi3", False, False),  # fused attn_qkv and ffn_up (gate | up), RoPE pairs half apart
}
# A small original context, so that the ramp falls inside the 16 pairs and
# the prompt's positions turn the interpolated pairs far from the originals.
YARN = {"qwen3.rope.scaling.type": "yarn", "qwen3.rope.scaling.factor": 8.0,
        "qwen3.rope.scaling.original_context_length": 64}
PROMPT = [1, 504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30, 12, 9001, 44, 7, 1000]


def tokenizer_fields(model_path) -> dict:
    fields = GGUFReader(str(model_path)).fields
    return {key: fields[key].contents() for key in
            ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
             "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id")}


def add_tokenizer(w: GGUFWriter, tok: dict) -> None:
    """The default model's tokenizer (tokenizer_fields) into a GGUF being written."""
    w.add_tokenizer_model(tok["tokenizer.ggml.model"])
    w.add_tokenizer_pre(tok["tokenizer.ggml.pre"])
    w.add_token_list(tok["tokenizer.ggml.tokens"])
    w.add_token_types(tok["tokenizer.ggml.token_type"])
    w.add_token_merges(tok["tokenizer.ggml.merges"])
    w.add_bos_token_id(int(tok["tokenizer.ggml.bos_token_id"]))
    w.add_eos_token_id(int(tok["tokenizer.ggml.eos_token_id"]))


def write_model(path, name: str, tok: dict, qtype: GGMLQuantizationType, seed: int = 3, extra=None,
                expert_ffn: int = EXPERT_FFN, head_dim: int = HEAD_DIM) -> None:
    arch, moe, key_length = ARCHS[name]
    rng = np.random.default_rng(seed)
    vocab = len(tok["tokenizer.ggml.tokens"])
    w = GGUFWriter(str(path), arch=arch)
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    if key_length:  # heads of 32: q is wider than the stream
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    heads = HEAD_DIM if key_length else DIM // HEADS
    if moe:
        w.add_expert_count(EXPERTS)
        w.add_expert_used_count(EXPERTS_USED)
        if arch == "qwen3moe":
            w.add_expert_feed_forward_length(expert_ffn)
            w.add_feed_forward_length(FFN)  # a dense width the experts do not use
        else:
            w.add_feed_forward_length(EXPERT_FFN)  # Mixtral's files give the experts' width here
    else:
        w.add_feed_forward_length(FFN)
    w.add_rope_freq_base(1e6)
    for key, value in {**(YARN if name == "qwen3-yarn" else {}), **(extra or {})}.items():
        (w.add_string if isinstance(value, str) else w.add_uint32 if isinstance(value, int) else w.add_float32)(
            key, value)
    w.add_layer_norm_rms_eps(1e-6)
    add_tokenizer(w, tok)

    def matrix(name, rows, cols, n=None):
        shape = (rows, cols) if n is None else (n, rows, cols)
        a = (rng.standard_normal(shape) / np.sqrt(cols)).astype(np.float32)
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
        if arch == "phi3":
            matrix(p + "attn_qkv.weight", (HEADS + 2 * KV_HEADS) * heads, DIM)
        else:
            matrix(p + "attn_q.weight", HEADS * heads, DIM)
            matrix(p + "attn_k.weight", KV_HEADS * heads, DIM)
            matrix(p + "attn_v.weight", KV_HEADS * heads, DIM)
        matrix(p + "attn_output.weight", DIM, HEADS * heads)
        if arch != "llama":
            norm(p + "attn_q_norm.weight", heads)
            norm(p + "attn_k_norm.weight", heads)
        norm(p + "ffn_norm.weight", DIM)
        if moe:
            w.add_tensor(p + "ffn_gate_inp.weight", rng.standard_normal((EXPERTS, DIM)).astype(np.float32))
            matrix(p + "ffn_gate_exps.weight", expert_ffn, DIM, EXPERTS)
            matrix(p + "ffn_up_exps.weight", expert_ffn, DIM, EXPERTS)
            matrix(p + "ffn_down_exps.weight", DIM, expert_ffn, EXPERTS)
        elif arch == "phi3":
            matrix(p + "ffn_up.weight", 2 * FFN, DIM)
            matrix(p + "ffn_down.weight", DIM, FFN)
        else:
            matrix(p + "ffn_gate.weight", FFN, DIM)
            matrix(p + "ffn_up.weight", FFN, DIM)
            matrix(p + "ffn_down.weight", DIM, FFN)
    norm("output_norm.weight", DIM)
    if name == "llama-rope-factors":  # factors of 1 to 8 over the pairs, as Llama 3.1's
        w.add_tensor("rope_freqs.weight", np.linspace(1.0, 8.0, heads // 2).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def tokenizer(model_path):
    return tokenizer_fields(model_path)


MODELS = [(name, qtype) for name in ARCHS for qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.Q8_0)]


@pytest.fixture(scope="module", params=MODELS, ids=[f"{n}-{q.name.lower()}" for n, q in MODELS])
def model(request, tmp_path_factory, tokenizer):
    name, qtype = request.param
    path = tmp_path_factory.mktemp(name) / f"{name}-{qtype.name}.gguf"
    write_model(path, name, tokenizer, qtype)
    return name, path, llama_ref.load(str(path))


def relative_errors(got, ref):
    return np.linalg.norm(got - ref, axis=1) / np.linalg.norm(ref, axis=1)


def test_logits_match_the_reference(model, run_exactly, tmp_path):
    name, path, ref = model
    arch, moe, key_length = ARCHS[name]
    assert ref.cfg.qk_norm == (arch in ("qwen3", "qwen3moe"))
    assert ref.cfg.rope_half == (arch in ("qwen3", "qwen3moe", "phi3"))
    assert bool(ref.cfg.n_experts) == moe
    got = engine_logits(run_exactly, path, PROMPT, tmp_path)
    want = ref.logits(PROMPT)
    assert got.shape == want.shape and np.isfinite(got).all()
    rel = relative_errors(got, want)
    assert rel.max() < REL_L2_BOUND, f"position {int(rel.argmax())}: relative L2 error {rel.max():.3e}"
    decided = llama_ref.top2_gap(want) > ARGMAX_GAP
    assert decided.mean() > 0.9
    assert (np.argmax(got, axis=1) == np.argmax(want, axis=1))[decided].all()


@pytest.mark.parametrize("wrong", [{"qk_norm": "flip"}, {"rope_half": "flip"}, {"n_experts_used": 1},
                                   {"rope_factors": None}, {"yarn": None}, {"yarn": "no magnitude"},
                                   {"yarn": "ramp"}],
                         ids=["qk-norm", "rope-pairs", "one-expert", "no-rope-factors", "no-yarn", "yarn-magnitude",
                              "yarn-ramp"])
def test_the_comparison_tells_a_wrong_model(model, run_exactly, tmp_path, wrong):
    name, path, ref = model
    if "n_experts_used" in wrong and not ref.cfg.n_experts:
        pytest.skip("a dense model")
    if "qk_norm" in wrong and ref.cfg.qk_norm is False:
        pytest.skip("no q/k norm weights to use")
    if "yarn" in wrong and ref.cfg.yarn is None:
        pytest.skip("no YaRN scaling")
    if wrong.get("yarn") == "no magnitude":
        wrong = {"yarn": {**ref.cfg.yarn, "attn_factor": 1.0 / (0.1 * np.log(ref.cfg.yarn["factor"]) + 1.0)}}
    if wrong.get("yarn") == "ramp":  # the ramp's upper end one pair lower
        wrong = {"yarn": {**ref.cfg.yarn, "beta_slow": 2.0}}
    if "rope_factors" in wrong:
        if "rope_freqs.weight" not in ref.w:
            pytest.skip("no RoPE factors")
        other = llama_ref.LlamaRef(ref.cfg, {k: v for k, v in ref.w.items() if k != "rope_freqs.weight"})
    else:
        wrong = {k: (not getattr(ref.cfg, k)) if v == "flip" else v for k, v in wrong.items()}
        other = llama_ref.LlamaRef(dataclasses.replace(ref.cfg, **wrong), ref.w)
    got = engine_logits(run_exactly, path, PROMPT, tmp_path)
    assert relative_errors(got, other.logits(PROMPT)).max() > 100 * REL_L2_BOUND


def test_greedy_matches_the_reference(model, run_exactly, tmp_path):
    _, path, ref = model
    assert_greedy_matches(run_exactly, path, ref, tmp_path)


def assert_greedy_matches(run_exactly, path, ref, tmp_path):
    """24 greedy tokens from the engine equal the reference's while its choice is decided, for 16 at least."""
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


def run_batch(run_exactly, model_path, bodies: list[dict], tmp_path, tag: str, *options) -> list[dict]:
    """`exactly batch` over the bodies (with `options`): each result's first choice."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    requests_file, results_file = tmp_path / f"{tag}.jsonl", tmp_path / f"{tag}-out.jsonl"
    requests_file.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    run_exactly(["batch", "-m", model_path, "-i", requests_file, "-o", results_file, *options])
    return [json.loads(line)["choices"][0] for line in results_file.read_text().splitlines()]


def assert_request_keeps_its_bits(run_exactly, model_path, tmp_path, *options) -> dict:
    """A sampled request's text and logprobs are the same alone, among five others, through chunked
    prefill and after a prefix-cache hit (under `options`); returns its choice."""
    mine = {"prompt": PROMPT * 2, "max_tokens": 12, "temperature": 0.9, "seed": 5, "logprobs": 2, "ignore_eos": True}
    others = [{"prompt": PROMPT[i:] + PROMPT[:i], "max_tokens": 9, "temperature": 0.7, "seed": i} for i in range(1, 6)]
    run = lambda bodies, tag, *extra: run_batch(run_exactly, model_path, bodies, tmp_path, tag, *options, *extra)  # noqa: E731
    alone = run([mine], "alone")[0]
    among = run(others[:3] + [mine] + others[3:], "among")[3]
    chunked = run([mine], "chunked", "--max-num-batched-tokens", 3)[0]
    cached = run([{**mine, "max_tokens": 1}, mine], "cached", "--max-num-seqs", 1)[1]  # the second hits the prefix cache
    assert len(alone["logprobs"]["tokens"]) == 12
    for other in (among, chunked, cached):
        assert other["text"] == alone["text"] and other["logprobs"] == alone["logprobs"]
    return alone


def test_smollm3_rotates_nothing_in_every_fourth_layer(run_exactly, tmp_path, tokenizer, monkeypatch):
    """SmolLM3 from GGUF, four layers: the fourth applies no RoPE (as llama.cpp reads the architecture); the
    control rotates every layer."""
    monkeypatch.setattr(f"{__name__}.LAYERS", 4)
    path = tmp_path / "smollm3.gguf"
    write_model(path, "smollm3", tokenizer, GGMLQuantizationType.F32)
    ref = llama_ref.load(str(path))
    assert ref.cfg.nope_layers == (3,)
    got = engine_logits(run_exactly, path, PROMPT, tmp_path)
    rotated = llama_ref.LlamaRef(dataclasses.replace(ref.cfg, nope_layers=()), ref.w)
    assert relative_errors(got, ref.logits(PROMPT)).max() < REL_L2_BOUND
    assert relative_errors(got, rotated.logits(PROMPT)).max() > 100 * REL_L2_BOUND


def test_a_request_is_the_same_alone_and_among_others(model, run_exactly, tmp_path):
    _, path, _ = model
    assert_request_keeps_its_bits(run_exactly, path, tmp_path)


def test_the_gpu_refuses_it_by_name(model, exactly_bin):
    name, path, _ = model
    if name in ("qwen3", "llama-rope-factors", "qwen3-yarn", "smollm3", "phi3"):
        pytest.skip("runs on the GPU (tests/cuda/check_hf.py, tests/cuda/check_gguf_experts.py)")
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1", "--device", "cuda"],
                       capture_output=True, text=True, timeout=120)
    if name in ("mixtral", "qwen3moe"):  # the GPU runs experts of widths in multiples of 64; these are 32 wide
        assert "experts of width 32" in p.stderr and "multiples of 64" in p.stderr, p.stderr
    else:
        assert ARCHS[name][0] in p.stderr and "--device cpu" in p.stderr, p.stderr
    assert p.returncode == 64


@pytest.mark.parametrize("key, value", [("llama.rope.scaling.type", "longrope"), ("llama.rope.scaling.factor", 4.0)])
def test_rope_scaling_is_refused_naming_the_key(tmp_path, exactly_bin, tokenizer, key, value):
    path = tmp_path / "scaled.gguf"
    write_model(path, "mixtral", tokenizer, GGMLQuantizationType.F32, extra={key: value})
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and key in p.stderr and ("not supported" in p.stderr or "without" in p.stderr), p.stderr


@pytest.mark.parametrize("extra, needle", [
    ({"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 4.0}, "llama.rope.scaling.original_context_length"),
    ({"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 4.0, "llama.rope.scaling.original_context_length": 64,
      "llama.rope.scaling.yarn_log_multiplier": 0.1}, "llama.rope.scaling.yarn_log_multiplier"),
    ({"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": -2.0,
      "llama.rope.scaling.original_context_length": 64}, "llama.rope.scaling.factor"),
    ({"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 4.0, "llama.rope.scaling.original_context_length": 64,
      "llama.rope.scaling.yarn_attn_factor": 0.9}, "llama.rope.scaling.yarn_attn_factor"),
], ids=["no-original-context", "log-multiplier", "negative-factor", "attn-factor"])
def test_yarn_settings_not_computed_exit_2_naming_the_key(tmp_path, exactly_bin, tokenizer, extra, needle):
    path = tmp_path / "yarn.gguf"
    write_model(path, "mixtral", tokenizer, GGMLQuantizationType.F32, extra=extra)
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and needle in p.stderr, p.stderr


@pytest.mark.parametrize("name, kwargs, needle", [
    ("qwen3moe", {"expert_ffn": 40}, "ffn_down_exps.weight' has 40 columns"),
    ("qwen3", {"head_dim": 2048}, "rope.dimension_count 2048"),
])
def test_shapes_the_kernels_cannot_run_exit_2(tmp_path, exactly_bin, tokenizer, name, kwargs, needle):
    path = tmp_path / "odd.gguf"
    write_model(path, name, tokenizer, GGMLQuantizationType.F32, **kwargs)
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and needle in p.stderr, p.stderr


def test_an_unknown_architecture_exits_2_naming_it(tmp_path, exactly_bin, tokenizer):
    path = tmp_path / "other.gguf"
    w = GGUFWriter(str(path), arch="gemma2")
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "'gemma2' is not supported" in p.stderr, p.stderr
