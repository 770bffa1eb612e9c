"""Structured output, tool calls and logit_bias with the rows on the GPU:
`exactly serve --device cuda` answers, and

1. a constrained greedy request whose grammar admits the unconstrained
   greedy text gives back that text's tokens and logprobs, bit for bit;
2. seeded samples over the schema corpus of the CPU tests
   (tests/e2e/structured_schemas.py) parse, and validate against their
   schema (with `jsonschema` where it is installed, else a small validator
   of the keywords the corpus uses);
3. a constrained request gives the same bits alone and among 31 others;
4. a -100 logit_bias on the greedy token leaves the runner-up of the
   model's raw logprobs; a forced tool call follows its function's schema;
5. rows biased and masked on the GPU (a request without logprobs: its rows
   are sampled there) give the tokens of the same request with logprobs
   (its rows whole, processed and sampled on the host), greedy and seeded,
   32 at once.

Needs only the Python standard library (urllib).

    python3 tests/cuda/check_structured_output.py --exactly BIN --model GGUF [--device cuda] [--samples 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from check_report import Report

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from structured_schemas import PROMPT, SCHEMAS  # noqa: E402  (a plain module beside the CPU tests)

REPORT = Report()
record = REPORT.record


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def validate(v, s: dict, root: dict) -> bool:
    """The corpus' keywords: type, enum, const, bounds, lengths, pattern, formats, properties,
    required, additionalProperties, items, prefixItems, anyOf, $ref."""
    if "$ref" in s:
        node = root
        for part in s["$ref"].lstrip("#/").split("/"):
            node = node[part]
        return validate(v, node, root)
    if "anyOf" in s and not any(validate(v, sub, root) for sub in s["anyOf"]):
        return False
    if "enum" in s and v not in s["enum"]:
        return False
    if "const" in s and v != s["const"]:
        return False
    types = s.get("type")
    if types is not None:
        kinds = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
        ok = False
        for t in types if isinstance(types, list) else [types]:
            if t in kinds:
                ok |= isinstance(v, kinds[t])
            elif t == "integer":
                ok |= isinstance(v, int) and not isinstance(v, bool)
            elif t == "number":
                ok |= isinstance(v, (int, float)) and not isinstance(v, bool)
        if not ok:
            return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if v < s.get("minimum", -math.inf) or v > s.get("maximum", math.inf):
            return False
        if v <= s.get("exclusiveMinimum", -math.inf) or v >= s.get("exclusiveMaximum", math.inf):
            return False
    if isinstance(v, str):
        if not s.get("minLength", 0) <= len(v) <= s.get("maxLength", math.inf):
            return False
        if "pattern" in s and not re.search(s["pattern"], v):
            return False
        if s.get("format") == "date" and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
            return False
        if s.get("format") == "email" and "@" not in v:
            return False
    if isinstance(v, dict):
        props = s.get("properties", {})
        if any(k not in v for k in s.get("required", [])):
            return False
        if s.get("additionalProperties") is False and any(k not in props for k in v):
            return False
        if not all(validate(v[k], props[k], root) for k in v if k in props):
            return False
    if isinstance(v, list):
        if not s.get("minItems", 0) <= len(v) <= s.get("maxItems", math.inf):
            return False
        prefix = s.get("prefixItems", [])
        if not all(validate(x, p, root) for x, p in zip(v, prefix)):
            return False
        rest = v[len(prefix):]
        if s.get("items") is False and rest:
            return False
        if isinstance(s.get("items"), dict) and not all(validate(x, s["items"], root) for x in rest):
            return False
    return True


def validator():
    try:
        import jsonschema
        return "jsonschema", lambda v, s: jsonschema.Draft202012Validator(s).is_valid(v)
    except ImportError:
        return "built-in validator", lambda v, s: validate(v, s, s)


def start(args) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([args.exactly, "serve", "-m", args.model, "--device", args.device, "--port", str(port),
                             "--max-num-seqs", "64"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        if proc.poll() is not None:
            sys.exit(f"server exited: {proc.stderr.read()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.25)
    proc.kill()
    sys.exit("server did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exactly", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--samples", type=int, default=20, help="seeded samples per schema")
    ap.add_argument("--json")
    args = ap.parse_args()
    proc, url = start(args)
    comp, chat = url + "/v1/completions", url + "/v1/chat/completions"
    try:
        # 1. greedy equality where the model's choice was allowed.
        for prompt in ["The capital of France is", "Once upon a time", "def fib(n):", "1, 2, 3, 4,"]:
            base = {"prompt": prompt, "max_tokens": 32, "temperature": 0, "logprobs": 5, "return_token_ids": True}
            plain = post(comp, base)["choices"][0]  # its end of text, if any, is allowed where it comes
            guided = post(comp, dict(base, guided_regex=re.escape(plain["text"]) + "[a-z]*"))["choices"][0]
            record(f"greedy equality {prompt!r}", guided["token_ids"] == plain["token_ids"] and
                   guided["logprobs"] == plain["logprobs"], tokens=len(plain["token_ids"]))

        # 2. the corpus validates.
        name_of_validator, valid = validator()
        for name, schema in sorted(SCHEMAS.items()):
            def one(seed, name=name, schema=schema):
                return post(chat, {"messages": [{"role": "user", "content": PROMPT.format(name=name.replace("_", " "))}],
                                   "max_tokens": 256, "temperature": 1.0, "seed": seed,
                                   "response_format": {"type": "json_schema",
                                                       "json_schema": {"name": name, "schema": schema}}})
            with ThreadPoolExecutor(32) as pool:
                answers = list(pool.map(one, range(args.samples)))
            stopped = bad = 0
            for a in answers:
                c = a["choices"][0]
                if c["finish_reason"] == "length":
                    bad += a["usage"]["completion_tokens"] != 256
                    continue
                stopped += 1
                try:
                    bad += not valid(json.loads(c["message"]["content"]), schema)
                except ValueError:
                    bad += 1
            # At temperature 1 some schemas' strings run long (an email's
            # local part may take the whole budget): a quarter of the samples
            # finishing is enough for the validation to mean something.
            record(f"schema {name}", bad == 0 and stopped >= max(1, args.samples // 4), stopped=stopped, invalid=bad,
                   validator=name_of_validator)

        # 3. batch invariance with grammars.
        target = {"messages": [{"role": "user", "content": "Describe a recipe."}], "max_tokens": 96,
                  "temperature": 1.0, "seed": 3, "logprobs": True, "top_logprobs": 2,
                  "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMAS["recipe"]}}}
        alone = post(chat, target)["choices"][0]
        others = [dict(target, seed=100 + i, max_tokens=64 + i) for i in range(16)]
        others += [{"prompt": "Tell me a story", "max_tokens": 80, "seed": i, "temperature": 1.0} for i in range(15)]
        with ThreadPoolExecutor(32) as pool:
            futures = [pool.submit(post, chat if "messages" in b else comp, b) for b in others[:16]]
            mine = pool.submit(post, chat, target)
            futures += [pool.submit(post, chat if "messages" in b else comp, b) for b in others[16:]]
            batched = mine.result()["choices"][0]
            for f in futures:
                f.result()
        record("batch invariance with grammars", batched["message"] == alone["message"] and
               batched["logprobs"] == alone["logprobs"])

        # 4. logit_bias and a forced tool call.
        plain = post(comp, {"prompt": "The capital of France is", "max_tokens": 1, "temperature": 0, "logprobs": 2,
                            "return_token_ids": True})["choices"][0]
        top = plain["logprobs"]["top_logprobs"][0]
        second = sorted(top, key=top.get, reverse=True)[1]
        biased = post(comp, {"prompt": "The capital of France is", "max_tokens": 1, "temperature": 0, "logprobs": 2,
                             "logit_bias": {str(plain["token_ids"][0]): -100}})["choices"][0]
        record("logit_bias -100 leaves the runner-up", biased["logprobs"]["tokens"][0] == second)
        params = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params}}]
        call = post(chat, {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": tools,
                           "tool_choice": "required", "max_tokens": 60, "temperature": 0})["choices"][0]
        calls = call["message"].get("tool_calls") or []
        record("forced tool call", call["finish_reason"] == "tool_calls" and len(calls) == 1 and
               valid(json.loads(calls[0]["function"]["arguments"]), params))
        # 5. processed on the GPU against processed on the host.
        def pair(i):
            name = sorted(SCHEMAS)[i % len(SCHEMAS)]
            body = {"prompt": PROMPT.format(name=name.replace("_", " ")), "max_tokens": 64,
                    "temperature": 0.0 if i % 4 == 0 else 1.0, "seed": 50 + i, "return_token_ids": True,
                    "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": SCHEMAS[name]}}}
            if i % 3 == 0:
                body["logit_bias"] = {"90": 3.0, "28": -2.0, str(200 + i): 4.0}
            device = post(comp, body)["choices"][0]
            host = post(comp, dict(body, logprobs=1))["choices"][0]
            return device["token_ids"] == host["token_ids"], len(device["token_ids"])
        with ThreadPoolExecutor(32) as pool:
            pairs = list(pool.map(pair, range(48)))
        record("GPU-processed rows give the host's tokens", all(same for same, _ in pairs),
               equal=sum(same for same, _ in pairs), of=len(pairs), tokens=sum(n for _, n in pairs))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return REPORT.finish("structured-output checks", args.json)


if __name__ == "__main__":
    sys.exit(main())
