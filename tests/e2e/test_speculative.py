"""Speculative decoding with model drafts from the command line.

`exactly export --layers L` writes a model that the PyPI gguf package reads as
the source's first L layers with everything else unchanged; greedy output of
`run` and `batch` with --spec draft:PATH (the exported model, or the target
itself) and --spec layerskip:L equals plain greedy output; `batch --stats`,
`run` and serve's /metrics report the speculation counters; bad --spec values
exit 64, or 2 for a draft that is not a valid GGUF, naming the problem."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import requests
from gguf import GGUFReader

from test_server import ServerProcess

CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
LAYERS = 8


@pytest.fixture(scope="module")
def exported(run_exactly, model_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / f"first{LAYERS}.gguf"
    run_exactly(["export", "--layers", LAYERS, "-m", model_path, "-o", path])
    return path


def layer_of(name: str) -> int:
    m = re.match(r"blk\.(\d+)\.", name)
    return int(m.group(1)) if m else -1


def test_export_is_read_by_gguf_as_the_first_layers(exported, model_path):
    out, src = GGUFReader(str(exported)), GGUFReader(str(model_path))
    assert out.fields["llama.block_count"].contents() == LAYERS
    assert list(out.fields) == list(src.fields)
    for name, field in src.fields.items():
        if name not in ("llama.block_count", "GGUF.tensor_count"):
            assert out.fields[name].contents() == field.contents(), name
    kept = [t for t in src.tensors if layer_of(t.name) < LAYERS]
    assert [t.name for t in out.tensors] == [t.name for t in kept]
    assert len(kept) < len(src.tensors)
    alignment = int(out.fields["general.alignment"].contents()) if "general.alignment" in out.fields else 32
    for t, s in zip(out.tensors, kept):
        assert t.tensor_type == s.tensor_type and list(t.shape) == list(s.shape), t.name
        assert t.data_offset % alignment == 0, t.name
        assert np.array_equal(t.data, s.data), t.name


def test_export_refuses_a_layer_count_the_model_does_not_have(run_exactly, model_path, tmp_path):
    proc = run_exactly(["export", "--layers", 31, "-m", model_path, "-o", tmp_path / "x.gguf"], check=False)
    assert proc.returncode == 64, proc.stderr
    assert "has 30 layers" in proc.stderr
    assert not (tmp_path / "x.gguf").exists()


def greedy_ids(run_exactly, model_path, tmp_path, *spec):
    ids_out = tmp_path / "ids.json"
    proc = run_exactly(["run", "-m", model_path, "-p", CHAT, "-n", 24, "--temp", 0, "-t", 2, "--ids-out", ids_out,
                        *spec])
    return json.loads(ids_out.read_text())["ids"], proc.stderr


@pytest.mark.parametrize("method", ["draft:EXPORTED", "draft:TARGET", f"layerskip:{LAYERS}"])
def test_greedy_run_with_a_model_draft_equals_plain_greedy(run_exactly, model_path, exported, tmp_path, method):
    method = method.replace("EXPORTED", str(exported)).replace("TARGET", str(model_path))
    plain, _ = greedy_ids(run_exactly, model_path, tmp_path)
    ids, stderr = greedy_ids(run_exactly, model_path, tmp_path, "--spec", method, "--num-speculative-tokens", 3,
                             "--no-adaptive-speculation")
    assert ids == plain
    drafted, accepted = map(int, re.search(r"speculation \(.*\): (\d+) drafted, (\d+) accepted", stderr).groups())
    assert drafted > 0
    if method.startswith("draft:") and method.endswith(str(model_path)):
        assert accepted == drafted, "the target drafting for itself must have every greedy draft accepted"


def test_batch_with_a_draft_model_equals_plain_and_reports_counters(run_exactly, model_path, exported, tmp_path):
    req = tmp_path / "in.jsonl"
    req.write_text("".join(json.dumps({"prompt": CHAT + p, "max_tokens": 16, "temperature": 0, "ignore_eos": True})
                           + "\n" for p in ["", "The", "Paris"]))
    results = {}
    for name, spec in [("plain", []), ("draft", ["--spec", f"draft:{exported}", "--no-adaptive-speculation"])]:
        out, stats = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.json"
        run_exactly(["batch", "-m", model_path, "-t", 2, "-i", req, "-o", out, "--stats", stats, *spec])
        results[name] = [json.loads(line)["choices"][0]["token_ids"] for line in out.read_text().splitlines()]
        results[name + "_stats"] = json.loads(stats.read_text())
    assert results["draft"] == results["plain"]
    assert results["draft_stats"]["spec_drafted_tokens"] > 0
    assert results["plain_stats"]["spec_drafted_tokens"] == 0


def test_serve_with_layerskip_reports_counters(exactly_bin, model_path):
    # All layers: the draft is the target, so every greedy draft is accepted.
    server = ServerProcess(exactly_bin, model_path, "--spec", "layerskip:30", "--num-speculative-tokens", 3,
                           "--no-adaptive-speculation")
    try:
        r = requests.post(server.url + "/v1/completions",
                          json={"prompt": CHAT, "max_tokens": 16, "temperature": 0, "ignore_eos": True}, timeout=60)
        assert r.status_code == 200, r.text
        m = server.wait_for_free_blocks()
        assert m["exactly_spec_decode_num_draft_tokens_total"] > 0
        assert m["exactly_spec_decode_num_accepted_tokens_total"] == m["exactly_spec_decode_num_draft_tokens_total"]
        assert m["exactly_kv_blocks_used"] == 0
    finally:
        assert server.stop() == 0


def swapped_vocabulary_copy(source, target):
    """A copy of `source` with two neighbouring tokens of equal length swapped
    in place: still a valid model (merges name the same token texts), but ids
    100 and up mean other texts than the target's. Returns the two texts."""
    field = GGUFReader(str(source)).fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]) for i in field.data]
    i = next(i for i in range(100, len(tokens) - 1) if len(tokens[i]) == len(tokens[i + 1]) != 0
             and tokens[i] != tokens[i + 1])
    offset = field.offset + sum(p.nbytes for p in field.parts[:field.data[i]])
    data = bytearray(source.read_bytes())
    n = len(tokens[i])
    assert data[offset:offset + n] == tokens[i]
    # Layout: [bytes of i][length of i + 1 (8 bytes)][bytes of i + 1].
    data[offset:offset + n], data[offset + n + 8:offset + 2 * n + 8] = tokens[i + 1], tokens[i]
    target.write_bytes(data)
    return i, tokens[i].decode(), tokens[i + 1].decode()


