"""Model APIs over HTTP: Anthropic's Messages API and OpenAI's chat completions, the latter at
any base URL, so an OpenAI-compatible server (vLLM, llama.cpp's server, Ollama) serves too.

One call is one ``call``: a deadline of ``backend.timeout`` seconds for the whole of it, each
try given what is left; a 429 or a 5xx (or a connection that failed) is tried again after the
server's Retry-After (``retry-after-ms`` first, then ``retry-after``, seconds or an HTTP date),
else after 0.5, 1, 2 ... seconds, at most ``backend.retries`` more times, and never past the
deadline: a wait that would end after it gives up at once and says so. Every way a call fails
is a ``Reply`` with a status and the provider's own reason (its error message, its HTTP status),
which a reviewer reports as NOT_RUN; nothing here raises for a failed call.

The key is read when the call is made, from the file ``backend.api_key_file`` names or else the
kind's environment variable (ANTHROPIC_API_KEY, OPENAI_API_KEY), and goes into one request
header and nowhere else: not into a reply, a reason, a log line or a model that crosses a task
boundary. Reasons pass through redaction all the same (a server that echoes the key, a base URL
with a password), and credentials.py knows the key file's contents as a secret.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from verify_dag import outside, processes
from verify_dag.backends.config import Backend
from verify_dag.backends.reply import Reply, ReplyStatus
from verify_dag.models.findings import TokenUsage

# httpx logs every request's URL at INFO; a worker's log at INFO is no place for a base URL
# that may carry a password, nor is it useful noise beside the task lines.
logging.getLogger("httpx").setLevel(logging.WARNING)

KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
# The SDKs' own variables for the address, honoured below VERIFY_DAG_BASE_URL.
BASE_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
DEFAULT_URL = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}
ANTHROPIC_VERSION = "2023-06-01"
# 529: Anthropic's "overloaded". 408: a proxy's request timeout. Both pass with time.
_RETRIED = frozenset({408, 429, 529})
_BACKOFF_START, _BACKOFF_CAP = 0.5, 8.0
_REASON_CAP = 300


def base_url(backend: Backend) -> tuple[str, str]:
    """Where ``backend``'s requests go, and which setting said so."""
    if backend.base_url:
        return backend.base_url, "configured base-url"
    name = BASE_ENV[backend.kind]
    from_env = os.environ.get(name, "").strip().rstrip("/")
    if from_env:
        return from_env, f"environment {name}"
    return DEFAULT_URL[backend.kind], "default"


def key_source(backend: Backend) -> str:
    """Where the key would come from, for ``verify-dag config`` (never the key itself)."""
    if backend.api_key_file:
        return f"file {backend.api_key_file}"
    name = KEY_ENV[backend.kind]
    return f"environment {name}" + ("" if os.environ.get(name, "").strip() else " (not set)")


