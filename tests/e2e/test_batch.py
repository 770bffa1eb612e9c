"""`exactly batch` and `exactly run` through the batched engine: one request
gives the same tokens from both, results come back in input order with
correct usage, stop strings are excluded, n parallel samples, and bad input is
refused with exit code 2 naming the line and field."""

from __future__ import annotations

import json

import pytest

CHAT = "<|im_start|>user\nName three fruits.<|im_end|>\n<|im_start|>assistant\n"


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def tokenize(run_exactly, model_path, text):
    out = run_exactly(["tokenize", "-m", str(model_path), "--json", text])
    return json.loads(out.stdout)


def test_seeded_request_gives_same_tokens_from_run_and_batch(run_exactly, model_path, tmp_path):
    prompt = tokenize(run_exactly, model_path, CHAT)
    ids_out = tmp_path / "run.json"
    run_exactly(["run", "-m", str(model_path), "--prompt-ids", ",".join(map(str, prompt)), "-n", "24",
                 "--temp", "0.9", "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05", "--seed", "1234",
                 "--ids-out", str(ids_out)])
    from_run = json.loads(ids_out.read_text())["ids"]
    req = write_jsonl(tmp_path / "in.jsonl", [
        {"prompt": CHAT, "max_tokens": 5, "temperature": 0.5, "seed": 1},  # other work in the same batch
        {"prompt": prompt, "max_tokens": 24, "temperature": 0.9, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
         "seed": 1234},
        {"prompt": CHAT + "Apple", "max_tokens": 30, "temperature": 1.0, "seed": 2},
    ])
    out = tmp_path / "out.jsonl"
    run_exactly(["batch", "-m", str(model_path), "-i", str(req), "-o", str(out)])
    results = read_jsonl(out)
    assert [r["index"] for r in results] == [0, 1, 2]
    assert results[1]["choices"][0]["token_ids"] == from_run
    assert len(from_run) > 3


def test_usage_stop_strings_and_parallel_samples(run_exactly, model_path, tmp_path):
    prompt_len = len(tokenize(run_exactly, model_path, CHAT))
    req = write_jsonl(tmp_path / "in.jsonl", [
        {"prompt": CHAT, "max_tokens": 12, "temperature": 0, "ignore_eos": True},
        {"prompt": CHAT, "max_tokens": 40, "temperature": 0, "stop": ["\n"]},
        {"prompt": CHAT, "max_tokens": 10, "temperature": 1.0, "seed": 3, "n": 3, "logprobs": 2},
    ])
    out = tmp_path / "out.jsonl"
    stats = tmp_path / "stats.json"
    run_exactly(["batch", "-m", str(model_path), "-i", str(req), "-o", str(out), "--stats", str(stats)])
    r0, r1, r2 = read_jsonl(out)

    c0 = r0["choices"][0]
    assert c0["finish_reason"] == "length" and len(c0["token_ids"]) == 12
    assert r0["usage"] == {"prompt_tokens": prompt_len, "completion_tokens": 12, "total_tokens": prompt_len + 12,
                           "prompt_tokens_details": {"cached_tokens": r0["usage"]["prompt_tokens_details"]["cached_tokens"]}}

    # The greedy text of request 1 is request 0's text cut before the first newline.
    c1 = r1["choices"][0]
    assert "\n" not in c1["text"]
    greedy_full = read_jsonl(out)[0]["choices"][0]["text"]
    if "\n" in greedy_full:
        assert c1["finish_reason"] == "stop"
        assert c1["text"] == greedy_full.split("\n")[0]

    assert len(r2["choices"]) == 3
    assert [c["index"] for c in r2["choices"]] == [0, 1, 2]
    for c in r2["choices"]:
        assert 1 <= len(c["token_ids"]) <= 10
        assert len(c["logprobs"]["token_logprobs"]) == len(c["token_ids"])
        assert all(lp <= 0 for lp in c["logprobs"]["token_logprobs"])
        assert all(len(alts) == 2 for alts in c["logprobs"]["top_logprobs"])
    assert r2["usage"]["completion_tokens"] == sum(len(c["token_ids"]) for c in r2["choices"])
    s = json.loads(stats.read_text())
    assert s["requests"] == 3 and s["generated_tokens"] >= 12


@pytest.mark.parametrize("line, needle", [
    ("{not json", "invalid JSON"),
    ('{"prompt": 5}', "'prompt'"),
    ('{"prompt": "hi", "max_tokens": "many"}', "'max_tokens'"),
    ('{"prompt": "hi", "temperature": -1}', "'temperature'"),
    ('{"prompt": [1, 2, 999999]}', "'prompt'"),
    ('{"prompt": "hi", "max_tokens": 9000}', "context"),
])
def test_bad_requests_are_refused_with_their_line(run_exactly, model_path, tmp_path, line, needle):
    req = tmp_path / "in.jsonl"
    req.write_text('{"prompt": "fine", "max_tokens": 2}\n' + line + "\n")
    out = run_exactly(["batch", "-m", str(model_path), "-i", str(req), "-o", str(tmp_path / "o.jsonl")], check=False)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr
    assert "in.jsonl:2" in out.stderr or "request 1" in out.stderr


def test_special_tokens_are_left_out_of_the_text_unless_asked(run_exactly, model_path, tmp_path):
    """skip_special_tokens (vLLM's, true by default): a special token's text (here <|im_start|>, forced by
    logit_bias) is not written; false writes it. The token ids are the same either way."""
    from test_architectures import run_batch
    body = {"prompt": "Hello", "max_tokens": 3, "temperature": 0, "logit_bias": {"1": 100}, "return_token_ids": True}
    skipped, kept = run_batch(run_exactly, model_path, [body, {**body, "skip_special_tokens": False}], tmp_path, "sp")
    assert skipped["token_ids"] == kept["token_ids"] == [1, 1, 1]
    assert skipped["text"] == "" and kept["text"] == "<|im_start|>" * 3


def test_the_python_package_takes_skip_special_tokens(model_path):
    from test_python_package import LLM, SamplingParams
    llm = LLM(model=str(model_path), threads=2)
    params = dict(max_tokens=3, temperature=0, logit_bias={1: 100})
    skipped, kept = llm.generate(["Hello", "Hello"], [SamplingParams(**params),
                                                      SamplingParams(**params, skip_special_tokens=False)])
    assert skipped.outputs[0].text == "" and kept.outputs[0].text == "<|im_start|>" * 3
