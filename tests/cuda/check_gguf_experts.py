"""GGUF mixtures of experts, scaled RoPEs and Gemma 3 on the GPU (run by
scripts/gpu-check): `exactly logits --device cuda` against the same binary
on the CPU (the oracle, checked against float64 references in CI) for the
tiny Mixtral-style, Qwen3-MoE, Llama 3.1-scaled, YaRN, Gemma 3 (plain,
linear RoPE scaling, final soft cap), Phi-3 and SmolLM3 files of
tests/cuda/expert_ggufs.py, in one pass (the prefill kernel), in chunks of 7
over a cached prefix and one token at a time (decode, graphs). A GPU that
ignored the scaling would miss the bounds: both files turn several pairs far
from their unscaled angles within the 40 positions, and YaRN's magnitude
scales every score by about 1.46.

The relative L2 error of the logits must be at most MEAN_REL on average over
the positions and MAX_REL at each (the GPU holds weights and activations in
bf16: about 1% of the logits' norm on average; where a token's k-th and
(k+1)-th expert logits lie within bf16's rounding of each other the two
devices may route it differently, which moves one position by up to ~10%),
and the argmax must agree wherever the CPU's top-2 gap exceeds GAP. Experts
loaded in the wrong order, or rows summed into the wrong tokens, move every
position by tens of percent (check_hf.py's control: 100% on average).

    python3 tests/cuda/check_gguf_experts.py --exactly BIN --models A.gguf,B.gguf [--json FILE]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from check_report import Report, run

MEAN_REL, MAX_REL, GAP, N_TOKENS = 0.02, 0.15, 0.5, 40
REPORT = Report()


def logits(exe: str, model: str, ids: list[int], device: str, chunk: int, out: Path) -> np.ndarray:
    run([exe, "logits", "-m", model, "--device", device, "--chunk", str(chunk), "--tokens", ",".join(map(str, ids)),
         "-o", out])
    got = np.fromfile(out, dtype=np.float32)
    return got.reshape(len(ids), got.size // len(ids)).astype(np.float64)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exactly", required=True)
    ap.add_argument("--models", required=True, help="comma-separated GGUF files (tests/cuda/expert_ggufs.py)")
    ap.add_argument("--json")
    a = ap.parse_args()
    rng = np.random.default_rng(11)
    ids = [int(i) for i in rng.integers(0, 49152, N_TOKENS)]
    with tempfile.TemporaryDirectory() as d:
        for model in a.models.split(","):
            name = Path(model).stem
            try:
                ref = logits(a.exactly, model, ids, "cpu", 512, Path(d) / "cpu.bin")
                top = np.partition(ref, -2, axis=1)[:, -2:]
                decided = (top[:, 1] - top[:, 0]) > GAP
                for chunk in (512, 7, 1):
                    got = logits(a.exactly, model, ids, "cuda", chunk, Path(d) / "cuda.bin")
                    rel = np.linalg.norm(got - ref, axis=1) / np.linalg.norm(ref, axis=1)
                    agree = (got.argmax(1) == ref.argmax(1))[decided]
                    REPORT.record(f"{name}: cuda against cpu, chunk {min(chunk, N_TOKENS)}",
                                  bool(np.isfinite(got).all()) and rel.mean() <= MEAN_REL and rel.max() <= MAX_REL
                                  and agree.all(),
                                  max_rel=f"{rel.max():.4f}", mean_rel=f"{rel.mean():.4f}",
                                  argmax_checked=int(decided.sum()), argmax_disagree=int((~agree).sum()))
            except Exception as e:  # one broken file must not hide the other
                REPORT.record(f"{name}: ran", False, error=repr(e)[:2000])
    return REPORT.finish("gguf expert checks", a.json)


if __name__ == "__main__":
    sys.exit(main())
