"""LLM: the engine in this process, with vLLM's offline API.

Requests go to the engine as completions request bodies, read by the parser
`exactly batch` uses, and the engine is stepped as `exactly batch` steps it,
so a seeded request gives the CLI's tokens, text and logprobs bit for bit.
The engine releases the GIL while it steps.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Iterator, Sequence

from . import _exactly
from .engine_args import engine_config
from .outputs import RequestOutput
from .request_state import RequestState
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer, messages_json, template_kwargs_json, token_ids_arg


class LLM:
    def __init__(self, model: str | os.PathLike, device: str = "cpu", **engine_args: Any) -> None:
        """Loads `model` (a GGUF file or a Hugging Face checkpoint directory)
        on `device` ("cpu" or "cuda"). engine_args: threads, kv_cache_memory
        (bytes or "2GiB"), gpu_memory_utilization, block_size,
        max_num_batched_tokens, max_num_seqs, enable_prefix_caching,
        long_prefill_token_threshold, max_model_len, spec ("ngram",
        "draft:PATH", "layerskip:L", "head:PATH"), num_speculative_tokens,
        adaptive_speculation, confident_draft_runs, draft_kv_cache_memory,
        deterministic, enforce_eager — the command line's flags."""
        if not isinstance(model, (str, os.PathLike)):
            raise ValueError(f"LLM: argument 'model' must be a path, got {type(model).__name__}")
        if not os.path.exists(model):
            raise FileNotFoundError(f"LLM: argument 'model': no such file or directory: {os.fspath(model)}")
        if device not in ("cpu", "cuda"):
            raise ValueError(f"LLM: argument 'device' must be 'cpu' or 'cuda', got {device!r}")
        config, load = engine_config(engine_args)
        self._engine = _exactly.Engine(os.fspath(model), device, config, load.deterministic, load.enforce_eager,
                                       load.tensor_parallel_size)
        self.tokenizer = Tokenizer(self._engine)
        self._step_lock = threading.Lock()   # one caller steps the engine at a time
        self._inbox: dict[int, list[Any]] = {}  # step outputs waiting for the caller that owns the request

    def get_tokenizer(self) -> Tokenizer:
        return self.tokenizer

    def kv_cache_usage(self) -> dict[str, int]:
        """KV blocks: total_blocks, used_blocks (held by running requests), cached_blocks."""
        return self._engine.kv_stats()

    def generate(self, prompts: Any, sampling_params: SamplingParams | Sequence[SamplingParams] | None = None
                 ) -> list[RequestOutput]:
        """Runs the prompts (a str, token ids, {"prompt": str} or
        {"prompt_token_ids": ids}, or a list of those) to completion; returns
        one RequestOutput per prompt, in order."""
        states = self._submit("generate", _prompt_list(prompts), sampling_params)
        return self._finish_all(states)

    def stream(self, prompts: Any, sampling_params: SamplingParams | Sequence[SamplingParams] | None = None
               ) -> Iterator[RequestOutput]:
        """As generate(), but yields each request's new text and tokens as the
        engine makes them (outputs hold deltas; the last one of a request has
        finished=True). Closing the iterator early aborts what is unfinished."""
        return self._stream(self._submit("stream", _prompt_list(prompts), sampling_params))

    def chat(self, messages: Any, sampling_params: SamplingParams | Sequence[SamplingParams] | None = None, *,
             tools: Any = None, tool_choice: Any = None, parallel_tool_calls: bool | None = None,
             response_format: Any = None, chat_template_kwargs: dict[str, Any] | None = None) -> list[RequestOutput]:
        """Answers one conversation (a list of {"role", "content"} messages) or
        several (a list of such lists), each rendered by the model's chat
        template as the server renders it. tools, tool_choice and
        parallel_tool_calls mean what they mean on /v1/chat/completions: the
        tools go to the template, "required" or a named function makes the
        answer one call (generated under its schema), and each finished
        output's tool_calls holds the calls found in its text.
        chat_template_kwargs: further template variables, as vLLM's
        (enable_thinking=False for Qwen3, say)."""
        return self._finish_all(self._submit_chat("chat", messages, sampling_params,
                                                  _tool_fields(tools, tool_choice, parallel_tool_calls),
                                                  response_format, chat_template_kwargs))

    def stream_chat(self, messages: Any, sampling_params: SamplingParams | Sequence[SamplingParams] | None = None, *,
                    tools: Any = None, tool_choice: Any = None, parallel_tool_calls: bool | None = None,
                    response_format: Any = None, chat_template_kwargs: dict[str, Any] | None = None
                    ) -> Iterator[RequestOutput]:
        """chat() as a stream of deltas, like stream(); a request's last delta
        carries its tool_calls."""
        return self._stream(self._submit_chat("stream_chat", messages, sampling_params,
                                              _tool_fields(tools, tool_choice, parallel_tool_calls),
                                              response_format, chat_template_kwargs))

    # --- requests in, outputs out -------------------------------------------------

    def _submit_chat(self, caller: str, messages: Any, sampling_params: Any, tool_fields: dict[str, Any],
                     response_format: Any, chat_template_kwargs: Any = None) -> list[RequestState]:
        extra = {}
        if response_format is not None:
            extra["response_format"] = _response_format(caller, response_format)
        tools, tools_json = None, ""
        if tool_fields:
            try:
                found = _exactly.tool_request(json.dumps(tool_fields))
            except (TypeError, ValueError) as e:
                raise ValueError(f"{caller}(): {e}") from None
            if found:
                tools, tools_json = json.loads(found), json.dumps(tool_fields["tools"])
                if tools["forced_schema"] is not None:
                    if extra:
                        raise ValueError(f"{caller}(): 'response_format' cannot be combined with a required tool "
                                         "call (tool_choice)")
                    extra["structured_outputs"] = {"json": tools["forced_schema"]}
        conversations = _conversation_list(caller, messages)
        kwargs = template_kwargs_json(caller, chat_template_kwargs)
        prompts = []
        for i, conversation in enumerate(conversations):
            try:
                prompts.append({"prompt_token_ids": self._engine.chat_tokens(messages_json(caller, conversation),
                                                                             tools_json, kwargs)})
            except ValueError as e:
                raise ValueError(f"{caller}(): conversation {i}: {e}") from None
        return self._submit(caller, prompts, sampling_params, extra, tools)

    def _submit(self, caller: str, prompts: list[Any], sampling_params: Any,
                extra_fields: dict[str, Any] | None = None,
                tools: dict[str, Any] | None = None) -> list[RequestState]:
        params = _params_list(caller, sampling_params, len(prompts))
        states: list[RequestState] = []
        try:
            for i, (prompt, sp) in enumerate(zip(prompts, params)):
                text, ids = self._prompt(caller, i, prompt)
                body = sp.request_fields()
                if extra_fields:
                    conflict = [f for f in ("structured_outputs",) if f in body]
                    if conflict:
                        asker = "a required tool call" if tools else "'response_format'"
                        raise ValueError(f"{caller}(): {asker} and SamplingParams.{conflict[0]} both ask "
                                         "for a grammar; give one")
                    body.update(extra_fields)
                body["prompt"] = ids
                if sp.max_tokens is None:  # as many as the context leaves
                    body["max_tokens"] = max(1, self._engine.max_model_len - len(ids))
                try:
                    request_id = self._engine.add_request(json.dumps(body))
                except ValueError as e:
                    raise ValueError(f"{caller}(): prompt {i}: {e}") from None
                states.append(RequestState(request_id, text, ids, sp, self.tokenizer, tools))
        except BaseException:
            self._abort(states)
            raise
        return states

    def _prompt(self, caller: str, index: int, prompt: Any) -> tuple[str | None, list[int]]:
        """A prompt's text (None for token ids) and token ids, as `exactly batch` encodes it."""
        if isinstance(prompt, dict):
            if "prompt_token_ids" in prompt:
                return None, token_ids_arg(caller, f"prompts[{index}]['prompt_token_ids']",
                                           prompt["prompt_token_ids"], self.tokenizer.vocab_size)
            if "prompt" in prompt:
                prompt = prompt["prompt"]
            else:
                raise ValueError(f"{caller}(): prompts[{index}] must have 'prompt' or 'prompt_token_ids'")
        if isinstance(prompt, str):
            return prompt, self._engine.encode(prompt, True)
        return None, token_ids_arg(caller, f"prompts[{index}]", prompt, self.tokenizer.vocab_size)

    def _finish_all(self, states: list[RequestState]) -> list[RequestOutput]:
        """Runs the requests to the end, their step outputs folded by the
        engine (none crosses into Python until the whole does)."""
        # A step's Python work is independent of how many requests wait: the
        # inbox is read only when another caller's step left something in it,
        # and the sorted id list is rebuilt only when a request finishes.
        try:
            waiting = {s.request_id for s in states}
            mine = sorted(waiting)
            while waiting:
                with self._step_lock:
                    if self._inbox:  # delivered by other callers' steps, folded in their turn
                        for i in list(waiting):
                            for out in self._inbox.pop(i, []):
                                self._engine.fold_output(out)
                                if out.finished:
                                    waiting.discard(i)
                        if len(waiting) != len(mine):
                            mine = sorted(waiting)
                    if not waiting:
                        break
                    if not self._engine.has_unfinished():
                        raise RuntimeError("the engine has no work but requests are unfinished")
                    finished, others = self._engine.step_folding(mine)
                    for out in others:
                        self._inbox.setdefault(out.id, []).append(out)
                    if finished:
                        waiting.difference_update(finished)
                        mine = sorted(waiting)
            for state in states:
                state.fold(self._engine.take_folded(state.request_id))
        finally:
            self._abort(states)
        return [state.whole() for state in states]

    def _stream(self, states: list[RequestState]) -> Iterator[RequestOutput]:
        return _Stream(self, states)

    def _outputs(self, states: list[RequestState]) -> Iterator[tuple[RequestState, Any]]:
        """Each step output of these requests, until all have finished."""
        by_id = {s.request_id: s for s in states}
        waiting = set(by_id)
        while waiting:
            for out in self._take(waiting):
                if out.finished:
                    waiting.discard(out.id)
                yield by_id[out.id], out

    def _take(self, ids: set[int]) -> list[Any]:
        """Outputs of `ids`, stepping the engine when none are waiting; outputs
        of other callers' requests wait in the inbox for them."""
        with self._step_lock:
            mine = [out for i in ids for out in self._inbox.pop(i, [])]
            while not mine:
                if not self._engine.has_unfinished():
                    raise RuntimeError("the engine has no work but requests are unfinished")
                for out in self._engine.step():
                    if out.id in ids:
                        mine.append(out)
                    else:
                        self._inbox.setdefault(out.id, []).append(out)
            return mine

    def _abort(self, states: list[RequestState]) -> None:
        """Stops the unfinished requests among `states` (their KV blocks are freed now)."""
        for state in states:
            if not state.finished:
                self._engine.abort(state.request_id)
                state.finished = True
            with self._step_lock:
                self._inbox.pop(state.request_id, None)
                self._engine.drop_folded(state.request_id)


