"""A Mistral-style checkpoint (every layer slides over the last WINDOW
positions) on the CPU: logits past the window equal the float64 reference's
(tests/reference/llama_ref.py with its own window mask), and the engine frees
the KV blocks that fall out of the window. In a pool of POOL_BLOCKS blocks of
2 tokens, too small for one whole sequence (the same pool refuses the model
without a window), greedy requests generate the reference's tokens, and a
request's tokens and logprobs are the same alone, batched (with preemption),
after a prefix-cache hit (on the blocks of its window: the prompt's head has
been evicted), without prefix caching and with speculation (prompt lookup,
and the model as its own draft, whose cache frees its window's blocks too). A llama GGUF with
llama.attention.sliding_window slides every layer too.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
from gguf import GGMLQuantizationType

import llama_ref
import test_architectures
from test_hf_checkpoint import CONFIG, reference, tensors, write_random_checkpoint
from test_logits import ARGMAX_GAP, REL_L2_BOUND, engine_logits

WINDOW, BLOCK, POOL_BLOCKS, BUDGET = 6, 2, 10, 8
MISTRAL = {**CONFIG, "architectures": ["MistralForCausalLM"], "sliding_window": WINDOW,
           "max_position_embeddings": 256}
SLOT_BYTES = 2 * CONFIG["num_hidden_layers"] * CONFIG["num_key_value_heads"] * 64 * 4  # K and V of every layer, f32
SMALL_POOL = ["--block-size", BLOCK, "--kv-cache-memory", POOL_BLOCKS * BLOCK * SLOT_BYTES,
              "--max-num-batched-tokens", BUDGET]
PROMPT = [1, 5, 9, 30, 2, 17, 4, 4, 11, 0, 23, 8, 3, 7, 19, 6, 12, 28, 14, 21]
NEW_TOKENS = 20  # prompt and output: 40 tokens, 20 blocks
EOS = CONFIG["vocab_size"] - 1  # the placeholder tokenizer's


def write_model(tmp_path):
    """The checkpoint and its float64 reference with the window."""
    model = tmp_path / "mistral"
    ref = reference(write_random_checkpoint(model, tensors(), MISTRAL, seed=27), MISTRAL)
    return model, llama_ref.LlamaRef(dataclasses.replace(ref.cfg, window=WINDOW), ref.w)


def worst_relative_error(got, want):
    return float((np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)).max())


def test_logits_past_the_window_match_the_reference(run_exactly, tmp_path):
    model, ref = write_model(tmp_path)
    ids = PROMPT * 2
    out = tmp_path / "logits.f32"
    run_exactly(["logits", "-m", model, "--tokens", ",".join(map(str, ids)), "--out", out])
    got = np.fromfile(out, dtype="<f4").reshape(len(ids), -1)
    assert worst_relative_error(got, ref.logits(ids)) < REL_L2_BOUND
    full = llama_ref.LlamaRef(dataclasses.replace(ref.cfg, window=0), ref.w)
    assert worst_relative_error(got, full.logits(ids)) > 100 * REL_L2_BOUND, "the window changes nothing here"


def test_greedy_tokens_in_a_pool_smaller_than_a_sequence(run_exactly, tmp_path):
    model, ref = write_model(tmp_path)
    out = tmp_path / "ids.json"
    run_exactly(["run", "-m", model, "--prompt-ids", ",".join(map(str, PROMPT)), "-n", NEW_TOKENS, "--temp", 0,
                 "--ids-out", out, *SMALL_POOL])
    want, gaps = ref.greedy(PROMPT, NEW_TOKENS)
    assert min(gaps) > ARGMAX_GAP and EOS not in want  # every token decided, none ends the run
    assert json.loads(out.read_text())["ids"] == want
    # Without a window the same pool cannot hold the request.
    (model / "config.json").write_text(json.dumps({**MISTRAL, "architectures": ["LlamaForCausalLM"],
                                                   "sliding_window": None}))
    p = run_exactly(["run", "-m", model, "--prompt-ids", ",".join(map(str, PROMPT)), "-n", NEW_TOKENS, "--temp", 0,
                     *SMALL_POOL], check=False)
    assert p.returncode == 64 and "pool holds only" in p.stderr, p.stderr


def run_batch(run_exactly, model, bodies: list[dict], tmp_path, tag: str, *options) -> tuple[list[dict], str]:
    """`exactly batch` in the small pool: each result (choices and usage) and what it reported."""
    requests_file, results_file = tmp_path / f"{tag}.jsonl", tmp_path / f"{tag}-out.jsonl"
    requests_file.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    p = run_exactly(["batch", "-m", model, "-i", requests_file, "-o", results_file, *SMALL_POOL, *options])
    return [json.loads(line) for line in results_file.read_text().splitlines()], p.stderr


def test_a_request_keeps_its_tokens_through_freed_blocks(run_exactly, tmp_path):
    model, _ = write_model(tmp_path)
    mine = {"prompt": PROMPT, "max_tokens": NEW_TOKENS, "temperature": 0, "logprobs": 2, "ignore_eos": True}
    others = [{"prompt": PROMPT[i:] + PROMPT[:i], "max_tokens": 16, "temperature": 0.8, "seed": i,
               "ignore_eos": True} for i in range(1, 5)]
    run = lambda bodies, tag, *extra: run_batch(run_exactly, model, bodies, tmp_path, tag, *extra)  # noqa: E731
    alone = run([mine], "alone")[0][0]["choices"][0]
    batched, report = run(others[:2] + [mine] + others[2:], "batched")
    assert int(re.search(r"(\d+) preemptions", report).group(1)) > 0, report
    cached = run([{**mine, "max_tokens": 1}, mine], "cached", "--max-num-seqs", 1)[0][1]
    # The prompt's head was evicted from the pool; its window's blocks were not.
    assert cached["usage"]["prompt_tokens_details"]["cached_tokens"] == 18
    uncached = run(others[:2] + [mine], "uncached", "--no-prefix-caching")[0][2]
    speculated = run([mine], "speculated", "--spec", "ngram")[0][0]["choices"][0]
    stats = tmp_path / "drafted-stats.json"  # itself as draft, in a pool as small
    drafted = run([mine], "drafted", "--spec", f"draft:{model}", "--no-adaptive-speculation", "--stats", stats,
                  "--draft-kv-cache-memory", POOL_BLOCKS * BLOCK * SLOT_BYTES)[0][0]["choices"][0]
    assert json.loads(stats.read_text())["spec_accepted_tokens"] > 0, "the draft's cache held no window"
    assert len(alone["logprobs"]["tokens"]) == NEW_TOKENS
    for other in (batched[2]["choices"][0], cached["choices"][0], uncached["choices"][0]):
        assert other["text"] == alone["text"] and other["logprobs"] == alone["logprobs"]
    assert speculated["text"] == drafted["text"] == alone["text"]


def test_a_llama_gguf_with_a_window_key_slides_every_layer(run_exactly, model_path, tmp_path):
    tokenizer = test_architectures.tokenizer_fields(model_path)
    path = tmp_path / "mixtral-window.gguf"
    test_architectures.write_model(path, "mixtral", tokenizer, GGMLQuantizationType.F32,
                                   extra={"llama.attention.sliding_window": 5})
    ref = llama_ref.load(str(path))
    assert ref.cfg.window == 5
    got = engine_logits(run_exactly, path, test_architectures.PROMPT, tmp_path)
    assert worst_relative_error(got, ref.logits(test_architectures.PROMPT)) < REL_L2_BOUND
    full = llama_ref.LlamaRef(dataclasses.replace(ref.cfg, window=0), ref.w)
    assert worst_relative_error(got, full.logits(test_architectures.PROMPT)) > 100 * REL_L2_BOUND
    patterned = tmp_path / "patterned.gguf"
    test_architectures.write_model(patterned, "mixtral", tokenizer, GGMLQuantizationType.F32,
                                   extra={"llama.attention.sliding_window": 5,
                                          "llama.attention.sliding_window_pattern": 2})
    p = run_exactly(["run", "-m", patterned, "-p", "x", "-n", 1], check=False)
    assert p.returncode == 2 and "llama.attention.sliding_window_pattern" in p.stderr, p.stderr
