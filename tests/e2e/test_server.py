"""`exactly serve` through the official OpenAI client and raw HTTP: completions
and chat, whole and streamed, n, batched prompts, logprobs, stop strings, echo,
seeded reproducibility (and agreement with `exactly batch`), usage, API keys,
and every error status in OpenAI's error shape. The server runs on a free
loopback port and must exit 0 on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import openai
import pytest
import requests

API_KEY = "test-key-123"
CHAT = "<|im_start|>user\nName three fruits.<|im_end|>\n<|im_start|>assistant\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """A running `exactly serve`; stop() sends SIGTERM and returns the exit code."""

    def __init__(self, exactly_bin, model_path, *extra, startup_timeout: float = 60):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.devnull, "w")
        self.proc = subprocess.Popen(
            [str(exactly_bin), "serve", "-m", str(model_path), "--port", str(self.port), "--kv-cache-memory", "256MiB",
             "-t", "2", *map(str, extra)], stdout=self.log, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"server exited with {self.proc.returncode}: {self.proc.stderr.read()[-2000:]}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        self.proc.kill()
        pytest.fail("server did not become healthy in time")

    def metrics(self) -> dict[str, float]:
        text = requests.get(self.url + "/metrics", timeout=10).text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def wait_for_free_blocks(self, timeout: float = 15) -> dict[str, float]:
        deadline = time.monotonic() + timeout
        while True:
            m = self.metrics()
            if m["exactly_kv_blocks_used"] == 0 and m["exactly_num_requests_running"] == 0:
                return m
            if time.monotonic() > deadline:
                return m
            time.sleep(0.1)

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def stop(self, timeout: float = 30) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.log.close()
        return code


@pytest.fixture(scope="module")
def server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--api-key", API_KEY, "--served-model-name", "smol",
                      "--max-body-bytes", 65536)
    yield s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def post(server, path, body, key=API_KEY, **kw):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return requests.post(server.url + path, headers=headers, timeout=60, **kw,
                         **({"data": body} if isinstance(body, (str, bytes)) else {"json": body}))


def assert_error(resp, status, needle=None, param=None):
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    if needle:
        assert needle in err["message"], err
    if param:
        assert err["param"] == param, err
    return err


def test_models_and_health(server, client):
    assert [m.id for m in client.models.list().data] == ["smol"]
    assert requests.get(server.url + "/health", timeout=5).status_code == 200


def test_completion_usage_counts_tokens(client, run_exactly, model_path):
    prompt_ids = json.loads(run_exactly(["tokenize", "-m", str(model_path), "--json", CHAT]).stdout)
    r = client.completions.create(model="smol", prompt=CHAT, max_tokens=12, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens == len(prompt_ids)
    assert r.usage.completion_tokens == 12
    assert r.usage.total_tokens == len(prompt_ids) + 12
    assert r.usage.prompt_tokens_details.cached_tokens <= len(prompt_ids)
    # A prompt of several 16-token blocks, sent twice: the second reuses its
    # full blocks through the prefix cache.
    long_prompt = CHAT * 4
    first = client.completions.create(model="smol", prompt=long_prompt, max_tokens=2, temperature=0)
    again = client.completions.create(model="smol", prompt=long_prompt, max_tokens=2, temperature=0)
    assert again.usage.prompt_tokens == first.usage.prompt_tokens
    assert 16 <= again.usage.prompt_tokens_details.cached_tokens < again.usage.prompt_tokens
    assert again.choices[0].text == first.choices[0].text


def test_seed_reproducible_and_same_as_batch(client, run_exactly, model_path, tmp_path):
    prompt_ids = json.loads(run_exactly(["tokenize", "-m", str(model_path), "--json", CHAT]).stdout)
    req = {"prompt": prompt_ids, "max_tokens": 24, "temperature": 0.9, "top_p": 0.95, "seed": 1234}
    a = client.completions.create(model="smol", **req)
    b = client.completions.create(model="smol", **req)
    assert a.choices[0].text == b.choices[0].text
    other = client.completions.create(model="smol", **{**req, "seed": 99})
    assert a.usage.completion_tokens > 3
    (tmp_path / "in.jsonl").write_text(json.dumps(req) + "\n")
    run_exactly(["batch", "-m", str(model_path), "-i", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o.jsonl")])
    batch = json.loads((tmp_path / "o.jsonl").read_text())
    assert batch["choices"][0]["text"] == a.choices[0].text
    assert len(batch["choices"][0]["token_ids"]) == a.usage.completion_tokens
    # A different seed almost surely samples differently at temperature 0.9 over 24 tokens.
    assert other.choices[0].text != a.choices[0].text


def test_streamed_completion_equals_whole(client):
    whole = client.completions.create(model="smol", prompt=CHAT, max_tokens=20, temperature=0)
    chunks = list(client.completions.create(model="smol", prompt=CHAT, max_tokens=20, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].choices == []


def test_chat_whole_and_streamed_agree(client):
    msgs = [{"role": "user", "content": "Name three fruits."}]
    whole = client.chat.completions.create(model="smol", messages=msgs, max_tokens=24, temperature=0)
    assert whole.choices[0].message.role == "assistant"
    assert len(whole.choices[0].message.content) > 0
    stream = client.chat.completions.create(model="smol", messages=msgs, max_tokens=24, temperature=0, stream=True)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == whole.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason


def test_chat_logprobs_shape(client):
    r = client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Hi"}], max_tokens=5,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3
        assert bytes(t.bytes) == t.token.encode("utf-8", "surrogatepass") or "\ufffd" in t.token
        # Greedy: the chosen token is the most likely one.
        assert t.top_logprobs[0].logprob == pytest.approx(t.logprob)
    assert "".join(t.token for t in content) == r.choices[0].message.content


def test_n_and_batched_prompts_number_choices(client):
    r = client.completions.create(model="smol", prompt=["Once upon a time", "The capital of France is"],
                                  max_tokens=6, temperature=1.0, seed=5, n=2, logprobs=2)
    assert sorted(c.index for c in r.choices) == [0, 1, 2, 3]
    for c in r.choices:
        assert c.finish_reason in ("stop", "length")
        assert len(c.logprobs.tokens) == len(c.logprobs.token_logprobs)
        assert all(len(alts) == 2 for alts in c.logprobs.top_logprobs)
    assert r.usage.completion_tokens == sum(len(c.logprobs.tokens) for c in r.choices)


def test_stop_string_cuts_the_text(client):
    full = client.completions.create(model="smol", prompt=CHAT, max_tokens=30, temperature=0,
                                     extra_body={"ignore_eos": True}).choices[0].text
    words = full.split()
    assert len(words) > 3, full
    stop = words[2]
    r = client.completions.create(model="smol", prompt=CHAT, max_tokens=30, temperature=0, stop=[stop, "\u00a7\u00a7"])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == full[:full.index(stop)]


def test_echo_prepends_the_prompt(client):
    r = client.completions.create(model="smol", prompt="The sky is", max_tokens=4, temperature=0, echo=True)
    assert r.choices[0].text.startswith("The sky is")
    assert len(r.choices[0].text) > len("The sky is")


@pytest.mark.parametrize("body, status, needle, param", [
    ('{"prompt": "hi", ', 400, "JSON", None),
    ('[1, 2]', 400, "object", None),
    ({"prompt": "hi", "max_tokens": "many"}, 400, "max_tokens", "max_tokens"),
    ({"prompt": 5}, 400, "prompt", "prompt"),
    ({"prompt": "hi", "temperature": -1}, 400, "temperature", "temperature"),
    ({"prompt": "hi", "stream": "yes"}, 400, "stream", "stream"),
    ({"prompt": [1, 2, 999999]}, 400, "vocabulary", "prompt"),
    ({"prompt": "hi", "max_tokens": 9000}, 400, "8192", "max_tokens"),
    ({"prompt": "hi", "model": "gpt-17"}, 404, "gpt-17", "model"),
])
def test_bad_completion_requests(server, body, status, needle, param):
    err = assert_error(post(server, "/v1/completions", body), status, needle, param)
    if status == 404:
        assert err["code"] == "model_not_found"


def test_context_overflow_names_the_numbers(server):
    err = assert_error(post(server, "/v1/completions", {"prompt": [1] * 8000, "max_tokens": 500}), 400, "8192")
    assert "8000" in err["message"] and "500" in err["message"] and "8500" in err["message"]


def test_bad_chat_requests(server):
    assert_error(post(server, "/v1/chat/completions", {"messages": "hi"}), 400, "messages", "messages")
    assert_error(post(server, "/v1/chat/completions", {}), 400, "messages", "messages")
    assert_error(post(server, "/v1/chat/completions", {"messages": [{"content": "x"}]}), 400, "role", "messages")
    assert_error(post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                       "top_logprobs": 2}), 400, "logprobs", "top_logprobs")


def test_api_key_is_required(server):
    ok = {"prompt": "hi", "max_tokens": 1}
    assert_error(post(server, "/v1/completions", ok, key=None), 401)
    assert_error(post(server, "/v1/completions", ok, key="wrong"), 401)
    assert requests.get(server.url + "/v1/models", timeout=5).status_code == 401
    assert post(server, "/v1/completions", ok).status_code == 200
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_oversized_body_is_413(server):
    err = assert_error(post(server, "/v1/completions", json.dumps({"prompt": "x" * 70000})), 413, "65536")
    assert err["code"] == "request_too_large"
    # The server still answers afterwards.
    assert post(server, "/v1/completions", {"prompt": "hi", "max_tokens": 1}).status_code == 200


def test_unknown_route_is_404(server):
    assert_error(requests.get(server.url + "/v1/nothing", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=5),
                 404)


def test_no_blocks_leak_after_the_requests(server):
    m = server.wait_for_free_blocks()
    assert m["exactly_kv_blocks_used"] == 0
    assert m["exactly_kv_blocks_total"] > 0
    assert m["exactly_generation_tokens_total"] > 0
    assert m["exactly_time_to_first_token_seconds_count"] > 0
