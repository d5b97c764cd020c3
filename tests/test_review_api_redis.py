"""The HTTP model backends on a fleet: real Redis (database 6), real worker processes, the fake
API server in this process. Only the review worker holds the key; the budget is counted in
Redis across the run's reviewers; the key is in no Redis key, no worker log, no report; the
review tasks' rate limit holds per worker.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from conftest import Repo, make_scenario, verify_branch
from fakes.fake_api import FakeAPI, Step
from redis_workers import fresh_db, logs, workers

from verify_dag.models import RunState, VerifyRequest
from verify_dag.models.source import parse_source
from verify_dag.phases import scope

DB = 6
KEY = "sk-ant-fleet-key-0123456789abcdefABCDEF"
MODEL_SKILLS = ("reviewer", "comment-review", "qa")


@dataclass(frozen=True)
class Fleet:
    broker: str
    api: FakeAPI
    log_dir: Path
    store: Path


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """w1 serves every queue but `review` and has no model backend or key; w2 serves `review`
    with the anthropic backend pointed at the fake API, the key in its environment only, and a
    rate limit of one start per second per review task."""
    broker = fresh_db(DB)
    log_dir = tmp_path / "logs"
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERIFY_DAG_BACKEND", "VERIFY_DAG_MODEL", "ANTHROPIC_", "OPENAI_"))
    }
    base["VERIFY_DAG_STORE"] = str(tmp_path / "store")
    base["VERIFY_DAG_MIRRORS"] = str(tmp_path / "mirrors")
    with FakeAPI(KEY) as api:
        reviewer_env = {
            **base,
            "VERIFY_DAG_BACKEND": "anthropic",
            "VERIFY_DAG_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": KEY,
            "VERIFY_DAG_MAX_OUTPUT_TOKENS": "50000",
            "VERIFY_DAG_MODEL_RETRIES": "1",
            "VERIFY_DAG_REVIEW_RATE_LIMIT": "20/m",
        }
        with (
            workers(broker, ["w1"], log_dir, base, queues={"w1": "git,static,test,exercise"}),
            workers(broker, ["w2"], log_dir, reviewer_env, queues={"w2": "review"}),
        ):
            yield Fleet(broker, api, log_dir, tmp_path / "store")
    fresh_db(DB)


def verify(fleet: Fleet, repo: Repo, out: Path, *flags: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERIFY_DAG_", "ANTHROPIC_"))}
    env["VERIFY_DAG_STORE"] = str(fleet.store)
    proc = subprocess.run(
        verify_branch(
            repo,
            "--broker",
            fleet.broker,
            "--format=json",
            f"--output={out}",
            "--timeout=150",
            *flags,
        ),
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert proc.returncode in (1, 4), proc.stderr + logs(fleet.log_dir)
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def redis_values(url: str) -> dict[str, bytes]:
    """Every key of the database and its value (strings, lists, hashes, sets, sorted sets)."""
    # Typed loosely: redis-py's stubs say str | bytes for what is bytes without decode_responses.
    client: Any = redis.Redis.from_url(url)
    out: dict[str, bytes] = {}
    try:
        for key in client.scan_iter():
            kind = client.type(key)
            if kind == b"string":
                value = client.get(key) or b""
            elif kind == b"list":
                value = b"\n".join(client.lrange(key, 0, -1))
            elif kind == b"hash":
                value = b"\n".join(k + b"=" + v for k, v in client.hgetall(key).items())
            elif kind == b"set":
                value = b"\n".join(client.smembers(key))
            elif kind == b"zset":
                value = b"\n".join(client.zrange(key, 0, -1))
            else:
                value = b""
            out[key.decode()] = value
    finally:
        client.close()
    return out


def no_key_anywhere(fleet: Fleet, tmp_path: Path) -> None:
    values = redis_values(fleet.broker)
    assert values  # the run's results and state are there to scan
    assert [k for k, v in values.items() if KEY.encode() in v or KEY in k] == []
    for log in fleet.log_dir.glob("*.log"):
        assert KEY not in log.read_text(errors="replace"), log
    written = [p for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts]
    assert [p for p in written if KEY.encode() in p.read_bytes()] == []


@pytest.mark.redis
def test_a_runs_budget_is_counted_in_redis_across_its_reviewers(
    tmp_path: Path, fleet: Fleet
) -> None:
    # One call may use 50,000 tokens of reply: one fits in 60,000, and it spends 55,000.
    fleet.api.usage = (30000, 25000)
    repo = make_scenario(tmp_path / "scenario")
    doc = verify(fleet, repo, tmp_path / "r.json", "--depth=deep", "--max-review-tokens=60000")
    statuses = {s["skill"]: s["status"] for s in doc["skillResults"]}
    ran = [s for s in MODEL_SKILLS if statuses[s] == "COMPLETED"]
    assert len(ran) == 1, statuses
    for skill in set(MODEL_SKILLS) - set(ran):
        notes = next(r["notes"] for r in doc["skillResults"] if r["skill"] == skill)
        assert statuses[skill] == "NOT_RUN" and "budget: the run's review-token budget" in notes
    assert len(fleet.api.requests) == 1 and fleet.api.requests[0].headers["x-api-key"] == KEY
    (used,) = doc["reviewTokens"]["skills"]
    assert (used["skill"], used["inputTokens"], used["outputTokens"]) == (ran[0], 30000, 25000)
    issue = next(i for i in doc["issues"] if i["title"].startswith("Division by zero"))
    assert issue["sources"] == [ran[0]]
    # The tally the review worker kept in Redis: what the one call spent.
    values = redis_values(fleet.broker)
    assert values[f"verify-dag-tokens-{doc['run']['id']}-review-tokens"] == b"55000"
    no_key_anywhere(fleet, tmp_path)


@pytest.mark.redis
def test_a_provider_that_echoes_the_key_leaves_it_nowhere(tmp_path: Path, fleet: Fleet) -> None:
    echoed = {"type": "error", "error": {"type": "api_error", "message": f"bad key {KEY}"}}
    fleet.api.push(*[Step(500, echoed, {"retry-after-ms": "10"})] * 2)
    repo = make_scenario(tmp_path / "scenario")
    doc = verify(fleet, repo, tmp_path / "r.json")
    reviewer = next(r for r in doc["skillResults"] if r["skill"] == "reviewer")
    assert reviewer["status"] == "NOT_RUN"
    assert "HTTP 500: api_error: bad key [REDACTED] (gave up after 2 tries)" in reviewer["notes"]
    (used,) = doc["reviewTokens"]["skills"]
    assert (used["requests"], used["inputTokens"], used["outputTokens"]) == (2, 0, 0)
    no_key_anywhere(fleet, tmp_path)


@pytest.mark.redis
def test_the_review_rate_limit_spaces_a_workers_calls(tmp_path: Path, fleet: Fleet) -> None:
    repo = make_scenario(tmp_path / "scenario")
    request = scope.validate_request(
        VerifyRequest(
            source=parse_source(str(repo.path)), scope="branch", base="base", no_cache=True
        )
    )
    found = scope.run(request)
    client = Celery(broker=fleet.broker, backend=fleet.broker)
    sig = client.signature("verify_dag.review.reviewer", queue="review")
    sent = [
        sig.apply_async(
            args=(
                RunState(run_id=f"rate-{n}", request=request, scope=found).model_dump(mode="json"),
            )
        )
        for n in range(2)
    ]
    for result in sent:
        result.get(timeout=60, disable_sync_subtasks=False)
    first, second = sorted(r.at for r in fleet.api.requests)
    # w2 runs two tasks at once, but starts `verify_dag.review.reviewer` once in three seconds.
    # The request leaves a little after the start, by a time that varies from task to task
    # (the first one warms the worker's imports), so the spacing is asked with a second's slack;
    # without the limit both requests leave within a fraction of a second.
    assert second - first >= 2.0, (first, second)
