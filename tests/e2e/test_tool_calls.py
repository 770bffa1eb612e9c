"""Tool calls through the official openai client: a required or named call
is generated under the function's schema (validated with `jsonschema`);
under `auto` the model's own formats are found (Hermes/SmolLM2
<tool_call> blocks, Llama 3.1's JSON) and returned as tool_calls, streamed
as deltas too, the rest as content; assistant tool_calls and `tool`
messages go back through the chat template; bad tools are 400. The model
is made to write a given format with a guided_regex, so detection is
tested on known text."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest
import requests

from test_server import ServerProcess, assert_error

MODEL = "SmolLM2-135M-Instruct.Q4_1"
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                            "unit": {"enum": ["c", "f"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "Local time in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                                                          "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path)
    yield s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_a_forced_call_follows_the_function_schema(client, choice):
    for seed in range(3):
        r = client.chat.completions.create(model=MODEL, messages=ASK, tools=TOOLS, tool_choice=choice,
                                           temperature=1.0, seed=seed, max_tokens=100)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", c
        assert c.message.content is None and len(c.message.tool_calls) == 1
        call = c.message.tool_calls[0]
        assert call.type == "function" and call.id.startswith("call_")
        if isinstance(choice, dict):
            assert call.function.name == "get_weather"
        schema = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == call.function.name)
        jsonschema.validate(json.loads(call.function.arguments), schema)


def regex_body(regex, **kw):
    return dict(model=MODEL, messages=ASK, tools=TOOLS, temperature=0, max_tokens=120,
                extra_body={"guided_regex": regex}, **kw)


HERMES = r'<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Paris", "unit": "c"\}\}\n</tool_call>'
SMOL_LIST = (r'<tool_call>\[\{"name": "get_weather", "arguments": \{"city": "Paris", "unit": "c"\}\}, '
             r'\{"name": "get_time", "arguments": \{"city": "Paris"\}\}\]</tool_call>')
LLAMA = r'\{"name": "get_time", "parameters": \{"city": "Rome"\}\}'


@pytest.mark.parametrize("regex, calls, content", [
    (HERMES, [("get_weather", {"city": "Paris", "unit": "c"})], None),
    (SMOL_LIST, [("get_weather", {"city": "Paris", "unit": "c"}), ("get_time", {"city": "Paris"})], None),
    (LLAMA, [("get_time", {"city": "Rome"})], None),
    ("Let me check. " + HERMES, [("get_weather", {"city": "Paris", "unit": "c"})], "Let me check."),
    (r'<tool_call>\{"name": "launch_rocket", "arguments": \{\}\}</tool_call>', [], "<tool_call>"),
    (r"It is sunny\.", [], "It is sunny."),
])
def test_auto_finds_calls_in_the_models_formats(client, regex, calls, content):
    r = client.chat.completions.create(**regex_body(regex))
    c = r.choices[0]
    got = [(t.function.name, json.loads(t.function.arguments)) for t in c.message.tool_calls or []]
    assert got == calls
    assert c.finish_reason == ("tool_calls" if calls else "stop")
    if content is None:
        assert c.message.content is None
    else:
        assert c.message.content.startswith(content)


def test_parallel_tool_calls_false_keeps_the_first(client):
    r = client.chat.completions.create(**regex_body(SMOL_LIST, parallel_tool_calls=False))
    assert [t.function.name for t in r.choices[0].message.tool_calls] == ["get_weather"]


def test_tool_choice_none_returns_text(client):
    r = client.chat.completions.create(**regex_body(HERMES, tool_choice="none"))
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].message.content.startswith("<tool_call>")


def test_streamed_calls_come_as_deltas_equal_to_the_whole_answer(client):
    whole = client.chat.completions.create(**regex_body("Let me check. " + HERMES))
    stream = client.chat.completions.create(**regex_body("Let me check. " + HERMES), stream=True)
    content, calls, finish = "", {}, None
    for chunk in stream:
        for ch in chunk.choices:
            d = ch.delta
            content += d.content or ""
            for t in d.tool_calls or []:
                entry = calls.setdefault(t.index, {"id": t.id, "name": "", "arguments": ""})
                entry["name"] += t.function.name or ""
                entry["arguments"] += t.function.arguments or ""
            finish = ch.finish_reason or finish
    assert finish == "tool_calls"
    assert content == whole.choices[0].message.content
    w = whole.choices[0].message.tool_calls
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == \
        [(t.function.name, json.loads(t.function.arguments)) for t in w]


@pytest.mark.parametrize("regex, incremental", [
    ("Let me check the weather for you now. " + HERMES, True),
    (r"It is sunny in Paris today, and warm\. Enjoy <your day\.", True),
    (LLAMA, False),
])
def test_content_streams_as_it_comes_while_tools_are_offered(client, regex, incremental):
    """Under auto, text that is certainly content is sent before the answer ends (never a piece of a call), and the
    deltas add up to the whole answer's content."""
    whole = client.chat.completions.create(**regex_body(regex)).choices[0].message
    deltas, calls_seen_at = [], None
    for chunk in client.chat.completions.create(**regex_body(regex), stream=True):
        for ch in chunk.choices:
            if ch.delta.tool_calls and calls_seen_at is None:
                calls_seen_at = len(deltas)
            if ch.delta.content:
                deltas.append(ch.delta.content)
    assert "".join(deltas) == (whole.content or "")
    assert not any("<tool" in d or "{" in d for d in deltas)
    before_end = len(deltas) - 1 if calls_seen_at is None else calls_seen_at
    assert (before_end >= 3) == incremental, deltas


