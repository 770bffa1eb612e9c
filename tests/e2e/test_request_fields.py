"""Nothing a client asks for is silently ignored: each endpoint accepts the
fields the README lists for it and refuses any other with 400 naming the
field (OpenAI's error shape, `param` set); `best_of` is accepted only where
it equals `n`; a client that disconnects from a whole (non-streamed) request
gets it aborted as a streaming one does."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

import pytest

from test_server import ServerProcess, assert_error, post

REPO = Path(__file__).resolve().parents[2]
BASES = {
    "/v1/completions": {"prompt": "Hello", "max_tokens": 2},
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 2},
}


@pytest.fixture(scope="module")
def server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path)
    yield s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


def readme_fields(path: str) -> list[str]:
    """The README's list of accepted fields for an endpoint: the line `- `PATH`: `a`, `b`, ...`."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"^- `" + re.escape(path) + r"`: (.+)$", text, re.M)
    assert m, f"README lists no accepted fields for {path}"
    return re.findall(r"`([a-z_]+)`", m.group(1))


@pytest.mark.parametrize("path", list(BASES))
def test_every_field_the_readme_lists_is_accepted(server, path):
    fields = readme_fields(path)
    assert "model" in fields and "temperature" in fields
    for field in fields:
        body = dict(BASES[path])
        body.setdefault(field, None)  # null reads as absent where OpenAI allows it
        r = post(server, path, body, key=None)
        if r.status_code == 400:
            assert "not supported" not in r.json()["error"]["message"], (field, r.text)


# Fields OpenAI documents that this server does not implement, and names it never heard of.
UNSUPPORTED = ["suffix", "functions", "function_call", "metadata", "store", "service_tier", "modalities",
               "audio", "prediction", "reasoning_effort", "web_search_options", "temprature", "x" * 200]


@pytest.mark.parametrize("path", list(BASES))
@pytest.mark.parametrize("field", UNSUPPORTED)
def test_an_unsupported_field_is_400_naming_it(server, path, field):
    if field in readme_fields(path):
        pytest.skip(f"{field} is supported on {path}")
    body = dict(BASES[path], **{field: 1})
    err = assert_error(post(server, path, body, key=None), 400, "not supported", field)
    assert field[:64] in err["message"] and len(err["message"]) < 300
    assert err["type"] == "invalid_request_error"


@pytest.mark.parametrize("path", list(BASES))
def test_an_unsupported_stream_option_is_400(server, path):
    body = dict(BASES[path], stream=True, stream_options={"include_usage": True, "continuous_usage": True})
    assert_error(post(server, path, body, key=None), 400, "continuous_usage", "stream_options")


@pytest.mark.parametrize("path", list(BASES))
def test_best_of_must_equal_n(server, path):
    assert_error(post(server, path, dict(BASES[path], best_of=3, n=2), key=None), 400, "best_of", "best_of")
    assert_error(post(server, path, dict(BASES[path], best_of=2), key=None), 400, "best_of", "best_of")
    assert_error(post(server, path, dict(BASES[path], best_of="2", n=2), key=None), 400, "best_of", "best_of")
    r = post(server, path, dict(BASES[path], best_of=2, n=2, seed=1), key=None)
    assert r.status_code == 200, r.text
    assert len(r.json()["choices"]) == 2


def test_a_whole_request_whose_client_leaves_is_aborted(server):
    before = server.metrics().get('exactly_request_success_total{finished_reason="abort"}', 0)
    body = json.dumps({"prompt": "Write a very long essay.", "max_tokens": 4000, "temperature": 0,
                       "ignore_eos": True}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(head + body)
        deadline = time.monotonic() + 30
        while server.metrics()["exactly_kv_blocks_used"] == 0:
            assert time.monotonic() < deadline, "the request never ran"
            time.sleep(0.05)
    m = server.wait_for_free_blocks()
    assert m["exactly_kv_blocks_used"] == 0
    assert m['exactly_request_success_total{finished_reason="abort"}'] == before + 1
