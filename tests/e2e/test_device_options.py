"""The GPU options on a machine without a GPU (CI): each fails with a usage
error (exit 64) naming what is missing, before any work, and the CPU path is
unchanged by them. (The GPU paths themselves are checked on the GPU machine:
tests/cuda/check_model.py, check_hf.py, check_layer_ops.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

LLAMA3_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "max_position_embeddings": 8192, "vocab_size": 128256, "hidden_act": "silu",
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def gpu_visible() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(["nvidia-smi"], capture_output=True).returncode == 0


@pytest.mark.skipif(gpu_visible(), reason="a GPU is visible here")
def test_cuda_without_a_gpu_is_a_usage_error(run_exactly, model_path):
    p = run_exactly(["run", "-m", model_path, "-p", "Hi", "-n", "2", "--device", "cuda"], check=False)
    assert p.returncode == 64, p.stderr
    assert "--device cuda" in p.stderr and ("no CUDA device" in p.stderr or "no CUDA backend" in p.stderr)


def test_unknown_device_is_rejected(run_exactly, model_path):
    p = run_exactly(["run", "-m", model_path, "-p", "Hi", "--device", "tpu"], check=False)
    assert p.returncode != 0 and "--device" in p.stderr


def test_dummy_weights_need_the_gpu(run_exactly, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_CONFIG))
    p = run_exactly(["bench", "throughput", "-m", tmp_path / "config.json", "--load-format", "dummy",
                     "--batch-sizes", "1"], check=False)
    assert p.returncode == 64, p.stderr
    assert "--load-format dummy needs --device cuda" in p.stderr


def test_gpu_flags_leave_the_cpu_path_unchanged(run_exactly, model_path):
    base = ["run", "-m", model_path, "-p", "The capital of France is", "-n", "8", "--temp", "0"]
    plain = run_exactly(base).stdout
    flagged = run_exactly(base + ["--gpu-memory-utilization", "0.5", "--enforce-eager"]).stdout
    assert plain == flagged and plain.strip()


def test_bench_throughput_on_the_cpu_reports_every_batch_size(run_exactly, model_path, tmp_path):
    out = tmp_path / "t.json"
    run_exactly(["bench", "throughput", "-m", model_path, "--batch-sizes", "1,2", "--input-len", "8",
                 "--output-len", "3", "-r", "1", "--json", out])
    j = json.loads(out.read_text())
    assert [r["batch"] for r in j["results"]] == [1, 2]
    for r in j["results"]:
        assert r["tokens_per_second"] > 0 and r["decode_tokens_per_second"] > 0 and r["ms_per_decode_step"] > 0


def test_step_trace_accounts_for_every_token(run_exactly, model_path, tmp_path):
    trace = tmp_path / "trace.csv"
    run_exactly(["bench", "throughput", "-m", model_path, "--batch-sizes", "1,3", "--input-len", "8",
                 "--output-len", "4", "-r", "2", "--step-trace", trace])
    lines = trace.read_text().splitlines()
    assert lines[0] == "batch,step,ms,forward_ms,prompt_tokens,generated,running"
    rows = [dict(zip(lines[0].split(","), line.split(","))) for line in lines[1:]]
    for batch in (1, 3):
        steps = [r for r in rows if int(r["batch"]) == batch]  # the last of the two runs only
        assert [int(r["step"]) for r in steps] == list(range(len(steps)))
        assert sum(int(r["prompt_tokens"]) for r in steps) == batch * 8
        assert sum(int(r["generated"]) for r in steps) == batch * 4
        assert all(0 < float(r["forward_ms"]) <= float(r["ms"]) for r in steps)
        assert int(steps[-1]["running"]) == 0


def test_step_trace_to_an_unwritable_path_is_a_usage_error(run_exactly, model_path, tmp_path):
    bad = tmp_path / "missing" / "trace.csv"
    p = run_exactly(["bench", "throughput", "-m", model_path, "--batch-sizes", "1", "--input-len", "4",
                     "--output-len", "2", "-r", "1", "--step-trace", bad], check=False)
    assert p.returncode == 64, p.stderr
    assert str(bad) in p.stderr
