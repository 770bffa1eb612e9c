"""The Python package on the GPU: LLM(device="cuda").generate() gives what
`exactly batch --device cuda` gives for the same requests, bit for bit —
greedy and seeded sampling, penalties, stop strings, n > 1, logprobs and a
JSON schema — all submitted at once, so rows of every kind share steps.

Run with the Python the package was built for, the build's `python/` on the
path (EXACTLY_BUILD_DIR):

    EXACTLY_BUILD_DIR=BUILD python3 tests/cuda/check_python_package.py --model GGUF [--device cuda] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from check_report import Report

BUILD = Path(os.environ.get("EXACTLY_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
sys.path.insert(0, str(BUILD / "python"))
from exactly import LLM, SamplingParams  # noqa: E402

REPORT = Report()
KINDS = ["greedy", "top-p", "penalties and a stop string", "n = 2 with logprobs", "JSON schema", "logit_bias"]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"]}


def requests() -> list[tuple[str, SamplingParams]]:
    prompts = ["The sea at night is", "List three colours:", "def fibonacci(n):", "Once upon a time"]
    out = []
    for i in range(24):
        kind = i % 6
        p = prompts[i % len(prompts)]
        if kind == 0:
            sp = SamplingParams(temperature=0, max_tokens=40)
        elif kind == 1:
            sp = SamplingParams(temperature=0.9, top_p=0.95, seed=i, max_tokens=40)
        elif kind == 2:
            sp = SamplingParams(temperature=0.7, top_k=40, seed=i, max_tokens=32, presence_penalty=0.5,
                                repetition_penalty=1.2, stop=["\n\n"])
        elif kind == 3:
            sp = SamplingParams(temperature=0.8, seed=i, n=2, max_tokens=24, logprobs=2)
        elif kind == 4:
            sp = SamplingParams(temperature=1.0, seed=i, max_tokens=64,
                                structured_outputs={"json": SCHEMA})
        else:
            sp = SamplingParams(temperature=0.8, seed=i, max_tokens=40, logit_bias={11: 3.0, 30: -2.0})
        out.append((p, sp))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exactly", default=str(BUILD / "bin" / "exactly"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json")
    args = ap.parse_args()
    reqs = requests()
    llm = LLM(model=args.model, device=args.device)
    outputs = llm.generate([p for p, _ in reqs], [sp for _, sp in reqs])
    del llm
    with tempfile.TemporaryDirectory() as tmp:
        inp, res = Path(tmp) / "requests.jsonl", Path(tmp) / "results.jsonl"
        inp.write_text("".join(json.dumps({"prompt": p, **sp.request_fields()}) + "\n" for p, sp in reqs))
        subprocess.run([args.exactly, "batch", "-m", args.model, "-i", str(inp), "-o", str(res), "--device", args.device],
                       check=True, capture_output=True)
        expected = [json.loads(line) for line in res.read_text().splitlines()]
    for i, (out, ref) in enumerate(zip(outputs, expected)):
        same = len(out.outputs) == len(ref["choices"])
        for c, rc in zip(out.outputs, ref["choices"]):
            same &= c.text == rc["text"] and c.token_ids == rc["token_ids"] and c.finish_reason == rc["finish_reason"]
            if rc.get("logprobs"):
                same &= [pos[t].logprob for pos, t in zip(c.logprobs, c.token_ids)] == rc["logprobs"]["token_logprobs"]
        REPORT.record(f"request {i} ({KINDS[i % len(KINDS)]})", same,
                      tokens=sum(len(c.token_ids) for c in out.outputs))
    REPORT.record("every request answered", len(outputs) == len(expected) == len(reqs))
    return REPORT.finish("Python package checks", args.json)


if __name__ == "__main__":
    sys.exit(main())
