"""One request's outputs as the engine's steps deliver them: deltas folded
into the whole, as `exactly batch` folds them."""

from __future__ import annotations

import json
from typing import Any

from . import _exactly
from .outputs import CompletionOutput, Logprob, PositionLogprobs, RequestOutput
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer


class RequestState:
    def __init__(self, request_id: int, prompt: str | None, prompt_ids: list[int], params: SamplingParams,
                 tokenizer: Tokenizer, tools: dict[str, Any] | None = None) -> None:
        self.request_id = request_id
        self._tools = tools  # chat(tools=...): tool_request()'s choice, names and parallel
        self.prompt = prompt
        self.prompt_ids = prompt_ids
        self.finished = False
        self._with_logprobs = params.logprobs is not None
        self._tokenizer = tokenizer
        self._text: list[list[bytes]] = [[] for _ in range(params.n)]  # pieces, decoded whole at the end as the CLI does
        self._completions = [self._completion(i) for i in range(params.n)]
        self._prompt_logprobs: list[PositionLogprobs | None] | None = None
        self._cached_tokens = 0

    def absorb(self, out: Any) -> RequestOutput:
        """Folds one step's output in; returns what it added (a delta)."""
        deltas = []
        for d in out.completions:
            whole = self._completions[d.index]
            delta = self._completion(d.index)
            text = d.text
            self._text[d.index].append(text)
            delta.text = text.decode("utf-8", "replace")
            delta.token_ids = list(d.token_ids)
            whole.token_ids.extend(delta.token_ids)
            if self._with_logprobs:
                delta.logprobs = [self._position(t) for t in d.logprobs]
                delta.cumulative_logprob = sum(t.logprob for t in d.logprobs)
                whole.logprobs.extend(delta.logprobs)
                for t in d.logprobs:
                    whole.cumulative_logprob += t.logprob
            delta.finish_reason = whole.finish_reason = d.finish_reason
            if d.finish_reason is not None:
                delta.tool_calls = whole.tool_calls = self._calls(d.index)
            deltas.append(delta)
        prompt_logprobs = None
        if out.prompt_logprobs:
            prompt_logprobs = [None if t is None else self._position(t) for t in out.prompt_logprobs]
            self._prompt_logprobs = prompt_logprobs
        self._cached_tokens = out.cached_prompt_tokens
        self.finished = out.finished
        return RequestOutput(str(self.request_id), self.prompt, self.prompt_ids, prompt_logprobs, deltas,
                             out.finished, self._cached_tokens)

    def fold(self, out: Any) -> None:
        """Folds one step's output into the whole without making a delta (for
        generate() and chat(), which return only the whole)."""
        for d in out.completions:
            whole = self._completions[d.index]
            self._text[d.index].append(d.text)
            whole.token_ids.extend(d.token_ids)
            if self._with_logprobs:
                logprobs = d.logprobs
                whole.logprobs.extend(self._position(t) for t in logprobs)
                for t in logprobs:
                    whole.cumulative_logprob += t.logprob
            if d.finish_reason is not None:
                whole.finish_reason = d.finish_reason
                whole.tool_calls = self._calls(d.index)
        if out.prompt_logprobs:
            self._prompt_logprobs = [None if t is None else self._position(t) for t in out.prompt_logprobs]
        self._cached_tokens = out.cached_prompt_tokens
        self.finished = out.finished

    def whole(self) -> RequestOutput:
        """Everything the request made so far."""
        for i, c in enumerate(self._completions):
            c.text = b"".join(self._text[i]).decode("utf-8", "replace")
        return RequestOutput(str(self.request_id), self.prompt, self.prompt_ids, self._prompt_logprobs,
                             self._completions, self.finished, self._cached_tokens)

    def _calls(self, index: int) -> list[dict] | None:
        """The tool calls in completion `index`'s finished text (None without tools)."""
        if self._tools is None:
            return None
        text = b"".join(self._text[index]).decode("utf-8", "replace")
        found = json.loads(_exactly.find_tool_calls(text, self._tools["choice"], self._tools["names"],
                                                    self._tools["parallel"]))
        return found["calls"]

    def _completion(self, index: int) -> CompletionOutput:
        logprobs = [] if self._with_logprobs else None
        cumulative = 0.0 if self._with_logprobs else None
        return CompletionOutput(index, "", [], cumulative, logprobs, None)

    def _position(self, t: Any) -> PositionLogprobs:
        """The top alternatives (ranks 1..N) and the chosen token (its own rank)."""
        text = self._tokenizer.token_text
        entry = {token: Logprob(logprob, rank, text(token)) for rank, (token, logprob) in enumerate(t.top, 1)}
        entry[t.id] = Logprob(t.logprob, t.rank, text(t.id))
        return entry
