"""Hugging Face checkpoints on the GPU (run by scripts/gpu-check): `exactly
logits -m DIR --device cuda` against transformers' float32 forward pass on
the GPU, from the same safetensors files.

Tiny models are built here with transformers from a config and random
weights (torch.manual_seed), saved with save_pretrained and loaded back by
both sides:

  a. Llama, bf16, one model.safetensors, separate lm_head;
  b. Qwen2 (q/k/v biases, tied embeddings), fp16, saved in shards behind
     model.safetensors.index.json;
  c. Llama, float32, rope_theta 500000, head_dim 128, with a byte-level BPE
     tokenizer.json written by `tokenizers` (the config's vocab_size is the
     tokenizer's); `exactly tokenize` must give the `tokenizers` ids;
  d. Qwen3, bf16, head_dim 128 wider than hidden / heads, per-head q/k norms;
  e. Qwen3, fp16, head_dim 64, one KV head;
  f. Mixtral, bf16, 8 experts of width 192, 2 a token;
  g. Qwen3-MoE, bf16, 16 experts of width 192, 4 a token (normalised top-k);
  h. RoPE scalings over a small original context, so that the 40 positions
     turn the scaled pairs far from the unscaled ones: Llama 3.1's "llama3"
     (factor 8, original 64), "linear" (factor 4) on Llama, and "yarn"
     (factor 8, original 32, its default attention factor) on Qwen3;
  i. Gemma 3 text, bf16, head_dim 64, its sandwich norms (1 + w), GeGLU,
     embedding scale, query_pre_attn_scalar 16 (not head_dim), sliding
     layers with their own RoPE base beside global ones (one of them with
     linear scaling), a window of 64 (the GPU caps the context there, where
     every window is full attention);
  j. SmolLM3, bf16, every second layer without RoPE (no_rope_layer_interval
     2), tied embeddings;
  k. Phi-3, bf16, fused qkv_proj and gate_up_proj, RoPE on 48 of each head's
     64 dims (partial_rotary_factor 0.75; its control rotates whole heads).

Each runs ~40 random token ids in one pass (the prefill kernel), in chunks of
7 over a cached prefix, and one token at a time (the split-KV decode kernel
and CUDA graphs). Per position, the relative L2 error of the logits must be
at most TOL = max(MAX_REL, 2 x the error of transformers itself run in bf16
from the same files) -- the "twice a same-precision reference" rule -- and the
argmax must equal float32's wherever float32's top-2 gap exceeds GAP.

Why the tolerance separates right from wrong: exactly holds weights, the
activations between products and the KV cache in bf16 (8 significant bits,
a relative rounding of at most 2^-9 each), so its logits differ from float32
by about 0.5-1.5% of their norm, as do transformers' own bf16 logits. A wrong
RoPE pairing, a bias dropped or added to the wrong rows, a shard read from
the wrong offset or transposed weights change them by 30-100%. The negative
control checks that: the checkpoint of (a) with its q/k rows permuted into
the adjacent-pair layout GGUF converters write (a loader that permutes
Hugging Face weights, or a kernel that pairs dims (2i, 2i+1)) must miss TOL
by a wide margin. For Qwen3 the control is transformers with the q/k norms
taken out (what a loader that ignores them computes): it must miss TOL by as
wide a margin. For the experts it is the checkpoint with its experts listed
in reverse (what a loader or a grouping kernel that hands a token's row to
the wrong expert computes). For a RoPE scaling it is the same checkpoint
with the scaling taken out of config.json (what an engine that ignores it
computes); for Gemma 3, scores scaled by 1/sqrt(head_dim) instead of its
query_pre_attn_scalar; for SmolLM3, RoPE on every layer.

The random weights are scaled so that the checks have teeth: initializer
range 0.05 (attention neither uniform nor one-hot, so RoPE matters), norms
drawn from [0.5, 1.5] (a norm loaded as ones shows; Gemma's w from [-0.5,
0.5], which it computes with as 1 + w), q/k/v biases drawn with
std 0.5 (transformers initialises them to zero, which would test nothing),
and a final norm 4x larger so that logits spread and enough positions have a
top-2 gap above GAP. The routers' weights are 10x larger, so that a token's
k-th and (k+1)-th expert logits are rarely within bf16's rounding of each
other (a near-tie that bf16 and float32 may settle differently).

    python3 tests/cuda/check_hf.py --exactly BIN [--json FILE] [--keep DIR] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from check_report import Report, run

MAX_REL = 0.03     # relative L2 error of a position's logits against float32 (at least)
GAP = 0.5          # float32 top-2 logit gap above which the argmax must agree
MIN_DECIDED = 10   # positions (of N_TOKENS) that must have such a gap, or the model tests too little
N_TOKENS = 40
CHUNKS = [512, 7, 1]
INIT_RANGE = 0.05
TRANSFORMERS_5 = int(transformers.__version__.split(".")[0]) >= 5

CASES = [
    dict(name="llama-bf16", arch="llama", dtype=torch.bfloat16, vocab=1000, hidden=512, ffn=1024, layers=4, heads=8,
         kv_heads=2, tied=False, theta=10000.0, shard=None, tokenizer=False, seed=1, context=2048),
    dict(name="qwen2-fp16-sharded", arch="qwen2", dtype=torch.float16, vocab=1536, hidden=256, ffn=512, layers=4,
         heads=4, kv_heads=2, tied=True, theta=1000000.0, shard="1MB", tokenizer=False, seed=2),
    dict(name="llama-f32-theta5e5", arch="llama", dtype=torch.float32, vocab=None, hidden=256, ffn=768, layers=3,
         heads=2, kv_heads=1, tied=False, theta=500000.0, shard=None, tokenizer=True, seed=3),
    dict(name="qwen3-bf16", arch="qwen3", dtype=torch.bfloat16, vocab=1200, hidden=256, ffn=512, layers=4, heads=4,
         kv_heads=2, head_dim=128, bias=False, tied=True, theta=1000000.0, shard=None, tokenizer=False, seed=4,
         context=2048),
    dict(name="qwen3-fp16", arch="qwen3", dtype=torch.float16, vocab=1000, hidden=256, ffn=512, layers=3,
         heads=4, kv_heads=1, head_dim=64, bias=False, tied=False, theta=10000.0, shard=None, tokenizer=False, seed=5),
    dict(name="mixtral-bf16", arch="mixtral", dtype=torch.bfloat16, vocab=1000, hidden=256, ffn=192, layers=3,
         heads=4, kv_heads=2, experts=8, chosen=2, tied=False, theta=1000000.0, shard=None, tokenizer=False, seed=6,
         context=2048),
    dict(name="qwen3moe-bf16", arch="qwen3moe", dtype=torch.bfloat16, vocab=1100, hidden=256, ffn=192, layers=3,
         heads=4, kv_heads=2, head_dim=64, experts=16, chosen=4, tied=False, theta=1000000.0, shard=None,
         tokenizer=False, seed=7, context=2048),
    dict(name="llama-rope-llama3", arch="llama", dtype=torch.bfloat16, vocab=1000, hidden=256, ffn=512, layers=3,
         heads=4, kv_heads=2, tied=False, theta=500000.0, shard=None, tokenizer=False, seed=8, context=2048,
         rope=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                   original_max_position_embeddings=64)),
    dict(name="llama-rope-linear", arch="llama", dtype=torch.bfloat16, vocab=1000, hidden=256, ffn=512, layers=3,
         heads=4, kv_heads=2, tied=False, theta=10000.0, shard=None, tokenizer=False, seed=9, context=2048,
         rope=dict(rope_type="linear", factor=4.0)),
    dict(name="qwen3-rope-yarn", arch="qwen3", dtype=torch.bfloat16, vocab=1000, hidden=256, ffn=512, layers=3,
         heads=4, kv_heads=2, head_dim=64, bias=False, tied=False, theta=1000000.0, shard=None, tokenizer=False,
         seed=10, context=2048, rope=dict(rope_type="yarn", factor=8.0, original_max_position_embeddings=32)),
    dict(name="gemma3-bf16", arch="gemma3", dtype=torch.bfloat16, vocab=1000, hidden=256, ffn=512, layers=4, heads=4,
         kv_heads=2, head_dim=64, scalar=16, window=64, tied=True, theta=1000000.0, shard=None, tokenizer=False,
         seed=11, context=2048),
    dict(name="gemma3-linear-bf16", arch="gemma3", dtype=torch.bfloat16, vocab=1000, hidden=256, ffn=512, layers=4,
         heads=4, kv_heads=1, head_dim=64, scalar=64, window=64, tied=True, theta=1000000.0, shard=None,
         tokenizer=False, seed=12, context=2048, rope=dict(rope_type="linear", factor=8.0)),
    dict(name="phi3-bf16", arch="phi3", dtype=torch.bfloat16, vocab=1000, hidden=256, ffn=512, layers=3, heads=4,
         kv_heads=2, tied=False, theta=10000.0, shard=None, tokenizer=False, seed=14, context=2048,
         rope=dict(rope_type="default", partial_rotary_factor=0.75)),
    dict(name="smollm3-bf16", arch="smollm3", dtype=torch.bfloat16, vocab=1000, hidden=256, ffn=512, layers=4,
         heads=4, kv_heads=2, interval=2, tied=True, theta=2000000.0, shard=None, tokenizer=False, seed=13,
         context=2048),
]
ROUTER_SCALE = 10.0

TOKENIZER_TEXT = ("The quick brown fox jumps over the lazy dog. Paged attention keeps the KV cache in blocks; "
                  "prefix caching shares them between requests. 0123456789 café naïve — ünïcödé. ") * 20
TOKENIZE_PROBE = "The lazy fox caches 42 blocks, naïvely — then jumps!"

REPORT = Report()
record = REPORT.record


def write_tokenizer(directory: Path) -> int:
    """A byte-level BPE tokenizer.json (GPT-2 pre-tokenizer); returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([TOKENIZER_TEXT], trainer)
    tok.save(str(directory / "tokenizer.json"))
    return tok.get_vocab_size()


