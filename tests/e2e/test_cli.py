"""The command line beyond generation: `chat` keeps history through the
model's template, `info` reports what the file holds, and `perplexity`
computes what llama.cpp's tool computes — checked against the float64
reference model and the reference tokenizer."""

from __future__ import annotations

import math
import re

import numpy as np


TURN = re.compile(r"\[(\d+) tokens in [0-9.]+ s; (\d+) of (\d+) prompt tokens from the cache\]")


def test_chat_keeps_history_and_reuses_its_kv(run_exactly, model_path):
    out = run_exactly(["chat", "-m", model_path, "--temp", "0", "-n", "40", "--kv-cache-memory", "256MiB"],
                      input="My name is Ada.\nWhat is my name?\n/exit\n", timeout=120)
    turns = [tuple(map(int, m)) for m in TURN.findall(out.stderr)]
    assert len(turns) == 2, out.stderr
    (gen1, cached1, prompt1), (gen2, cached2, prompt2) = turns
    assert gen1 > 0 and gen2 > 0 and out.stdout.strip()
    # The second prompt holds the first exchange (prompt, reply, new question)...
    assert prompt2 > prompt1 + gen1 - 2
    # ...and most of it comes from the prefix cache rather than being recomputed.
    assert cached1 == 0 and cached2 >= 16 and cached2 >= (prompt1 // 16) * 16 - 16


def test_chat_reset_forgets_history(run_exactly, model_path):
    out = run_exactly(["chat", "-m", model_path, "--temp", "0", "-n", "30", "--kv-cache-memory", "256MiB"],
                      input="My name is Ada.\n/reset\nWhat is my name?\n", timeout=120)
    assert "history cleared" in out.stderr
    turns = TURN.findall(out.stderr)
    assert len(turns) == 2
    # After /reset the second prompt is no longer than a fresh first one.
    assert int(turns[1][2]) <= int(turns[0][2]) + 2


def test_info_reports_metadata_types_and_memory(run_exactly, model_path):
    out = run_exactly(["info", "-m", model_path]).stdout
    assert "llama.block_count" in out and "30" in out
    assert re.search(r"Q4_1\s+210 tensors", out), out
    assert re.search(r"Q8_0\s+1 tensors", out), out
    assert re.search(r"F32\s+61 tensors", out), out
    assert "KV cache (fp32): 45.00 KiB per token" in out
    assert "layers 30, dim 576, ffn 1536, heads 9 (kv 3, head dim 64), vocab 49152, context 8192" in out


def test_perplexity_matches_the_reference_computation(run_exactly, model_path, repo_root, tmp_path,
                                                      ref_model, ref_tokenizer, bos_id):
    """Two windows of 64 tokens; in each, the prediction of tokens 33..63 from
    everything before them in the window (llama.cpp scores the second half,
    with BOS replacing the window's first token when the model adds one)."""
    import tokenizer_ref
    text = (repo_root / "tests" / "data" / "prompts" / "long_en.txt").read_text(encoding="utf-8")
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    ctx, chunks = 64, 2
    out = run_exactly(["perplexity", "-m", model_path, "-f", path, "--ctx", ctx, "--chunks", chunks], timeout=300)
    got = float(re.search(r"PPL = ([0-9.]+)", out.stdout).group(1))

    tokens = tokenizer_ref.encode(ref_tokenizer, text, bos_id=bos_id)
    nll, count = 0.0, 0
    for c in range(chunks):
        window = list(tokens[c * ctx:(c + 1) * ctx])
        if bos_id is not None:
            window[0] = bos_id
        logits = ref_model.logits(window)
        for j in range(ctx // 2, ctx - 1):
            row = logits[j]
            m = row.max()
            log_z = m + math.log(np.exp(row - m).sum())
            nll += log_z - row[tokens[c * ctx + j + 1]]
            count += 1
    want = math.exp(nll / count)
    print(f"perplexity: engine {got:.4f}, float64 reference {want:.4f}")
    assert abs(got - want) / want < 1e-3
