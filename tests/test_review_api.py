"""Judgement reviewers on the HTTP model backends, through the whole DAG on the embedded worker,
against a fake API server the tests start: findings, tokens in the report, retries, failures
that are NOT_RUN with the provider's reason, the review-token budget, the result cache."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BRANCH, Repo, verify_json
from fakes.fake_api import FakeAPI, Step

from verify_dag import metrics
from verify_dag.report import markdown

KEY = "sk-ant-test-0123456789abcdefABCDEF0123"
MODEL_SKILLS = ("reviewer", "comment-review", "qa")


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAPI]:
    """The fake API, configured as the anthropic backend of this process's embedded worker."""
    for key in list(os.environ):
        if key.startswith(("VERIFY_DAG_BACKEND", "VERIFY_DAG_MODEL", "ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("VERIFY_DAG_RESULT_CACHE", str(tmp_path / "results"))
    with FakeAPI(KEY) as server:
        monkeypatch.setenv("VERIFY_DAG_BACKEND", "anthropic")
        monkeypatch.setenv("VERIFY_DAG_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        yield server


def result(doc: dict[str, Any], skill: str) -> dict[str, Any]:
    return next(s for s in doc["skillResults"] if s["skill"] == skill)


def files_under(root: Path) -> Iterator[Path]:
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", "home")]
        yield from (Path(top, n) for n in names)


def test_deep_review_on_the_messages_api(scenario: Repo, tmp_path: Path, api: FakeAPI) -> None:
    _, doc = verify_json(scenario, tmp_path, *BRANCH, "--depth=deep")
    for skill in MODEL_SKILLS:
        assert result(doc, skill)["status"] == "COMPLETED", result(doc, skill)
    issue = next(i for i in doc["issues"] if i["title"].startswith("Division by zero"))
    assert {"reviewer", "qa"} <= set(issue["sources"])
    assert issue["location"] == {"path": "src/calc.py", "line": 5}
    tokens = doc["reviewTokens"]
    used = {s["skill"]: s for s in tokens["skills"]}
    assert set(used) == set(MODEL_SKILLS)
    assert used["reviewer"] == {
        "skill": "reviewer",
        "backend": "anthropic",
        "model": "claude-opus-4-5",  # the capable tier's default
        "inputTokens": 1200,
        "outputTokens": 300,
        "requests": 1,
        "fromCache": False,
    }
    assert used["qa"]["model"] == "claude-sonnet-4-5"
    assert (tokens["inputTokens"], tokens["outputTokens"]) == (3600, 900)
    assert tokens["maxTokens"] is None
    assert all(r.headers["x-api-key"] == KEY for r in api.requests) and len(api.requests) == 3
    assert "> **Review tokens:** 3,600 in, 900 out." in markdown(doc)
    # The run metrics count them from the stored report.
    exposed = metrics.exposition(os.environ["VERIFY_DAG_STORE"])
    assert 'verify_dag_review_tokens_total{direction="in",skill="qa"} 1200.0' in exposed
    assert 'verify_dag_review_tokens_total{direction="out",skill="reviewer"} 300.0' in exposed
    assert 'verify_dag_review_requests_total{backend="anthropic",skill="reviewer"} 1.0' in exposed
    # skillResults items stay exactly skill, status and notes.
    assert all(set(r) == {"skill", "status", "notes"} for r in doc["skillResults"])
    # The key is in no file the run wrote: the report, the store, the result cache.
    leaked = [p for p in files_under(tmp_path) if KEY.encode() in p.read_bytes()]
    assert leaked == []


def test_the_budget_stops_the_reviewers_after_it_is_spent(
    scenario: Repo, tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A call may use 50,000 tokens of reply, so only one fits in 60,000 at a time; it spends
    # 55,000, after which none fits at all: exactly one reviewer asks the model, whatever order
    # the three run in.
    monkeypatch.setenv("VERIFY_DAG_MAX_OUTPUT_TOKENS", "50000")
    api.usage = (30000, 25000)
    rc, doc = verify_json(scenario, tmp_path, *BRANCH, "--depth=deep", "--max-review-tokens=60000")
    statuses = {s: result(doc, s)["status"] for s in MODEL_SKILLS}
    ran = [s for s, status in statuses.items() if status == "COMPLETED"]
    assert len(ran) == 1, statuses
    for skill in set(MODEL_SKILLS) - set(ran):
        assert statuses[skill] == "NOT_RUN"
        notes = result(doc, skill)["notes"]
        assert "budget: the run's review-token budget (60000) is spent" in notes, notes
    assert len(api.requests) == 1
    tokens = doc["reviewTokens"]
    assert tokens["maxTokens"] == 60000 and (tokens["inputTokens"], tokens["outputTokens"]) == (
        30000,
        25000,
    )
    assert [s["skill"] for s in tokens["skills"]] == ran
    assert rc == 1  # the failing test; the reviewers that did not run are not a pass either
    assert "(budget 60,000)" in markdown(doc)


def test_retries_on_an_openai_compatible_server_are_counted(
    scenario: Repo, tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFY_DAG_BACKEND", "openai")
    monkeypatch.setenv("VERIFY_DAG_BASE_URL", f"{api.url}/v1")
    monkeypatch.setenv("VERIFY_DAG_MODEL", "qwen2.5-coder")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    busy = {"error": {"message": "Rate limit reached", "type": "requests", "code": "429"}}
    down = {"error": {"message": "upstream failed", "type": "server_error"}}
    api.push(Step(429, busy, {"retry-after-ms": "50"}), Step(503, down, {"retry-after": "0"}))
    _, doc = verify_json(scenario, tmp_path, *BRANCH)
    assert result(doc, "reviewer")["status"] == "COMPLETED"
    (used,) = doc["reviewTokens"]["skills"]
    assert (used["backend"], used["model"], used["requests"]) == ("openai", "qwen2.5-coder", 3)
    assert [r.path for r in api.requests] == ["/v1/chat/completions"] * 3
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in api.requests)


@pytest.mark.parametrize(
    ("steps", "env", "said"),
    [
        (
            [Step(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})] * 3,
            {"VERIFY_DAG_MODEL_RETRIES": "1"},
            "failed: {host}: HTTP 500: api_error: boom (gave up after 2 tries)",
        ),
        ([Step(200, None, delay=4)], {"VERIFY_DAG_MODEL_TIMEOUT": "1"}, "timeout: {host} gave no"),
        (
            [],
            {"ANTHROPIC_API_KEY": "sk-ant-wrong-0000000000000000"},
            "auth: {host}: HTTP 401: authentication_error: Incorrect API key provided: [REDACTED]",
        ),
    ],
    ids=["5xx", "slow", "wrong-key"],
)
def test_a_failed_call_is_not_run_with_the_providers_reason(
    steps: list[Step],
    env: dict[str, str],
    said: str,
    scenario: Repo,
    tmp_path: Path,
    api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    api.push(*steps)
    rc, doc = verify_json(scenario, tmp_path, *BRANCH)
    reviewer = result(doc, "reviewer")
    assert reviewer["status"] == "NOT_RUN"
    host = api.url.removeprefix("http://")
    assert said.format(host=host) in reviewer["notes"], reviewer["notes"]
    assert not any(i["sources"] == ["reviewer"] for i in doc["issues"])
    assert rc == 1


def test_the_result_cache_keys_a_reply_by_model_and_parameters(
    scenario: Repo, tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    verify_json(scenario, tmp_path, *BRANCH)
    _, again = verify_json(scenario, tmp_path, *BRANCH)
    assert len(api.requests) == 1  # the same prompt, backend, model and parameters: reused
    (used,) = again["reviewTokens"]["skills"]
    assert used["fromCache"] is True and (used["inputTokens"], used["requests"]) == (0, 0)
    assert result(again, "reviewer")["status"] == "COMPLETED"
    monkeypatch.setenv("VERIFY_DAG_MAX_OUTPUT_TOKENS", "2048")
    verify_json(scenario, tmp_path, *BRANCH)
    assert len(api.requests) == 2
    monkeypatch.setenv("VERIFY_DAG_MODEL", "claude-haiku-4-5")
    verify_json(scenario, tmp_path, *BRANCH)
    assert len(api.requests) == 3
    assert api.requests[-1].body["model"] == "claude-haiku-4-5"
