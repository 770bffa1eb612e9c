"""Hugging Face transformers' generate on the GPU: the baseline that
`exactly bench throughput --device cuda` is compared with, measured in the
same run. A model of the shape a config.json gives, random bf16 weights,
random prompt tokens of --input-len, exactly --output-len new tokens (greedy,
EOS ignored), each batch size timed after a warm-up; generated tokens per
second = batch * output_len / wall time.

    python3 bench/cuda/bench_hf_generate.py CONFIG_JSON --batch-sizes 1,32,128 [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--batch-sizes", default="1,32,128")
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--repetitions", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()

    config = AutoConfig.from_pretrained(a.config)
    torch.manual_seed(0)
    with torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        except TypeError:  # transformers 4.x names it torch_dtype
            model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    model.eval()
    gen = torch.Generator(device="cuda").manual_seed(0)

    def generate(batch: int, input_len: int, output_len: int) -> float:
        ids = torch.randint(0, config.vocab_size, (batch, input_len), device="cuda", generator=gen)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=output_len,
                           min_new_tokens=output_len, do_sample=False, pad_token_id=0)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    generate(1, 16, 4)  # warm-up: kernels loaded, allocator primed
    results = []
    for batch in (int(b) for b in a.batch_sizes.split(",")):
        times = [generate(batch, a.input_len, a.output_len) for _ in range(a.repetitions)]
        tps = batch * a.output_len / statistics.median(times)
        results.append({"batch": batch, "tokens_per_second": tps, "seconds": times})
        print(f"transformers {torch.__version__} generate: batch {batch}: {tps:.1f} tokens/s", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"input_len": a.input_len, "output_len": a.output_len, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
