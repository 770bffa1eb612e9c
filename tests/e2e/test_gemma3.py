"""Gemma 3 on the CPU, from GGUF (as llama.cpp's converter writes it) and from
a Hugging Face checkpoint (Gemma3ForCausalLM), against the float64 reference
tests/reference/gemma3_ref.py.

The tiny models have six layers (five sliding with a window of 5 keys, the
sixth global, as Gemma 3's pattern), heads of 32 over a 64-wide stream with
GQA 4 over 2, per-head q/k norms, sandwich norms, GeGLU and the embedding
scaled by sqrt(64). Prompts of 16 tokens and 24 generated ones run far past
the window, so each piece shows in the logits: controls with the window,
GELU or the post-norms taken out of the reference are far from the engine.
Linear RoPE scaling on the global layer and a final soft cap are variants.
A request's tokens and logprobs are the same alone, among others, through
chunked prefill and after a prefix-cache hit. The GPU runs it
(tests/cuda/check_hf.py and check_gguf_experts.py check it there); here it
must not be refused by name.
"""

from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize

import gemma3_ref
from test_architectures import (PROMPT, add_tokenizer, assert_greedy_matches, assert_request_keeps_its_bits,
                                tokenizer_fields)
from test_hf_checkpoint import bf16_round, write_random_checkpoint
from test_logits import ARGMAX_GAP, REL_L2_BOUND, engine_logits

LAYERS, DIM, HEADS, KV_HEADS, HEAD_DIM, FFN, WINDOW = 6, 64, 4, 2, 32, 128, 5
VARIANTS = {  # name: extra GGUF metadata
    "plain": {},
    "linear-rope": {"gemma3.rope.scaling.type": "linear", "gemma3.rope.scaling.factor": 8.0},
    "softcap": {"gemma3.final_logit_softcapping": 3.0},
}


def write_gguf(path, tok: dict, qtype, extra: dict, seed: int = 5) -> None:
    rng = np.random.default_rng(seed)
    vocab = len(tok["tokenizer.ggml.tokens"])
    w = GGUFWriter(str(path), arch="gemma3")
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1e6)
    w.add_uint32("gemma3.attention.sliding_window", WINDOW)
    w.add_layer_norm_rms_eps(1e-6)
    for key, value in extra.items():
        (w.add_string if isinstance(value, str) else w.add_float32)(key, value)
    add_tokenizer(w, tok)

    def matrix(name, rows, cols):
        a = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
        if qtype == GGMLQuantizationType.F32:
            w.add_tensor(name, a)
        else:
            w.add_tensor(name, quantize(a, qtype), raw_dtype=qtype)

    def norm(name, n):  # llama.cpp stores 1 + w
        w.add_tensor(name, (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32))

    w.add_tensor("token_embd.weight", (0.2 * rng.standard_normal((vocab, DIM))).astype(np.float32))
    for layer in range(LAYERS):
        p = f"blk.{layer}."
        norm(p + "attn_norm.weight", DIM)
        matrix(p + "attn_q.weight", HEADS * HEAD_DIM, DIM)
        matrix(p + "attn_k.weight", KV_HEADS * HEAD_DIM, DIM)
        matrix(p + "attn_v.weight", KV_HEADS * HEAD_DIM, DIM)
        matrix(p + "attn_output.weight", DIM, HEADS * HEAD_DIM)
        norm(p + "attn_q_norm.weight", HEAD_DIM)
        norm(p + "attn_k_norm.weight", HEAD_DIM)
        norm(p + "post_attention_norm.weight", DIM)
        norm(p + "ffn_norm.weight", DIM)
        matrix(p + "ffn_gate.weight", FFN, DIM)
        matrix(p + "ffn_up.weight", FFN, DIM)
        matrix(p + "ffn_down.weight", DIM, FFN)
        norm(p + "post_ffw_norm.weight", DIM)
    norm("output_norm.weight", DIM)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def tokenizer(model_path):
    return tokenizer_fields(model_path)


MODELS = [("plain", GGMLQuantizationType.F32), ("plain", GGMLQuantizationType.Q8_0),
          ("linear-rope", GGMLQuantizationType.F32), ("softcap", GGMLQuantizationType.F32)]


@pytest.fixture(scope="module", params=MODELS, ids=[f"{n}-{q.name.lower()}" for n, q in MODELS])
def model(request, tmp_path_factory, tokenizer):
    name, qtype = request.param
    path = tmp_path_factory.mktemp("gemma3") / f"gemma3-{name}-{qtype.name}.gguf"
    write_gguf(path, tokenizer, qtype, VARIANTS[name])
    return name, path, gemma3_ref.load(str(path))


def worst_relative_error(got, want):
    return float((np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)).max())


