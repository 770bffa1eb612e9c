"""`exactly serve` at the HTTP level, against clients that break the rules:
size limits that hold under chunked transfer encoding, Range headers that are
ignored, bounded header count and size, deadlines for headers and bodies,
idle and slow connections that hold no thread, streams not bounded by the
event-loop threads, a connection bound that evicts the longest-idle
connection, a client gone while it waits for a whole response, and a SIGTERM
that ends every stream with a final "abort" chunk and [DONE] within a bounded
time whatever the clients do. Raw sockets, so that every byte is the test's."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import requests

from test_server import ServerProcess

MAX_BODY = 1 << 20


@pytest.fixture(scope="module")
def server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--max-body-bytes", MAX_BODY, "--header-timeout", 1,
                      "--body-timeout", 2, "--http-threads", 1, "--max-num-seqs", 32)
    yield s
    assert s.stop() == 0, s.proc.stderr.read()[-2000:]


class Conn:
    """A raw client connection that keeps what it received beyond one response."""

    def __init__(self, server, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, data: bytes):
        self.sock.sendall(data)

    def fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buf += chunk
        return bool(chunk)

    def read_until(self, marker: bytes) -> bytes:
        """Everything received up to and including `marker` (or up to the close)."""
        while marker not in self.buf:
            if not self.fill():
                out, self.buf = self.buf, b""
                return out
        end = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:end], self.buf[end:]
        return out

    def read_response(self) -> tuple[int, dict[str, str], bytes]:
        """One response with a Content-Length body: (status, headers, body)."""
        head = self.read_until(b"\r\n\r\n")
        if not head.endswith(b"\r\n\r\n"):
            raise ConnectionError(f"closed after {head!r}")
        lines = head[:-4].decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        length = int(headers.get("content-length", 0))
        while len(self.buf) < length:
            if not self.fill():
                raise ConnectionError("closed inside the body")
        body, self.buf = self.buf[:length], self.buf[length:]
        return int(lines[0].split()[1]), headers, body

    def close(self):
        self.sock.close()


def error_of(body: bytes) -> dict:
    err = json.loads(body)["error"]
    assert set(err) == {"message", "type", "param", "code"}
    return err


def health_seconds(server) -> float:
    start = time.monotonic()
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
    return time.monotonic() - start


def threads_of(server) -> int:
    with open(f"/proc/{server.proc.pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def test_chunked_body_past_the_limit_is_413(server):
    c = Conn(server)
    c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"x" * 65536
    chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
    sent = 0
    c.sock.settimeout(0.01)
    while sent < 20_000_000 and not c.buf:  # a 20 MB body, unless the server answers first
        try:
            c.send(chunk)
            sent += len(piece)
            c.fill()
        except (socket.timeout, BlockingIOError):
            continue
        except (BrokenPipeError, ConnectionResetError):
            break
    c.sock.settimeout(10)
    status, _, body = c.read_response()
    assert status == 413
    assert error_of(body)["code"] == "request_too_large"
    # The server read at most the limit and what was in flight when it answered.
    assert sent < MAX_BODY + (8 << 20), sent
    assert health_seconds(server) < 5


def test_content_length_past_the_limit_is_413_before_the_body(server):
    c = Conn(server)
    c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 20000000\r\n\r\n")
    status, headers, body = c.read_response()
    assert status == 413 and headers["connection"] == "close"
    assert "1048576" in error_of(body)["message"]


def test_ranges_are_ignored(server):
    plain = requests.get(server.url + "/metrics", timeout=10)
    ranged = requests.get(server.url + "/metrics", timeout=10,
                          headers={"Range": "bytes=" + ",".join(["0-"] * 500)})
    assert ranged.status_code == 200
    assert "content-range" not in ranged.headers
    assert ranged.headers["content-type"] == plain.headers["content-type"]
    # The same page once (its counters move between the two reads), not 500 copies.
    assert abs(len(ranged.content) - len(plain.content)) < 200


def test_header_count_and_size_are_bounded(server):
    c = Conn(server)
    fields = b"".join(b"X-F%d: v\r\n" % i for i in range(150))
    c.send(b"GET /health HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n")
    status, _, body = c.read_response()
    assert status == 431 and error_of(body)["code"] == "too_many_headers"

    c = Conn(server)
    c.send(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
    status, _, body = c.read_response()
    assert status == 431 and error_of(body)["code"] == "headers_too_large"
    assert health_seconds(server) < 5


@pytest.mark.parametrize("request_bytes, needle", [
    (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}", "malformed"),
    (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "chunked"),
    (b"GARBAGE\r\n\r\n", "malformed"),
    (b"GET /health HTTP/1.1\r\nBad Header: x\r\n\r\n", "malformed"),
])
def test_malformed_framing_is_400(server, request_bytes, needle):
    c = Conn(server)
    c.send(request_bytes)
    status, headers, body = c.read_response()
    assert status == 400 and headers["connection"] == "close"
    assert needle in error_of(body)["message"]


def test_slow_headers_are_cut_at_the_deadline(server):
    c = Conn(server)
    c.send(b"GET /health HTTP/1.1\r\n")
    start = time.monotonic()
    c.sock.settimeout(0.2)
    while time.monotonic() - start < 10:
        try:
            c.send(b"X")  # one byte at a time, never finishing the header
            if not c.fill():
                break
        except socket.timeout:
            continue
        except (BrokenPipeError, ConnectionResetError):
            break
    elapsed = time.monotonic() - start
    assert 0.8 < elapsed < 5, elapsed  # --header-timeout 1, plus the linger before the close
    assert c.buf.startswith(b"HTTP/1.1 408"), c.buf[:100]


def test_slow_body_is_cut_at_the_deadline(server):
    c = Conn(server)
    c.send(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
    start = time.monotonic()
    status, _, body = c.read_response()
    assert status == 408 and error_of(body)["code"] == "timeout"
    assert 1.5 < time.monotonic() - start < 5  # --body-timeout 2


def test_idle_and_slow_connections_hold_no_thread(server):
    before = threads_of(server)
    idle = [Conn(server) for _ in range(200)]
    slow = [Conn(server) for _ in range(100)]
    for c in slow:
        c.send(b"GET /health HTTP/1.1\r\nX-Slow: ")
    time.sleep(0.3)
    assert threads_of(server) == before
    assert max(health_seconds(server) for _ in range(5)) < 1
    for c in idle + slow:
        c.close()


def stream_request(server, max_tokens=400) -> Conn:
    c = Conn(server, timeout=60)
    body = json.dumps({"prompt": "Write a long story.", "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": True}).encode()
    c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    return c


def test_streams_are_not_bounded_by_event_loop_threads(server):
    # One event-loop thread (--http-threads 1) carries 12 streams at once.
    streams = [stream_request(server) for _ in range(12)]
    for c in streams:
        assert c.read_until(b'"text"').endswith(b'"text"')
    assert server.metrics()["exactly_num_requests_running"] == 12
    for c in streams:
        c.close()
    assert server.wait_for_free_blocks()["exactly_kv_blocks_used"] == 0


def test_client_gone_while_waiting_for_a_whole_response_aborts(server):
    aborted = server.metrics()['exactly_request_success_total{finished_reason="abort"}']
    c = Conn(server)
    body = json.dumps({"prompt": "Write a long story.", "max_tokens": 4000, "temperature": 0,
                       "ignore_eos": True}).encode()
    c.send(b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    deadline = time.monotonic() + 30
    while server.metrics()["exactly_kv_blocks_used"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    c.close()
    m = server.wait_for_free_blocks()
    assert m["exactly_kv_blocks_used"] == 0 and m["exactly_num_requests_running"] == 0
    assert m['exactly_request_success_total{finished_reason="abort"}'] == aborted + 1


def test_expect_100_continue_and_pipelining(server):
    c = Conn(server)
    body = json.dumps({"prompt": "Hi", "max_tokens": 2}).encode()
    c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body))
    assert c.read_until(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
    c.send(body)
    status, _, reply = c.read_response()
    assert status == 200 and json.loads(reply)["usage"]["completion_tokens"] == 2
    # Two requests in one write: two responses, in order.
    c.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n")
    assert c.read_response()[0] == 200
    assert c.read_response()[0] == 404


def test_connection_bound_evicts_the_longest_idle(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--max-connections", 20)
    try:
        idle = [Conn(s) for _ in range(30)]
        time.sleep(0.2)
        assert health_seconds(s) < 2
        m = s.metrics()
        assert m["exactly_http_connections_open"] <= 21
        assert m["exactly_http_connections_evicted_total"] >= 11
        # The first ones were evicted: the server closed them.
        idle[0].sock.settimeout(5)
        assert not idle[0].fill()
        for c in idle:
            c.close()
    finally:
        assert s.stop() == 0


def test_sigterm_ends_every_stream_with_abort_and_done(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--shutdown-timeout", 2, "--header-timeout", 30)
    readers = [stream_request(s, max_tokens=4000) for _ in range(4)]
    heads = [r.read_until(b'"text"') for r in readers]
    stalled = stream_request(s, max_tokens=4000)  # never reads a byte
    slowloris = Conn(s)
    slowloris.send(b"GET /health HTTP/1.1\r\nX-Slow: ")
    idle = Conn(s)
    results = [None] * len(readers)

    def drain(i):
        results[i] = heads[i] + readers[i].read_until(b"\r\n0\r\n\r\n")

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(len(readers))]
    for t in threads:
        t.start()
    start = time.monotonic()
    code = s.stop(timeout=20)
    elapsed = time.monotonic() - start
    for t in threads:
        t.join(timeout=10)
    assert code == 0
    assert elapsed < 2 + 5, elapsed  # the shutdown timeout, one engine step and the process exit
    for data in results:
        events = [line[6:].strip() for line in data.decode().split("\n") if line.startswith("data: ")]
        assert events[-1] == "[DONE]", events[-3:]
        finishes = [c["finish_reason"] for e in events[:-1] for c in json.loads(e)["choices"] if c["finish_reason"]]
        assert finishes == ["abort"], finishes
        assert data.endswith(b"0\r\n\r\n")
    for c in [stalled, slowloris, idle]:
        c.close()
