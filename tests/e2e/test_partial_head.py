"""A draft model whose output head covers only some tokens.

A GGUF file may list in `exactly.output_token_ids` the token of each row of
its output.weight (bench/draft/ distils such drafts: most of a small draft's
cost is the head). The engine gives those tokens their rows' logits and every
other token -inf. Checked here on models cut from the default one:
- the listed tokens' logits equal, bit for bit, those of the same model with
  its whole head (the rows are the same bytes), and every other logit is -inf;
- greedy output with such a draft equals plain greedy output, and the draft
  proposes nothing outside its tokens;
- bad lists (not increasing, outside the vocabulary, a row count that
  differs, no head of its own) are refused with exit code 2, naming the key.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "draft"))
from write_draft_gguf import write_gguf  # noqa: E402

CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
LAYERS = 2
EOS = 2


def head_rows(model_path, ids):
    """The stored bytes of the embedding rows `ids` (the default model ties its head to the embedding)."""
    embd = next(t for t in GGUFReader(str(model_path)).tensors if t.name == "token_embd.weight")
    return np.ascontiguousarray(embd.data[np.asarray(ids)]), embd.tensor_type


def partial_copy(model_path, path, ids, n_layers=LAYERS, rows=None):
    data, qtype = head_rows(model_path, ids if rows is None else rows)
    write_gguf(str(model_path), str(path), n_layers, {"output.weight": (data, qtype)}, ids, name_suffix="")


@pytest.fixture(scope="module")
def models(model_path, tmp_path_factory):
    d = tmp_path_factory.mktemp("partial")
    whole, part = d / "whole.gguf", d / "part.gguf"
    ids = sorted(set(range(0, 49152, 3)) | {EOS})
    write_gguf(str(model_path), str(whole), LAYERS, name_suffix="")
    partial_copy(model_path, part, ids)
    return whole, part, ids


def logits(run_exactly, model, tokens, out):
    run_exactly(["logits", "-m", model, "--tokens", ",".join(map(str, tokens)), "-o", out, "-t", 2])
    return np.fromfile(out, dtype=np.float32).reshape(len(tokens), -1)


def test_listed_tokens_keep_their_logits_and_the_rest_are_minus_infinity(run_exactly, models, tmp_path):
    whole, part, ids = models
    tokens = [1, 4093, 198, 19161, 253, 1890, 1977, 563, 2, 198, 1, 520, 9531, 198]
    full = logits(run_exactly, whole, tokens, tmp_path / "whole.bin")
    some = logits(run_exactly, part, tokens, tmp_path / "part.bin")
    assert full.shape == some.shape == (len(tokens), 49152)
    listed = np.zeros(49152, dtype=bool)
    listed[ids] = True
    assert np.array_equal(some[:, listed], full[:, listed])
    assert np.all(np.isneginf(some[:, ~listed]))
    assert np.all(np.isfinite(full))


def test_greedy_with_a_partial_head_draft_equals_plain_greedy(run_exactly, model_path, models, tmp_path):
    _, part, ids = models

    def greedy(*spec):
        ids_out = tmp_path / "ids.json"
        proc = run_exactly(["run", "-m", model_path, "-p", CHAT, "-n", 24, "--temp", 0, "-t", 2,
                            "--ids-out", ids_out, *spec])
        return json.loads(ids_out.read_text())["ids"], proc.stderr

    plain, _ = greedy()
    spec, stderr = greedy("--spec", f"draft:{part}", "--num-speculative-tokens", 3, "--no-adaptive-speculation")
    assert spec == plain
    assert int(re.search(r"(\d+) drafted", stderr).group(1)) > 0


def test_a_draft_with_every_row_of_its_head_matches_the_target_whole(run_exactly, model_path, tmp_path):
    # All 30 layers and a head that lists every token: the target itself, so
    # every greedy draft is accepted.
    path = tmp_path / "all.gguf"
    partial_copy(model_path, path, list(range(49152)), n_layers=30)
    ids_out = tmp_path / "ids.json"
    proc = run_exactly(["run", "-m", model_path, "-p", CHAT, "-n", 16, "--temp", 0, "-t", 2, "--ids-out", ids_out,
                        "--spec", f"draft:{path}", "--num-speculative-tokens", 3, "--no-adaptive-speculation"])
    drafted, accepted = map(int, re.search(r"(\d+) drafted, (\d+) accepted", proc.stderr).groups())
    assert drafted > 0 and accepted == drafted


@pytest.mark.parametrize("case,needle", [
    ("decreasing", "the ids must increase strictly"),
    ("repeated", "the ids must increase strictly"),
    ("outside", "the ids must increase strictly and lie in [0, 49152)"),
    ("fewer_rows", "tensor 'output.weight' should have shape [576, 100]"),
    ("tied", "is set, so the file needs its own output.weight"),
])
def test_bad_token_lists_are_refused(run_exactly, model_path, tmp_path, case, needle):
    path = tmp_path / f"{case}.gguf"
    ids = list(range(100))
    if case == "decreasing":
        ids[10], ids[11] = ids[11], ids[10]
    elif case == "repeated":
        ids[11] = ids[10]
    elif case == "outside":
        ids[-1] = 49152
    if case == "tied":
        write_gguf(str(model_path), str(path), LAYERS, vocab_ids=ids, name_suffix="")
    else:
        rows = list(range(99)) if case == "fewer_rows" else [min(i, 49151) for i in ids]
        partial_copy(model_path, path, ids, rows=rows)
    proc = run_exactly(["logits", "-m", path, "--tokens", "1,2", "-o", tmp_path / "x.bin"], check=False)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and str(path) in proc.stderr, proc.stderr
    assert "exactly.output_token_ids" in proc.stderr or case == "fewer_rows", proc.stderr
