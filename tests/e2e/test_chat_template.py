"""Chat templates rendered by exactly equal Python jinja2's rendering, byte for byte.

jinja2 is configured as Hugging Face's apply_chat_template configures it
(transformers/utils/chat_template_utils.py): ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, the loopcontrols extension and the {% generation %} tag, a `tojson` filter that
is json.dumps(ensure_ascii=False, ...), and the raise_exception / strftime_now
globals. strftime_now formats a fixed time on both sides.

Each template is rendered over many conversations by one run of the test tool
build/bin/render_chat_template (a JSON array of contexts in, renderings out).
Templates: the default model's (from its GGUF) and the public templates stored
in tests/data/chat_templates/.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_DIR = REPO_ROOT / "tests" / "data" / "chat_templates"
FIXED_NOW = datetime(2024, 9, 3, 14, 5, 9)


class GenerationTag(jinja2.ext.Extension):
    """transformers' {% generation %} tag (AssistantTracker): marks the assistant's text, renders it unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def hf_environment() -> ImmutableSandboxedEnvironment:
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    return env


def reference_render(template_text: str, context: dict) -> dict:
    try:
        return {"text": hf_environment().from_string(template_text).render(**context)}
    except jinja2.exceptions.TemplateError as e:  # raise_exception and undefined misuse
        return {"error": str(e)}
    except Exception as e:  # noqa: BLE001 - a TypeError in the template is an error on both sides
        return {"error": f"{type(e).__name__}: {e}"}


def render_snippets(tool, tmp_path, snippets: dict, context: dict) -> dict:
    """Renders each snippet over `context` with our renderer: {"text": ...} or {"error": ...} per name."""
    out = {}
    for name, source in snippets.items():
        path = tmp_path / f"{name}.jinja"
        path.write_text(source, encoding="utf-8")
        p = subprocess.run([str(tool), str(path)], input=json.dumps([context]), capture_output=True, text=True,
                           timeout=60)
        out[name] = json.loads(p.stdout)[0] if p.returncode == 0 else {"error": p.stderr.strip()}
    return out


def msg(role, content, **extra):
    return {"role": role, "content": content, **extra}


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather — in °C",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "City, e.g. \"Zürich\""},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
                },
                "required": ["location"],
            },
        },
    },
    {"type": "function", "function": {"name": "noop", "description": "", "parameters": {}}},
]

WEATHER_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"location": "Paris", "days": 2}}}

PLAIN = {
    "system_user": [msg("system", "You are terse."), msg("user", "Hi there!")],
    "user_only": [msg("user", "What is 2+2?")],
    "multi_turn": [
        msg("user", "Hello"),
        msg("assistant", "Hi! How can I help?"),
        msg("user", "Tell me a joke.\nA short one."),
    ],
    "system_multi_turn": [
        msg("system", "  Be kind.\n"),
        msg("user", "a"),
        msg("assistant", "b"),
        msg("user", "c"),
        msg("assistant", "d"),
    ],
    "unicode": [msg("user", "Grüße, 世界! 🙂 «ñ» — ‘q’ \\ \"dq\" tab\there"), msg("assistant", "Привет, мир")],
    "jinja_looking": [msg("user", "{{ 1 + 1 }} {% if x %}y{% endif %} {# c #} {{ raise_exception('no') }}")],
    "padded": [msg("user", "\n\n   padded content   \n"), msg("assistant", "  x  ")],
    "empty_content": [msg("user", "")],
    "thinking": [msg("user", "2+2?"), msg("assistant", "<think>\nadd them\n</think>\n\n4"), msg("user", "ok")],
}

ERRORS = {
    "assistant_first": [msg("assistant", "I speak first"), msg("user", "ok")],
    "two_users": [msg("user", "a"), msg("user", "b")],
    "unknown_role": [msg("user", "a"), msg("critic", "b")],
}

