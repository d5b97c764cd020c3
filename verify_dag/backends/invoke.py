"""Call a model backend once and say what came back, as one of a few plain outcomes.

``invoke`` never raises for a backend failure: a judgement skill turns every status but ``ok`` into
NOT_RUN (or BLOCKED) with the reason, because a review that did not happen must never read as a
review that found nothing (docs/report.md, NOT_RUN).

The real CLIs, as this module relies on them:

- ``codex exec [options] -`` reads the prompt from stdin, streams progress (and an echo of the
  prompt) to stderr, prints the final message on stdout and writes it to ``--output-last-message``;
  failures are ``ERROR: ...`` lines on stderr with a non-zero exit.
- ``claude -p --output-format json`` reads the prompt from stdin and prints one result envelope
  ``{"type": "result", "subtype": "success", "is_error": false, "result": "...", ...}``; errors
  (usage limits, "Not logged in · Please run /login") come back in that envelope with
  ``is_error: true``, and a logged-out CLI has been seen to say so with ``is_error: false``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from verify_dag import processes
from verify_dag.backends.config import HTTP_KINDS, Backend
from verify_dag.backends.reply import Reply, ReplyStatus
from verify_dag.models.findings import TokenUsage

__all__ = ["Reply", "ReplyStatus", "build_argv", "invoke", "model_env"]

_BROKER = ("VERIFY_DAG_BROKER_URL", "VERIFY_DAG_RESULT_BACKEND")
_RATE = re.compile(
    r"rate[ _-]?limit|too many requests|\b429\b|quota|usage limit|limit reached|"
    r"hit your (?:\w+ )?limit",
    re.IGNORECASE,
)
_AUTH = re.compile(
    r"not logged in|/login\b|\b40[13]\b|unauthori[sz]ed|authenticat|api[ _-]?key|"
    r"codex login|log ?in again|credential|forbidden",
    re.IGNORECASE,
)
# The few notices a CLI has been seen to print *as its reply* with a zero exit. Narrow on purpose:
# a real finding may well talk about API keys.
_NOTICE = re.compile(
    r"please run /login|not logged in|invalid api key|usage limit|"
    r"hit your (?:\w+ )?limit|rate limit exceeded|quota exceeded",
    re.IGNORECASE,
)
_ERROR_LINE = re.compile(
    r"^(?:error|fatal|panic|exception|■|⚠)|\berror\b|\b[45]\d\d\b", re.IGNORECASE
)


def model_env() -> dict[str, str]:
    """The model CLI's environment: ours, minus the broker settings.

    Not ``processes.scrubbed_env``: that strips API keys and tokens because repository code
    must never see them, but a model CLI is the user's own tool and authenticates with exactly those
    (OPENAI_API_KEY, ANTHROPIC_API_KEY, CODEX_HOME, ...). It has no use for our broker, though.
    """
    return {k: v for k, v in os.environ.items() if k not in _BROKER and not k.startswith("CELERY_")}


def build_argv(backend: Backend, last_message: Path) -> list[str]:
    if backend.kind == "codex":
        return [
            "codex",
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "read-only",
            "--color",
            "never",
            *(["--model", backend.model] if backend.model else []),
            *(["--config", f"model_reasoning_effort={backend.effort}"] if backend.effort else []),
            "--output-last-message",
            str(last_message),
            "-",
        ]
    if backend.kind == "claude":
        # --effort only when configured (the tier defaults set none): older CLIs lack the flag.
        return [
            "claude",
            "-p",
            "--output-format",
            "json",
            *(["--model", backend.model] if backend.model else []),
            *(["--effort", backend.effort] if backend.effort else []),
        ]
    return _fill(backend)


def _fill(backend: Backend) -> list[str]:
    """Substitute whole-argument placeholders; an unset one drops out with its option flag."""
    values = {"{model}": backend.model, "{effort}": backend.effort, "{skill}": backend.skill}
    argv: list[str] = []
    for arg in backend.command:
        if arg not in values:
            argv.append(arg)
            continue
        value = values[arg]
        if value is not None:
            argv.append(value)
        elif len(argv) > 1 and argv[-1].startswith("-") and "=" not in argv[-1]:
            argv.pop()  # "--model {model}" with no model: neither half is meaningful
    return argv


def invoke(backend: Backend, prompt: str, *, cwd: Path, timeout: float | None = None) -> Reply:
    if backend.kind in HTTP_KINDS:
        # Imported here: httpx costs every CLI process about 90 ms it mostly does not need.
        from verify_dag.backends import http

        return http.call(backend, prompt, timeout=timeout)
    limit = timeout if timeout is not None else backend.timeout
    reply = _cli(backend, prompt, cwd, limit)
    if reply.status == "missing" or reply.usage is not None:
        return reply
    # A CLI prints no token counts (claude's envelope aside): one request, tokens unknown.
    usage = TokenUsage(backend=backend.kind, model=backend.model, requests=1)
    return reply.model_copy(update={"usage": usage})


def _cli(backend: Backend, prompt: str, cwd: Path, limit: float) -> Reply:
    with tempfile.TemporaryDirectory(prefix="verify-dag-model-") as tmp:
        last = Path(tmp) / "last-message.txt"
        argv = build_argv(backend, last)
        try:
            res = processes.run(
                argv, cwd=cwd, timeout=limit, env=model_env(), input_data=prompt.encode("utf-8")
            )
        except OSError as exc:  # e.g. a vanished cwd: still an outcome, never an exception
            return Reply(status="failed", reason=_clip(f"{argv[0]}: {exc}"))
        if res.not_found:
            return Reply(status="missing", reason=f"{argv[0]} not found on PATH")
        if res.timed_out:
            return Reply(status="timeout", reason=f"{argv[0]} gave no reply within {limit:g} s")
        if backend.kind == "claude":
            return _claude(res, prompt, backend)
        text = res.stdout
        if backend.kind == "codex" and last.is_file():
            text = last.read_text("utf-8", "replace") or res.stdout
        if res.returncode != 0:
            return _failure(argv[0], res.returncode, [res.stderr, res.stdout], prompt)
        return _success(text)


def _claude(res: processes.Result, prompt: str, backend: Backend) -> Reply:
    reply = _claude_reply(res, prompt)
    envelope = _envelope(res.stdout)
    got = envelope.get("usage") if envelope is not None else None
    if not isinstance(got, dict):
        return reply
    # The envelope's usage is the Messages API's: cache reads and writes are input too.
    parts = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    read = [n for p in parts if isinstance(n := got.get(p), int)]
    out = got.get("output_tokens")
    usage = TokenUsage(
        backend="claude",
        model=backend.model,
        input_tokens=sum(read) if read else None,
        output_tokens=out if isinstance(out, int) else None,
        requests=1,
    )
    return reply.model_copy(update={"usage": usage})


def _claude_reply(res: processes.Result, prompt: str) -> Reply:
    envelope = _envelope(res.stdout)
    if envelope is None:
        if res.returncode != 0:
            return _failure("claude", res.returncode, [res.stderr, res.stdout], prompt)
        if not res.stdout.strip():
            return Reply(status="empty", reason="claude printed nothing")
        first = res.stdout.strip().splitlines()[0]
        return Reply(status="failed", reason=_clip(f"claude printed no JSON result: {first}"))
    result = envelope.get("result")
    text = result if isinstance(result, str) else ""
    subtype = str(envelope.get("subtype") or "")
    if res.returncode != 0 or envelope.get("is_error") or subtype not in ("", "success"):
        said = text or f"claude ended with {subtype or 'an error'}"
        return _failure("claude", res.returncode, [res.stderr], prompt, said=said)
    return _success(text)


def _envelope(stdout: str) -> dict[str, object] | None:
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    if isinstance(data, list):  # stream-style output: the last result event is the envelope
        data = next(
            (e for e in reversed(data) if isinstance(e, dict) and e.get("type") == "result"), None
        )
    return data if isinstance(data, dict) else None


def _success(text: str) -> Reply:
    text = processes.redact(text)
    stripped = text.strip()
    if not stripped:
        return Reply(status="empty", reason="the backend exited 0 with an empty reply")
    if len(stripped) < 300 and "{" not in stripped and _NOTICE.search(stripped):
        status: ReplyStatus = "rate_limited" if _RATE.search(stripped) else "auth"
        return Reply(status=status, reason=_clip(stripped.splitlines()[0]))
    return Reply(status="ok", text=text)


def _failure(name: str, returncode: int, outputs: list[str], prompt: str, said: str = "") -> Reply:
    """Classify a failed call. ``said`` is what the CLI itself reported (claude's result text);
    ``outputs`` are streams in which only error-looking lines count as evidence."""
    # Codex echoes the prompt on stderr; a prompt about, say, authentication code must not make
    # an unrelated crash look like a login problem, so echoed lines are not evidence.
    echoed = {line.strip() for line in prompt.splitlines()}
    lines = [
        s for out in outputs for line in out.splitlines() if (s := line.strip()) and s not in echoed
    ]
    marked = [line for line in lines if _ERROR_LINE.search(line)]
    evidence = [s for line in said.splitlines() if (s := line.strip())] + (marked or lines[-3:])
    checks: tuple[tuple[ReplyStatus, re.Pattern[str]], ...] = (
        ("rate_limited", _RATE),
        ("auth", _AUTH),
    )
    for status, pattern in checks:
        hit = next((line for line in evidence if pattern.search(line)), None)
        if hit is not None:
            return Reply(status=status, reason=_clip(hit))
    first = evidence[0] if evidence else "no output"
    return Reply(status="failed", reason=_clip(f"{name} exited {returncode}: {first}"))


def _clip(text: str, limit: int = 300) -> str:
    text = processes.redact(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
