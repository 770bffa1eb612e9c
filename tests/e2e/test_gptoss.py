"""gpt-oss on the CPU, from GGUF as llama.cpp's converter writes it, against the
float64 reference tests/reference/gptoss_ref.py.

The tiny models have four layers (the even ones sliding with a window of 6
keys, the odd ones global, as gpt-oss alternates them), heads of 32 over a
64-wide stream with GQA 4 over 2, biases on q, k, v and o, a sink logit per
head, 4 experts with biases (2 per token) behind a biased router, the clamped
SwiGLU, and YaRN RoPE scaling. Expert pre-activations are scaled so that the
clamps at 7 bind for a good share of them. Prompts of 16 tokens and 24
generated ones run past the window, so each piece shows in the logits:
controls with the sinks, the window, the clamps, the clamped gate, the
router's bias or the second expert taken out of the reference are far from
the engine. Experts in F32, Q8_0 and MXFP4 (the released checkpoints' format).
A request's tokens and logprobs are the same alone, among others, through
chunked prefill and after a prefix-cache hit; files missing a piece exit 2
naming it; the GPU refuses the model by name.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.quants import quantize

import gptoss_ref
from test_architectures import (PROMPT, add_tokenizer, assert_greedy_matches, assert_request_keeps_its_bits,
                                tokenizer_fields)
from test_logits import ARGMAX_GAP, REL_L2_BOUND, engine_logits

LAYERS, DIM, HEADS, KV_HEADS, HEAD_DIM, WINDOW = 4, 64, 4, 2, 32, 6
EXPERTS, EXPERTS_USED, EXPERT_FFN = 4, 2, 64
A = "gpt-oss."


def write_gguf(path, tok: dict, qtype: GGMLQuantizationType, expert_qtype: GGMLQuantizationType,
               drop: str | None = None, extra: dict | None = None, seed: int = 11) -> None:
    rng = np.random.default_rng(seed)
    vocab = len(tok["tokenizer.ggml.tokens"])
    w = GGUFWriter(str(path), arch="gpt-oss")
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(EXPERT_FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(150000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(EXPERTS_USED)
    w.add_expert_feed_forward_length(EXPERT_FFN)
    metadata = {A + "attention.sliding_window": WINDOW, A + "rope.scaling.type": "yarn",
                A + "rope.scaling.factor": 8.0, A + "rope.scaling.original_context_length": 64, **(extra or {})}
    for key, value in metadata.items():
        if key != drop:
            (w.add_string if isinstance(value, str) else w.add_uint32 if isinstance(value, int) else w.add_float32)(
                key, value)
    add_tokenizer(w, tok)

    def add(name, a, q=GGMLQuantizationType.F32):
        if name == drop:
            return
        a = a.astype(np.float32)
        if q == GGMLQuantizationType.F32:
            w.add_tensor(name, a)
        else:
            w.add_tensor(name, quantize(a, q), raw_dtype=q)

    def matrix(shape, gain=1.0):
        return gain * rng.standard_normal(shape) / np.sqrt(shape[-1])

    def vector(n, spread=0.5, centre=0.0):
        return centre + spread * rng.standard_normal(n)

    add("token_embd.weight", rng.standard_normal((vocab, DIM)))
    for layer in range(LAYERS):
        p = f"blk.{layer}."
        add(p + "attn_norm.weight", vector(DIM, 0.2, 1.0))
        for name, rows in (("attn_q", HEADS * HEAD_DIM), ("attn_k", KV_HEADS * HEAD_DIM),
                           ("attn_v", KV_HEADS * HEAD_DIM)):
            add(p + name + ".weight", matrix((rows, DIM)), qtype)
            add(p + name + ".bias", vector(rows))
        add(p + "attn_output.weight", matrix((DIM, HEADS * HEAD_DIM)), qtype)
        add(p + "attn_output.bias", vector(DIM))
        add(p + "attn_sinks.weight", vector(HEADS, 1.5, 1.0))
        add(p + "post_attention_norm.weight", vector(DIM, 0.2, 1.0))
        add(p + "ffn_gate_inp.weight", matrix((EXPERTS, DIM), 2.0))
        add(p + "ffn_gate_inp.bias", vector(EXPERTS, 1.0))
        # Pre-activations of spread about 6: the clamps at 7 bind often.
        add(p + "ffn_gate_exps.weight", matrix((EXPERTS, EXPERT_FFN, DIM), 5.0), expert_qtype)
        add(p + "ffn_gate_exps.bias", vector((EXPERTS, EXPERT_FFN), 3.0))
        add(p + "ffn_up_exps.weight", matrix((EXPERTS, EXPERT_FFN, DIM), 5.0), expert_qtype)
        add(p + "ffn_up_exps.bias", vector((EXPERTS, EXPERT_FFN), 3.0))
        add(p + "ffn_down_exps.weight", matrix((EXPERTS, DIM, EXPERT_FFN), 0.2), expert_qtype)
        add(p + "ffn_down_exps.bias", vector((EXPERTS, DIM)))
    add("output_norm.weight", vector(DIM, 0.2, 1.0))
    add("output.weight", matrix((vocab, DIM)), qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def tokenizer(model_path):
    return tokenizer_fields(model_path)


F32, Q8_0, MXFP4 = GGMLQuantizationType.F32, GGMLQuantizationType.Q8_0, GGMLQuantizationType.MXFP4
MODELS = {"f32": (F32, F32), "q8_0": (Q8_0, Q8_0), "mxfp4-experts": (Q8_0, MXFP4)}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request, tmp_path_factory, tokenizer):
    path = tmp_path_factory.mktemp("gpt-oss") / f"gpt-oss-{request.param}.gguf"
    write_gguf(path, tokenizer, *MODELS[request.param])
    return request.param, path, gptoss_ref.load(str(path))


def worst_relative_error(got, want):
    return float((np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)).max())


def test_the_clamps_bind(model):
    """The weights are such that the clamped SwiGLU differs from a plain one (the controls rely on it)."""
    _, _, ref = model
    h = ref.w["token_embd.weight"][PROMPT]
    gate = h @ ref.w["blk.0.ffn_gate_exps.weight"][0].T + ref.w["blk.0.ffn_gate_exps.bias"][0]
    up = h @ ref.w["blk.0.ffn_up_exps.weight"][0].T + ref.w["blk.0.ffn_up_exps.bias"][0]
    assert (gate > 7).mean() > 0.05 and (np.abs(up) > 7).mean() > 0.05


def test_logits_match_the_reference_and_each_piece_matters(model, run_exactly, tmp_path):
    _, path, ref = model
    assert ref.cfg.windows == (WINDOW, 0, WINDOW, 0)
    got = engine_logits(run_exactly, path, PROMPT, tmp_path)
    want = ref.logits(PROMPT)
    assert got.shape == want.shape and np.isfinite(got).all()
    assert worst_relative_error(got, want) < REL_L2_BOUND
    top2 = np.partition(want, -2, axis=1)[:, -2:]
    decided = (top2[:, 1] - top2[:, 0]) > ARGMAX_GAP
    assert decided.mean() > 0.9 and (np.argmax(got, axis=1) == np.argmax(want, axis=1))[decided].all()
    no_router_bias = {k: (np.zeros_like(v) if k.endswith("ffn_gate_inp.bias") else v) for k, v in ref.w.items()}
    no_o_bias = {k: (np.zeros_like(v) if k.endswith("attn_output.bias") else v) for k, v in ref.w.items()}
    controls = {"no sinks": (dataclasses.replace(ref.cfg, sinks=False), ref.w),
                "full attention": (dataclasses.replace(ref.cfg, windows=(0,) * LAYERS), ref.w),
                "no clamps": (dataclasses.replace(ref.cfg, limit=np.inf), ref.w),
                "plain swiglu": (dataclasses.replace(ref.cfg, activation="silu"), ref.w),
                "one expert": (dataclasses.replace(ref.cfg, n_experts_used=1), ref.w),
                "no yarn": (dataclasses.replace(ref.cfg, yarn=None), ref.w),
                "no router bias": (ref.cfg, no_router_bias),
                "no output bias": (ref.cfg, no_o_bias)}
    for what, (cfg, weights) in controls.items():
        other = gptoss_ref.GptOssRef(cfg, weights).logits(PROMPT)
        assert worst_relative_error(got, other) > 100 * REL_L2_BOUND, what


def test_greedy_matches_the_reference(model, run_exactly, tmp_path):
    _, path, ref = model
    assert_greedy_matches(run_exactly, path, ref, tmp_path)


def test_a_request_keeps_its_bits_alone_among_others_chunked_and_cached(model, run_exactly, tmp_path):
    _, path, _ = model
    assert_request_keeps_its_bits(run_exactly, path, tmp_path)


def test_the_gpu_refuses_it_by_name(model, exactly_bin):
    _, path, _ = model
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1", "--device", "cuda"],
                       capture_output=True, text=True, timeout=120)
    assert "gpt-oss" in p.stderr and "--device cpu" in p.stderr, p.stderr
    assert p.returncode == 64


@pytest.mark.parametrize("drop", ["blk.1.attn_sinks.weight", "blk.0.attn_output.bias", "blk.2.ffn_gate_inp.bias",
                                  "blk.3.ffn_down_exps.bias", "blk.0.post_attention_norm.weight",
                                  A + "attention.sliding_window"])
def test_a_missing_piece_exits_2_naming_it(tmp_path, exactly_bin, tokenizer, drop):
    path = tmp_path / "missing.gguf"
    write_gguf(path, tokenizer, F32, F32, drop=drop)
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and drop in p.stderr, p.stderr


def test_a_bias_of_the_wrong_shape_exits_2_naming_it(tmp_path, exactly_bin, tokenizer):
    """Each expert's bias row has the expert's width: a transposed table is refused, not read across experts."""
    full = tmp_path / "full.gguf"
    write_gguf(full, tokenizer, F32, F32)
    reader = GGUFReader(str(full))
    path = tmp_path / "transposed.gguf"
    w = GGUFWriter(str(path), arch="gpt-oss")
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        w.add_key_value(field.name, field.contents(), field.types[0],
                        field.types[-1] if field.types[0].name == "ARRAY" else None)
    for t in reader.tensors:
        data = np.array(t.data).reshape([int(n) for n in reversed(t.shape)])
        if t.name == "blk.0.ffn_up_exps.bias":
            data = np.ascontiguousarray(data.T)
        w.add_tensor(t.name, data.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "blk.0.ffn_up_exps.bias" in p.stderr, p.stderr


# ---------------------------------------------------------------- Hugging Face checkpoints (GptOssForCausalLM)

HF_VOCAB = 512
FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def hf_config(mxfp4: bool) -> dict:
    config = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": DIM,
              "intermediate_size": EXPERT_FFN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "num_local_experts": EXPERTS,
              "num_experts_per_tok": EXPERTS_USED, "vocab_size": HF_VOCAB, "max_position_embeddings": 256,
              "rms_norm_eps": 1e-5, "rope_theta": 150000.0, "sliding_window": WINDOW,
              "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(LAYERS)],
              "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
                               "truncate": False, "original_max_position_embeddings": 64},
              "attention_bias": True, "swiglu_limit": 7.0, "tie_word_embeddings": False, "hidden_act": "silu",
              "torch_dtype": "bfloat16"}
    if mxfp4:
        config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]}
    return config


def bf16(a: np.ndarray) -> tuple[bytes, np.ndarray]:
    """bf16 bits (round to nearest even) and the values they hold."""
    bits = a.astype(np.float32).view(np.uint32)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return bits.tobytes(), (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def write_safetensors(path, tensors: dict) -> None:
    """tensors: name -> (dtype, shape, bytes)."""
    header, blobs, at = {}, [], 0
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def write_hf_checkpoint(d, mxfp4: bool, seed: int = 13) -> dict[str, np.ndarray]:
    """A random GptOssForCausalLM checkpoint as transformers stores it; returns the values as the reference's GGUF names."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    tensors, ref = {}, {}

    def add(name, a, gguf_name=None):
        blob, exact = bf16(a)
        tensors[name] = ("BF16", a.shape, blob)
        if gguf_name:
            ref[gguf_name] = exact
        return exact

    def matrix(shape, gain=1.0):
        return gain * rng.standard_normal(shape) / np.sqrt(shape[-1])

    def vector(shape, spread=0.5, centre=0.0):
        return centre + spread * rng.standard_normal(shape)

    def mxfp4_experts(name, out, inner):  # random nibbles and scales; the reference decodes them itself
        blocks = rng.integers(0, 256, (EXPERTS, out, inner // 32, 16), dtype=np.uint8)
        scales = rng.integers(124, 129, (EXPERTS, out, inner // 32), dtype=np.uint8)
        tensors[name + "_blocks"] = ("U8", blocks.shape, blocks.tobytes())
        tensors[name + "_scales"] = ("U8", scales.shape, scales.tobytes())
        values = np.empty((EXPERTS, out, inner // 32, 32))
        values[..., 0::2], values[..., 1::2] = FP4_VALUES[blocks & 15], FP4_VALUES[blocks >> 4]
        return (values * np.exp2(scales.astype(np.float64) - 127)[..., None]).reshape(EXPERTS, out, inner)

    add("model.embed_tokens.weight", rng.standard_normal((HF_VOCAB, DIM)), "token_embd.weight")
    for layer in range(LAYERS):
        p, g = f"model.layers.{layer}.", f"blk.{layer}."
        add(p + "input_layernorm.weight", vector(DIM, 0.2, 1.0), g + "attn_norm.weight")
        add(p + "post_attention_layernorm.weight", vector(DIM, 0.2, 1.0), g + "ffn_norm.weight")
        for proj, gguf_name, rows in (("q_proj", "attn_q", HEADS * HEAD_DIM), ("k_proj", "attn_k", KV_HEADS * HEAD_DIM),
                                      ("v_proj", "attn_v", KV_HEADS * HEAD_DIM)):
            add(p + f"self_attn.{proj}.weight", matrix((rows, DIM)), g + gguf_name + ".weight")
            add(p + f"self_attn.{proj}.bias", vector(rows), g + gguf_name + ".bias")
        add(p + "self_attn.o_proj.weight", matrix((DIM, HEADS * HEAD_DIM)), g + "attn_output.weight")
        add(p + "self_attn.o_proj.bias", vector(DIM), g + "attn_output.bias")
        add(p + "self_attn.sinks", vector(HEADS, 1.5, 1.0), g + "attn_sinks.weight")
        add(p + "mlp.router.weight", matrix((EXPERTS, DIM), 2.0), g + "ffn_gate_inp.weight")
        add(p + "mlp.router.bias", vector(EXPERTS, 1.0), g + "ffn_gate_inp.bias")
        x = p + "mlp.experts."
        if mxfp4:  # [experts, out, in]: gate and up interleaved along out
            gate_up = mxfp4_experts(x + "gate_up_proj", 2 * EXPERT_FFN, DIM)
            down = mxfp4_experts(x + "down_proj", DIM, EXPERT_FFN)
        else:  # [experts, in, out] as transformers' GptOssExperts holds them
            gate_up = add(x + "gate_up_proj", matrix((EXPERTS, DIM, 2 * EXPERT_FFN), 5.0)).transpose(0, 2, 1)
            down = add(x + "down_proj", matrix((EXPERTS, EXPERT_FFN, DIM), 0.2)).transpose(0, 2, 1)
        ref[g + "ffn_gate_exps.weight"], ref[g + "ffn_up_exps.weight"] = gate_up[:, 0::2], gate_up[:, 1::2]
        ref[g + "ffn_down_exps.weight"] = down
        bias = add(x + "gate_up_proj_bias", vector((EXPERTS, 2 * EXPERT_FFN), 3.0))
        ref[g + "ffn_gate_exps.bias"], ref[g + "ffn_up_exps.bias"] = bias[:, 0::2], bias[:, 1::2]
        add(x + "down_proj_bias", vector((EXPERTS, DIM)), g + "ffn_down_exps.bias")
    add("model.norm.weight", vector(DIM, 0.2, 1.0), "output_norm.weight")
    add("lm_head.weight", matrix((HF_VOCAB, DIM)), "output.weight")
    write_safetensors(d / "model.safetensors", tensors)
    (d / "config.json").write_text(json.dumps(hf_config(mxfp4)))
    return ref


def hf_reference(values: dict[str, np.ndarray]) -> gptoss_ref.GptOssRef:
    cfg = gptoss_ref.GptOssConfig(
        n_layers=LAYERS, dim=DIM, ffn_dim=EXPERT_FFN, n_heads=HEADS, n_kv_heads=KV_HEADS, head_dim=HEAD_DIM,
        rope_base=150000.0, rope_dims=HEAD_DIM, norm_eps=1e-5, vocab=HF_VOCAB, rope_half=True, n_experts=EXPERTS,
        n_experts_used=EXPERTS_USED, windows=tuple(WINDOW if i % 2 == 0 else 0 for i in range(LAYERS)),
        yarn={"factor": 8.0, "original_context": 64.0, "beta_fast": 32.0, "beta_slow": 1.0, "attn_factor": 1.0,
              "truncate": False})
    return gptoss_ref.GptOssRef(cfg, values)


HF_PROMPT = [1, 504, 233, 63, 164, 270, 69, 260, 237, 276, 30, 12, 90, 44, 7, 100]


@pytest.mark.parametrize("layout", ["bf16", "mxfp4"])
def test_a_hugging_face_checkpoint_runs_as_the_reference(run_exactly, tmp_path, layout):
    values = write_hf_checkpoint(tmp_path / layout, mxfp4=layout == "mxfp4")
    ref = hf_reference(values)
    got = engine_logits(run_exactly, tmp_path / layout, HF_PROMPT, tmp_path)
    want = ref.logits(HF_PROMPT)
    assert got.shape == want.shape and np.isfinite(got).all()
    assert worst_relative_error(got, want) < REL_L2_BOUND
    # transformers leaves the YaRN ramp's ends unrounded here (truncate: false), llama.cpp rounds them.
    truncated = gptoss_ref.GptOssRef(dataclasses.replace(ref.cfg, yarn={**ref.cfg.yarn, "truncate": True}), values)
    assert worst_relative_error(got, truncated.logits(HF_PROMPT)) > 100 * REL_L2_BOUND
    swapped = dict(values)  # gate and up read the other way round from the interleaved product
    for layer in range(LAYERS):
        g = f"blk.{layer}."
        for kind in ("weight", "bias"):
            swapped[g + f"ffn_gate_exps.{kind}"], swapped[g + f"ffn_up_exps.{kind}"] = \
                values[g + f"ffn_up_exps.{kind}"], values[g + f"ffn_gate_exps.{kind}"]
    assert worst_relative_error(got, gptoss_ref.GptOssRef(ref.cfg, swapped).logits(HF_PROMPT)) > 100 * REL_L2_BOUND


@pytest.mark.parametrize("edit, needle", [
    (lambda c: c.update(quantization_config={"quant_method": "awq"}), "quantization_config"),
    (lambda c: c.update(layer_types=["sliding_attention"] * 3), "layer_types"),
    (lambda c: c.update(swiglu_limit=-1), "swiglu_limit"),
    (lambda c: c.pop("num_local_experts"), "num_local_experts"),
], ids=["other-quantization", "layer-types", "limit", "experts"])
def test_a_hugging_face_config_that_cannot_run_exits_2(run_exactly, tmp_path, exactly_bin, edit, needle):
    write_hf_checkpoint(tmp_path / "ckpt", mxfp4=False)
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    edit(config)
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config))
    p = subprocess.run([str(exactly_bin), "run", "-m", str(tmp_path / "ckpt"), "--prompt-ids", "1,2", "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and needle in p.stderr, p.stderr