def build(case: dict, directory: Path) -> int:
    """Saves the case's checkpoint into `directory`; returns its vocabulary size."""
    directory.mkdir(parents=True)
    vocab = write_tokenizer(directory) if case["tokenizer"] else case["vocab"]
    scaling = {"rope_type": "default", **case.get("rope", {})}
    rope = ({"rope_parameters": {**scaling, "rope_theta": case["theta"]}} if TRANSFORMERS_5
            else {"rope_theta": case["theta"], **({"rope_scaling": scaling} if "rope" in case else {})})
    if case["arch"] == "gemma3":  # a RoPE of each layer type; the scaling on the global layers only
        local = {"rope_type": "default", "rope_theta": 10000.0}
        rope = ({"rope_parameters": {"full_attention": {**scaling, "rope_theta": case["theta"]},
                                     "sliding_attention": local}} if TRANSFORMERS_5
                else {"rope_theta": case["theta"], "rope_local_base_freq": 10000.0,
                      **({"rope_scaling": scaling} if "rope" in case else {})})
    common = dict(vocab_size=vocab, hidden_size=case["hidden"], intermediate_size=case["ffn"],
                  num_hidden_layers=case["layers"], num_attention_heads=case["heads"],
                  num_key_value_heads=case["kv_heads"], max_position_embeddings=case.get("context", 256), rms_norm_eps=1e-5,
                  initializer_range=INIT_RANGE, tie_word_embeddings=case["tied"], **rope)
    if case["arch"] == "qwen2":
        config, cls = Qwen2Config(use_sliding_window=False, **common), Qwen2ForCausalLM
    elif case["arch"] == "qwen3":
        from transformers import Qwen3Config, Qwen3ForCausalLM
        config = Qwen3Config(use_sliding_window=False, head_dim=case["head_dim"], attention_bias=case["bias"], **common)
        cls = Qwen3ForCausalLM
    elif case["arch"] == "mixtral":
        from transformers import MixtralConfig, MixtralForCausalLM
        config = MixtralConfig(num_local_experts=case["experts"], num_experts_per_tok=case["chosen"], **common)
        cls = MixtralForCausalLM
    elif case["arch"] == "qwen3moe":
        from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
        config = Qwen3MoeConfig(use_sliding_window=False, head_dim=case["head_dim"], attention_bias=False,
                                num_experts=case["experts"], num_experts_per_tok=case["chosen"],
                                moe_intermediate_size=case["ffn"], norm_topk_prob=True, decoder_sparse_step=1,
                                mlp_only_layers=[], **common)
        cls = Qwen3MoeForCausalLM
    elif case["arch"] == "phi3":
        from transformers import Phi3Config, Phi3ForCausalLM
        config = Phi3Config(sliding_window=None, pad_token_id=None, **common)  # its pad id is past this vocabulary
        cls = Phi3ForCausalLM
    elif case["arch"] == "smollm3":
        from transformers import SmolLM3Config, SmolLM3ForCausalLM
        config = SmolLM3Config(no_rope_layer_interval=case["interval"], pad_token_id=None, **common)  # its pad id is past this vocabulary
        cls = SmolLM3ForCausalLM
    elif case["arch"] == "gemma3":
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig
        kinds = ["sliding_attention", "full_attention"] * (case["layers"] // 2)
        config = Gemma3TextConfig(head_dim=case["head_dim"], query_pre_attn_scalar=case["scalar"],
                                  sliding_window=case["window"], layer_types=kinds,
                                  hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None,
                                  attn_logit_softcapping=None, **common)
        cls = Gemma3ForCausalLM
    else:
        config, cls = LlamaConfig(**common), LlamaForCausalLM
    torch.manual_seed(case["seed"])
    model = cls(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # Gemma computes with 1 + w: the same effective range
                p.uniform_(0.5, 1.5).sub_(1.0 if case["arch"] == "gemma3" else 0.0)
            elif name.endswith(".bias"):
                p.normal_(0.0, 0.5)
            if "experts" in case and name.endswith(".gate.weight"):
                p.mul_(ROUTER_SCALE)
        model.model.norm.weight.mul_(4.0)
    model = model.to(case["dtype"])
    kwargs = {"max_shard_size": case["shard"]} if case["shard"] else {}
    try:
        model.save_pretrained(directory, safe_serialization=True, **kwargs)
    except TypeError:  # transformers without the keyword: safetensors is all it writes
        model.save_pretrained(directory, **kwargs)
    if "experts" in case:
        write_experts_per_expert(directory, case)
    sharded = (directory / "model.safetensors.index.json").exists()
    if bool(case["shard"]) != sharded:
        raise RuntimeError(f"{case['name']}: expected {'a sharded' if case['shard'] else 'a single-file'} checkpoint")
    return vocab


EXPERT_KEYS = {"mixtral": ("block_sparse_moe", "w1", "w3", "w2"), "qwen3moe": ("mlp", "gate_proj", "up_proj", "down_proj")}


def expert_layer_prefix(key: str, block: str) -> str:
    """'model.layers.3' of any of the layer's expert or router keys."""
    return key.split(".mlp.")[0] if ".mlp." in key else key.split(f".{block}.")[0]


def write_experts_per_expert(directory: Path, case: dict, reverse: bool = False):
    """Rewrites the experts of model.safetensors as the checkpoints people
    serve hold them, one tensor per expert and matrix (Mixtral's
    block_sparse_moe.experts.E.w1/w3/w2 and .gate, Qwen3-MoE's
    mlp.experts.E.gate_proj/up_proj/down_proj), whatever layout this
    transformers saved them in (one tensor per expert, or fused gate_up_proj /
    down_proj stacks, [E, 2F, D] or transposed); with `reverse`, expert E's
    matrices go to n - 1 - E (the negative control)."""
    from safetensors.torch import load_file, save_file
    block, gate_name, up_name, down_name = EXPERT_KEYS[case["arch"]]
    n, ffn, dim = case["experts"], case["ffn"], case["hidden"]
    path = directory / "model.safetensors"
    state = load_file(str(path))
    out, per_expert = {}, {}  # per_expert: (layer prefix, expert) -> {"gate", "up", "down"}
    for key, t in state.items():
        if key.endswith("experts.gate_up_proj"):
            g = t if t.shape[1] == 2 * ffn else t.transpose(1, 2)
            for e in range(n):
                per_expert.setdefault((expert_layer_prefix(key, block), e), {}).update(gate=g[e, :ffn], up=g[e, ffn:])
        elif key.endswith("experts.down_proj"):
            d = t if t.shape[1] == dim else t.transpose(1, 2)
            for e in range(n):
                per_expert.setdefault((expert_layer_prefix(key, block), e), {})["down"] = d[e]
        elif ".experts." in key:  # one tensor per expert already
            e, rest = key.split(".experts.", 1)[1].split(".", 1)
            which = {gate_name: "gate", up_name: "up", down_name: "down"}[rest.split(".")[0]]
            per_expert.setdefault((expert_layer_prefix(key, block), int(e)), {})[which] = t
        elif key.endswith(".gate.weight") and ".experts" not in key:
            out[f"{expert_layer_prefix(key, block)}.{block}.gate.weight"] = t
        else:
            out[key] = t
    if len(per_expert) != n * case["layers"]:
        raise RuntimeError(f"{case['name']}: {len(per_expert)} experts found in the saved checkpoint, "
                           f"{n * case['layers']} expected (keys: {sorted(state)[:8]} ...)")
    for (prefix, e), m in per_expert.items():
        base = f"{prefix}.{block}.experts.{n - 1 - e if reverse else e}."
        out[base + f"{gate_name}.weight"] = m["gate"].contiguous()
        out[base + f"{up_name}.weight"] = m["up"].contiguous()
        out[base + f"{down_name}.weight"] = m["down"].contiguous()
    save_file(out, str(path), metadata={"format": "pt"})


def hf_logits(directory: Path, ids: list[int], dtype: torch.dtype, without_qk_norms: bool = False) -> np.ndarray:
    kw = {"dtype": dtype} if TRANSFORMERS_5 else {"torch_dtype": dtype}
    model = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager", **kw).cuda().eval()
    if without_qk_norms:
        for layer in model.model.layers:
            layer.self_attn.q_norm = torch.nn.Identity()
            layer.self_attn.k_norm = torch.nn.Identity()
    with torch.no_grad():
        out = model(torch.tensor([ids], device="cuda")).logits[0].float().cpu().numpy()
    del model
    torch.cuda.empty_cache()
    return out.astype(np.float64)


def exactly_logits(exe: str, directory: Path, ids: list[int], chunk: int, vocab: int, tmp: Path) -> np.ndarray:
    out = tmp / f"logits-{chunk}.bin"
    run([exe, "logits", "-m", directory, "--device", "cuda", "--chunk", str(chunk), "--tokens",
         ",".join(map(str, ids)), "-o", out])
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), vocab).astype(np.float64)


