"""Hugging Face checkpoints (a directory with config.json and safetensors) from
the command line on the CPU: tiny random Llama and Qwen2 checkpoints (BF16,
F16 and F32 tensors as stored, Qwen2's q/k/v biases) give the logits of the
float64 reference built from the same values (RoPE pairs half a head apart,
as Hugging Face lays q and k out), and a checkpoint that does not match its
config is rejected, naming the tensor and its file. The GPU runs them in
tests/cuda/check_hf.py.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import llama_ref
from test_logits import REL_L2_BOUND

BAD_INPUT = 2   # ExitCode::kBadInput

CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 128, "intermediate_size": 256,
          "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-5,
          "max_position_embeddings": 64, "vocab_size": 32, "tie_word_embeddings": True, "hidden_act": "silu"}


def tensors() -> dict[str, tuple[str, tuple[int, ...]]]:
    d, f, q, kv = 128, 256, 128, 64
    t = {"model.embed_tokens.weight": ("BF16", (32, d)), "model.norm.weight": ("F32", (d,))}
    for i in range(CONFIG["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t.update({p + "input_layernorm.weight": ("F32", (d,)), p + "post_attention_layernorm.weight": ("F32", (d,)),
                  p + "self_attn.q_proj.weight": ("BF16", (q, d)), p + "self_attn.k_proj.weight": ("BF16", (kv, d)),
                  p + "self_attn.v_proj.weight": ("BF16", (kv, d)), p + "self_attn.o_proj.weight": ("BF16", (d, q)),
                  p + "mlp.gate_proj.weight": ("F16", (f, d)), p + "mlp.up_proj.weight": ("F16", (f, d)),
                  p + "mlp.down_proj.weight": ("F16", (d, f))})
    return t


def write_checkpoint(d: Path, t: dict[str, tuple[str, tuple[int, ...]]]) -> Path:
    """config.json and model.safetensors (zeros) in d, written from the format's definition."""
    d.mkdir(parents=True, exist_ok=True)
    size = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4}
    header, at = {}, 0
    for name, (dtype, shape) in t.items():
        n = int(np.prod(shape)) * size[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + n]}
        at += n
    text = json.dumps(header).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + bytes(at))
    (d / "config.json").write_text(json.dumps(CONFIG))
    return d


def run_on_cpu(run_exactly, model: Path, tmp_path: Path):
    return run_exactly(["logits", "-m", model, "--tokens", "1,2", "-o", tmp_path / "out.bin"], check=False)