def _prompt_list(prompts: Any) -> list[Any]:
    """One prompt (text, token ids or a dict) or a list of prompts, as a list."""
    if isinstance(prompts, (str, dict)):
        return [prompts]
    if isinstance(prompts, (list, tuple)):
        if prompts and all(isinstance(p, int) and not isinstance(p, bool) for p in prompts):
            return [list(prompts)]  # one prompt of token ids
        return list(prompts)
    raise ValueError("argument 'prompts' must be a str, token ids, a dict or a list of those, "
                     f"got {type(prompts).__name__}")


def _params_list(caller: str, params: Any, count: int) -> list[SamplingParams]:
    if params is None:
        return [SamplingParams()] * count
    if isinstance(params, SamplingParams):
        return [params] * count
    if isinstance(params, (list, tuple)) and all(isinstance(p, SamplingParams) for p in params):
        if len(params) != count:
            raise ValueError(f"{caller}(): argument 'sampling_params' has {len(params)} entries for {count} prompts")
        return list(params)
    raise ValueError(f"{caller}(): argument 'sampling_params' must be a SamplingParams or a list of them")


def _conversation_list(caller: str, messages: Any) -> list[Any]:
    """One conversation (a list of message dicts) or a list of conversations, as a list."""
    if isinstance(messages, (list, tuple)) and messages and all(isinstance(m, (list, tuple)) for m in messages):
        return list(messages)
    if isinstance(messages, (list, tuple)):
        return [messages]
    raise ValueError(f"{caller}(): argument 'messages' must be a list of messages or a list of conversations, "
                     f"got {type(messages).__name__}")


