"""The Python package (python/exactly, imported from the build under test):
generate, chat and stream against `exactly batch` and independent references
(Hugging Face's rendering of the chat template, the reference tokenizer),
seeded outputs equal to the CLI's bit for bit, bad arguments refused with
Python exceptions that name them, the GIL released while the engine steps,
memory returned after `del llm`, and `python -m exactly` as the CLI."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("EXACTLY_BUILD_DIR", REPO_ROOT / "build"))
PACKAGE_DIR = BUILD_DIR / "python"

if not (PACKAGE_DIR / "exactly" / "__init__.py").exists():
    pytest.fail(f"{PACKAGE_DIR}/exactly not built (the build needs Python's headers and nanobind)",
                pytrace=False)
sys.path.insert(0, str(PACKAGE_DIR))
import exactly  # noqa: E402
from exactly import LLM, SamplingParams  # noqa: E402

ENGINE_ARGS = {"kv_cache_memory": "256MiB", "threads": 2}
CLI_ENGINE_ARGS = ["--kv-cache-memory", "256MiB", "-t", "2"]
MESSAGES = [{"role": "system", "content": "Answer in one short sentence."},
            {"role": "user", "content": "What colour is the sky?"}]


@pytest.fixture(scope="module")
def llm(model_path):
    return LLM(model=str(model_path), **ENGINE_ARGS)


def batch_results(run_exactly, model_path, tmp_path, bodies):
    requests_file, results_file = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    requests_file.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    run_exactly(["batch", "-m", model_path, "-i", requests_file, "-o", results_file, *CLI_ENGINE_ARGS])
    return [json.loads(line) for line in results_file.read_text().splitlines()]


# Seeded sampling with every output field: logprobs with alternatives, prompt
# logprobs, n > 1, a stop string, penalties, and greedy decoding.
REQUESTS = [
    ("The sea at night is", SamplingParams(temperature=0.9, top_p=0.95, seed=7, max_tokens=24, logprobs=3,
                                           prompt_logprobs=2)),
    ("List three colours:", SamplingParams(temperature=0.7, top_k=40, seed=11, n=2, max_tokens=20,
                                           stop=["\n\n"], presence_penalty=0.5, logprobs=1)),
    ([1, 504, 3458, 314], SamplingParams(temperature=0, max_tokens=12, repetition_penalty=1.2)),
]


def test_generate_equals_exactly_batch_bit_for_bit(llm, run_exactly, model_path, tmp_path):
    outputs = llm.generate([p for p, _ in REQUESTS], [sp for _, sp in REQUESTS])
    bodies = [{"prompt": p, **sp.request_fields()} for p, sp in REQUESTS]
    expected = batch_results(run_exactly, model_path, tmp_path, bodies)
    assert len(outputs) == len(expected) == len(REQUESTS)
    for out, ref, (prompt, sp) in zip(outputs, expected, REQUESTS):
        assert out.finished
        assert len(out.outputs) == len(ref["choices"]) == sp.n
        assert len(out.prompt_token_ids) == ref["usage"]["prompt_tokens"]
        for c, rc in zip(out.outputs, ref["choices"]):
            assert c.text == rc["text"]
            assert c.token_ids == rc["token_ids"]
            assert c.finish_reason == rc["finish_reason"]
            if sp.logprobs is None:
                assert c.logprobs is None and rc["logprobs"] is None
                continue
            lp = rc["logprobs"]
            assert [pos[t].logprob for pos, t in zip(c.logprobs, c.token_ids)] == lp["token_logprobs"]
            assert [{e.decoded_token: e.logprob for e in pos.values() if e.rank <= sp.logprobs}
                    for pos in c.logprobs] == lp["top_logprobs"]
            assert c.cumulative_logprob == pytest.approx(sum(lp["token_logprobs"]), abs=1e-9)
        if sp.prompt_logprobs is None:
            assert out.prompt_logprobs is None and "prompt_logprobs" not in ref
        else:
            assert out.prompt_logprobs[0] is None and ref["prompt_logprobs"][0] is None
            got = [{str(t): {"logprob": e.logprob, "rank": e.rank, "decoded_token": e.decoded_token}
                    for t, e in pos.items()} for pos in out.prompt_logprobs[1:]]
            assert got == ref["prompt_logprobs"][1:]


def test_text_prompts_are_encoded_as_the_reference_tokenizer_does(llm, ref_tokenizer, bos_id):
    import tokenizer_ref
    text = "Tokenizers split words like 'unbelievable' and emoji 🌊 into pieces."
    [out] = llm.generate(text, SamplingParams(max_tokens=1))
    assert out.prompt_token_ids == tokenizer_ref.encode(ref_tokenizer, text, bos_id=bos_id)
    assert llm.tokenizer.encode(text) == out.prompt_token_ids
    assert llm.tokenizer.decode(out.prompt_token_ids) == text


def hf_rendering(model_path, messages) -> str:
    """The chat template rendered by jinja2 as Hugging Face renders it."""
    from gguf import GGUFReader
    from test_chat_template import hf_environment
    template = GGUFReader(str(model_path)).fields["tokenizer.chat_template"].contents()
    return hf_environment().from_string(template).render(messages=messages, add_generation_prompt=True,
                                                          bos_token="", eos_token="")


def test_chat_renders_the_template_as_hugging_face_and_answers_as_batch(llm, run_exactly, model_path, tmp_path,
                                                                         ref_tokenizer):
    import tokenizer_ref
    rendered = hf_rendering(model_path, MESSAGES)
    assert llm.tokenizer.apply_chat_template(MESSAGES) == rendered
    sp = SamplingParams(temperature=0.8, seed=5, max_tokens=40)
    [out] = llm.chat(MESSAGES, sp)
    assert out.prompt_token_ids == tokenizer_ref.encode(ref_tokenizer, rendered, bos_id=None)
    [ref] = batch_results(run_exactly, model_path, tmp_path, [{"prompt": out.prompt_token_ids, **sp.request_fields()}])
    assert out.outputs[0].text == ref["choices"][0]["text"]
    assert out.outputs[0].token_ids == ref["choices"][0]["token_ids"]
    # An instruct model answers and ends its turn (its end-of-turn token is not reported).
    assert out.outputs[0].finish_reason == "stop"
    # Two conversations at once give each its own answer, the first as alone.
    both = llm.chat([MESSAGES, [{"role": "user", "content": "Say hello."}]], sp)
    assert [o.outputs[0].text for o in both][0] == out.outputs[0].text


def test_chat_template_kwargs_are_template_variables(llm):
    """As transformers' apply_chat_template(**kwargs) and vLLM's chat(chat_template_kwargs=...):
    passed to the template (this one reads none, so the rendering is unchanged); the variables
    the engine sets are refused by name."""
    plain = llm.tokenizer.apply_chat_template(MESSAGES)
    assert llm.tokenizer.apply_chat_template(MESSAGES, enable_thinking=False) == plain
    assert llm.tokenizer.apply_chat_template(MESSAGES, tokenize=True, enable_thinking=False) == \
        llm.tokenizer.apply_chat_template(MESSAGES, tokenize=True)
    with pytest.raises(ValueError, match="bos_token"):
        llm.tokenizer.apply_chat_template(MESSAGES, bos_token="x")
    sp = SamplingParams(max_tokens=1)
    with pytest.raises(ValueError, match="add_generation_prompt"):
        llm.chat(MESSAGES, sp, chat_template_kwargs={"add_generation_prompt": False})
    with pytest.raises(ValueError, match="dict"):
        llm.chat(MESSAGES, sp, chat_template_kwargs=["enable_thinking"])
    [out] = llm.chat(MESSAGES, sp, chat_template_kwargs={"enable_thinking": False})
    assert out.prompt_token_ids == llm.tokenizer.apply_chat_template(MESSAGES, tokenize=True)
    # transformers' own options are refused, not taken for template variables.
    for option in ("continue_final_message", "chat_template", "return_dict"):
        with pytest.raises(ValueError, match=option):
            llm.tokenizer.apply_chat_template(MESSAGES, **{option: True})
    # tools as chat() passes them: this template reads none, so they go to the system message.
    with_tools = llm.tokenizer.apply_chat_template(MESSAGES, tools=TOOLS)
    assert "get_weather" in with_tools and with_tools != plain
    with pytest.raises(ValueError, match="tools"):
        llm.tokenizer.apply_chat_template(MESSAGES, tools="get_weather")


def test_stream_deltas_add_up_to_the_whole(llm):
    sp = SamplingParams(temperature=0.8, seed=3, max_tokens=30, logprobs=0)
    [whole] = llm.generate("Once upon a time", sp)
    deltas = list(llm.stream("Once upon a time", sp))
    assert len(deltas) > 2
    assert all(not d.finished for d in deltas[:-1]) and deltas[-1].finished
    assert "".join(d.outputs[0].text for d in deltas) == whole.outputs[0].text
    assert [t for d in deltas for t in d.outputs[0].token_ids] == whole.outputs[0].token_ids
    assert deltas[-1].outputs[0].finish_reason == whole.outputs[0].finish_reason
    chat_deltas = list(llm.stream_chat(MESSAGES, SamplingParams(temperature=0, max_tokens=20)))
    [chat_whole] = llm.chat(MESSAGES, SamplingParams(temperature=0, max_tokens=20))
    assert "".join(d.outputs[0].text for d in chat_deltas) == chat_whole.outputs[0].text


def test_closing_a_stream_aborts_and_frees_its_blocks(llm):
    stream = llm.stream(["A long story: " * 20] * 3, SamplingParams(max_tokens=500, ignore_eos=True, seed=1))
    for _ in range(4):
        next(stream)
    assert llm.kv_cache_usage()["used_blocks"] > 0
    stream.close()
    assert llm.kv_cache_usage()["used_blocks"] == 0
    # A stream dropped unread aborts too.
    dropped = llm.stream("Another story", SamplingParams(max_tokens=200, ignore_eos=True))
    del dropped
    gc.collect()
    assert llm.kv_cache_usage()["used_blocks"] == 0
    assert llm.generate("After that,", SamplingParams(max_tokens=3))[0].finished


def test_interleaved_streams_each_get_their_own_outputs(llm):
    sp = SamplingParams(temperature=0, max_tokens=12)
    alone = [o.outputs[0].text for o in llm.generate(["The moon", "A river"], sp)]
    first, second = llm.stream("The moon", sp), llm.stream("A river", sp)
    texts = ["", ""]
    pending = [first, second]
    while pending:
        for i, s in enumerate((first, second)):
            if s in pending:
                try:
                    texts[i] += next(s).outputs[0].text
                except StopIteration:
                    pending.remove(s)
    assert texts == alone


@pytest.mark.parametrize("kwargs, field", [
    ({"temperature": -1}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_k": -2}, "top_k"),
    ({"n": 0}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"logprobs": 21}, "logprobs"),
    ({"prompt_logprobs": -1}, "prompt_logprobs"),
    ({"seed": 1.5}, "seed"),
    ({"stop": [1, 2]}, "stop"),
    ({"stop_token_ids": [-1]}, "stop_token_ids"),
    ({"ignore_eos": "yes"}, "ignore_eos"),
    ({"repetition_penalty": 0}, "repetition_penalty"),
    ({"seed": object()}, "seed"),
])
def test_bad_sampling_params_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"'{field}'"):
        SamplingParams(**kwargs)


@pytest.mark.parametrize("kwargs, error, name", [
    ({"device": "tpu"}, ValueError, "device"),
    ({"block_size": 0}, ValueError, "block_size"),
    ({"max_num_seqs": "many"}, ValueError, "max_num_seqs"),
    ({"kv_cache_memory": "lots"}, ValueError, "kv_cache_memory"),
    ({"threads": 10**6}, ValueError, "threads"),
    ({"enable_prefix_caching": 1}, ValueError, "enable_prefix_caching"),
    ({"spec": "telepathy"}, ValueError, "telepathy"),
    ({"best_of": 2}, TypeError, "best_of"),
])
def test_bad_engine_arguments_name_the_argument(model_path, kwargs, error, name):
    with pytest.raises(error, match=name):
        LLM(model=str(model_path), **{**ENGINE_ARGS, **kwargs})


def test_bad_models_and_requests_raise_not_crash(llm, model_path, tmp_path):
    with pytest.raises(FileNotFoundError, match="'model'"):
        LLM(model=str(tmp_path / "missing.gguf"))
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_bytes(b"not a model at all")
    with pytest.raises(ValueError, match="model.gguf"):
        LLM(model=str(not_gguf))
    with pytest.raises(ValueError, match="prompts"):
        llm.generate(3.5)
    with pytest.raises(ValueError, match="vocabulary"):
        llm.generate([[1, 2, 10**7]])
    with pytest.raises(ValueError, match="prompt 1: field 'prompt' is empty"):
        llm.generate(["fine", ""])
    with pytest.raises(ValueError, match="context"):
        llm.generate("x " * 10, SamplingParams(max_tokens=10**6))
    with pytest.raises(ValueError, match="sampling_params"):
        llm.generate(["a", "b"], [SamplingParams()])
    with pytest.raises(ValueError, match="'messages'"):
        llm.chat([{"content": "no role"}])
    with pytest.raises(ValueError, match="'messages'"):
        llm.chat("hello")
    with pytest.raises(ValueError, match="'tools'"):
        llm.chat(MESSAGES, tools=[{"type": "function", "function": {"name": "f", "color": 1}}])
    with pytest.raises(ValueError, match="'tool_choice'"):
        llm.chat(MESSAGES, tool_choice="required")
    with pytest.raises(ValueError, match="'tool_choice'"):
        llm.chat(MESSAGES, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nowhere"}})
    with pytest.raises(ValueError, match="tool call"):
        llm.chat(MESSAGES, tools=TOOLS, tool_choice="required", response_format={"type": "json_object"})
    with pytest.raises(ValueError, match="'response_format'"):
        llm.chat(MESSAGES, response_format={"type": "xml"})
    with pytest.raises(ValueError, match="'structured_outputs.regex' must be a string"):
        SamplingParams(structured_outputs={"regex": 7})
    with pytest.raises(ValueError, match="'guided_regex'|'structured_outputs'.*compile|does not compile"):
        llm.generate("x", SamplingParams(structured_outputs={"regex": "[a-"}))
    with pytest.raises(ValueError, match="'logit_bias'"):
        llm.generate("x", SamplingParams(logit_bias={10**7: 1.0}))
    with pytest.raises(ValueError, match="token_ids"):
        llm.tokenizer.decode([-1])
    # Nothing refused was left running.
    assert llm.kv_cache_usage()["used_blocks"] == 0
    assert llm.generate("Still", SamplingParams(max_tokens=2))[0].finished


class StepTimer:
    """The engine with each step's start and end recorded."""

    def __init__(self, engine):
        self._engine, self.steps = engine, []

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def step(self):
        start = time.perf_counter()
        out = self._engine.step()
        self.steps.append((start, time.perf_counter()))
        return out

    def step_folding(self, mine):  # generate()'s step
        start = time.perf_counter()
        out = self._engine.step_folding(mine)
        self.steps.append((start, time.perf_counter()))
        return out