def rel_error(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.linalg.norm(got - ref, axis=1) / np.linalg.norm(ref, axis=1)


def top2_gap(ref: np.ndarray) -> np.ndarray:
    top = np.partition(ref, -2, axis=1)[:, -2:]
    return top[:, 1] - top[:, 0]


def permute_to_adjacent_pairs(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Rows of each head reordered from half-split to adjacent-pair RoPE order, as GGUF converters do."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def check_case(exe: str, case: dict, root: Path):
    name = case["name"]
    directory = root / name
    vocab = build(case, directory)
    rng = np.random.default_rng(case["seed"])
    ids = [int(i) for i in rng.integers(0, vocab, N_TOKENS)]
    ref = hf_logits(directory, ids, torch.float32)
    ref_bf16 = rel_error(hf_logits(directory, ids, torch.bfloat16), ref)
    tol = max(MAX_REL, 2.0 * float(ref_bf16.max()))
    gaps = top2_gap(ref)
    decided = gaps > GAP
    if case["tokenizer"]:
        from tokenizers import Tokenizer
        want = Tokenizer.from_file(str(directory / "tokenizer.json")).encode(TOKENIZE_PROBE).ids
        got = json.loads(run([exe, "tokenize", "-m", directory, "--json", TOKENIZE_PROBE]).stdout)
        record(f"{name}: tokenize == tokenizers", got == want, tokens=len(want))
    for chunk in CHUNKS:
        got = exactly_logits(exe, directory, ids, chunk, vocab, root)
        finite = bool(np.isfinite(got).all())
        rel = rel_error(got, ref)
        agree = (got.argmax(1) == ref.argmax(1))[decided]
        ok = (finite and float(rel.max()) <= tol and bool(agree.all()) and int(decided.sum()) >= MIN_DECIDED)
        record(f"{name}: logits chunk {min(chunk, N_TOKENS)}", ok, max_rel=f"{rel.max():.4f}",
               mean_rel=f"{rel.mean():.4f}", tol=f"{tol:.4f}", hf_bf16_max_rel=f"{ref_bf16.max():.4f}",
               worst_position=int(rel.argmax()), argmax_checked=int(decided.sum()),
               argmax_disagree=int((~agree).sum()))
    return directory, ids, ref, tol, vocab


def check_negative_control(exe: str, case: dict, directory: Path, ids: list[int], ref: np.ndarray, tol: float,
                           vocab: int, root: Path):
    """q/k rows permuted into the adjacent-pair layout: what a wrong RoPE pairing computes."""
    from safetensors.torch import load_file, save_file
    wrong = root / f"{case['name']}-adjacent-pairs"
    wrong.mkdir()
    shutil.copy(directory / "config.json", wrong / "config.json")
    state = load_file(str(directory / "model.safetensors"))
    for key in list(state):
        if key.endswith("q_proj.weight"):
            state[key] = permute_to_adjacent_pairs(state[key], case["heads"]).contiguous()
        elif key.endswith("k_proj.weight"):
            state[key] = permute_to_adjacent_pairs(state[key], case["kv_heads"]).contiguous()
    save_file(state, str(wrong / "model.safetensors"), metadata={"format": "pt"})
    rel = rel_error(exactly_logits(exe, wrong, ids, 512, vocab, root), ref)
    # Fails the tolerance by a wide margin: the checks above would catch it.
    record(f"{case['name']}: negative control (q/k in adjacent-pair layout) misses the tolerance",
           float(rel.max()) > 3 * tol, max_rel=f"{rel.max():.4f}", mean_rel=f"{rel.mean():.4f}", tol=f"{tol:.4f}")


def check_experts_negative_control(exe: str, case: dict, directory: Path, ids: list[int], ref: np.ndarray,
                                   tol: float, vocab: int, root: Path):
    """The experts listed in reverse: each token's rows go to the wrong experts."""
    wrong = root / f"{case['name']}-experts-reversed"
    shutil.copytree(directory, wrong)
    write_experts_per_expert(wrong, case, reverse=True)
    rel = rel_error(exactly_logits(exe, wrong, ids, 512, vocab, root), ref)
    record(f"{case['name']}: negative control (experts reversed) misses the tolerance", float(rel.max()) > 3 * tol,
           max_rel=f"{rel.max():.4f}", mean_rel=f"{rel.mean():.4f}", tol=f"{tol:.4f}")


def unscaled(config: dict, case: dict) -> None:
    """The RoPE scaling (or partial rotation) taken out of config.json."""
    config.pop("rope_scaling", None)
    if "rope_parameters" in config:
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": case["theta"]}


def head_dim_scale(config: dict, case: dict) -> None:
    """Gemma 3's scores scaled by 1/sqrt(head_dim) instead of its query_pre_attn_scalar."""
    config["query_pre_attn_scalar"] = case["head_dim"]


def rope_everywhere(config: dict, case: dict) -> None:
    """SmolLM3 with RoPE on every layer (what an engine that ignores its NoPE layers computes)."""
    config["no_rope_layers"] = [1] * case["layers"]


def check_config_control(exe: str, case: dict, directory: Path, ids: list[int], ref: np.ndarray, tol: float,
                         vocab: int, root: Path, edit, what: str):
    """The checkpoint with config.json changed by `edit` (a feature taken out) must miss the tolerance."""
    wrong = root / f"{case['name']}-{edit.__name__}"
    shutil.copytree(directory, wrong)
    config = json.loads((wrong / "config.json").read_text())
    edit(config, case)
    (wrong / "config.json").write_text(json.dumps(config))
    rel = rel_error(exactly_logits(exe, wrong, ids, 512, vocab, root), ref)
    record(f"{case['name']}: negative control ({what}) misses the tolerance", float(rel.max()) > 3 * tol,
           max_rel=f"{rel.max():.4f}", mean_rel=f"{rel.mean():.4f}", tol=f"{tol:.4f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exactly", required=True)
    ap.add_argument("--json")
    ap.add_argument("--keep", help="build the checkpoints in this directory and keep them")
    ap.add_argument("--only", help="comma-separated case names (default: every case)")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    unknown = (only or set()) - {c["name"] for c in CASES}
    if unknown:
        ap.error(f"--only: no case named {', '.join(sorted(unknown))}")
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 means float32
    torch.backends.cudnn.allow_tf32 = False
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}",
          flush=True)
    with tempfile.TemporaryDirectory() as d:
        root = Path(a.keep) if a.keep else Path(d)
        root.mkdir(parents=True, exist_ok=True)
        for case in CASES:
            if only is not None and case["name"] not in only:
                continue
            try:
                directory, ids, ref, tol, vocab = check_case(a.exactly, case, root)
                if case["name"] == "llama-bf16":
                    check_negative_control(a.exactly, case, directory, ids, ref, tol, vocab, root)
                controls = []
                if "rope" in case:
                    controls.append((unscaled, "the RoPE options left out"))
                if case["arch"] == "gemma3" and case["scalar"] != case["head_dim"]:
                    controls.append((head_dim_scale, "scores scaled by 1/sqrt(head_dim)"))
                if case["arch"] == "smollm3":
                    controls.append((rope_everywhere, "RoPE on every layer"))
                for edit, what in controls:
                    check_config_control(a.exactly, case, directory, ids, ref, tol, vocab, root, edit, what)
                if "experts" in case:
                    check_experts_negative_control(a.exactly, case, directory, ids, ref, tol, vocab, root)
                if case["arch"] == "qwen3":
                    rel = rel_error(hf_logits(directory, ids, torch.float32, without_qk_norms=True), ref)
                    record(f"{case['name']}: negative control (q/k norms left out) misses the tolerance",
                           float(rel.max()) > 3 * tol, max_rel=f"{rel.max():.4f}", tol=f"{tol:.4f}")
            except Exception as e:  # one broken case must not hide the others
                record(f"{case['name']}: ran", False, error=repr(e)[:2000])
    return REPORT.finish("hf checks", a.json)


if __name__ == "__main__":
    sys.exit(main())