def test_round_trip_call_tool_message_answer(server, client):
    first = client.chat.completions.create(model=MODEL, messages=ASK, tools=TOOLS,
                                           tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                           temperature=0, max_tokens=60)
    call = first.choices[0].message.tool_calls[0]
    messages = ASK + [first.choices[0].message.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": call.id, "content": "18 degrees and sunny"}]
    answer = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, temperature=0,
                                            max_tokens=40)
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")
    # The prompt the answer came from holds the call and the tool's result, through the template.
    ids = requests.post(server.url + "/tokenize", json={"messages": messages, "tools": TOOLS},
                        timeout=30).json()["tokens"]
    prompt = requests.post(server.url + "/detokenize", json={"tokens": ids}, timeout=30).json()["prompt"]
    assert "18 degrees and sunny" in prompt
    block = prompt[prompt.rindex("<tool_call>") + len("<tool_call>"):prompt.rindex("</tool_call>")]  # the last: the call
    assert json.loads(block) == {"name": call.function.name, "arguments": json.loads(call.function.arguments)}
    assert "<tools>" in prompt and "Current weather in a city" in prompt  # the template renders no tools itself
    assert answer.usage.prompt_tokens == len(ids)


@pytest.mark.parametrize("extra, needle, param", [
    ({"tools": "get_weather"}, "array", "tools"),
    ({"tools": [{"type": "function", "function": {"description": "x"}}]}, "name", "tools"),
    ({"tools": [{"type": "retrieval"}]}, "function", "tools"),
    ({"tools": TOOLS + TOOLS[:1]}, "twice", "tools"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice", "tool_choice"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "fly"}}}, "fly", "tool_choice"),
    ({"tool_choice": "required"}, "tools", "tool_choice"),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "boolean", "parallel_tool_calls"),
    ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool", "response_format"),
])
def test_bad_tools_are_400(server, extra, needle, param):
    body = dict({"messages": ASK, "max_tokens": 4}, **extra)
    r = requests.post(server.url + "/v1/chat/completions", json=body, timeout=30)
    assert_error(r, 400, needle, param)


def test_tools_are_refused_on_completions(server):
    r = requests.post(server.url + "/v1/completions", json={"prompt": "x", "tools": TOOLS}, timeout=30)
    assert_error(r, 400, "not supported", "tools")
