"""Tool conversations through the tool-use chat templates of Llama 3.1, Llama
3.2, Qwen2.5 and Qwen3 (Hermes-style <tool_call> blocks), as `exactly serve
--chat-template FILE` renders them for a request: the prompt the server
builds (its /tokenize of the messages and tools, which is what
/v1/chat/completions uses) equals jinja2's rendering of the same conversation
the way transformers and vLLM pass it (a call's arguments as a JSON object in
the client's key order, not the string OpenAI sends), tokenized by the
reference tokenizer. Also: Qwen3's thinking switched off through vLLM's
chat_template_kwargs; --chat-template given inline, and refused when it is
neither a file nor a template or does not parse."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
import requests
import tokenizer_ref
from gguf import GGUFReader

from test_chat_template import TEMPLATE_DIR, TOOLS, hf_environment
from test_server import ServerProcess

TEMPLATES = ["llama-3.1-instruct", "llama-3.2-instruct", "qwen2.5-instruct", "qwen3"]

# OpenAI's shape: arguments as a string, its keys not in sorted order.
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"location": "Zürich", "days": 2, "unit": "celsius"}'}}

CONVERSATIONS = {
    "first_turn": [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Zürich?"}],
    "call_result_answer": [
        {"role": "user", "content": "Weather in Zürich?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"},
        {"role": "user", "content": "And tomorrow?"},
    ],
}


def as_transformers_passes(messages):
    """Content None as "", each call's arguments parsed (key order kept)."""
    out = []
    for m in messages:
        m = {**m, "content": m.get("content") or ""}
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
        out.append(m)
    return out


@pytest.fixture(scope="module")
def special_texts(model_path):
    fields = GGUFReader(str(model_path)).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    return (tokens[int(fields["tokenizer.ggml.bos_token_id"].contents())],
            tokens[int(fields["tokenizer.ggml.eos_token_id"].contents())])


@pytest.fixture(scope="module", params=TEMPLATES)
def templated_server(request, exactly_bin, model_path):
    path = TEMPLATE_DIR / f"{request.param}.jinja"
    s = ServerProcess(exactly_bin, model_path, "--chat-template", path)
    yield path, s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
def test_the_prompt_is_the_templates_rendering(templated_server, conversation, special_texts, ref_tokenizer, bos_id):
    path, server = templated_server
    messages = CONVERSATIONS[conversation]
    r = requests.post(server.url + "/tokenize", json={"messages": messages, "tools": TOOLS}, timeout=60)
    assert r.status_code == 200, r.text
    env = hf_environment()
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)  # as the server's clock
    text = env.from_string(Path(path).read_text(encoding="utf-8")).render(
        messages=as_transformers_passes(messages), tools=TOOLS, add_generation_prompt=True,
        bos_token=special_texts[0], eos_token=special_texts[1])
    assert "get_weather" in text  # the template rendered the tools or the call
    if conversation == "call_result_answer":
        assert "21 degrees" in text and '"days": 2' in text and text.index('"location"') < text.index('"days"')
    ids = tokenizer_ref.encode(ref_tokenizer, text, bos_id=None)
    if bos_id is not None and (not ids or ids[0] != bos_id):
        ids = [bos_id] + ids
    assert r.json()["tokens"] == ids


def reference_ids(path, messages, special_texts, ref_tokenizer, bos_id, **variables):
    text = hf_environment().from_string(Path(path).read_text(encoding="utf-8")).render(
        messages=as_transformers_passes(messages), add_generation_prompt=True, bos_token=special_texts[0],
        eos_token=special_texts[1], **variables)
    ids = tokenizer_ref.encode(ref_tokenizer, text, bos_id=None)
    return text, ([bos_id] + ids if bos_id is not None and (not ids or ids[0] != bos_id) else ids)


@pytest.fixture(scope="module")
def qwen3_server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--chat-template", TEMPLATE_DIR / "qwen3.jinja")
    yield s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


