"""SamplingParams: how one request samples and stops, with vLLM's field names.

Each field is checked when the object is made, by the engine's own reader of
OpenAI request fields (the one `exactly batch` and the server use), so a bad
value raises ValueError naming the field, and a request means the same from
Python as from the command line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from typing import Any

from . import _exactly


@dataclasses.dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0                      # 0 or -1: off
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True    # False: special tokens' text stays in the output
    max_tokens: int | None = 16         # None: as many as the context leaves
    logprobs: int | None = None         # top-N alternatives per generated token
    prompt_logprobs: int | None = None  # top-N alternatives per prompt token
    # {token id: bias in [-100, 100]}, added to the token's logit before sampling
    logit_bias: dict[int, float] | None = None
    # vLLM's structured outputs: one of {"json": schema (a dict or its JSON
    # text)}, {"regex": ...}, {"grammar": EBNF}, {"choice": [...]},
    # {"json_object": True}; the output is generated under that grammar
    structured_outputs: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        try:
            _exactly.check_request_fields(json.dumps(self.request_fields()))
        except ValueError as e:
            raise ValueError(f"SamplingParams: {e}") from None

    def request_fields(self) -> dict[str, Any]:
        """The fields as a completions request body carries them (no prompt)."""
        body = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                body[f.name] = _plain(f.name, value)
        return body


def _plain(name: str, value: Any) -> Any:
    """A JSON value for a field: numpy scalars become Python numbers; a value
    JSON cannot carry is refused by name."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise ValueError(f"SamplingParams: field '{name}' must be finite, got {value}")
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_plain(name, v) for v in value]
    if isinstance(value, dict):
        if name == "logit_bias":  # JSON keys are strings: token ids written in decimal
            return {str(_plain(name, k)) if isinstance(k, numbers.Integral) else k: _plain(name, v)
                    for k, v in value.items()}
        return {k: _plain(name, v) for k, v in value.items()}
    raise ValueError(f"SamplingParams: field '{name}' has a value of type {type(value).__name__}")
