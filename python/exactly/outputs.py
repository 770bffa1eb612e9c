"""What generate() and chat() return, shaped as vLLM's outputs."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Logprob:
    logprob: float
    rank: int                 # 1: the most likely token
    decoded_token: str


# One position's logprobs: the chosen token's entry and its top-N alternatives', by token id.
PositionLogprobs = dict[int, Logprob]


@dataclasses.dataclass
class CompletionOutput:
    index: int                # which of the request's n samples
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None           # with logprobs: the sum of the chosen tokens' logprobs
    logprobs: list[PositionLogprobs] | None    # with logprobs: one per generated token
    finish_reason: str | None                  # "stop", "length" or "abort"; None while running
    # chat(tools=...): the calls found in the finished text, in OpenAI's tool_calls shape
    # ({"id", "type": "function", "function": {"name", "arguments"}}); None without tools
    tool_calls: list[dict] | None = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclasses.dataclass
class RequestOutput:
    request_id: str
    prompt: str | None                  # the prompt's text, when it was given as text
    prompt_token_ids: list[int]
    prompt_logprobs: list[PositionLogprobs | None] | None  # with prompt_logprobs: None for the first token
    outputs: list[CompletionOutput]
    finished: bool
    num_cached_tokens: int = 0          # prompt tokens found in the prefix cache
