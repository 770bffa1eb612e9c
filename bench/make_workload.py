#!/usr/bin/env python3
"""Writes a synthetic serving workload as JSONL completions requests.

Prompt and output lengths are drawn from fixed-seed lognormal distributions
(long-tailed, as real chat traffic is), clipped so prompt + output <= --max-len:
by default mean prompt ~300 tokens and mean output ~200 tokens, max 2048.
Prompts are random token ids (the model's compute does not depend on their
meaning); outputs run to their drawn length (ignore_eos), so every run of the
same file does the same work.

    bench/make_workload.py --num 256 --out workload.jsonl

Two more shapes for the latency benchmarks (BENCHMARKS.md):
    --kind shared-prefix   requests sharing a --shared-prefix system prompt,
                           one every --gap seconds (prefix-cache warm vs cold)
    --kind long-arrival    --num short requests decoding, then one prompt of
                           --long-prompt tokens arriving at --gap seconds
                           (decode latency while a long prompt is prefilled)
"""
import argparse
import json
import math
import random


def lognormal_with_mean(rng, mean, sigma):
    # E[exp(N(mu, sigma^2))] = exp(mu + sigma^2 / 2)
    mu = math.log(mean) - sigma * sigma / 2
    return rng.lognormvariate(mu, sigma)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num", type=int, default=256)
    ap.add_argument("--prompt-mean", type=float, default=300)
    ap.add_argument("--output-mean", type=float, default=200)
    ap.add_argument("--sigma", type=float, default=0.8, help="lognormal shape (larger: longer tail)")
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--shared-prefix", type=int, default=0, help="tokens of a system prompt shared by every request")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kind", choices=["longtail", "shared-prefix", "long-arrival"], default="longtail")
    ap.add_argument("--gap", type=float, default=4.0, help="seconds between arrivals (shared-prefix, long-arrival)")
    ap.add_argument("--long-prompt", type=int, default=4000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    prefix = [rng.randrange(3, args.vocab) for _ in range(args.shared_prefix)]

    def tokens(n):
        return [rng.randrange(3, args.vocab) for _ in range(n)]

    if args.kind == "shared-prefix":
        with open(args.out, "w") as f:
            for i in range(args.num):
                req = {"prompt": prefix + tokens(20), "max_tokens": 1, "temperature": 0, "arrival": args.gap * i}
                f.write(json.dumps(req) + "\n")
        return
    if args.kind == "long-arrival":
        with open(args.out, "w") as f:
            for i in range(args.num):
                req = {"prompt": tokens(32), "max_tokens": 150, "temperature": 0, "ignore_eos": True}
                f.write(json.dumps(req) + "\n")
            req = {"prompt": tokens(args.long_prompt), "max_tokens": 8, "temperature": 0, "ignore_eos": True,
                   "arrival": args.gap}
            f.write(json.dumps(req) + "\n")
        return
    with open(args.out, "w") as f:
        for i in range(args.num):
            p = max(1, min(args.max_len - 2, round(lognormal_with_mean(rng, args.prompt_mean, args.sigma))))
            o = max(1, min(args.max_len - p, round(lognormal_with_mean(rng, args.output_mean, args.sigma))))
            prompt = prefix + [rng.randrange(3, args.vocab) for _ in range(max(1, p - len(prefix)))]
            req = {"prompt": prompt, "max_tokens": o, "temperature": args.temperature, "seed": i, "ignore_eos": True}
            f.write(json.dumps(req) + "\n")


if __name__ == "__main__":
    main()