def test_logits_match_the_reference_and_each_piece_matters(model, run_exactly, tmp_path):
    name, path, ref = model
    assert ref.cfg.windows == (WINDOW,) * 5 + (0,)
    got = engine_logits(run_exactly, path, PROMPT, tmp_path)
    want = ref.logits(PROMPT)
    assert got.shape == want.shape and np.isfinite(got).all()
    assert worst_relative_error(got, want) < REL_L2_BOUND
    top2 = np.partition(want, -2, axis=1)[:, -2:]
    decided = (top2[:, 1] - top2[:, 0]) > ARGMAX_GAP
    assert (np.argmax(got, axis=1) == np.argmax(want, axis=1))[decided].all()
    controls = {"full attention": dataclasses.replace(ref.cfg, windows=(0,) * LAYERS),
                "silu": dataclasses.replace(ref.cfg, activation="silu"),
                "no post-norms": dataclasses.replace(ref.cfg, sandwich=False),
                "unscaled embedding": dataclasses.replace(ref.cfg, embedding_scale=1.0)}
    if name == "linear-rope":
        controls["unscaled rope"] = dataclasses.replace(ref.cfg, linear_scale=1.0)
    if name == "softcap":
        controls["uncapped"] = dataclasses.replace(ref.cfg, softcap=0.0)
    for what, cfg in controls.items():
        other = gemma3_ref.Gemma3Ref(cfg, ref.w).logits(PROMPT)
        assert worst_relative_error(got, other) > 100 * REL_L2_BOUND, what


def test_greedy_matches_the_reference(model, run_exactly, tmp_path):
    _, path, ref = model
    assert_greedy_matches(run_exactly, path, ref, tmp_path)


def test_a_request_keeps_its_bits_alone_among_others_chunked_and_cached(model, run_exactly, tmp_path):
    _, path, _ = model
    assert_request_keeps_its_bits(run_exactly, path, tmp_path)


def test_the_gpu_does_not_refuse_it(model, exactly_bin):
    """Gemma 3 runs on the GPU (tests/cuda/check_hf.py checks it against transformers there); a machine
    without one says so, not that the architecture is CPU-only."""
    _, path, _ = model
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1", "--device", "cuda"],
                       capture_output=True, text=True, timeout=120)
    assert "only so far" not in p.stderr, p.stderr


@pytest.mark.parametrize("key, value, needle", [
    ("gemma3.attn_logit_softcapping", 50.0, "attn_logit_softcapping"),
    ("gemma3.rope.scaling.type", "yarn", "'gemma3.rope.scaling.type' is 'yarn'"),
])
def test_what_would_compute_another_model_exits_2(tmp_path, exactly_bin, tokenizer, key, value, needle):
    path = tmp_path / "odd.gguf"
    write_gguf(path, tokenizer, GGMLQuantizationType.F32, {key: value})
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and needle in p.stderr, p.stderr


