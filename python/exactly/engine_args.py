"""LLM(...)'s engine arguments: checked by name and range (as the command
line checks its flags) and turned into the engine's configuration."""

from __future__ import annotations

import dataclasses
from typing import Any

from . import _exactly


def _int(lo: int, hi: int | None = None):
    def check(name: str, v: Any) -> int:
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"LLM: argument '{name}' must be an integer, got {type(v).__name__}")
        if v < lo or (hi is not None and v > hi):
            bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
            raise ValueError(f"LLM: argument '{name}' must be {bound}, got {v}")
        return v
    return check


def _fraction(lo: float, hi: float):
    def check(name: str, v: Any) -> float:
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi:
            raise ValueError(f"LLM: argument '{name}' must be a number between {lo} and {hi}, got {v!r}")
        return float(v)
    return check


def _bool(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"LLM: argument '{name}' must be True or False, got {v!r}")
    return v


def _size(name: str, v: Any) -> int:
    """Bytes, as an integer or a string such as "2GiB" (the command line's sizes)."""
    if isinstance(v, int) and not isinstance(v, bool):
        size = v
    elif isinstance(v, str):
        size = _exactly.parse_byte_size(v)
    else:
        size = None
    if size is None or size <= 0:
        raise ValueError(f"LLM: argument '{name}' must be a positive number of bytes or a size such as '2GiB', got {v!r}")
    return size


def _spec(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"LLM: argument '{name}' must be 'ngram', 'draft:PATH', 'layerskip:L' or 'head:PATH', got {v!r}")
    return v


# name → (check, EngineConfig field). Threads are bounded: an argument never
# decides an unbounded number of threads.
_CONFIG_ARGS = {
    "threads": (_int(0, 1024), "threads"),
    "kv_cache_memory": (_size, "kv_cache_memory"),
    "gpu_memory_utilization": (_fraction(0.05, 1.0), "gpu_memory_utilization"),
    "block_size": (_int(1, 1024), "block_size"),
    "max_num_batched_tokens": (_int(1), "max_num_batched_tokens"),
    "max_num_seqs": (_int(1), "max_num_seqs"),
    "enable_prefix_caching": (_bool, "enable_prefix_caching"),
    "long_prefill_token_threshold": (_int(0), "long_prefill_token_threshold"),
    "max_model_len": (_int(1), "max_model_len"),
    "spec": (_spec, "spec_method"),
    "num_speculative_tokens": (_int(1, 16), "num_speculative_tokens"),
    "adaptive_speculation": (_bool, "adaptive_speculation"),
    "confident_draft_runs": (_bool, "confident_draft_runs"),
    "draft_kv_cache_memory": (_size, "draft_kv_cache_memory"),
}
_LOAD_ARGS = {"deterministic": _bool, "enforce_eager": _bool, "tensor_parallel_size": _int(1, 64)}
NAMES = sorted([*_CONFIG_ARGS, *_LOAD_ARGS])


@dataclasses.dataclass
class LoadArgs:
    # The command line's default: the canonical order, whose bits do not
    # depend on the batch (False: the fastest kernels at each batch size).
    deterministic: bool = True
    enforce_eager: bool = False
    tensor_parallel_size: int = 1  # CPU: ranks the model is split over


def engine_config(args: dict[str, Any]) -> tuple[Any, LoadArgs]:
    """The engine's configuration from LLM(...)'s keyword arguments; TypeError
    for an unknown one, ValueError naming a bad value."""
    config, load = _exactly.EngineConfig(), LoadArgs()
    for name, value in args.items():
        if name in _CONFIG_ARGS:
            check, field = _CONFIG_ARGS[name]
            setattr(config, field, check(name, value))
        elif name in _LOAD_ARGS:
            setattr(load, name, _LOAD_ARGS[name](name, value))
        else:
            raise TypeError(f"LLM: unexpected argument '{name}' (engine arguments: {', '.join(NAMES)})")
    return config, load
