"""Tiny GGUF files for the GPU (tests/cuda/check_gguf_experts.py): a
Mixtral-style `llama` file and a `qwen3moe` file with the default model's
tokenizer, F32 and Q8_0 tensors, at widths the GPU's expert products take
(dim and expert width 64, heads of 64); two scaled RoPEs, a `llama`
file with Llama 3.1's rope_freqs.weight and a `qwen3` file with YaRN; and
`gemma3` files (heads of 64, a window of 64 that the GPU's context stops
at) plain, with linear RoPE scaling on the global layer and with a final
soft cap; a `phi3` file (fused q/k/v and gate/up, Q8_0); and a four-layer
`smollm3` file (its fourth layer without RoPE).
Written on a machine with the `gguf` package (tests/e2e's writer), then
carried to the GPU machine:

    python3 tests/cuda/expert_ggufs.py OUT_DIR [MODEL_GGUF]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "e2e"), str(ROOT / "tests" / "reference")]

import test_architectures as ta  # noqa: E402
import test_gemma3 as tg  # noqa: E402
from gguf import GGMLQuantizationType  # noqa: E402

CASES = [("mixtral", GGMLQuantizationType.F32), ("qwen3moe", GGMLQuantizationType.Q8_0),
         ("llama-rope-factors", GGMLQuantizationType.F32), ("qwen3-yarn", GGMLQuantizationType.F32),
         ("phi3", GGMLQuantizationType.Q8_0)]


def main() -> int:
    out = Path(sys.argv[1])
    model = sys.argv[2] if len(sys.argv) > 2 else str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    out.mkdir(parents=True, exist_ok=True)
    tok = ta.tokenizer_fields(model)
    # Heads of 64 (the GPU's attention takes 64 and 128), experts 64 wide over a stream of 64.
    ta.DIM, ta.HEADS, ta.KV_HEADS, ta.HEAD_DIM, ta.EXPERT_FFN = 64, 1, 1, 64, 64
    for name, qtype in CASES:
        path = out / f"{name}-{qtype.name.lower()}.gguf"
        ta.write_model(path, name, tok, qtype, seed=5, expert_ffn=64, head_dim=64)
        print(path)
    ta.LAYERS = 4  # SmolLM3's fourth layer is its NoPE layer
    ta.write_model(out / "smollm3-f32.gguf", "smollm3", tok, GGMLQuantizationType.F32, seed=5, head_dim=64)
    print(out / "smollm3-f32.gguf")
    tg.HEAD_DIM, tg.WINDOW = 64, 64
    for variant in tg.VARIANTS:
        path = out / f"gemma3-{variant}.gguf"
        tg.write_gguf(path, tok, GGMLQuantizationType.F32, tg.VARIANTS[variant])
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