def test_the_gil_is_released_while_the_engine_steps(model_path):
    """A Python thread's loop runs inside the engine's steps: with the GIL held
    through a step, no Python code could run between its start and its end."""
    llm = LLM(model=str(model_path), kv_cache_memory="256MiB", threads=1, max_num_batched_tokens=4096)
    timer = StepTimer(llm._engine)
    llm._engine = timer
    ticks, done = [], threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        llm.generate(["The history of the sea " * 60] * 4, SamplingParams(max_tokens=8, ignore_eos=True))
    finally:
        done.set()
        thread.join()
    long_steps = [(a, b) for a, b in timer.steps if b - a > 0.1]
    assert long_steps, "no step took long enough to tell"
    inside = sum(1 for t in ticks for a, b in long_steps if a < t < b)
    assert inside >= 10, f"{inside} ticks of the Python thread inside {len(long_steps)} long steps"


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_memory_returns_after_del(model_path):
    """The KV cache and the model are released when the last reference goes,
    and the process's resident memory shows it; making and dropping engines
    again and again leaves nothing behind."""
    def use_and_drop():
        llm = LLM(model=str(model_path), kv_cache_memory="256MiB", threads=2, enable_prefix_caching=False)
        llm.generate(["Memory " * 100] * 4, SamplingParams(max_tokens=4))
        held = rss_mib()
        del llm
        gc.collect()
        return held, rss_mib()

    gc.collect()
    before = rss_mib()
    rounds = [use_and_drop() for _ in range(3)]
    for held, after in rounds:
        assert held - before > 100, f"the engine held only {held - before:.0f} MiB: nothing to measure"
        assert after - before < 0.1 * (held - before), f"before {before:.0f}, held {held:.0f}, after {after:.0f} MiB"
    afters = [after for _, after in rounds]
    assert afters[-1] - afters[0] < 5, f"resident memory after each drop grew: {afters} MiB"