QWEN_TOOLS = [
    ("tools_first_turn", [msg("user", "Weather in Paris?")], TOOLS),
    ("tools_with_system", [msg("system", "Use tools."), msg("user", "Weather?")], TOOLS),
    (
        "tool_round_trip",
        [
            msg("user", "Weather in Paris?"),
            msg("assistant", None, tool_calls=[WEATHER_CALL, {"name": "noop", "arguments": {}}]),
            msg("tool", '{"temp": 21}'),
            msg("tool", "ok"),
            msg("assistant", "It is 21 °C."),
        ],
        TOOLS,
    ),
    ("tool_calls_without_tools", [msg("user", "x"), msg("assistant", "calling", tool_calls=[WEATHER_CALL])], None),
]

# Qwen3's thinking: the switch through chat_template_kwargs, reasoning given
# apart or inside <think> in the content, and a multi-step tool exchange
# (the last user query is the one before the tool responses).
QWEN3_THINKING = [
    ("no_thinking", [msg("user", "2+2?")], {"enable_thinking": False}),
    ("thinking_on", [msg("user", "2+2?")], {"enable_thinking": True}),
    ("reasoning_content", [msg("user", "2+2?"), msg("assistant", "4", reasoning_content="add them"),
                           msg("user", "and 3+3?")], {}),
    ("reasoning_last", [msg("user", "2+2?"), msg("assistant", "\n\n4", reasoning_content="\nadd\n")], {}),
    (
        "multi_step_tools",
        [
            msg("user", "Weather in Paris?"),
            msg("assistant", "<think>\nI should call.\n</think>\n\n", tool_calls=[WEATHER_CALL]),
            msg("tool", "21 degrees"),
            msg("assistant", "<think>\nGot it.\n</think>\n\nIt is 21 degrees."),
        ],
        {"tools": TOOLS},
    ),
]

LLAMA_TOOLS = [
    ("tools_in_user_message", [msg("system", "sys"), msg("user", "Weather in Paris?")], {"tools": TOOLS}),
    ("tools_in_system", [msg("user", "Weather?")], {"tools": TOOLS, "tools_in_user_message": False}),
    (
        "tool_call_and_result",
        [
            msg("user", "Weather?"),
            msg("assistant", "", tool_calls=[WEATHER_CALL]),
            msg("tool", "21 degrees"),
            msg("ipython", {"temp": 21, "unit": "C"}),
        ],
        {"tools": TOOLS, "tools_in_user_message": False},
    ),
    ("date_string", [msg("user", "Date?")], {"date_string": "01 Jan 2025"}),
    ("two_tool_calls", [msg("user", "x"), msg("assistant", "", tool_calls=[WEATHER_CALL, WEATHER_CALL])], {}),
    ("tools_without_user_message", [], {"tools": TOOLS}),
]

LLAMA31_BUILTIN = [
    (
        "builtin_tools",
        [
            msg("user", "Search for llamas"),
            msg("assistant", "", tool_calls=[{"function": {"name": "brave_search", "arguments": {"query": "llamas", "n": "3"}}}]),
        ],
        {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]},
    ),
]


STRING_ARGS_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}

DEEPSEEK_TOOLS = [
    (
        "tool_round_trip",
        [
            msg("system", "sys"),
            msg("user", "Weather?"),
            msg("assistant", None, tool_calls=[STRING_ARGS_CALL, STRING_ARGS_CALL]),
            msg("tool", "21"),
            msg("tool", "22"),
            msg("assistant", "Warm."),
            msg("user", "And now?"),
            msg("assistant", None, tool_calls=[STRING_ARGS_CALL]),
            msg("tool", "23"),
        ],
        {},
    ),
]


# Gemma 3's messages whose content is a list of parts (text and image), the
# system turn folded into the first user turn.
GEMMA3_PARTS = [
    ("parts", [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  What is this?  "}]},
               {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]}], {}),
    ("system-parts", [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                      {"role": "user", "content": "Hi"}], {}),
    ("number-content", [{"role": "user", "content": 5}], {}),
]


