#!/usr/bin/env python3
"""A stand-in OpenAI-compatible completions server with known timing, for
testing `exactly bench serve` without a model.

POST /v1/completions with "stream": true answers with server-sent events:
the first text chunk --ttft-ms after the request arrived, then one chunk
every --itl-ms, each carrying --tokens-per-chunk tokens, until max_tokens
tokens are sent; then a chunk with only a finish_reason, a usage chunk
(when stream_options.include_usage is set) and "data: [DONE]". Chunk times
follow a schedule from the request's arrival, so they do not drift.

Every --fail-every'th request (counting from 1) gets HTTP 500 instead.

Prints the port it listens on (127.0.0.1 only) as its first line, and exits
by itself after --max-seconds.
"""
import argparse
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_handler(args):
    counter = {"n": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def setup(self):
            super().setup()
            # Chunks are small and spaced out: Nagle plus delayed ACKs would
            # add tens of milliseconds to the very gaps being measured.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *unused):
            pass

        def send_json(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def event(self, obj):
            data = obj if isinstance(obj, str) else json.dumps(obj)
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

        def do_POST(self):
            arrived = time.monotonic()
            with lock:
                counter["n"] += 1
                n = counter["n"]
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path != "/v1/completions":
                return self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            if req.get("stream") is not True:
                return self.send_json(400, {"error": {"message": "this server only streams"}})
            if args.fail_every and n % args.fail_every == 0:
                return self.send_json(500, {"error": {"message": "injected failure"}})
            prompt = req.get("prompt", "")
            prompt_tokens = len(prompt) if isinstance(prompt, list) else len(prompt.split())
            max_tokens = int(req.get("max_tokens", 16))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()  # HTTP/1.0: closing the connection ends the body
            sent, chunk = 0, 0
            while sent < max_tokens:
                due = arrived + (args.ttft_ms + chunk * args.itl_ms) / 1000.0
                time.sleep(max(0.0, due - time.monotonic()))
                k = min(args.tokens_per_chunk, max_tokens - sent)
                text = "".join(f" t{sent + i}" for i in range(k))
                self.event({"id": f"cmpl-{n}", "object": "text_completion", "model": req.get("model", "fake"),
                            "choices": [{"index": 0, "text": text, "finish_reason": None}]})
                sent += k
                chunk += 1
            self.event({"id": f"cmpl-{n}", "object": "text_completion",
                        "choices": [{"index": 0, "text": "", "finish_reason": "length"}]})
            if (req.get("stream_options") or {}).get("include_usage"):
                self.event({"id": f"cmpl-{n}", "object": "text_completion", "choices": [],
                            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": sent,
                                      "total_tokens": prompt_tokens + sent}})
            self.event("[DONE]")

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    ap.add_argument("--ttft-ms", type=float, default=50)
    ap.add_argument("--itl-ms", type=float, default=10)
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    ap.add_argument("--fail-every", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=120)
    args = ap.parse_args()
    # The default backlog of 5 would drop simultaneous connections (an
    # infinite request rate) and their retries would show up as TTFT.
    ThreadingHTTPServer.request_queue_size = 256
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    stopper = threading.Timer(args.max_seconds, server.shutdown)
    stopper.daemon = True
    stopper.start()
    server.serve_forever(poll_interval=0.1)
    server.server_close()


if __name__ == "__main__":
    main()
