#!/usr/bin/env python3
"""`exactly serve` under hostile and heavy load, measured from outside.

Starts the server binary given (so that two builds can be compared on the
same machine), then measures, with the idle and slow clients in a process of
their own:

  health   /health latency (a new connection per probe, as a load balancer
           probes) with no other client, with --idle idle connections open and
           with --slow connections that send one header byte a second
           (reconnecting when the server closes them, so that as many stay
           open); probes that get no answer within --probe-timeout fail
  ttft     time to the first streamed token of a short completion, in the
           same three conditions (phase "health"), and in alternating blocks
           of the three (phase "ttft"), which cancels the machine's drift
  streams  --streams concurrent streaming clients, two waves: completions,
           errors, [DONE] and finish reasons, the most requests the engine
           ran at once (polled from /metrics), KV blocks in use afterwards and
           the server's RSS growth per 1,000 requests after the first wave
  shutdown seconds from SIGTERM to exit while --slow slow connections, a
           stream that reads and one that never reads are open

Prints a table and writes --json. Standard library only.

  bench/serve_stress.py --server build/bin/exactly --label beast --json OUT.json
  bench/serve_stress.py --model bench/configs/llama-3-8b.json --token-ids --phases streams,shutdown \
      --server-args "--device cuda --load-format dummy --max-num-seqs 1024 --max-queued-requests 2048"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


# ---- the server ----

class Server:
    def __init__(self, binary: str, model: str, port: int, extra: list[str], log: Path, startup_timeout: float):
        self.port = port
        self.log = open(log, "w")
        args = [binary, "serve", "-m", model, "--port", str(port), *extra]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"server exited with {self.proc.returncode}; see {log}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    if s.recv(100).startswith(b"HTTP/1.1 200"):
                        return
            except OSError:
                pass
            time.sleep(0.2)
        sys.exit("server did not start")

    def rss_mib(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024

    def cpu_seconds(self, main_thread_only: bool = False) -> float:
        """CPU time of the process (or of its main thread, which runs the
        event loop with --http-threads 1 and accepts with cpp-httplib)."""
        path = f"/proc/{self.proc.pid}/task/{self.proc.pid}/stat" if main_thread_only else f"/proc/{self.proc.pid}/stat"
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def threads(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("Threads:"))

    def stop(self, timeout: float = 120) -> tuple[int, float]:
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        return code, time.monotonic() - start


# ---- HTTP over asyncio streams ----

async def read_head(reader) -> tuple[int, dict[str, str]]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), headers


async def read_body(reader, headers) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out = b""
        async for piece in chunks(reader):
            out += piece
        return out
    return await reader.readexactly(int(headers.get("content-length", 0)))


async def chunks(reader):
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


async def get(port: int, path: str, timeout: float) -> tuple[int, bytes]:
    async def once():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            status, headers = await read_head(reader)
            return status, await read_body(reader, headers)
        finally:
            writer.close()
    return await asyncio.wait_for(once(), timeout)


# --token-ids: prompts go as token ids (one per word, from 100 up), for a
# model without a real tokenizer (random weights of a config's shape).
TOKEN_IDS = False


def completion_request(prompt: str, max_tokens: int) -> bytes:
    if TOKEN_IDS:
        prompt = [100 + i for i in range(len(prompt.split()))]
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                       "stream": True}).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


async def stream(port: int, prompt: str, max_tokens: int, timeout: float) -> dict:
    """One streamed completion: first-token time, finish reasons, whether [DONE] came."""
    out = {"ok": False, "ttft": None, "finishes": [], "done": False, "error": None}
    start = time.monotonic()

    async def once():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(completion_request(prompt, max_tokens))
            status, headers = await read_head(reader)
            if status != 200:
                out["error"] = f"status {status}"
                return
            async for piece in chunks(reader):
                for line in piece.decode().split("\n"):
                    if not line.startswith("data: "):
                        continue
                    if line == "data: [DONE]":
                        out["done"] = True
                        continue
                    for c in json.loads(line[6:])["choices"]:
                        if c.get("text") and out["ttft"] is None:
                            out["ttft"] = time.monotonic() - start
                        if c.get("finish_reason"):
                            out["finishes"].append(c["finish_reason"])
            out["ok"] = out["done"] and len(out["finishes"]) == 1
        finally:
            writer.close()
    try:
        await asyncio.wait_for(once(), timeout)
    except (asyncio.TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as e:
        out["error"] = type(e).__name__
    return out


def metrics(port: int) -> dict[str, float]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    out = {}
    for line in data.split(b"\r\n\r\n", 1)[1].decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


# ---- attackers ----

async def idle_client(port: int, stop: asyncio.Event, counts: dict):
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts["refused"] += 1
            await asyncio.sleep(0.5)
            continue
        counts["open"] += 1
        try:
            stop_wait = asyncio.ensure_future(stop.wait())
            closed = asyncio.ensure_future(reader.read(1))
            await asyncio.wait([stop_wait, closed], return_when=asyncio.FIRST_COMPLETED)
            stop_wait.cancel()
            closed.cancel()
        except OSError:
            pass
        finally:
            counts["open"] -= 1
            counts["closed_by_server"] += not stop.is_set()
            writer.close()


async def slow_client(port: int, stop: asyncio.Event, counts: dict):
    """Sends a request header one byte a second and never finishes it."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts["refused"] += 1
            await asyncio.sleep(0.5)
            continue
        counts["open"] += 1
        try:
            writer.write(b"GET /health HTTP/1.1\r\nX-Slow: ")
            while not stop.is_set() and not reader.at_eof():
                try:
                    await asyncio.wait_for(stop.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass
                writer.write(b"a")
                await writer.drain()
                if reader._buffer or reader.at_eof():  # the server answered (408) or closed
                    break
        except OSError:
            pass
        finally:
            counts["open"] -= 1
            counts["closed_by_server"] += not stop.is_set()
            writer.close()


async def attack(port: int, kind: str, n: int):
    """The attacker process: keeps n connections open until stdin closes,
    prints "ready" once 95% are open and its counts at the end."""
    stop = asyncio.Event()
    counts = {"open": 0, "refused": 0, "closed_by_server": 0}
    make = idle_client if kind == "idle" else slow_client
    tasks = [asyncio.ensure_future(make(port, stop, counts)) for _ in range(n)]
    deadline = time.monotonic() + 30
    while counts["open"] < n * 0.95 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    print(json.dumps({"ready": counts["open"]}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    counts["open_at_end"] = counts["open"]
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps(counts), flush=True)


async def with_attackers(port: int, kind: str, n: int, body):
    """Runs `body` while another process keeps n idle or slow connections open
    (apart, so that the attackers' work does not delay this process's clock)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--attack", kind, "--count", str(n), "--port", str(port),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    ready = json.loads(await proc.stdout.readline())
    await asyncio.sleep(2)
    try:
        result = await body()
    finally:
        proc.stdin.close()
        counts = json.loads(await proc.stdout.readline())
        await proc.wait()
    result["attackers_open"] = ready["ready"]
    result["attackers_open_at_end"] = counts["open_at_end"]
    result["attackers_closed_by_server"] = counts["closed_by_server"]
    return result


# ---- measurements ----

def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


# Probing stops after this many failures (each costs the whole timeout); the
# probes not sent count as failed.
MAX_FAILURES = 10


async def probe_health(port: int, n: int, timeout: float) -> dict:
    lat, failed = [], 0
    for _ in range(n):
        if failed >= MAX_FAILURES:
            failed = n - len(lat)
            break
        start = time.monotonic()
        try:
            status, _ = await get(port, "/health", timeout)
            if status != 200:
                failed += 1
            else:
                lat.append(time.monotonic() - start)
        except (asyncio.TimeoutError, OSError, asyncio.IncompleteReadError):
            failed += 1
        await asyncio.sleep(0.02)
    # A failed probe counts as the timeout in the percentiles.
    all_lat = lat + [timeout] * failed
    return {"probes": n, "failed": failed, "p50_ms": 1000 * pct(all_lat, 0.5), "p99_ms": 1000 * pct(all_lat, 0.99)}


async def measure_ttft(port: int, n: int, timeout: float) -> dict:
    ttfts, failed = [], 0
    for _ in range(n):
        if failed >= MAX_FAILURES:
            failed = n - len(ttfts)
            break
        r = await stream(port, "Hello", 2, timeout)
        if r["ok"] and r["ttft"] is not None:
            ttfts.append(r["ttft"])
        else:
            failed += 1
    return {"requests": n, "failed": failed,
            "median_ms": 1000 * statistics.median(ttfts) if ttfts else None}


async def condition(port: int, args) -> dict:
    return {"health": await probe_health(port, args.probes, args.probe_timeout),
            "ttft": await measure_ttft(port, args.ttft_requests, args.probe_timeout)}


async def streams_wave(server: Server, n: int, max_tokens: int, timeout: float) -> dict:
    words = "the cat sat on a mat while seven small birds sang about rivers and distant hills".split()
    prompts = [" ".join(words[(i * 7 + j) % len(words)] for j in range(3 + i % 8)) for i in range(n)]
    peak = {"running": 0.0}
    done = asyncio.Event()

    async def poll():
        while not done.is_set():
            try:
                m = await asyncio.get_running_loop().run_in_executor(None, metrics, server.port)
                peak["running"] = max(peak["running"], m["exactly_num_requests_running"])
            except OSError:
                pass
            await asyncio.sleep(0.5)

    poller = asyncio.ensure_future(poll())
    start = time.monotonic()
    cpu = (server.cpu_seconds(), server.cpu_seconds(True), time.process_time())
    results = await asyncio.gather(*(stream(server.port, p, max_tokens, timeout) for p in prompts))
    elapsed = time.monotonic() - start
    cpu = [after - before for after, before in
           zip((server.cpu_seconds(), server.cpu_seconds(True), time.process_time()), cpu)]
    done.set()
    await poller
    errors = {}
    for r in results:
        if not r["ok"]:
            key = r["error"] or f"finishes={r['finishes']} done={r['done']}"
            errors[key] = errors.get(key, 0) + 1
    return {"clients": n, "completed": sum(r["ok"] for r in results), "errors": errors,
            "seconds": elapsed, "peak_running": peak["running"], "server_cpu_s": cpu[0],
            "server_main_thread_cpu_s": cpu[1], "client_cpu_s": cpu[2],
            "ttft_median_ms": 1000 * statistics.median([r["ttft"] for r in results if r["ttft"] is not None])}


async def run_streams(server: Server, args) -> dict:
    """Waves of concurrent streams; RSS growth is measured from the end of the
    first wave (the allocator's first growth is not a leak) to the last."""
    waves, rss = [], []
    for _ in range(args.waves):
        waves.append(await streams_wave(server, args.streams, args.max_tokens, args.stream_timeout))
        rss.append(server.rss_mib())
    await asyncio.sleep(1)
    m = metrics(server.port)
    out = {"waves": waves, "rss_after_each_wave_mib": rss, "kv_blocks_used_after": m["exactly_kv_blocks_used"],
           "running_after": m["exactly_num_requests_running"]}
    if len(rss) > 1:
        out["rss_growth_per_1000_requests_mib"] = (rss[-1] - rss[0]) * 1000 / (args.streams * (len(rss) - 1))
    return out


async def interleaved_ttft(server: Server, args) -> dict:
    """TTFT in alternating blocks (no attack, idle connections, slow ones), so
    that the machine's drift falls on every condition alike; medians of the
    blocks' medians."""
    async def block():
        r = await measure_ttft(server.port, args.ttft_requests, args.probe_timeout)
        return r["median_ms"]
    per = {"none": [], "idle": [], "slow": []}
    for _ in range(args.ttft_blocks):
        per["none"].append(await block())
        per["idle"].append((await with_attackers(server.port, "idle", args.idle, lambda: wrap(block)))["value"])
        per["slow"].append((await with_attackers(server.port, "slow", args.slow, lambda: wrap(block)))["value"])
    med = {k: statistics.median(v) for k, v in per.items()}
    return {"blocks_ms": per, "median_ms": med, "idle_over_none": med["idle"] / med["none"],
            "slow_over_none": med["slow"] / med["none"]}


async def wrap(f) -> dict:
    return {"value": await f()}


async def shutdown_under_attack(server: Server, args) -> dict:
    async def body():
        # A stream whose client never reads, beside one that does.
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(completion_request("Write a long story.", 4000))
        live = asyncio.ensure_future(stream(server.port, "Write a long story.", 4000, 120))
        await asyncio.sleep(3)
        code, seconds = await asyncio.get_running_loop().run_in_executor(None, server.stop)
        r = await live
        writer.close()
        return {"exit_code": code, "seconds": seconds, "reading_stream_finishes": r["finishes"],
                "reading_stream_done": r["done"]}
    return await with_attackers(server.port, "slow", args.slow, body)


async def main_async(args) -> dict:
    out = {"label": args.label, "server": args.server, "commit": git_commit()}
    server = Server(args.server, args.model, args.port, args.server_args.split(), Path(args.log),
                    args.startup_timeout)
    try:
        out["threads_at_start"] = server.threads()
        for _ in range(3):
            await stream(server.port, "Hello", 2, 60)  # warm up
        if "health" in args.phases:
            out["idle_server"] = await condition(server.port, args)
            out[f"with_{args.idle}_idle"] = await with_attackers(server.port, "idle", args.idle,
                                                                 lambda: condition(server.port, args))
            out["threads_with_idle"] = server.threads()
            out[f"with_{args.slow}_slow"] = await with_attackers(server.port, "slow", args.slow,
                                                                 lambda: condition(server.port, args))
        if "ttft" in args.phases:
            out["interleaved_ttft"] = await interleaved_ttft(server, args)
        if "streams" in args.phases:
            out["streams"] = await run_streams(server, args)
        if "shutdown" in args.phases:
            out["shutdown"] = await shutdown_under_attack(server, args)
    finally:
        if server.proc.poll() is None:
            server.stop()
    return out


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return ""


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", default=str(REPO / "build/bin/exactly"))
    p.add_argument("--model", default=str(REPO / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--server-args", default="--kv-cache-memory 2GiB -t 2 --max-num-seqs 1024 --max-queued-requests 2048",
                   help="extra arguments of `exactly serve`")
    p.add_argument("--port", type=int, default=8391)
    p.add_argument("--label", default="")
    p.add_argument("--phases", default="health,streams,shutdown")
    p.add_argument("--idle", type=int, default=2000)
    p.add_argument("--slow", type=int, default=2000)
    p.add_argument("--probes", type=int, default=200)
    p.add_argument("--probe-timeout", type=float, default=5.0)
    p.add_argument("--ttft-requests", type=int, default=50)
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--waves", type=int, default=2)
    p.add_argument("--ttft-blocks", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--stream-timeout", type=float, default=600)
    p.add_argument("--log", default="/tmp/serve_stress_server.log")
    p.add_argument("--startup-timeout", type=float, default=300)
    p.add_argument("--token-ids", action="store_true", help="send prompts as token ids (models without a tokenizer)")
    p.add_argument("--json")
    p.add_argument("--attack", choices=["idle", "slow"], help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.attack:
        return asyncio.run(attack(args.port, args.attack, args.count))
    global TOKEN_IDS
    TOKEN_IDS = args.token_ids
    out = asyncio.run(main_async(args))
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
