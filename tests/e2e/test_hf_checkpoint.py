"""Hugging Face checkpoints (a directory with config.json and safetensors) from
the command line, on machines without a GPU: the CPU refuses them with a usage
error that says what to do, and a checkpoint that does not match its config is
rejected, naming the tensor and its file, before a GPU is looked for (so the
same error comes on any machine). The GPU runs them in tests/cuda/check_hf.py.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

USAGE = 64      # ExitCode::kUsage
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


def run_on_gpu_or_skip(run_exactly, model: Path, tmp_path: Path):
    p = run_exactly(["logits", "-m", model, "--device", "cuda", "--tokens", "1,2", "-o", tmp_path / "out.bin"],
                    check=False)
    if p.returncode == USAGE and "no CUDA backend" in p.stderr:
        pytest.skip("this build has no CUDA backend")
    return p


@pytest.mark.parametrize("path", ["", "config.json", "model.safetensors"])
@pytest.mark.parametrize("command", [["run", "-p", "hi", "-n", "1"], ["info"], ["logits", "--tokens", "1", "-o", "-"]])
def test_cpu_refuses_hf_checkpoints_with_a_usage_error(run_exactly, tmp_path, path, command):
    model = write_checkpoint(tmp_path / "hf", tensors()) / path
    p = run_exactly([command[0], "-m", model, *command[1:]], check=False)
    assert p.returncode == USAGE, p.stderr
    assert "Hugging Face checkpoint" in p.stderr and "--device cuda" in p.stderr and "GGUF" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and "internal check" not in p.stderr


def test_wrong_shape_is_named_before_the_gpu_is_needed(run_exactly, tmp_path):
    t = tensors()
    t["model.layers.1.self_attn.k_proj.weight"] = ("BF16", (128, 128))  # as if num_key_value_heads were 2
    model = write_checkpoint(tmp_path / "hf", t)
    p = run_on_gpu_or_skip(run_exactly, model, tmp_path)
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
    p = run_on_gpu_or_skip(run_exactly, write_checkpoint(tmp_path / "hf", t), tmp_path)
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
