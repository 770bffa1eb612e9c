"""`exactly serve --reasoning-parser deepseek_r1|qwen3` (vLLM's names): a chat
answer's <think>...</think> comes back as the message's `reasoning_content`,
the rest as its `content`, whole and streamed (the deltas add up to the
whole, reasoning first); tool calls are looked for in the content only.
The model is made to write known text with a guided_regex. Without the flag
the text is all content; an unknown parser name is refused at start."""

from __future__ import annotations

import subprocess

import openai
import pytest

from test_server import ServerProcess
from test_tool_calls import ASK, HERMES, MODEL, TOOLS


def start(exactly_bin, model_path, *flags):
    s = ServerProcess(exactly_bin, model_path, *flags)
    return s, openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def servers(exactly_bin, model_path):
    made = {name: start(exactly_bin, model_path, *flags) for name, flags in
            {"deepseek_r1": ("--reasoning-parser", "deepseek_r1"), "qwen3": ("--reasoning-parser", "qwen3"),
             "none": ()}.items()}
    yield {name: client for name, (_, client) in made.items()}
    for s, _ in made.values():
        assert s.stop() == 0, s.proc.stderr.read()[-2000:]


def answer(client, regex, **extra):
    body = dict(model=MODEL, messages=ASK, temperature=0, max_tokens=80, extra_body={"guided_regex": regex}, **extra)
    whole = client.chat.completions.create(**body).choices[0].message
    reasoning, content, order = "", "", []
    for chunk in client.chat.completions.create(**body, stream=True):
        for ch in chunk.choices:
            r = getattr(ch.delta, "reasoning_content", None) or (ch.delta.model_extra or {}).get("reasoning_content")
            if r:
                reasoning += r
                order.append("r")
            if ch.delta.content:
                content += ch.delta.content
                order.append("c")
    return whole, reasoning, content, order


def reasoning_of(message):
    return getattr(message, "reasoning_content", None) or (message.model_extra or {}).get("reasoning_content")


THOUGHT = r"<think>The user asks about Paris\. Check the weather\.</think>It is sunny in Paris\."


@pytest.mark.parametrize("parser", ["deepseek_r1", "qwen3"])
def test_thinking_is_reasoning_content_whole_and_streamed(servers, parser):
    whole, reasoning, content, order = answer(servers[parser], THOUGHT)
    assert reasoning_of(whole) == "The user asks about Paris. Check the weather."
    assert whole.content == "It is sunny in Paris."
    assert (reasoning, content) == (reasoning_of(whole), whole.content)
    assert order.index("c") > max(i for i, kind in enumerate(order) if kind == "r")  # reasoning first
    assert order.count("r") >= 3  # streamed as it came, not at the end


def test_deepseek_r1_reads_reasoning_before_a_close_without_an_open(servers):
    whole, reasoning, content, _ = answer(servers["deepseek_r1"], r"Thinking it over\.</think>Sunny\.")
    assert (reasoning_of(whole), whole.content) == ("Thinking it over.", "Sunny.") == (reasoning, content)


def test_qwen3_takes_an_answer_without_think_as_content(servers):
    whole, reasoning, content, _ = answer(servers["qwen3"], r"Sunny, and warm\. </think> stays text")
    assert reasoning_of(whole) is None and reasoning == ""
    assert whole.content == content == "Sunny, and warm. </think> stays text"


def test_without_a_parser_the_thinking_stays_in_the_content(servers):
    whole, reasoning, content, _ = answer(servers["none"], THOUGHT)
    assert reasoning_of(whole) is None and reasoning == ""
    assert whole.content == content == THOUGHT.replace("\\", "")


def test_tool_calls_are_found_after_the_reasoning(servers):
    whole, reasoning, content, _ = answer(servers["qwen3"], r"<think>A tool knows\.</think>" + HERMES, tools=TOOLS)
    assert reasoning_of(whole) == reasoning == "A tool knows."
    assert [t.function.name for t in whole.tool_calls] == ["get_weather"] and whole.content is None


def test_an_unknown_parser_is_refused(exactly_bin, model_path):
    p = subprocess.run([str(exactly_bin), "serve", "-m", str(model_path), "--reasoning-parser", "granite"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 64 and "--reasoning-parser" in p.stderr, p.stderr
