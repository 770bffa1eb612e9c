#!/usr/bin/env python3
"""Writes the editing workload of the speculation benchmark
(docs/journal/benchmarks-record.md §4):
"fix the typos in this text and return it in full" over six pangram sentences
with one letter dropped from one word each, as ChatML prompts with 96 output
tokens (ignore_eos), one file per temperature and request count.

    bench/make_edit_workload.py --out-dir /tmp/spec
"""
import argparse
import json
import random
from pathlib import Path

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.", "Pack my box with five dozen liquor jugs.",
    "How vexingly quick daft zebras jump!", "Sphinx of black quartz, judge my vow.",
    "The five boxing wizards jump quickly.", "Jackdaws love my big sphinx of quartz.",
    "A wizard's job is to vex chumps quickly in fog.", "Watch Jeopardy, Alex Trebek's fun TV quiz game.",
]


def with_typo(rng, sentence):
    words = sentence.split()
    i = rng.randrange(len(words))
    if len(words[i]) > 3:
        j = rng.randrange(1, len(words[i]) - 1)
        words[i] = words[i][:j] + words[i][j + 1:]
    return " ".join(words)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for temp in (0.0, 0.8):
        for n in (1, 4, 16, 64):
            with open(out / f"edit_t{temp}_n{n}.jsonl", "w") as f:
                for i in range(n):
                    text = " ".join(with_typo(rng, rng.choice(SENTENCES)) for _ in range(6))
                    prompt = ("<|im_start|>user\nFix the typos in this text and return it in full:\n"
                              f"{text}<|im_end|>\n<|im_start|>assistant\n")
                    req = {"prompt": prompt, "max_tokens": 96, "temperature": temp, "seed": i, "ignore_eos": True}
                    f.write(json.dumps(req) + "\n")


if __name__ == "__main__":
    main()