def test_a_missing_post_norm_exits_2_naming_the_tensor(tmp_path, exactly_bin, tokenizer):
    full = tmp_path / "full.gguf"
    write_gguf(full, tokenizer, GGMLQuantizationType.F32, {})
    from gguf import GGUFReader
    reader = GGUFReader(str(full))
    path = tmp_path / "missing.gguf"
    w = GGUFWriter(str(path), arch="gemma3")
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        w.add_key_value(field.name, field.contents(), field.types[0],
                        field.types[-1] if field.types[0].name == "ARRAY" else None)
    for t in reader.tensors:
        if t.name != "blk.3.post_ffw_norm.weight":
            w.add_tensor(t.name, np.asarray(t.data).reshape(tuple(int(n) for n in reversed(t.shape))))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = subprocess.run([str(exactly_bin), "run", "-m", str(path), "-p", "x", "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "blk.3.post_ffw_norm.weight" in p.stderr, p.stderr


HF_CONFIG = {"architectures": ["Gemma3ForCausalLM"], "hidden_size": 128, "intermediate_size": 256,
             "num_hidden_layers": 6, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
             "rms_norm_eps": 1e-6, "max_position_embeddings": 64, "vocab_size": 32, "query_pre_attn_scalar": 48,
             "rope_theta": 1e6, "rope_local_base_freq": 1e4, "sliding_window": 4, "sliding_window_pattern": 3,
             "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": None,
             "attn_logit_softcapping": None, "rope_scaling": {"rope_type": "linear", "factor": 4.0},
             "torch_dtype": "bfloat16"}


def hf_tensors() -> dict:
    d, f, q, kv, hd = 128, 256, 128, 64, 64
    t = {"model.embed_tokens.weight": ("BF16", (32, d)), "model.norm.weight": ("BF16", (d,))}
    for i in range(HF_CONFIG["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            t[p + norm + ".weight"] = ("BF16", (d,))
        t.update({p + "self_attn.q_proj.weight": ("BF16", (q, d)), p + "self_attn.k_proj.weight": ("BF16", (kv, d)),
                  p + "self_attn.v_proj.weight": ("BF16", (kv, d)), p + "self_attn.o_proj.weight": ("BF16", (d, q)),
                  p + "self_attn.q_norm.weight": ("BF16", (hd,)), p + "self_attn.k_norm.weight": ("BF16", (hd,)),
                  p + "mlp.gate_proj.weight": ("F16", (f, d)), p + "mlp.up_proj.weight": ("F16", (f, d)),
                  p + "mlp.down_proj.weight": ("F16", (d, f))})
    return t


HF_TO_GGUF = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
              "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
              "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
              "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down"}


IMAGE_TEXT_ROOTS = {"causal-lm": None, "image-text-4.50": "language_model.model.",
                    "image-text-4.52": "model.language_model."}


@pytest.mark.parametrize("layout", list(IMAGE_TEXT_ROOTS))
def test_a_hugging_face_checkpoint_runs_as_the_reference(run_exactly, tmp_path, layout):
    """Norms stored as w (the model computes with 1 + w), the embedding scale
    sqrt(128) rounded to bf16 as transformers rounds it, scores scaled by
    query_pre_attn_scalar^-1/2, layers 2 and 5 global with linear RoPE scaling.
    Gemma3ForConditionalGeneration checkpoints (4B and up) run as the text
    model inside them: text_config (missing keys take transformers' defaults),
    tensors under either transformers version's root, the vision tower unread."""
    model = tmp_path / "hf"
    tensors, config, root = hf_tensors(), HF_CONFIG, IMAGE_TEXT_ROOTS[layout]
    if root is not None:
        tensors = {root + k[len("model."):]: v for k, v in tensors.items()}
        tensors["vision_tower.vision_model.embeddings.patch_embedding.weight"] = ("F32", (8, 3, 2, 2))
        text = {k: v for k, v in HF_CONFIG.items() if k not in ("architectures", "torch_dtype", "rms_norm_eps")}
        config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                  "torch_dtype": "bfloat16", "text_config": {**text, "model_type": "gemma3_text"},
                  "vision_config": {"model_type": "siglip_vision_model"}}
    stored = write_random_checkpoint(model, tensors, config, seed=13)
    values = {("model." + k[len(root):] if root and k.startswith(root) else k): v for k, v in stored.items()}
    w = {"token_embd.weight": values["model.embed_tokens.weight"], "output_norm.weight": values["model.norm.weight"]}
    for name, v in values.items():
        for hf, gguf_name in HF_TO_GGUF.items():
            if name.startswith("model.layers.") and f".{hf}.weight" in name:
                w[f"blk.{name.split('.')[2]}.{gguf_name}.weight"] = v
    w = {k: v + 1.0 if "norm" in k else v for k, v in w.items()}  # Gemma's 1 + w
    bf16_root = (bf16_round(np.sqrt(np.float32([128]))).astype(np.uint32) << 16).view(np.float32)[0]
    cfg = gemma3_ref.Gemma3Config(n_layers=6, dim=128, ffn_dim=256, n_heads=2, n_kv_heads=1, head_dim=64,
                                  rope_base=1e6, local_base=1e4, norm_eps=1e-6, vocab=32,
                                  windows=(4, 4, 0, 4, 4, 0), attn_scale=48 ** -0.5,
                                  embedding_scale=float(bf16_root),
                                  linear_scale=4.0)
    assert cfg.embedding_scale == 11.3125  # sqrt(128) = 11.3137 in bf16
    ref = gemma3_ref.Gemma3Ref(cfg, w)
    ids = [1, 5, 9, 30, 2, 17, 4, 4, 11, 0, 23, 8]
    out = tmp_path / "logits.f32"
    run_exactly(["logits", "-m", model, "--tokens", ",".join(map(str, ids)), "--out", out])
    got = np.fromfile(out, dtype="<f4").reshape(len(ids), -1)
    assert worst_relative_error(got, ref.logits(ids)) < REL_L2_BOUND
    no_offset = gemma3_ref.Gemma3Ref(cfg, {k: v - 1.0 if "norm" in k else v for k, v in w.items()})
    assert worst_relative_error(got, no_offset.logits(ids)) > 100 * REL_L2_BOUND
    unscaled = gemma3_ref.Gemma3Ref(dataclasses.replace(cfg, linear_scale=1.0), w)
    assert worst_relative_error(got, unscaled.logits(ids)) > 100 * REL_L2_BOUND
