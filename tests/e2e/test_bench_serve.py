"""`exactly bench serve` against a fake streaming server with known timing
(tests/e2e/fake_openai_server.py): the reported TTFT, TPOT, ITL and token
counts match the delays and lengths the server was told to use, under a fixed
concurrency and under Poisson arrivals; HTTP errors and refused connections
are counted as failures without stopping the benchmark; --plot writes a PNG
that decodes.

Needs no model. Timing bounds are generous (the machine may be busy), but
tight enough to catch a unit slip or a TTFT/TPOT mix-up."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

FAKE_SERVER = Path(__file__).with_name("fake_openai_server.py")
TTFT_MS = 50
ITL_MS = 10


@pytest.fixture
def fake_server():
    """fake_server(**options) -> base URL of a running fake server; stopped after the test."""
    procs = []

    def start(**options):
        args = [sys.executable, str(FAKE_SERVER), "--port", "0", "--max-seconds", "60"]
        for key, value in options.items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        port = int(proc.stdout.readline())
        return f"http://127.0.0.1:{port}"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def bench(run_exactly, url, tmp_path, *args, check=True):
    out = tmp_path / "result.json"
    proc = run_exactly(["bench", "serve", "--url", url, "--json", str(out), "--timeout", "20", *map(str, args)],
                       timeout=60, check=check)
    print(proc.stdout)
    return json.loads(out.read_text()) if out.exists() else None, proc


def assert_timing_matches_server(r, n, output_len):
    assert r["completed"] == n and r["failed"] == 0, r["failures"]
    assert r["output_tokens"] == n * output_len
    # Lower bounds are tight (the server never sends early); upper bounds leave
    # room for a busy machine yet stay below a TTFT/ITL mix-up (50 vs 10 ms).
    assert TTFT_MS - 2 <= r["ttft"]["median_ms"] <= TTFT_MS + 150, r["ttft"]
    assert ITL_MS - 1 <= r["tpot"]["median_ms"] <= ITL_MS + 20, r["tpot"]
    assert ITL_MS - 3 <= r["itl"]["median_ms"] <= ITL_MS + 20, r["itl"]
    assert r["itl"]["count"] == n * (output_len - 1)  # one gap between each pair of chunks
    assert r["tpot"]["count"] == n
    e2e_ms = TTFT_MS + (output_len - 1) * ITL_MS
    assert e2e_ms - 2 <= r["e2el"]["median_ms"] <= e2e_ms + 300, r["e2el"]
    assert r["ttft"]["median_ms"] <= r["ttft"]["p90_ms"] <= r["ttft"]["p99_ms"]
    assert r["output_throughput"] == pytest.approx(r["output_tokens"] / r["duration_s"], rel=1e-6)
    assert r["request_throughput"] == pytest.approx(n / r["duration_s"], rel=1e-6)


def test_fixed_concurrency_reports_the_server_delays(run_exactly, fake_server, tmp_path):
    url = fake_server(ttft_ms=TTFT_MS, itl_ms=ITL_MS)
    n, output_len = 16, 20
    r, _ = bench(run_exactly, url, tmp_path, "--dataset", "synthetic", "--num-prompts", n, "--input-len", 8,
                 "--output-len", output_len, "--max-concurrency", 4, "--slo-ttft-ms", 1000, "--slo-tpot-ms", 1000)
    assert_timing_matches_server(r, n, output_len)
    assert r["max_concurrency"] == 4 and r["request_rate"] == "inf"
    assert r["input_tokens"] == n * 8
    # Four workers back to back: four rounds of one request's latency.
    one_request_s = (TTFT_MS + (output_len - 1) * ITL_MS) / 1000
    assert 4 * one_request_s * 0.95 <= r["duration_s"] <= 4 * one_request_s * 4
    assert r["good_requests"] == n and r["goodput"] == pytest.approx(r["request_throughput"])


def test_poisson_arrivals_report_the_server_delays(run_exactly, fake_server, tmp_path):
    url = fake_server(ttft_ms=TTFT_MS, itl_ms=ITL_MS)
    n, output_len = 16, 20
    r, _ = bench(run_exactly, url, tmp_path, "--dataset", "synthetic", "--num-prompts", n, "--input-len", 8,
                 "--output-len", output_len, "--request-rate", 20, "--seed", 3,
                 "--slo-ttft-ms", TTFT_MS / 2)
    assert_timing_matches_server(r, n, output_len)
    assert r["request_rate"] == 20
    # No request can meet a TTFT objective below the server's fixed delay.
    assert r["good_requests"] == 0 and r["goodput"] == 0


def test_dataset_file_token_counts_come_from_usage(run_exactly, fake_server, tmp_path):
    # Two tokens per chunk: counting chunks would report half the tokens.
    url = fake_server(ttft_ms=5, itl_ms=2, tokens_per_chunk=2)
    rows = [{"prompt": "one two three", "max_tokens": 7, "temperature": 0},
            {"prompt": [5, 6, 7, 8], "max_tokens": 4, "ignore_eos": True, "arrival": 1.5}]
    dataset = tmp_path / "workload.jsonl"
    dataset.write_text("".join(json.dumps(x) + "\n" for x in rows))
    r, _ = bench(run_exactly, url, tmp_path, "--dataset", dataset, "--num-prompts", 6, "--max-concurrency", 2)
    assert r["completed"] == 6 and r["failed"] == 0
    assert r["output_tokens"] == 3 * (7 + 4)
    assert r["input_tokens"] == 3 * (3 + 4)


def test_http_errors_are_counted_as_failures(run_exactly, fake_server, tmp_path):
    url = fake_server(ttft_ms=5, itl_ms=2, fail_every=3)
    n = 12
    r, _ = bench(run_exactly, url, tmp_path, "--dataset", "synthetic", "--num-prompts", n, "--input-len", 4,
                 "--output-len", 5, "--max-concurrency", 3)
    assert r["failed"] == n // 3 and r["completed"] == n - n // 3
    assert r["output_tokens"] == (n - n // 3) * 5
    assert len(r["failures"]) == 1 and r["failures"][0]["count"] == n // 3
    assert r["failures"][0]["reason"].startswith("HTTP 500")


def test_refused_connections_fail_every_request_without_crashing(run_exactly, tmp_path):
    with socket.socket() as s:  # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r, _ = bench(run_exactly, f"http://127.0.0.1:{port}", tmp_path, "--dataset", "synthetic", "--num-prompts", 4,
                 "--output-len", 4, "--request-rate", "inf")
    assert r["completed"] == 0 and r["failed"] == 4
    assert r["failures"][0]["reason"].startswith("connection")
    assert r["ttft"]["median_ms"] is None


def read_png(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        chunks[kind] = chunks.get(kind, b"") + body
        at += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, color) == (8, 2)
    raw = zlib.decompress(chunks[b"IDAT"])
    assert len(raw) == height * (1 + 3 * width)
    assert b"IEND" in chunks
    return width, height, raw


def test_sweep_plot_is_a_valid_png(run_exactly, fake_server, tmp_path):
    url = fake_server(ttft_ms=10, itl_ms=3)
    plot = tmp_path / "sweep.png"
    r, _ = bench(run_exactly, url, tmp_path, "--dataset", "synthetic", "--num-prompts", 8, "--output-len", 10,
                 "--sweep", "20,inf", "--plot", plot)
    assert [run["request_rate"] for run in r["runs"]] == [20, "inf"]
    assert all(run["completed"] == 8 for run in r["runs"])
    width, height, raw = read_png(plot)
    assert width > 100 and height > 100
    # Something besides the white background was drawn.
    assert raw.count(b"\xff") < len(raw) * 0.99


def test_usage_errors(run_exactly, tmp_path):
    proc = run_exactly(["bench", "serve", "--url", "http://127.0.0.1:1", "--dataset", "synthetic",
                        "--num-prompts", "2"], check=False, timeout=30)
    assert proc.returncode == 64 and "--request-rate" in proc.stderr
    proc = run_exactly(["bench", "serve", "--url", "127.0.0.1:1", "--dataset", "synthetic", "--num-prompts", "2",
                        "--request-rate", "1"], check=False, timeout=30)
    assert proc.returncode == 64 and "--url" in proc.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    proc = run_exactly(["bench", "serve", "--url", "http://127.0.0.1:1", "--dataset", str(bad),
                        "--request-rate", "1"], check=False, timeout=30)
    assert proc.returncode == 2 and "bad.jsonl:1" in proc.stderr and "max_tokens" in proc.stderr


def test_a_stalled_request_is_bounded_by_the_timeout(run_exactly, fake_server, tmp_path):
    url = fake_server(ttft_ms=20000, itl_ms=1)
    out = tmp_path / "result.json"
    proc = run_exactly(["bench", "serve", "--url", url, "--dataset", "synthetic", "--num-prompts", 2,
                        "--output-len", 3, "--max-concurrency", 2, "--timeout", 1, "--json", out], timeout=15)
    r = json.loads(out.read_text())
    assert r["failed"] == 2 and r["failures"][0]["reason"].startswith("timed out"), proc.stdout
    assert r["duration_s"] < 5
