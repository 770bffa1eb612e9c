"""`exactly verify` on the CPU engine: every check identical (exit 0), and the
checker itself fails when a run is perturbed (another seed for one target
in the crowd run: exit 1 naming the check and the token)."""

from __future__ import annotations

import json


def test_verify_passes_on_the_cpu_engine(run_exactly, model_path, tmp_path):
    out = tmp_path / "verify.json"
    proc = run_exactly(["verify", "-m", str(model_path), "--fillers", "3", "--context", "160", "--json", str(out)])
    checks = json.loads(out.read_text())
    assert [c["check"] for c in checks] == [
        "among 3 others", "prefill chunks of 1", "prefill chunks of 7", "prefill chunks of 64",
        "prefill chunks of 160", "after a prefix-cache hit", "with preemption", "with speculation (greedy)",
        "sampler == scorer"]
    assert all(c["identical"] for c in checks), checks
    assert "9/9 checks identical" in proc.stdout


def test_verify_reports_a_perturbed_run(run_exactly, model_path):
    proc = run_exactly(["verify", "-m", str(model_path), "--fillers", "3", "--context", "160", "--perturb"],
                       check=False)
    assert proc.returncode == 1, proc.stderr[-500:]
    assert "DIFFERS    among 3 others" in proc.stdout and "request 1: token" in proc.stdout
    assert "1 of 9 checks differ" in proc.stderr