def bf16_round(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 (nearest even), as uint16 bits."""
    bits = a.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def write_random_checkpoint(d: Path, t: dict, config: dict, seed: int) -> dict[str, np.ndarray]:
    """config.json and model.safetensors with random values; returns each tensor's values in float64."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    header, blobs, values, at = {}, [], {}, 0
    for name, (dtype, shape) in t.items():
        scale = 1.0 if "norm" in name else 1.0 / np.sqrt(shape[-1])
        a = (rng.standard_normal(shape) * scale + (1.0 if "norm" in name else 0.0)).astype(np.float32)
        if dtype == "BF16":
            bits = bf16_round(a)
            blob, exact = bits.tobytes(), (bits.astype(np.uint32) << 16).view(np.float32)
        elif dtype == "F16":
            blob, exact = a.astype(np.float16).tobytes(), a.astype(np.float16)
        else:
            blob, exact = a.tobytes(), a
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        values[name] = exact.astype(np.float64)
        at += len(blob)
    text = json.dumps(header).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    (d / "config.json").write_text(json.dumps(config))
    return values


GGUF_NAMES = {"self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
              "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
              "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


EXPERT_NAMES = {"MixtralForCausalLM": ("block_sparse_moe", "w1", "w3", "w2"),
                "Qwen3MoeForCausalLM": ("mlp", "gate_proj", "up_proj", "down_proj")}


def add_experts(t: dict, config: dict, n_experts: int, ffn: int) -> None:
    """A mixture of experts in place of each layer's MLP, named as the architecture names them."""
    block, gate, up, down = EXPERT_NAMES[config["architectures"][0]]
    d = config["hidden_size"]
    for i in range(config["num_hidden_layers"]):
        for proj in ("gate_proj", "up_proj", "down_proj"):
            t.pop(f"model.layers.{i}.mlp.{proj}.weight")
        t[f"model.layers.{i}.{block}.gate.weight"] = ("F32", (n_experts, d))
        for e in range(n_experts):
            x = f"model.layers.{i}.{block}.experts.{e}."
            t.update({x + gate + ".weight": ("BF16", (ffn, d)), x + up + ".weight": ("BF16", (ffn, d)),
                      x + down + ".weight": ("F16", (d, ffn))})


def reference(values: dict[str, np.ndarray], config: dict) -> llama_ref.LlamaRef:
    w = {"token_embd.weight": values["model.embed_tokens.weight"], "output_norm.weight": values["model.norm.weight"]}
    arch = config["architectures"][0]
    n_experts = config.get("num_local_experts", config.get("num_experts", 0))
    if arch in EXPERT_NAMES:
        block, gate, up, down = EXPERT_NAMES[arch]
        for i in range(config["num_hidden_layers"]):
            x = f"model.layers.{i}.{block}."
            w[f"blk.{i}.ffn_gate_inp.weight"] = values[x + "gate.weight"]
            for name, part in (("ffn_gate_exps", gate), ("ffn_up_exps", up), ("ffn_down_exps", down)):
                w[f"blk.{i}.{name}.weight"] = np.stack([values[f"{x}experts.{e}.{part}.weight"]
                                                       for e in range(n_experts)])
    for name, v in values.items():
        for hf, gguf_name in GGUF_NAMES.items():
            prefix = name.split(hf)[0]
            if name.startswith("model.layers.") and hf + "." in name:
                layer = prefix.split(".")[2]
                w[f"blk.{layer}.{gguf_name}.{name.rsplit('.', 1)[1]}"] = v
    d, heads = config["hidden_size"], config["num_attention_heads"]
    cfg = llama_ref.LlamaConfig(n_layers=config["num_hidden_layers"], dim=d, ffn_dim=config["intermediate_size"],
                                n_heads=heads, n_kv_heads=config["num_key_value_heads"], head_dim=d // heads,
                                rope_base=config.get("rope_theta", 10000.0), rope_dims=d // heads,
                                norm_eps=config["rms_norm_eps"], vocab=config["vocab_size"], rope_half=True,
                                qk_norm=arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"),
                                n_experts=n_experts, n_experts_used=config.get("num_experts_per_tok", 0),
                                yarn=yarn_of(config))
    return llama_ref.LlamaRef(cfg, w)


def yarn_of(config: dict) -> dict | None:
    """The reference's YaRN settings from a config's rope_scaling (transformers' defaults, no mscale keys)."""
    s = config.get("rope_scaling") or {}
    if s.get("rope_type") != "yarn":
        return None
    return dict(factor=s["factor"], original_context=s.get("original_max_position_embeddings",
                                                           config["max_position_embeddings"]),
                beta_fast=s.get("beta_fast", 32.0), beta_slow=s.get("beta_slow", 1.0), attn_factor=1.0)


def test_yarn_from_a_checkpoint_runs_as_the_reference_does(run_exactly, tmp_path):
    """Qwen3 with YaRN over a small original context: the ramp inside the 32 pairs, the magnitude applied."""
    t, config = tensors(), {**CONFIG, "architectures": ["Qwen3ForCausalLM"], "head_dim": 64,
                            "use_sliding_window": False, "sliding_window": None, "attention_bias": False,
                            "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64}}
    for i in range(config["num_hidden_layers"]):
        for proj in ("q", "k"):
            t[f"model.layers.{i}.self_attn.{proj}_norm.weight"] = ("BF16", (64,))
    model = tmp_path / "hf"
    ref = reference(write_random_checkpoint(model, t, config, seed=12), config)
    unscaled = llama_ref.LlamaRef(llama_ref.dataclasses.replace(ref.cfg, yarn=None), ref.w)
    assert_matches_reference_not_control(run_exactly, model, tmp_path, ref, unscaled)


def assert_matches_reference_not_control(run_exactly, model: Path, tmp_path: Path, ref, control) -> None:
    """The engine's logits within the bound of the reference, and 100 bounds away from the control (the
    same model without the feature under test: it matters at these positions)."""
    ids = [1, 5, 9, 30, 2, 17, 4, 4, 11, 0, 23, 8, 3, 7, 19, 6]
    out = tmp_path / "logits.f32"
    run_exactly(["logits", "-m", model, "--tokens", ",".join(map(str, ids)), "--out", out])
    got = np.fromfile(out, dtype="<f4").reshape(len(ids), -1)
    want = ref.logits(ids)
    scale = np.linalg.norm(want, axis=1)
    assert (np.linalg.norm(got - want, axis=1) / scale).max() < REL_L2_BOUND
    assert (np.linalg.norm(got - control.logits(ids), axis=1) / scale).max() > 100 * REL_L2_BOUND


def llama3_divisors(d: int, base: float, factor: float, low: float, high: float, original: int) -> np.ndarray:
    """Llama 3.1's frequency divisors as its reference code defines them: pairs whose wavelength exceeds
    original / low are divided by factor, those under original / high kept, a linear blend of the
    frequency in between."""
    wavelength = 2 * np.pi * base ** (2.0 * np.arange(d // 2) / d)
    smooth = (original / wavelength - low) / (high - low)
    blended = 1.0 / ((1 - smooth) / factor + smooth)
    return np.where(wavelength < original / high, 1.0, np.where(wavelength > original / low, factor, blended))


def test_llama3_rope_scaling_from_a_checkpoint_runs_as_the_reference_does(run_exactly, tmp_path):
    """Llama 3.1's "llama3" scaling over a small original context: every regime (kept, blended, divided) met."""
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 32}
    config = {**CONFIG, "rope_scaling": scaling}
    model = tmp_path / "hf"
    ref = reference(write_random_checkpoint(model, tensors(), config, seed=13), config)
    divisors = llama3_divisors(64, 10000.0, 8.0, 1.0, 4.0, 32)
    assert (divisors == 1).any() and (divisors == 8).any() and ((divisors > 1) & (divisors < 8)).any()
    unscaled = llama_ref.LlamaRef(ref.cfg, dict(ref.w))
    ref.w["rope_freqs.weight"] = divisors
    assert_matches_reference_not_control(run_exactly, model, tmp_path, ref, unscaled)


@pytest.mark.parametrize("arch", ["LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MixtralForCausalLM",
                                  "Qwen3MoeForCausalLM", "Qwen3MoeForCausalLM:num_local_experts"])
def test_the_cpu_runs_a_checkpoint_as_the_reference_does(run_exactly, tmp_path, arch):
    # ":num_local_experts": the expert count under the name transformers 5 writes.
    arch, _, experts_key = arch.partition(":")
    t, config = tensors(), {**CONFIG, "architectures": [arch]}
    if arch == "MixtralForCausalLM":  # 4 experts of 64, 2 a token; the experts' width is intermediate_size
        config.update({"num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 64})
        add_experts(t, config, 4, 64)
    if arch == "Qwen3MoeForCausalLM":
        config.update({experts_key or "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                       "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": []})
        add_experts(t, config, 4, 64)
    if arch.startswith("Qwen3"):  # per-head q/k norms; heads of 64 given explicitly, no sliding window
        config.update({"head_dim": 64, "use_sliding_window": False, "sliding_window": None, "attention_bias": False})
        for i in range(config["num_hidden_layers"]):
            for proj in ("q", "k"):
                t[f"model.layers.{i}.self_attn.{proj}_norm.weight"] = ("BF16", (64,))
    if arch == "Qwen2ForCausalLM":  # q/k/v biases, hard-wired in Qwen2
        for i in range(config["num_hidden_layers"]):
            for proj, width in (("q", 128), ("k", 64), ("v", 64)):
                t[f"model.layers.{i}.self_attn.{proj}_proj.bias"] = ("BF16", (width,))
    model = tmp_path / "hf"
    ref = reference(write_random_checkpoint(model, t, config, seed=11), config)
    ids = [1, 5, 9, 30, 2, 17, 4, 4, 11, 0, 23, 8]
    out = tmp_path / "logits.f32"
    run_exactly(["logits", "-m", model, "--tokens", ",".join(map(str, ids)), "--out", out])
    got = np.fromfile(out, dtype="<f4").reshape(len(ids), -1)
    want = ref.logits(ids)
    rel = np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)
    assert rel.max() < REL_L2_BOUND, rel
    # Controls: the adjacent RoPE pairing, or the biases left out, are far from the engine.
    other = llama_ref.LlamaRef(llama_ref.dataclasses.replace(ref.cfg, rope_half=False), ref.w)
    assert (np.linalg.norm(got - other.logits(ids), axis=1) / np.linalg.norm(want, axis=1)).max() > 100 * REL_L2_BOUND
    if arch in EXPERT_NAMES:
        one = llama_ref.LlamaRef(llama_ref.dataclasses.replace(ref.cfg, n_experts_used=1), ref.w)
        assert (np.linalg.norm(got - one.logits(ids), axis=1) / np.linalg.norm(want, axis=1)).max() > \
            100 * REL_L2_BOUND
    if arch.startswith("Qwen3"):
        unnormed = llama_ref.LlamaRef(llama_ref.dataclasses.replace(ref.cfg, qk_norm=False), ref.w)
        assert (np.linalg.norm(got - unnormed.logits(ids), axis=1) / np.linalg.norm(want, axis=1)).max() > \
            100 * REL_L2_BOUND
    if arch == "Qwen2ForCausalLM":
        unbiased = llama_ref.LlamaRef(ref.cfg, {k: v for k, v in ref.w.items() if not k.endswith(".bias")})
        assert (np.linalg.norm(got - unbiased.logits(ids), axis=1) / np.linalg.norm(want, axis=1)).max() > \
            100 * REL_L2_BOUND


@pytest.mark.parametrize("key, value, needle", [
    ("norm_topk_prob", False, "norm_topk_prob"),
    ("decoder_sparse_step", 2, "decoder_sparse_step"),
    ("mlp_only_layers", [0], "mlp_only_layers"),
])
def test_qwen3_moe_options_that_change_the_model_are_refused(run_exactly, tmp_path, key, value, needle):
    t, config = tensors(), {**CONFIG, "architectures": ["Qwen3MoeForCausalLM"], "num_experts": 4,
                            "num_experts_per_tok": 2, "moe_intermediate_size": 64, "norm_topk_prob": True,
                            "head_dim": 64}
    add_experts(t, config, 4, 64)
    config[key] = value
    model = tmp_path / "hf"
    write_random_checkpoint(model, t, config, seed=3)
    p = run_on_cpu(run_exactly, model, tmp_path)
    assert p.returncode == BAD_INPUT and needle in p.stderr, p.stderr


def test_info_describes_a_checkpoint(run_exactly, tmp_path):
    model = write_checkpoint(tmp_path / "hf", tensors())
    p = run_exactly(["info", "-m", model])
    assert "Hugging Face checkpoint" in p.stdout and "layers 2, dim 128" in p.stdout, p.stdout
    p = run_exactly(["info", "-m", model, "--tensors"], check=False)
    assert p.returncode == 64 and "GGUF" in p.stderr, p.stderr


def test_template_variables_without_a_template_are_refused(tmp_path):
    from exactly import LLM
    llm = LLM(model=str(write_checkpoint(tmp_path / "hf", tensors())), kv_cache_memory="64MiB")
    messages = [{"role": "user", "content": "x"}]
    assert llm.tokenizer.apply_chat_template(messages).startswith("<|im_start|>user")  # ChatML, the fallback
    with pytest.raises(ValueError, match="chat_template_kwargs"):
        llm.tokenizer.apply_chat_template(messages, enable_thinking=False)


def phi3_tensors() -> dict[str, tuple[str, tuple[int, ...]]]:
    """tensors() with each layer's q/k/v and gate/up fused as Phi-3 stores them."""
    t = {}
    for name, spec in tensors().items():
        if name.endswith("self_attn.q_proj.weight"):
            t[name.replace("q_proj", "qkv_proj")] = ("BF16", (128 + 2 * 64, 128))
        elif name.endswith("mlp.gate_proj.weight"):
            t[name.replace("gate_proj", "gate_up_proj")] = ("F16", (2 * 256, 128))
        elif not name.endswith(("self_attn.k_proj.weight", "self_attn.v_proj.weight", "mlp.up_proj.weight")):
            t[name] = spec
    return t


def unfused(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Phi-3's fused tensors split back into the separate projections, rows in order."""
    out = {}
    for name, v in values.items():
        if "qkv_proj" in name:
            for part, rows in (("q_proj", v[:128]), ("k_proj", v[128:192]), ("v_proj", v[192:])):
                out[name.replace("qkv_proj", part)] = rows
        elif "gate_up_proj" in name:
            out[name.replace("gate_up_proj", "gate_proj")], out[name.replace("gate_up_proj", "up_proj")] = v[:256], v[256:]
        else:
            out[name] = v
    return out


@pytest.mark.parametrize("where", ["top level", "rope_parameters"])
def test_phi3_fused_projections_and_partial_rotary(run_exactly, tmp_path, where):
    """Phi-3: q/k/v in one qkv_proj and gate/up in one gate_up_proj (rows in that order), and RoPE on the first
    int(64 x 0.75) = 48 dims of each head, pairs 24 apart (partial_rotary_factor at the config's top level, or
    inside rope_parameters as transformers 5 writes it). The control rotates whole heads."""
    factor = ({"partial_rotary_factor": 0.75} if where == "top level" else
              {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.75}})
    config = {**CONFIG, "architectures": ["Phi3ForCausalLM"], **factor}
    model = tmp_path / "hf"
    full = reference(unfused(write_random_checkpoint(model, phi3_tensors(), config, seed=16)), config)
    partial = llama_ref.LlamaRef(llama_ref.dataclasses.replace(full.cfg, rope_dims=48), full.w)
    assert_matches_reference_not_control(run_exactly, model, tmp_path, partial, full)


@pytest.mark.parametrize("key, value, needle", [
    ("partial_rotary_factor", 45 / 64, "must be an even number of dims"),
    ("rope_scaling", {"rope_type": "yarn", "factor": 4.0}, "takes for 'longrope'"),
    ("rope_scaling", {"type": "longrope", "factor": 4.0}, "type 'longrope'"),
])
def test_phi3_options_it_does_not_compute_are_refused(run_exactly, tmp_path, key, value, needle):
    config = {**CONFIG, "architectures": ["Phi3ForCausalLM"], key: value}
    write_random_checkpoint(tmp_path / "hf", phi3_tensors(), config, seed=16)
    p = run_on_cpu(run_exactly, tmp_path / "hf", tmp_path)
    assert p.returncode == BAD_INPUT and needle in p.stderr, p.stderr


def test_partial_rotary_is_refused_where_the_attention_rotates_whole_heads(run_exactly, tmp_path):
    write_random_checkpoint(tmp_path / "hf", tensors(), {**CONFIG, "partial_rotary_factor": 0.5}, seed=16)
    p = run_on_cpu(run_exactly, tmp_path / "hf", tmp_path)
    assert p.returncode == BAD_INPUT and "'partial_rotary_factor' is 0.5" in p.stderr, p.stderr


@pytest.mark.parametrize("keys, nope", [({"no_rope_layers": [1, 0]}, (1,)), ({"no_rope_layers": [0, 1, 1]}, (0,)),
                                        ({"no_rope_layer_interval": 2}, (1,))])
def test_smollm3_rotates_nothing_in_its_nope_layers(run_exactly, tmp_path, keys, nope):
    """SmolLM3: a layer with 0 in no_rope_layers (or every no_rope_layer_interval-th) rotates neither q nor k;
    embeddings tied by default. The control rotates every layer."""
    config = {k: v for k, v in CONFIG.items() if k != "tie_word_embeddings"}
    config = {**config, "architectures": ["SmolLM3ForCausalLM"], **keys}
    model = tmp_path / "hf"
    ref = reference(write_random_checkpoint(model, tensors(), config, seed=15), config)
    nope_ref = llama_ref.LlamaRef(llama_ref.dataclasses.replace(ref.cfg, nope_layers=nope), ref.w)
    assert_matches_reference_not_control(run_exactly, model, tmp_path, nope_ref, ref)


@pytest.mark.parametrize("value", [[1], [1, 2], "all"])
def test_smollm3_bad_nope_layers_are_named(run_exactly, tmp_path, value):
    config = {**CONFIG, "architectures": ["SmolLM3ForCausalLM"], "no_rope_layers": value}
    write_random_checkpoint(tmp_path / "hf", tensors(), config, seed=15)
    p = run_on_cpu(run_exactly, tmp_path / "hf", tmp_path)
    assert p.returncode == BAD_INPUT and "'no_rope_layers'" in p.stderr, p.stderr


MISTRAL3_LAYOUTS = {  # where transformers 4.50-4.51 and 4.52 on put the text model and its head
    "image-text-4.50": ("language_model.model.", "language_model.lm_head.weight"),
    "image-text-4.52": ("model.language_model.", "lm_head.weight"),
}


@pytest.mark.parametrize("layout", list(MISTRAL3_LAYOUTS))
def test_a_mistral3_image_text_checkpoint_runs_its_text_model(run_exactly, tmp_path, layout):
    """Mistral Small 3.1's Mistral3ForConditionalGeneration: its text_config runs as MistralForCausalLM, its
    tensors found under either root, the vision tower and projector unread. The logits are those of the same
    values saved as a MistralForCausalLM checkpoint, bit for bit."""
    config = {**CONFIG, "architectures": ["MistralForCausalLM"], "tie_word_embeddings": False, "sliding_window": None}
    t = {**tensors(), "lm_head.weight": ("BF16", (32, 128))}
    write_random_checkpoint(tmp_path / "plain", t, config, seed=14)
    root, head = MISTRAL3_LAYOUTS[layout]
    image = {(root + k[len("model."):] if k.startswith("model.") else head if k == "lm_head.weight" else k): v
             for k, v in t.items()}  # in the same order: the same values drawn
    image["vision_tower.transformer.layers.0.attention.q_proj.weight"] = ("BF16", (16, 16))
    image["multi_modal_projector.linear_1.weight"] = ("BF16", (128, 16))
    text = {k: v for k, v in config.items() if k not in ("architectures", "tie_word_embeddings")}
    composite = {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
                 "tie_word_embeddings": False, "text_config": {**text, "model_type": "mistral"},
                 "vision_config": {"model_type": "pixtral"}}
    write_random_checkpoint(tmp_path / "image", image, composite, seed=14)
    ids = "1,5,9,30,2,17,4,4,11,0"
    logits = []
    for name in ("plain", "image"):
        run_exactly(["logits", "-m", tmp_path / name, "--tokens", ids, "--out", tmp_path / f"{name}.f32"])
        logits.append(np.fromfile(tmp_path / f"{name}.f32", dtype="<f4"))
    assert logits[0].size == 10 * 32 and np.array_equal(logits[0], logits[1])

    del composite["text_config"]
    (tmp_path / "image" / "config.json").write_text(json.dumps(composite))
    p = run_on_cpu(run_exactly, tmp_path / "image", tmp_path)
    assert p.returncode == BAD_INPUT and "'text_config' is missing" in p.stderr, p.stderr


@pytest.mark.parametrize("path", ["", "config.json", "model.safetensors"])
def test_a_checkpoint_is_named_by_its_directory_or_a_file_in_it(run_exactly, tmp_path, path):
    model = write_checkpoint(tmp_path / "hf", tensors()) / path
    p = run_exactly(["run", "-m", model, "--prompt-ids", "1,2", "-n", "1"], check=False)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "internal check" not in p.stderr


def test_wrong_shape_is_named(run_exactly, tmp_path):
    t = tensors()
    t["model.layers.1.self_attn.k_proj.weight"] = ("BF16", (128, 128))  # as if num_key_value_heads were 2
    model = write_checkpoint(tmp_path / "hf", t)
    p = run_on_cpu(run_exactly, model, tmp_path)
    assert p.returncode == BAD_INPUT, p.stderr
    assert "model.safetensors: tensor 'model.layers.1.self_attn.k_proj.weight' has shape [128, 128]" in p.stderr
    assert "the config implies [64, 128]" in p.stderr


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.pop("model.layers.0.mlp.up_proj.weight"), "tensor 'model.layers.0.mlp.up_proj.weight' is missing"),
    (lambda t: t.update({"model.norm.weight": ("I32", (128,))}), "tensor 'model.norm.weight' has dtype I32"),
    (lambda t: t.update({"model.layers.0.self_attn.o_proj.bias": ("F32", (128,))}), "o_proj bias"),
])
def test_bad_tensors_are_named(run_exactly, tmp_path, edit, message):
    t = tensors()
    edit(t)
    p = run_on_cpu(run_exactly, write_checkpoint(tmp_path / "hf", t), tmp_path)
    assert p.returncode == BAD_INPUT, p.stderr
    assert message in p.stderr


def test_bad_config_is_named(run_exactly, tmp_path):
    model = write_checkpoint(tmp_path / "hf", tensors())
    cfg = dict(CONFIG)
    del cfg["hidden_size"]
    (model / "config.json").write_text(json.dumps(cfg))
    p = run_exactly(["run", "-m", model, "-p", "hi", "-n", "1"], check=False)
    assert p.returncode == BAD_INPUT, p.stderr
    assert "config.json: key 'hidden_size' is missing" in p.stderr


def test_tokenize_reads_the_checkpoints_tokenizer_json_without_a_gpu(run_exactly, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    model = write_checkpoint(tmp_path / "hf", tensors())
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog, naïvely. 12345 "] * 20, trainer)
    tok.save(str(model / "tokenizer.json"))
    text = "The lazy fox — naïve 42!"
    got = json.loads(run_exactly(["tokenize", "-m", model, "--json", text]).stdout)
    assert got == tok.encode(text).ids