# gpt-oss (harmony): tools whose JSON schemas exercise the TypeScript rendering
# (nested objects, arrays of enums, unions, nullable types, defaults, a tool
# given without the "function" wrapper), reasoning as "thinking" or
# "reasoning_content" (kept only after the last user message), calls answered
# by tool_call_id or in order, and malformed conversations (raise_exception).
GPT_OSS_TOOLS = TOOLS + [
    {
        "type": "function",
        "function": {
            "name": "search_docs",
            "description": "Search the documentation.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for"},
                    "filters": {
                        "type": "object",
                        "description": "Narrow the search",
                        "properties": {
                            "year": {"type": ["integer", "null"]},
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "kinds": {"type": "array", "items": {"type": "string", "enum": ["guide", "api"]}},
                            "deep": {"type": "object", "properties": {"ok": {"type": "boolean", "default": True}}},
                        },
                        "required": ["tags"],
                    },
                    "limit": {"type": "integer", "default": 10},
                    "score": {"type": "number", "default": 0.5, "description": "Minimum score"},
                    "mode": {"enum": ["fast", "slow", 3], "default": "fast"},
                    "target": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]},
                    "extra": {"type": "object"},
                    "anything": {},
                    "grid": {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}},
                    "bag": {"type": "array"},
                },
                "required": ["query", "mode"],
            },
        },
    },
    {"name": "bare_tool", "description": "A tool without the function wrapper.",
     "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}},
    {"type": "function", "function": {"name": "no_params"}},
]

CALL_A = {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": {"location": "Paris"}}}
CALL_B = {"id": "call_b", "type": "function", "function": {"name": "search_docs", "arguments": '{"query": "x"}'}}

GPT_OSS = [
    ("effort_high", [msg("user", "2+2?")], {"reasoning_effort": "high"}),
    ("identity", [msg("system", "Be brief."), msg("user", "Hi")], {"model_identity": "You are a test model."}),
    ("rich_tools", [msg("system", "Use tools."), msg("user", "Find docs.")], {"tools": GPT_OSS_TOOLS}),
    ("tools_no_system", [msg("user", "Find docs.")], {"tools": GPT_OSS_TOOLS, "reasoning_effort": "low"}),
    ("developer_first", [msg("developer", "Answer in French."), msg("user", "Hello")], {"tools": TOOLS}),
    ("parts", [{"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
               {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}]}], {}),
    ("reasoning_dropped", [msg("user", "2+2?"), msg("assistant", "4", reasoning_content="add them"),
                           msg("user", "3+3?"), msg("assistant", "6", thinking="add again")], {}),
    ("reasoning_kept_none", [msg("user", "2+2?"), msg("assistant", "4", thinking=None, reasoning_content="add")], {}),
    (
        "tool_chain",
        [
            msg("system", "Use tools."),
            msg("user", "Weather in Paris, and the docs?"),
            msg("assistant", "Let me check.", thinking="I need two calls.", tool_calls=[CALL_A, CALL_B]),
            msg("tool", "docs: none", tool_call_id="call_b"),
            msg("tool", {"temp": 21, "unit": "C"}, tool_call_id="call_a"),
            msg("assistant", None, reasoning_content="Now the second round.", tool_calls=[CALL_B]),
            msg("tool", "still none"),
            msg("assistant", "21 °C in Paris; no docs.", thinking="Done."),
        ],
        {"tools": GPT_OSS_TOOLS},
    ),
    (
        "tool_chain_then_user",
        [
            msg("user", "Weather?"),
            msg("assistant", "", thinking="call it", tool_calls=[CALL_A]),
            msg("tool", "21"),
            msg("assistant", "21 degrees.", thinking="answer"),
            msg("user", "Thanks!"),
        ],
        {"tools": TOOLS, "reasoning_effort": "low"},
    ),
    ("tool_without_call", [msg("user", "x"), msg("tool", "orphan")], {"tools": TOOLS}),
    ("too_many_results", [msg("user", "x"), msg("assistant", None, tool_calls=[CALL_A]), msg("tool", "1"),
                          msg("tool", "2")], {"tools": TOOLS}),
    ("late_system", [msg("user", "x"), msg("system", "late")], {}),
]


