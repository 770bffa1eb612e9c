"""`exactly serve` against input an attacker or a careless client sends: every
such request gets a 4xx in OpenAI's error shape naming what is wrong, and the
server keeps answering afterwards (it never crashes or hangs on one body)."""

from __future__ import annotations

import json

import pytest
import requests

from test_server import ServerProcess, assert_error


@pytest.fixture(scope="module")
def server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--max-body-bytes", 1 << 20)
    yield s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


def post_raw(server, path, data: bytes):
    return requests.post(server.url + path, data=data, headers={"Content-Type": "application/json"}, timeout=60)


def assert_4xx(resp, needle=None, param=None):
    return assert_error(resp, 400, needle, param)


def assert_alive(server):
    r = requests.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 1}, timeout=60)
    assert r.status_code == 200, r.text


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("where", ["extra", "content"])
def test_deep_nesting_is_refused_not_a_crash(server, where):
    # 30,000 levels once killed the process with a stack overflow while the
    # message was turned into template values.
    message = '{"role": "user", "content": "hi", "extra": %s}' if where == "extra" else '{"role": "user", "content": %s}'
    body = '{"messages": [%s], "max_tokens": 1}' % (message % nested(30000))
    assert_4xx(post_raw(server, "/v1/chat/completions", body.encode()), "nest")
    assert_alive(server)


def test_nesting_within_the_limit_is_accepted(server):
    # 100 levels of an unused field stay well inside the limit (128).
    body = {"messages": [{"role": "user", "content": "hi", "extra": json.loads(nested(100))}], "max_tokens": 1}
    r = requests.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text


def test_deep_nesting_on_completions_too(server):
    body = '{"prompt": "hi", "max_tokens": 1, "user_data": %s}' % nested(5000)
    assert_4xx(post_raw(server, "/v1/completions", body.encode()), "nest")
    assert_alive(server)


@pytest.mark.parametrize("body, needle, param", [
    (b'{"prompt": "hi", "max_tokens": 1, "temperature": 1e309}', "number", None),
    (b'{"prompt": "hi", "max_tokens": 1, "temperature": -1e309}', "number", None),
    (b'{"prompt": "hi", "max_tokens": 1, "n": 4294967297}', "n", "n"),
    (b'{"prompt": "hi", "max_tokens": 1, "top_k": 4294967297}', "top_k", "top_k"),
    (b'{"prompt": "hi", "max_tokens": 1, "top_k": -7}', "top_k", "top_k"),
    (b'{"prompt": "hi", "max_tokens": 1, "priority": 18446744073709551615}', "priority", "priority"),
    (b'{"prompt": "hi", "max_tokens": 1, "stop_token_ids": [4294967297]}', "stop_token_ids", "stop_token_ids"),
    (b'{"prompt": "hi", "max_tokens": 1, "temperature": 1e39}', "temperature", "temperature"),
    (b'{"prompt": "hi", "max_tokens": 1}\x00{"garbage": true}', "NUL", None),
    (b'{"prompt": "hi", "max_tokens": 1}\x00', "NUL", None),
    (b'{"prompt": "hi", "max_tokens": 1} {"second": 1}', "JSON", None),
    (b'{"prompt": "hi", "max_tokens": 1} trailing', "JSON", None),
    (b'\xff\xfe{"prompt": "hi"}', "JSON", None),
])
def test_bad_numbers_and_bodies_are_400(server, body, needle, param):
    assert_4xx(post_raw(server, "/v1/completions", body), needle, param)
    assert_alive(server)


@pytest.mark.parametrize("content", [
    [{"type": 5, "text": "hi"}],
    [{"type": ["text"], "text": "hi"}],
    [{"type": None, "text": "hi"}],
    [{"type": "text", "text": 5}],
    [{"type": "image_url", "image_url": {"url": "x"}}],
    ["hi"],
    [None],
    {"type": "text", "text": "hi"},
])
def test_bad_content_parts_are_400(server, content):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 1}
    assert_4xx(requests.post(server.url + "/v1/chat/completions", json=body, timeout=60), "messages", "messages")
    assert_alive(server)


def test_batch_refuses_deep_nesting(run_exactly, model_path, tmp_path):
    (tmp_path / "in.jsonl").write_text('{"prompt": "hi", "max_tokens": 1, "x": %s}\n' % nested(30000))
    proc = run_exactly(["batch", "-m", str(model_path), "-i", str(tmp_path / "in.jsonl"),
                        "-o", str(tmp_path / "o.jsonl")], check=False)
    assert proc.returncode == 2, proc.stderr[-500:]
    assert "in.jsonl:1" in proc.stderr and "nest" in proc.stderr