class _Stream:
    """The deltas of submitted requests. Closing it, or dropping it unread,
    aborts whatever is unfinished, so no request runs for nobody."""

    def __init__(self, llm: LLM, states: list[RequestState]) -> None:
        self._llm, self._states = llm, states
        self._outputs = llm._outputs(states)

    def __iter__(self) -> "_Stream":
        return self

    def __next__(self) -> RequestOutput:
        try:
            state, out = next(self._outputs)
        except BaseException:
            self.close()
            raise
        return state.absorb(out)

    def close(self) -> None:
        if self._states:
            self._outputs.close()
            self._llm._abort(self._states)
            self._states = []

    def __enter__(self) -> "_Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def _tool_fields(tools: Any, tool_choice: Any, parallel_tool_calls: Any) -> dict[str, Any]:
    """The chat request fields the arguments stand for (checked by tool_request)."""
    fields = {}
    for name, value in (("tools", tools), ("tool_choice", tool_choice), ("parallel_tool_calls", parallel_tool_calls)):
        if value is not None:
            fields[name] = value
    return fields


def _response_format(caller: str, value: Any) -> Any:
    """OpenAI's response_format as JSON: a dict, or a pydantic model class
    (its JSON schema, named after it), as the openai client's parse() takes."""
    schema = getattr(value, "model_json_schema", None)
    if isinstance(value, type) and callable(schema):
        return {"type": "json_schema", "json_schema": {"name": value.__name__, "schema": schema(), "strict": True}}
    if not isinstance(value, dict):
        raise ValueError(f"{caller}(): 'response_format' must be a dict or a pydantic model class, "
                         f"got {type(value).__name__}")
    return value