def contexts_for(name: str) -> list[tuple[str, dict]]:
    """(case name, context) pairs: every conversation with and without the generation prompt."""
    cases = []
    convs = [(k, m, {}) for k, m in {**PLAIN, **ERRORS}.items()]
    if name.startswith("qwen"):
        convs += [(k, m, {"tools": t} if t else {}) for k, m, t in QWEN_TOOLS]
    if name.startswith("qwen3"):
        convs += QWEN3_THINKING
    if name.startswith("llama-3.1") or name.startswith("llama-3.2"):
        convs += LLAMA_TOOLS
    if name.startswith("llama-3.1"):
        convs += LLAMA31_BUILTIN
    if name.startswith("deepseek"):
        convs += DEEPSEEK_TOOLS
    if name.startswith("gemma-3"):
        convs += GEMMA3_PARTS
    if name.startswith("gpt-oss"):
        convs += [(k, m, {"tools": t} if t else {}) for k, m, t in QWEN_TOOLS] + GPT_OSS
    for case, messages, extra in convs:
        for gen in (True, False):
            context = {**extra, "messages": messages, "add_generation_prompt": gen,
                       "bos_token": "<|bos|>", "eos_token": "<|eos|>"}
            cases.append((f"{case}/gen={gen}", context))
    return cases


def default_model_template() -> str:
    from gguf import GGUFReader

    model = Path(os.environ.get("EXACTLY_MODEL", REPO_ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not model.is_file():
        pytest.fail(f"model not found: {model}")
    field = GGUFReader(str(model)).fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode("utf-8")


TEMPLATE_NAMES = ["default-model"] + sorted(p.stem for p in TEMPLATE_DIR.glob("*.jinja"))


@pytest.fixture(scope="session")
def render_tool() -> Path:
    from shared_fixtures import built_tool
    return built_tool("render_chat_template")


def test_all_expected_templates_are_present():
    assert len(TEMPLATE_NAMES) >= 5, TEMPLATE_NAMES


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_matches_jinja2(name, render_tool, tmp_path):
    if name == "default-model":
        template_text = default_model_template()
        template_file = tmp_path / "default.jinja"
        template_file.write_bytes(template_text.encode("utf-8"))
    else:
        template_file = TEMPLATE_DIR / f"{name}.jinja"
        template_text = template_file.read_bytes().decode("utf-8")

    cases = contexts_for(name)
    proc = subprocess.run(
        [str(render_tool), str(template_file), "--now", FIXED_NOW.strftime("%Y-%m-%dT%H:%M:%S")],
        input=json.dumps([c for _, c in cases]), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(proc.stdout)
    assert len(ours) == len(cases)

    rendered = 0
    for (case, context), got in zip(cases, ours):
        want = reference_render(template_text, context)
        if "text" in want:
            assert got == want, f"{name} {case}: jinja2 rendered {want['text']!r}, we gave {got!r}"
            rendered += 1
        else:
            assert "error" in got, f"{name} {case}: jinja2 failed with {want['error']!r}, we rendered {got!r}"
            if not want["error"].startswith("TypeError"):  # Python's wording of type errors is not ours
                assert want["error"] in got["error"], f"{name} {case}: {got['error']!r} lacks {want['error']!r}"
    # Most conversations are valid for every template, so most must have rendered.
    assert rendered >= len(cases) // 2, f"{name}: only {rendered} of {len(cases)} cases rendered"


def test_raise_exception_cases_really_raise(render_tool):
    """Gemma rejects a system turn and broken alternation; both engines must say so."""
    template_file = TEMPLATE_DIR / "gemma-2-it.jinja"
    cases = [
        {"messages": PLAIN["system_user"], "add_generation_prompt": True, "bos_token": "<bos>", "eos_token": ""},
        {"messages": ERRORS["two_users"], "add_generation_prompt": True, "bos_token": "<bos>", "eos_token": ""},
    ]
    proc = subprocess.run([str(render_tool), str(template_file)], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(proc.stdout)
    assert "System role not supported" in ours[0]["error"]
    assert "Conversation roles must alternate user/assistant/user/assistant/..." in ours[1]["error"]
    assert "line 1, column" in ours[1]["error"]
