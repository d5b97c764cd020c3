"""The HTTP model backends (anthropic, openai) against a fake API server the tests start: the
request and reply shapes, retries on 429 and 5xx bounded by count and by the call's deadline,
Retry-After honoured, slow replies, malformed JSON, and the key kept out of every reason."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.fake_api import FakeAPI, Step

from verify_dag import outside, processes
from verify_dag.backends import Backend, Reply, invoke, load_config, parse_reply, resolve
from verify_dag.backends import http as http_backend
from verify_dag.errors import UsageError

KEY = "sk-test-0123456789abcdef0123456789"
PROMPT = "Review the change.\nRELEVANT STATIC FINDINGS:\nnone\n"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("VERIFY_DAG_", "ANTHROPIC_", "OPENAI_")) or key == "XDG_CONFIG_HOME":
            monkeypatch.delenv(key)


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with FakeAPI(KEY) as server:
        yield server


def backend(kind: str, api: FakeAPI, **extra: object) -> Backend:
    url = api.url if kind == "anthropic" else f"{api.url}/v1"
    settings: dict[str, object] = {"model": "m1", "base_url": url, "timeout": 10.0, **extra}
    return Backend(kind=kind, skill="reviewer", **settings)


def ask(b: Backend, tmp_path: Path) -> tuple[Reply, float]:
    began = time.monotonic()
    reply = invoke(b, PROMPT, cwd=tmp_path)
    return reply, time.monotonic() - began


def test_every_call_is_counted_as_work_beyond_the_commits(
    api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run that asked a model is never kept as an answer to replay (verify_dag/cli/replay.py):
    # its reply is the service's, whether it came back or not.
    monkeypatch.setenv(http_backend.KEY_ENV["openai"], KEY)
    before = outside.calls()
    assert ask(backend("openai", api), tmp_path)[0].status == "ok"
    monkeypatch.delenv(http_backend.KEY_ENV["openai"])
    assert ask(backend("openai", api), tmp_path)[0].status == "auth"
    assert outside.calls() == before + 2


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_reply_in_each_apis_shape_gives_findings_and_tokens(
    kind: str, api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(http_backend.KEY_ENV[kind], KEY)
    reply = invoke(backend(kind, api, max_output_tokens=1000), PROMPT, cwd=tmp_path)
    assert reply.status == "ok", reply
    parsed = parse_reply(reply.text, "reviewer")
    assert [f.title for f in parsed.findings] == ["Division by zero when the list is empty"]
    assert reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (1200, 300)
    assert reply.usage.requests == 1 and reply.usage.backend == kind
    (req,) = api.requests
    assert req.body["model"] == "m1"
    assert req.body["messages"] == [{"role": "user", "content": PROMPT}]
    if kind == "anthropic":
        assert req.path == "/v1/messages"
        assert req.headers["x-api-key"] == KEY and "authorization" not in req.headers
        assert req.body["max_tokens"] == 1000
    else:
        assert req.path == "/v1/chat/completions"
        assert req.headers["authorization"] == f"Bearer {KEY}"
        assert req.body["max_tokens"] == 1000 and "reasoning_effort" not in req.body


def test_openai_effort_is_sent_as_reasoning_effort(
    api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert invoke(backend("openai", api, effort="high"), PROMPT, cwd=tmp_path).status == "ok"
    assert api.requests[0].body["reasoning_effort"] == "high"


def test_a_local_server_needs_no_key(tmp_path: Path) -> None:
    with FakeAPI(None) as local:
        reply = invoke(backend("openai", local), PROMPT, cwd=tmp_path)
    assert reply.status == "ok", reply
    assert "authorization" not in local.requests[0].headers


def test_anthropic_without_a_key_asks_nothing(api: FakeAPI, tmp_path: Path) -> None:
    reply = invoke(backend("anthropic", api), PROMPT, cwd=tmp_path)
    assert reply.status == "auth"
    assert reply.reason == "ANTHROPIC_API_KEY is not set in the worker's environment"
    assert api.requests == []


def test_the_key_file_wins_and_is_never_echoed(
    api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "anthropic.key"
    key_file.write_text(KEY + "\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-wrong-key-from-the-environment")
    monkeypatch.setenv("VERIFY_DAG_API_KEY_FILE", str(key_file))
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "anthropic")
    b = resolve(load_config(None), "reviewer")
    assert b is not None and b.api_key_file == str(key_file)
    b = b.model_copy(update={"base_url": api.url})
    assert invoke(b, PROMPT, cwd=tmp_path).status == "ok"
    assert api.requests[0].headers["x-api-key"] == KEY
    # A server that echoes the key it was sent: the reason never carries it, though it came
    # from a file and not from a variable named like a key.
    api.push(Step(400, {"type": "error", "error": {"type": "x", "message": f"bad {KEY}"}}))
    reply = invoke(b, PROMPT, cwd=tmp_path)
    assert reply.status == "failed" and KEY not in reply.reason and "[REDACTED]" in reply.reason
    assert KEY not in processes.redact(f"key={KEY}")


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_wrong_key_is_auth_not_retried_and_not_echoed(
    kind: str, api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-wrong-9876543210fedcba9876543210"
    monkeypatch.setenv(http_backend.KEY_ENV[kind], wrong)
    reply = invoke(backend(kind, api), PROMPT, cwd=tmp_path)
    assert reply.status == "auth", reply
    assert "HTTP 401" in reply.reason and wrong not in reply.reason
    assert len(api.requests) == 1


def test_429_waits_for_retry_after_then_succeeds(
    api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    api.push(Step(429, limited, {"retry-after": "1"}))
    reply, _ = ask(backend("anthropic", api), tmp_path)
    assert reply.status == "ok", reply
    first, second = api.requests
    assert second.at - first.at >= 0.95  # the server's wait, not the 0.5 s backoff
    assert reply.usage is not None and reply.usage.requests == 2


def test_5xx_retries_are_bounded_and_keep_the_providers_reason(
    api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    down = {"error": {"type": "server_error", "message": "the engine is overloaded"}}
    api.push(*[Step(500, down, {"retry-after-ms": "20"})] * 10)
    reply, took = ask(backend("openai", api, retries=2), tmp_path)
    assert reply.status == "failed"
    assert reply.reason == (
        f"{api.url.removeprefix('http://')}: HTTP 500: server_error: the engine is overloaded "
        "(gave up after 3 tries)"
    )
    assert len(api.requests) == 3 and took < 2


def test_a_retry_after_past_the_deadline_gives_up_at_once(
    api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "quota"}}
    api.push(Step(429, limited, {"retry-after": "30"}))
    reply, took = ask(backend("anthropic", api, timeout=2.0), tmp_path)
    assert reply.status == "rate_limited"
    assert "retry due in 30 s, past the call's 2 s limit" in reply.reason
    assert len(api.requests) == 1 and took < 1


def test_a_slow_reply_times_out_within_the_calls_limit(
    api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    api.push(Step(200, None, delay=5))
    reply, took = ask(backend("openai", api, timeout=0.5), tmp_path)
    assert reply.status == "timeout"
    assert reply.reason.endswith("gave no reply within 0.5 s")
    assert took < 2


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_malformed_json_is_a_failure_not_a_pass(
    kind: str, api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(http_backend.KEY_ENV[kind], KEY)
    api.push(Step(200, '{"content": [{"type": "text", "text": "trunc'))
    reply, _ = ask(backend(kind, api), tmp_path)
    assert reply.status == "failed"
    assert "HTTP 200 with a body that is not JSON" in reply.reason
    assert len(api.requests) == 1


def test_a_body_of_the_wrong_shape_is_a_failure(
    api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    api.push(Step(200, {"unexpected": True}))
    reply, _ = ask(backend("openai", api), tmp_path)
    assert reply.status == "failed"
    assert "HTTP 200 without a reply" in reply.reason


def test_a_refused_request_is_not_retried(
    api: FakeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    missing = {"type": "error", "error": {"type": "not_found_error", "message": "model: m1"}}
    api.push(Step(404, missing))
    reply, _ = ask(backend("anthropic", api), tmp_path)
    assert reply.status == "failed"
    assert reply.reason.endswith("HTTP 404: not_found_error: model: m1")
    assert len(api.requests) == 1


def test_an_unreachable_server_is_tried_a_bounded_number_of_times(tmp_path: Path) -> None:
    with FakeAPI(None) as gone:
        url = gone.url
    b = Backend(kind="openai", skill="qa", model="m", base_url=url, retries=1, timeout=10.0)
    reply, took = ask(b, tmp_path)
    assert reply.status == "failed"
    assert "cannot connect" in reply.reason and "gave up after 2 tries" in reply.reason
    assert took < 3


def test_openai_needs_a_model_and_the_repository_cannot_choose_the_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "openai")
    with pytest.raises(UsageError, match="the openai backend needs a model for qa"):
        resolve(load_config(None), "qa")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text(
        '[tool.verify-dag]\nbase-url = "https://attacker.example/v1"\napi-key-file = "/x"\n'
    )
    monkeypatch.setenv("VERIFY_DAG_MODEL", "llama3")
    config = load_config(repo)
    b = resolve(config, "qa")
    assert b is not None and b.base_url is None and b.api_key_file is None
    assert any("ignored `base-url`: a model API address" in n for n in config.notes)
    assert any("ignored `api-key-file`" in n for n in config.notes)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("VERIFY_DAG_BASE_URL", "ftp://x", "expected an http:// or https:// URL"),
        ("VERIFY_DAG_BASE_URL", "https://u:pw@h/v1 x", "'https://***@h/v1 x'"),
        ("VERIFY_DAG_MODEL_RETRIES", "99", "from 0 to 10"),
        ("VERIFY_DAG_MAX_OUTPUT_TOKENS", "0", "of at least 1"),
    ],
)
def test_malformed_http_settings_are_usage_errors(
    name: str, value: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=message.replace("*", r"\*").replace("/", "/")) as err:
        load_config(None)
    assert "pw" not in str(err.value)