def test_python_m_exactly_is_the_cli(exactly_bin, model_path):
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_DIR)}
    args = ["run", "-m", str(model_path), "-p", "The sea", "-n", "12", "--temp", "0", "-t", "2"]
    via_python = subprocess.run([sys.executable, "-m", "exactly", *args], capture_output=True, text=True, env=env,
                                timeout=120)
    via_cli = subprocess.run([str(exactly_bin), *args], capture_output=True, text=True, timeout=120)
    assert via_python.returncode == via_cli.returncode == 0, via_python.stderr[-2000:]
    assert via_python.stdout == via_cli.stdout and via_cli.stdout.strip()
    bad = subprocess.run([sys.executable, "-m", "exactly", "run", "--no-such-flag"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert bad.returncode == 64 and "no-such-flag" in bad.stderr
    assert exactly.__version__ in subprocess.run([sys.executable, "-m", "exactly", "--version"], capture_output=True,
                                                 text=True, env=env, timeout=60).stdout


# Structured output and logit_bias from Python: the output parses and
# validates; a constrained greedy request whose grammar admits the model's own
# answer gives that answer's tokens; the same bodies through `exactly batch`
# give the same bits.
def test_structured_outputs_validate_and_keep_the_models_choice(llm, run_exactly, model_path, tmp_path):
    import jsonschema

    schema = {"type": "object", "properties": {"colour": {"type": "string", "enum": ["blue", "red", "green"]},
                                                "confidence": {"type": "integer", "minimum": 0, "maximum": 10}},
              "required": ["colour", "confidence"]}
    sp = SamplingParams(temperature=0.8, seed=5, max_tokens=64, structured_outputs={"json": schema})
    out = llm.chat(MESSAGES, sp)[0].outputs[0]
    assert out.finish_reason == "stop", out.text
    jsonschema.validate(json.loads(out.text), schema)

    free = llm.generate("The sky is", SamplingParams(temperature=0, max_tokens=6))[0].outputs[0]
    choice = SamplingParams(temperature=0, max_tokens=6, structured_outputs={"choice": [free.text, "green"]})
    assert llm.generate("The sky is", choice)[0].outputs[0].token_ids == free.token_ids

    bias = SamplingParams(temperature=0, max_tokens=1, logit_bias={free.token_ids[0]: -100})
    assert llm.generate("The sky is", bias)[0].outputs[0].token_ids[0] != free.token_ids[0]

    bodies = [{"prompt": "The sky is", **choice.request_fields()}, {"prompt": "The sky is", **bias.request_fields()}]
    cli = batch_results(run_exactly, model_path, tmp_path, bodies)
    assert cli[0]["choices"][0]["token_ids"] == free.token_ids
    assert cli[1]["choices"][0]["token_ids"] == llm.generate("The sky is", bias)[0].outputs[0].token_ids


def test_chat_takes_a_pydantic_model_as_response_format(llm):
    import pydantic

    class Answer(pydantic.BaseModel):
        colour: str
        sure: bool

    out = llm.chat(MESSAGES, SamplingParams(temperature=0, max_tokens=48), response_format=Answer)[0].outputs[0]
    assert out.finish_reason == "stop", out.text
    Answer.model_validate_json(out.text)


def test_batch_refuses_fields_it_would_ignore(run_exactly, model_path, tmp_path):
    requests_file = tmp_path / "requests.jsonl"
    requests_file.write_text(json.dumps({"prompt": "hi", "tools": []}) + "\n")
    result = subprocess.run([str(BUILD_DIR / "bin/exactly"), "batch", "-m", str(model_path), "-i",
                             str(requests_file), "-o", str(tmp_path / "out.jsonl")], capture_output=True, text=True)
    assert result.returncode == 2
    assert "requests.jsonl:1" in result.stderr and "'tools'" in result.stderr



from test_tool_calls import ASK, TOOLS  # noqa: E402  (the server's tool tests' functions and question)


def test_chat_with_tools_answers_as_the_server(llm, exactly_bin, model_path):
    """tools, tool_choice and parallel_tool_calls as /v1/chat/completions
    reads them: the same prompt through the template, the same text, and
    the same calls found in it, at temperature 0 and seeded; a forced call
    validates against its function's schema."""
    import jsonschema
    from test_server import ServerProcess, post

    cases = [({"tool_choice": "required"}, SamplingParams(temperature=0, max_tokens=60)),
             ({"tool_choice": {"type": "function", "function": {"name": "get_time"}}},
              SamplingParams(temperature=1.0, seed=3, max_tokens=60)),
             ({"tool_choice": "auto", "parallel_tool_calls": False}, SamplingParams(temperature=0, max_tokens=60)),
             ({"tool_choice": "none"}, SamplingParams(temperature=0, max_tokens=30))]
    server = ServerProcess(exactly_bin, model_path)
    try:
        for fields, params in cases:
            [out] = llm.chat(ASK, params, tools=TOOLS, **fields)
            c = out.outputs[0]
            body = {"model": "SmolLM2-135M-Instruct.Q4_1", "messages": ASK, "tools": TOOLS, **fields, "temperature": params.temperature,
                    "max_tokens": params.max_tokens}
            if params.seed is not None:
                body["seed"] = params.seed
            r = post(server, "/v1/chat/completions", body)
            assert r.status_code == 200, r.text
            choice = r.json()["choices"][0]
            served_calls = choice["message"].get("tool_calls") or []
            assert [x["function"] for x in c.tool_calls] == [x["function"] for x in served_calls], fields
            if not served_calls:
                assert c.text == choice["message"]["content"], fields
            if fields["tool_choice"] != "auto" and fields["tool_choice"] != "none":
                assert len(c.tool_calls) == 1 and c.tool_calls[0]["type"] == "function"
                call = c.tool_calls[0]["function"]
                schema = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == call["name"])
                jsonschema.validate(json.loads(call["arguments"]), schema)
                if isinstance(fields["tool_choice"], dict):
                    assert call["name"] == "get_time"
            if fields["tool_choice"] == "none":
                assert c.tool_calls == []
    finally:
        assert server.stop() == 0


def test_streamed_chat_with_tools_ends_with_the_calls(llm):
    params = SamplingParams(temperature=0, max_tokens=60)
    [whole] = llm.chat(ASK, params, tools=TOOLS, tool_choice="required")
    deltas = list(llm.stream_chat(ASK, params, tools=TOOLS, tool_choice="required"))
    assert "".join(d.outputs[0].text for d in deltas) == whole.outputs[0].text
    assert deltas[-1].finished and deltas[-1].outputs[0].tool_calls is not None
    assert [x["function"] for x in deltas[-1].outputs[0].tool_calls] == \
        [x["function"] for x in whole.outputs[0].tool_calls]
    assert all(d.outputs[0].tool_calls is None for d in deltas[:-1])