def test_chat_template_kwargs_switch_qwen3_thinking_off(qwen3_server, special_texts, ref_tokenizer, bos_id):
    messages = CONVERSATIONS["first_turn"]
    body = {"messages": messages, "chat_template_kwargs": {"enable_thinking": False}}
    r = requests.post(qwen3_server.url + "/tokenize", json=body, timeout=60)
    assert r.status_code == 200, r.text
    text, ids = reference_ids(TEMPLATE_DIR / "qwen3.jinja", messages, special_texts, ref_tokenizer, bos_id,
                              enable_thinking=False)
    assert text.endswith("<think>\n\n</think>\n\n")
    assert r.json()["tokens"] == ids
    plain = requests.post(qwen3_server.url + "/tokenize", json={"messages": messages}, timeout=60).json()
    assert plain["count"] < r.json()["count"]
    chat = requests.post(qwen3_server.url + "/v1/chat/completions", json={**body, "max_tokens": 1}, timeout=60)
    assert chat.status_code == 200, chat.text
    assert chat.json()["usage"]["prompt_tokens"] == r.json()["count"]


@pytest.mark.parametrize("kwargs, needle", [
    ({"add_generation_prompt": False}, "add_generation_prompt"),
    ({"messages": []}, "messages"),
    ("enable_thinking=false", "object"),
])
def test_bad_chat_template_kwargs_are_400(qwen3_server, kwargs, needle):
    for path in ("/v1/chat/completions", "/tokenize"):
        r = requests.post(qwen3_server.url + path, json={"messages": CONVERSATIONS["first_turn"],
                                                          "chat_template_kwargs": kwargs}, timeout=60)
        assert r.status_code == 400, (path, r.text)
        err = r.json()["error"]
        assert needle in err["message"] and err["param"] == "chat_template_kwargs", (path, err)


def test_deeply_nested_arguments_are_400(templated_server):
    _, server = templated_server
    deep = {**CALL, "function": {"name": "get_weather", "arguments": "[" * 100000 + "]" * 100000}}
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [deep]}]
    r = requests.post(server.url + "/v1/chat/completions", json={"messages": messages, "max_tokens": 1}, timeout=60)
    assert r.status_code == 400 and "nest" in r.json()["error"]["message"], r.text
    assert requests.get(server.url + "/health", timeout=10).status_code == 200


def test_arguments_that_are_not_json_are_400(templated_server):
    _, server = templated_server
    bad = {**CALL, "function": {"name": "get_weather", "arguments": "{not json"}}
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [bad]}]
    r = requests.post(server.url + "/v1/chat/completions", json={"messages": messages, "max_tokens": 1}, timeout=60)
    assert r.status_code == 400
    assert "arguments" in r.json()["error"]["message"] and r.json()["error"]["param"] == "messages"


def test_an_inline_template_is_used(exactly_bin, model_path):
    template = "{% for m in messages %}<<{{ m.role }}|{{ m.content }}>>{% endfor %}"
    s = ServerProcess(exactly_bin, model_path, "--chat-template", template)
    try:
        out = requests.post(s.url + "/tokenize", json={"messages": [{"role": "user", "content": "hey"}]},
                            timeout=60).json()
        text = requests.post(s.url + "/detokenize", json={"tokens": out["tokens"]}, timeout=60).json()["prompt"]
        assert text == "<<user|hey>>"
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("value, code, needle", [
    ("not-a-file-nor-template", 64, "neither a file nor a Jinja template"),
    ("{% if %}", 2, "line 1"),
])
def test_bad_chat_templates_are_refused_at_start(exactly_bin, model_path, value, code, needle):
    p = subprocess.run([str(exactly_bin), "serve", "-m", str(model_path), "--port", "0", "--chat-template", value],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == code, p.stderr
    assert "--chat-template" in p.stderr and needle in p.stderr


def test_run_refuses_a_template_without_chat(exactly_bin, model_path):
    p = subprocess.run([str(exactly_bin), "run", "-m", str(model_path), "-p", "x", "-n", "1",
                        "--chat-template", str(TEMPLATE_DIR / "qwen2.5-instruct.jinja")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 64 and "--chat" in p.stderr
