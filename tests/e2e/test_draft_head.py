"""Draft heads (`--spec head:PATH`) through the command line.

Heads are written here with bench/draft/write_head_gguf.py (numpy and the
gguf package). Checked:
- greedy output with a random head, whole or with a partial output head
  (exactly.output_token_ids), equals plain greedy output, and the head drafts;
- a head that is not the target's or not a head at all exits 2 naming what is
  wrong: another hidden size, vocabulary or layer count, a missing, misshapen,
  mistyped or unexpected tensor, a bad token list, a truncated or corrupt file.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "draft"))
from write_head_gguf import random_head, target_shape, write_head  # noqa: E402

CHAT = "<|im_start|>user\nName three colours, then name them again.<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def shape(model_path):
    return target_shape(str(model_path))


def greedy(run_exactly, model_path, tmp_path, *spec):
    ids_out = tmp_path / "ids.json"
    proc = run_exactly(["run", "-m", model_path, "-p", CHAT, "-n", 20, "--temp", 0, "-t", 2, "--ids-out", ids_out,
                        *spec])
    return json.loads(ids_out.read_text())["ids"], proc.stderr


@pytest.mark.parametrize("partial", [False, True])
def test_greedy_with_a_random_head_equals_plain_greedy(run_exactly, model_path, shape, tmp_path, partial):
    path = tmp_path / "head.gguf"
    ids = sorted(set(range(0, shape["vocab"], 2)) | {2}) if partial else None
    write_head(str(path), shape, random_head(shape, seed=5, ffn=128), vocab_ids=ids, matrix_type="F16")
    plain, _ = greedy(run_exactly, model_path, tmp_path)
    spec, stderr = greedy(run_exactly, model_path, tmp_path, "--spec", f"head:{path}", "--num-speculative-tokens", 3,
                          "--no-adaptive-speculation")
    assert spec == plain
    assert int(re.search(r"(\d+) drafted", stderr).group(1)) > 0, stderr


def bad_head(shape, case, path):
    """Writes the head of `case` to `path`; returns what the error must name."""
    t = random_head(shape, seed=1, ffn=32)
    meta, ids, skip = {}, None, False
    needle = {
        "hidden": "'exactly-draft-head.embedding_length' is 512 but the target's hidden size is 576",
        "vocab": "'exactly-draft-head.vocab_size' is 32000 but the target's vocabulary size is 49152",
        "layer": "'exactly-draft-head.target_layer' is 12 but the target's number of layers is 30",
        "no_vocab_key": "exactly-draft-head.vocab_size",
        "missing": "blk.0.attn_v.weight",
        "shape": "tensor 'fc.weight' should have shape [1152, 576]",
        "ffn": "tensor 'blk.0.ffn_up.weight' should have shape [576, 32]",
        "extra": "unexpected tensor 'blk.1.attn_q.weight'",
        "norm_f16": "tensor 'output_norm.weight' should be F32",
        "ids": "exactly.output_token_ids[1] = 3: the ids must increase strictly",
    }[case]
    if case == "hidden":
        meta["embedding_length"] = 512
    elif case == "vocab":
        meta["vocab_size"] = 32000
    elif case == "layer":
        meta["target_layer"] = 12
    elif case == "no_vocab_key":
        meta["vocab_size"] = None
    elif case == "missing":
        del t["blk.0.attn_v.weight"]
        skip = True
    elif case == "shape":
        t["fc.weight"] = t["fc.weight"][:, :1088]
    elif case == "ffn":
        t["blk.0.ffn_up.weight"] = t["blk.0.ffn_up.weight"][:16]
    elif case == "extra":
        t["blk.1.attn_q.weight"] = t["blk.0.attn_q.weight"]
    elif case == "ids":
        ids = [5, 3, 7]
    elif case == "norm_f16":
        t["output_norm.weight"] = t["output_norm.weight"].astype(np.float16)
    write_head(str(path), shape, t, vocab_ids=ids, meta_override=meta, skip_checks=skip)
    return needle


CASES = ["hidden", "vocab", "layer", "no_vocab_key", "missing", "shape", "ffn", "extra", "norm_f16", "ids"]


@pytest.mark.parametrize("case", CASES)
def test_a_bad_head_exits_2_naming_what_is_wrong(run_exactly, model_path, shape, tmp_path, case):
    path = tmp_path / f"{case}.gguf"
    needle = bad_head(shape, case, path)
    proc = run_exactly(["run", "-m", model_path, "-p", "Hi", "-n", 2, "-t", 2, "--spec", f"head:{path}"], check=False)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr, proc.stderr
    assert f"--spec head:{path}" in proc.stderr, proc.stderr


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "a model"])
def test_a_damaged_file_or_a_model_is_no_head(run_exactly, model_path, shape, tmp_path, damage):
    path = tmp_path / "head.gguf"
    if damage == "a model":
        path = Path(model_path)
        needle = "architecture 'llama' is not a draft head"
    else:
        write_head(str(path), shape, random_head(shape, seed=2, ffn=32))
        data = bytearray(path.read_bytes())
        if damage == "truncated":
            data = data[: len(data) - 4096]
        else:
            data[8:16] = (10**12).to_bytes(8, "little")  # an absurd tensor count
        path.write_bytes(bytes(data))
        needle = str(path)
    proc = run_exactly(["run", "-m", model_path, "-p", "Hi", "-n", 2, "-t", 2, "--spec", f"head:{path}"], check=False)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr, proc.stderr


def test_trained_weights_become_a_head_through_the_documented_command(run_exactly, repo_root, model_path, shape,
                                                                     tmp_path):
    # HEAD.npz as bench/draft/train_head.py saves it: PyTorch's [rows, cols]
    # float32 weights under the GGUF names, and the layer's head counts.
    import subprocess

    npz, path = tmp_path / "HEAD.npz", tmp_path / "head.gguf"
    np.savez(npz, n_heads=shape["n_heads"], n_kv_heads=shape["n_kv_heads"], **random_head(shape, seed=9, ffn=96))
    subprocess.run([sys.executable, repo_root / "bench" / "draft" / "write_head_gguf.py", "--target", model_path,
                    "--trained", npz, "--out", path], check=True, capture_output=True)
    plain, _ = greedy(run_exactly, model_path, tmp_path)
    spec, stderr = greedy(run_exactly, model_path, tmp_path, "--spec", f"head:{path}", "--num-speculative-tokens", 2,
                          "--no-adaptive-speculation")
    assert spec == plain
    assert int(re.search(r"(\d+) drafted", stderr).group(1)) > 0, stderr
