"""A stand-in for `vllm`: `fake_vllm.py --version`, or `fake_vllm.py serve MODEL --host H --port P
--served-model-name NAME [--max-model-len N] [--fake-mode ok|exit|sick] ...` (other flags are
taken and ignored, as they would be read by vLLM).

It answers what a2c asks of a vLLM server: GET /health, /v1/models (with `max_model_len`),
/version, POST /tokenize (one token per 4 bytes of the prompt, or of the compact JSON of the
messages in its chat form) and /v1/chat/completions,
refusing with vLLM's 400 a call whose input plus `max_tokens` passes the context, as vLLM does.
Its argv and CUDA_VISIBLE_DEVICES go to stdout (the run's logs/driver-server.log), and it starts
one child in its process group (as vLLM starts its engine core) whose pid it prints, so a test
can check that stopping the server leaves no process behind.

Modes: `exit` exits with status 3 at once; `sick` answers /health with 503 for ever;
`engine-dead` logs vLLM's engine failure and then neither serves nor exits (as vLLM was seen to).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.0.0-fake"


def _opt(argv: list[str], name: str, default: str | None = None) -> str | None:
    if name in argv:
        return argv[argv.index(name) + 1]
    return default


def tokens(text: str) -> int:
    return max(1, len(text.encode()) // 4)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--version"]:
        print(VERSION)
        return 0
    if argv[:1] != ["serve"]:
        print("usage: vllm serve MODEL ...", file=sys.stderr)
        return 2
    mode = _opt(argv, "--fake-mode", "ok")
    name = _opt(argv, "--served-model-name", argv[1])
    context = int(_opt(argv, "--max-model-len", "2048"))
    print("FAKE_ARGV " + json.dumps(argv), flush=True)
    print("FAKE_CUDA_VISIBLE_DEVICES " + repr(os.environ.get("CUDA_VISIBLE_DEVICES")),
          flush=True)
    if mode == "exit":
        # a real one's tail: the engine's ERROR line, its traceback, then a warning at exit
        print("(EngineCore_DP0 pid=1) ERROR 12-05 03:00:00 [core.py:708] Engine process "
              "failed.\nTraceback (most recent call last):\n  File \"core.py\", line 1\n"
              "ValueError: the model does not fit (fake)\n/usr/lib/python3.11/multiprocessing/"
              "resource_tracker.py:254: UserWarning: resource_tracker: There appear to be 1 "
              "leaked semaphore objects to clean up at shutdown", flush=True)
        return 3
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"FAKE_CHILD {child.pid}", flush=True)
    if mode == "engine-dead":     # vLLM's engine fails, its API server lives on, never serving
        print("(EngineCore_DP0 pid=1) ERROR 12-05 04:08:23 [core.py:1510] EngineCore failed to "
              "start.\n(EngineCore_DP0 pid=1) ERROR 12-05 04:08:23 [core.py:1510] RuntimeError: "
              "Worker failed with error 'ImportError: /root/.cache/vllm/torch_compile_cache/x.so:"
              " file too short'\nSystemExit: ", flush=True)
        import time
        time.sleep(600)
        return 1

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _json(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                if mode == "sick":
                    return self._json(503, {"error": "not ready"})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            if self.path == "/v1/models":
                return self._json(200, {"object": "list", "data": [
                    {"id": name, "object": "model", "max_model_len": context}]})
            if self.path == "/version":
                return self._json(200, {"version": VERSION})
            return self._json(404, {"error": "not found"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            if self.path == "/v1/messages/count_tokens":    # Anthropic's counting route
                return self._json(200, {"input_tokens": tokens(json.dumps(
                    body.get("messages"), separators=(",", ":")))})
            if self.path == "/tokenize":
                print("FAKE_TOKENIZE", flush=True)
                # the chat form counts the messages as its chat route does (as vLLM's
                # renders them with the chat template the call will get)
                text = json.dumps(body["messages"], separators=(",", ":")) \
                    if "messages" in body else body.get("prompt") or ""
                return self._json(200, {"count": tokens(text), "max_model_len": context})
            if self.path == "/v1/chat/completions":
                prompt = tokens(json.dumps(body.get("messages"), separators=(",", ":")))
                cap = body.get("max_completion_tokens") or body.get("max_tokens")
                if cap is not None and prompt + cap > context:
                    return self._json(400, {"object": "error", "type": "BadRequestError",
                                            "message": f"This model's maximum context length "
                                                       f"is {context} tokens. However, you "
                                                       f"requested {prompt + cap} tokens",
                                            "code": 400})
                out = min(cap or 7, 7)
                print(f"FAKE_CALL max_tokens={cap}", flush=True)
                return self._json(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "model": name,
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": "fake answer"}}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": out,
                              "total_tokens": prompt + out}})
            return self._json(404, {"error": "not found"})

    server = ThreadingHTTPServer((_opt(argv, "--host", "127.0.0.1"),
                                  int(_opt(argv, "--port", "8000"))), Handler)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        child.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
