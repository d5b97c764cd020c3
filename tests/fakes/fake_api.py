"""A fake model API over HTTP, speaking Anthropic's Messages API (``POST /v1/messages``) and
OpenAI's chat completions (``POST /chat/completions``, under any prefix) as far as verify-dag
relies on them: their request shapes are checked (a missing or wrong key is a 401, a body the
real API would refuse is a 400, in each API's error shape) and their reply shapes returned, with
usage.

Steps queued with ``push`` are answered first, one per request, in order: a status, a body
(an object is sent as JSON, a string as it is: malformed JSON), headers (Retry-After) and a
delay before the answer (a slow reply). Then every request gets the default answer: the reply
text ``reply`` (one finding by default, or what ``replies`` gives for a prompt containing a
text), with ``usage`` tokens. Every request is logged in ``requests`` (path, headers, body,
arrival time). Runs in a thread of the test process; workers in other processes reach it on
loopback.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FINDING = {
    "title": "Division by zero when the list is empty",
    "severity": 7,
    "location": "src/calc.py:5",
    "category": "correctness",
    "description": "mean() divides by len(values) without checking for an empty list.",
}
DEFAULT_REPLY = json.dumps({"findings": [FINDING]})


@dataclass
class Step:
    status: int = 200
    body: Any = None  # None: the API's reply shape with the reply text
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Logged:
    path: str
    headers: dict[str, str]
    body: Any
    at: float


class FakeAPI:
    def __init__(self, key: str | None, *, usage: tuple[int, int] = (1200, 300)) -> None:
        self.key = key  # None: no key is asked for (a local OpenAI-compatible server)
        self.usage = usage
        self.reply = DEFAULT_REPLY
        self.replies: list[tuple[str, str]] = []  # (text in the prompt, reply)
        self.requests: list[Logged] = []
        self._steps: deque[Step] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeAPI:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def push(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    def _next(self) -> Step | None:
        with self._lock:
            return self._steps.popleft() if self._steps else None

    def _answer(self, path: str, headers: dict[str, str], raw: bytes) -> Step:
        anthropic = path.endswith("/v1/messages")
        if not anthropic and not path.endswith("/chat/completions"):
            return Step(404, {"error": {"type": "not_found", "message": f"no route {path}"}})
        given = headers.get("x-api-key") if anthropic else headers.get("authorization")
        wanted = self.key if anthropic else (f"Bearer {self.key}" if self.key else given)
        if self.key is not None and given != wanted:
            kind = "authentication_error" if anthropic else "invalid_api_key"
            # OpenAI's 401 quotes the key it was given: the client must not pass that on.
            said = f"Incorrect API key provided: {given}"
            return Step(401, {"type": "error", "error": {"type": kind, "message": said}})
        try:
            body = json.loads(raw)
        except ValueError:
            return Step(400, {"error": {"type": "invalid_request_error", "message": "bad json"}})
        problem = _invalid(body, anthropic, headers)
        if problem:
            return Step(400, {"error": {"type": "invalid_request_error", "message": problem}})
        step = self._next()
        if step is not None and step.body is not None:
            return step
        prompt = body["messages"][0]["content"]
        text = next((r for t, r in self.replies if t in prompt), self.reply)
        tokens_in, tokens_out = self.usage
        if anthropic:
            shaped: Any = {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
            }
        else:
            shaped = {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": tokens_in,
                    "completion_tokens": tokens_out,
                    "total_tokens": tokens_in + tokens_out,
                },
            }
        if step is not None:  # a queued step with the default body: its status, delay, headers
            return Step(step.status, shaped, step.headers, step.delay)
        return Step(200, shaped)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    logged: Any = json.loads(raw)
                except ValueError:
                    logged = raw.decode("utf-8", "replace")
                with api._lock:
                    api.requests.append(Logged(self.path, headers, logged, time.monotonic()))
                step = api._answer(self.path, headers, raw)
                if step.delay:
                    time.sleep(step.delay)
                body = step.body if isinstance(step.body, str) else json.dumps(step.body)
                data = body.encode("utf-8")
                try:
                    self.send_response(step.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in step.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (its time-out): what a slow server sees

            def log_message(self, *_: Any) -> None:
                pass

        return Handler


def _invalid(body: Any, anthropic: bool, headers: dict[str, str]) -> str | None:
    """What the real API would refuse in this request body, or None."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return "model: field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    first = messages[0]
    if not isinstance(first, dict) or first.get("role") != "user":
        return "messages.0.role: the first message must be the user's"
    if not isinstance(first.get("content"), str):
        return "messages.0.content: expected a string"
    if anthropic:
        if headers.get("anthropic-version") != "2023-06-01":
            return "anthropic-version: header required"
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            return "max_tokens: field required"
    elif "max_completion_tokens" in body:
        return "max_completion_tokens: not supported by this server"
    return None