@pytest.mark.parametrize("method,code,needle", [
    ("medusa", 64, "--spec medusa is not a known method (known: ngram, draft:PATH, layerskip:L, head:PATH)"),
    ("layerskip:0", 64, "--spec layerskip:0: L must be between 1 and 30"),
    ("layerskip:31", 64, "--spec layerskip:31: L must be between 1 and 30"),
    ("layerskip:x", 64, "'x' is not a number of layers"),
    ("draft:", 64, "needs the path of a GGUF draft model"),
    ("draft:MISSING", 2, "cannot open: No such file or directory"),
    ("draft:NOT_GGUF", 2, "not a GGUF file"),
    ("draft:SWAPPED", 64, "the draft model's vocabulary differs from the target's: token"),
])
def test_bad_spec_values_are_refused_clearly(run_exactly, model_path, exported, tmp_path, method, code, needle):
    (tmp_path / "not.gguf").write_text("hello")
    if method == "draft:SWAPPED":
        i, a, b = swapped_vocabulary_copy(exported, tmp_path / "swapped.gguf")
        needle += f" {i} is '{b}' in the draft and '{a}' in the target"
    method = (method.replace("MISSING", str(tmp_path / "missing.gguf")).replace("NOT_GGUF", str(tmp_path / "not.gguf"))
              .replace("SWAPPED", str(tmp_path / "swapped.gguf")))
    proc = run_exactly(["run", "-m", model_path, "-p", "hi", "-n", 1, "--kv-cache-memory", "64MiB", "--spec", method],
                       check=False)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr
    assert "--spec" in proc.stderr