def _key(backend: Backend) -> tuple[str | None, str | None]:
    """(the key, None), or (None, why there is none). An openai kind may have none: a local
    server often needs no key."""
    if backend.api_key_file:
        try:
            key = Path(backend.api_key_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or type(exc).__name__
            return None, f"cannot read the API key file {backend.api_key_file}: {why}"
        return (key, None) if key else (None, f"the API key file {backend.api_key_file} is empty")
    key = os.environ.get(KEY_ENV[backend.kind], "").strip()
    if key or backend.kind == "openai":
        return key or None, None
    return None, f"{KEY_ENV[backend.kind]} is not set in the worker's environment"


def _request(backend: Backend, prompt: str, key: str | None) -> tuple[str, dict[str, str], Any]:
    url, _ = base_url(backend)
    message = [{"role": "user", "content": prompt}]
    if backend.kind == "anthropic":
        headers = {"anthropic-version": ANTHROPIC_VERSION, "x-api-key": key or ""}
        body: dict[str, Any] = {
            "model": backend.model,
            "max_tokens": backend.max_output_tokens,
            "messages": message,
        }
        return f"{url}/v1/messages", headers, body
    headers = {"authorization": f"Bearer {key}"} if key else {}
    # OpenAI's reasoning models refuse max_tokens and want max_completion_tokens; vLLM,
    # llama.cpp's server and Ollama read max_tokens.
    own = urlsplit(url).hostname == "api.openai.com"
    body = {
        "model": backend.model,
        "messages": message,
        ("max_completion_tokens" if own else "max_tokens"): backend.max_output_tokens,
    }
    if backend.effort:
        body["reasoning_effort"] = backend.effort
    return f"{url}/chat/completions", headers, body


def call(backend: Backend, prompt: str, *, timeout: float | None = None) -> Reply:
    """Ask ``backend`` once (retries included) and say what came back."""
    outside.call()  # its answer is the service's, not the commits' (cli/replay.py)
    limit = timeout if timeout is not None else backend.timeout
    key, missing = _key(backend)
    if missing is not None:
        return Reply(status="auth", reason=_clip(missing))
    url, headers, body = _request(backend, prompt, key)
    host = urlsplit(url).netloc.rpartition("@")[2]
    deadline = time.monotonic() + limit
    tries = 0
    with httpx.Client(follow_redirects=False) as client:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return _timeout(backend, host, limit, tries)
            tries += 1
            try:
                response = client.post(url, json=body, headers=headers, timeout=left)
            except httpx.TimeoutException:
                return _timeout(backend, host, limit, tries)
            except httpx.TransportError as exc:
                status: ReplyStatus = "failed"
                reason = f"{host}: cannot connect: {type(exc).__name__}: {exc}"
                wait = _backoff(tries)
            else:
                if response.status_code == 200:
                    return _answer(backend, host, response, tries)
                status, reason = _refusal(host, response)
                if not (response.status_code in _RETRIED or response.status_code >= 500):
                    return _reply(backend, status, reason, tries)
                wait = _retry_after(response) or _backoff(tries)
            if tries > backend.retries:
                return _reply(backend, status, f"{reason} (gave up after {tries} tries)", tries)
            if time.monotonic() + wait >= deadline:
                said = f"retry due in {wait:g} s, past the call's {limit:g} s limit"
                return _reply(backend, status, f"{reason} ({said}; {tries} tries)", tries)
            time.sleep(wait)


def _usage(backend: Backend, tries: int, data: Any = None) -> TokenUsage:
    got = data.get("usage") if isinstance(data, dict) else None
    got = got if isinstance(got, dict) else {}
    if backend.kind == "anthropic":
        parts = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        read = [n for p in parts if isinstance(n := got.get(p), int)]
        tokens_in = sum(read) if read else None
        tokens_out = got.get("output_tokens")
    else:
        tokens_in, tokens_out = got.get("prompt_tokens"), got.get("completion_tokens")
    return TokenUsage(
        backend=backend.kind,
        model=backend.model,
        input_tokens=tokens_in if isinstance(tokens_in, int) else (0 if not data else None),
        output_tokens=tokens_out if isinstance(tokens_out, int) else (0 if not data else None),
        requests=tries,
    )


def _reply(backend: Backend, status: ReplyStatus, reason: str, tries: int) -> Reply:
    # A refused request is not billed: nothing was read or written.
    return Reply(status=status, reason=_clip(reason), usage=_usage(backend, tries))


def _timeout(backend: Backend, host: str, limit: float, tries: int) -> Reply:
    return _reply(backend, "timeout", f"{host} gave no reply within {limit:g} s", tries)


def _answer(backend: Backend, host: str, response: httpx.Response, tries: int) -> Reply:
    try:
        data = response.json()
    except ValueError:
        head = response.text.strip().splitlines()[0][:80] if response.text.strip() else ""
        said = f"{host}: HTTP 200 with a body that is not JSON: {head}"
        return _reply(backend, "failed", said, tries)
    text = _text(backend, data)
    usage = _usage(backend, tries, data)
    if text is None:
        shown = json.dumps(data)[:120] if not isinstance(data, str) else data[:120]
        return Reply(
            status="failed", reason=_clip(f"{host}: HTTP 200 without a reply: {shown}"), usage=usage
        )
    if not text.strip():
        return Reply(status="empty", reason=f"{host} answered with an empty reply", usage=usage)
    return Reply(status="ok", text=processes.redact(text), usage=usage)


def _text(backend: Backend, data: Any) -> str | None:
    """The reply's text, or None when the body is not the API's reply shape."""
    if not isinstance(data, dict):
        return None
    if backend.kind == "anthropic":
        content = data.get("content")
        if not isinstance(content, list):
            return None
        return "".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    return content if isinstance(content, str) else ("" if content is None else None)


def _refusal(host: str, response: httpx.Response) -> tuple[ReplyStatus, str]:
    """What a non-200 answer was, in the provider's words where it gave some."""
    code = response.status_code
    said = ""
    try:
        data = response.json()
    except ValueError:
        said = response.text.strip().splitlines()[0][:160] if response.text.strip() else ""
    else:
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict):
            kind = error.get("type") or error.get("code")
            message = str(error.get("message") or "")
            said = f"{kind}: {message}" if kind else message
        elif isinstance(error, str):
            said = error
    reason = f"{host}: HTTP {code}" + (f": {said}" if said else "")
    if code == 429:
        return "rate_limited", reason
    if code in (401, 403):
        return "auth", reason
    return "failed", reason


def _retry_after(response: httpx.Response) -> float | None:
    """The server's wait, in seconds: ``retry-after-ms`` (Anthropic's and OpenAI's), else
    ``retry-after`` as seconds or as an HTTP date."""
    ms = response.headers.get("retry-after-ms")
    try:
        if ms is not None:
            return max(float(ms) / 1000, 0.0)
    except ValueError:
        pass
    raw = response.headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _backoff(tries: int) -> float:
    return float(min(_BACKOFF_START * 2 ** (tries - 1), _BACKOFF_CAP))


def _clip(text: str) -> str:
    text = processes.redact(text)
    return text if len(text) <= _REASON_CAP else text[: _REASON_CAP - 1] + "…"
