"""vLLM's surface beside OpenAI's: /tokenize and /detokenize in vLLM's request
and response shapes (checked against the reference tokenizer and the
model's chat template rendered by jinja2 elsewhere in these tests), and the
vllm:* metrics that dashboards and autoscalers read, labelled with
model_name, counting what the requests did."""

from __future__ import annotations

import re

import pytest
import requests
import tokenizer_ref

from test_server import ServerProcess, assert_error

TEXTS = ["Hello, world!", "  spaces\tand\nnewlines  ", "ünïcödé — 東京 🙂", "<|im_start|>user"]


@pytest.fixture(scope="module")
def server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--served-model-name", "smol")
    yield s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


def call(server, path, body):
    return requests.post(server.url + path, json=body, timeout=60)


@pytest.mark.parametrize("text", TEXTS)
def test_tokenize_matches_the_reference_tokenizer(server, ref_tokenizer, bos_id, text):
    r = call(server, "/tokenize", {"model": "smol", "prompt": text})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["tokens"] == tokenizer_ref.encode(ref_tokenizer, text, bos_id=bos_id)
    assert out["count"] == len(out["tokens"])
    assert out["max_model_len"] == 8192
    assert out["token_strs"] is None
    plain = call(server, "/tokenize", {"prompt": text, "add_special_tokens": False}).json()
    assert plain["tokens"] == tokenizer_ref.encode(ref_tokenizer, text, bos_id=None)


@pytest.mark.parametrize("text", TEXTS[:3])  # the last holds a control token, which decodes to no text
def test_detokenize_inverts_tokenize(server, text):
    ids = call(server, "/tokenize", {"prompt": text, "add_special_tokens": False}).json()["tokens"]
    r = call(server, "/detokenize", {"tokens": ids})
    assert r.status_code == 200, r.text
    assert r.json() == {"prompt": text}


def test_token_strs(server):
    out = call(server, "/tokenize", {"prompt": "Hello world", "add_special_tokens": False,
                                     "return_token_strs": True}).json()
    assert len(out["token_strs"]) == out["count"] and "".join(out["token_strs"]).replace("Ġ", " ") == "Hello world"


def test_tokenize_chat_messages_is_the_prompt_chat_completions_uses(server):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    out = call(server, "/tokenize", {"messages": messages}).json()
    chat = requests.post(server.url + "/v1/chat/completions", json={"messages": messages, "max_tokens": 1},
                         timeout=60).json()
    assert out["count"] == chat["usage"]["prompt_tokens"]
    text = call(server, "/detokenize", {"tokens": out["tokens"]}).json()["prompt"]
    assert text.endswith("assistant\n") and "Hi there" in text
    without = call(server, "/tokenize", {"messages": messages, "add_generation_prompt": False}).json()
    assert without["count"] < out["count"]


@pytest.mark.parametrize("path, body, needle, param", [
    ("/tokenize", {"prompt": 5}, "prompt", "prompt"),
    ("/tokenize", {"prompt": "x", "truncate": 3}, "not supported", "truncate"),
    ("/tokenize", {"prompt": "x", "add_special_tokens": "yes"}, "boolean", "add_special_tokens"),
    ("/tokenize", {"messages": "x"}, "messages", "messages"),
    ("/detokenize", {"tokens": [1, -1]}, "token ids", "tokens"),
    ("/detokenize", {"tokens": [10 ** 9]}, "token ids", "tokens"),
    ("/detokenize", {"tokens": "1 2"}, "array", "tokens"),
])
def test_bad_tokenize_requests_are_400(server, path, body, needle, param):
    assert_error(call(server, path, body), 400, needle, param)


def test_tokenize_refuses_other_models_and_methods(server):
    assert call(server, "/tokenize", {"model": "gpt-17", "prompt": "x"}).status_code == 404
    assert requests.get(server.url + "/tokenize", timeout=5).status_code == 405


def test_the_api_key_guards_tokenize(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--api-key", "k")
    try:
        assert requests.post(s.url + "/tokenize", json={"prompt": "x"}, timeout=10).status_code == 401
        ok = requests.post(s.url + "/tokenize", json={"prompt": "x"}, headers={"Authorization": "Bearer k"},
                           timeout=10)
        assert ok.status_code == 200
    finally:
        assert s.stop() == 0


def vllm_metrics(server) -> dict[str, float]:
    out = {}
    for line in requests.get(server.url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("vllm:"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_vllm_metrics_count_the_requests(server):
    before = vllm_metrics(server)
    label = 'model_name="smol"'
    for _ in range(3):
        r = requests.post(server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 5, "ignore_eos": True},
                          timeout=60)
        assert r.status_code == 200
    server.wait_for_free_blocks()
    after = vllm_metrics(server)
    for name in ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"]:
        assert f"{name}{{{label}}}" in after
    assert 0 <= after[f"vllm:kv_cache_usage_perc{{{label}}}"] <= 1
    assert after[f"vllm:generation_tokens_total{{{label}}}"] - before[f"vllm:generation_tokens_total{{{label}}}"] == 15
    assert (after[f'vllm:request_success_total{{{label},finished_reason="length"}}']
            - before[f'vllm:request_success_total{{{label},finished_reason="length"}}']) == 3
    for hist in ["time_to_first_token_seconds", "e2e_request_latency_seconds", "request_queue_time_seconds",
                 "request_prefill_time_seconds", "request_decode_time_seconds"]:
        count = f"vllm:{hist}_count{{{label}}}"
        assert after[count] - before.get(count, 0) == 3, hist
        assert after[f'vllm:{hist}_bucket{{{label},le="+Inf"}}'] == after[count]
    # Phases add up: queue + prefill + decode is the end-to-end time, less the time before the engine took it.
    e2e = after[f"vllm:e2e_request_latency_seconds_sum{{{label}}}"]
    parts = sum(after[f"vllm:request_{p}_time_seconds_sum{{{label}}}"] for p in ["queue", "prefill", "decode"])
    assert 0 < parts <= e2e + 1e-6
    # Ours stay beside them.
    text = requests.get(server.url + "/metrics", timeout=10).text
    assert re.search(r"^exactly_num_requests_running \d", text, re.M)
