"""Images and ops: worker.Dockerfile, ops/compose.yaml, and the worker's environment defaults.

No Docker engine runs here, so nothing is built: hadolint lints the Dockerfile, check-jsonschema
validates the compose file against the Compose spec, and the structural checks below hold the
file to what ops/README.md promises. Each linter is also shown a bad file, so a mute linter cannot
pass these tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import redis_workers
import yaml
from celery import Celery

from verify_dag.tasks.app import QUEUES

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "worker.Dockerfile"
HADOLINT_CONFIG = ROOT / ".hadolint.yaml"
COMPOSE = ROOT / "ops" / "compose.yaml"
OPS_README = ROOT / "ops" / "README.md"
WORKER_ENV = (
    "VERIFY_DAG_QUEUES",
    "VERIFY_DAG_CONCURRENCY",
    "VERIFY_DAG_POOL",
    "VERIFY_DAG_LOGLEVEL",
)


def tool(name: str) -> str:
    """An executable installed with this interpreter (the dev extra), else one on PATH."""
    here = Path(sysconfig.get_path("scripts")) / name
    if here.is_file():
        return str(here)
    found = shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[dev]'"
    return found


# --- worker.Dockerfile --------------------------------------------------------------------------


def hadolint(path: Path) -> tuple[int, list[dict[str, Any]]]:
    proc = subprocess.run(
        [
            tool("hadolint"),
            "--config",
            str(HADOLINT_CONFIG),
            "--failure-threshold",
            "style",
            "--format",
            "json",
            "--no-color",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.stderr == "", proc.stderr
    findings: list[dict[str, Any]] = json.loads(proc.stdout or "[]")
    return proc.returncode, findings


def test_hadolint_finds_nothing_in_the_worker_dockerfile() -> None:
    code, findings = hadolint(DOCKERFILE)
    assert findings == [], "\n".join(f"{f['line']}: {f['code']} {f['message']}" for f in findings)
    assert code == 0


def test_hadolint_is_not_mute(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install flask\nCMD python app.py\n", encoding="utf-8")
    code, findings = hadolint(bad)
    assert code != 0
    # DL3006 untagged image, DL3013 unpinned pip, DL3042 pip cache, DL3025 shell-form CMD.
    assert {"DL3006", "DL3013", "DL3042", "DL3025"} <= {f["code"] for f in findings}


def test_every_hadolint_ignore_gives_its_reason() -> None:
    config = yaml.safe_load(HADOLINT_CONFIG.read_text(encoding="utf-8"))
    text = HADOLINT_CONFIG.read_text(encoding="utf-8")
    assert set(config) <= {"ignored"}, "only ignores are configured; thresholds stay strict"
    for rule in config.get("ignored") or []:
        assert re.search(rf"^\s*# {rule} \(.+\): \S", text, re.M), f"{rule}: no reason given"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined = re.sub(
        r"\\\n",
        " ",
        "\n".join(
            line
            for line in path.read_text(encoding="utf-8").splitlines()
            if not line.lstrip().startswith("#")
        ),
    )
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def healthcheck_argv() -> list[str]:
    (args,) = [rest for word, rest in instructions(DOCKERFILE) if word == "HEALTHCHECK"]
    argv: list[str] = json.loads(args[args.index("CMD ") + 4 :])
    return argv


def test_worker_image_shape() -> None:
    steps = instructions(DOCKERFILE)
    assert steps[0] == ("FROM", "python:3.11-slim")
    runs = " ".join(rest for word, rest in steps if word == "RUN")
    assert "apt-get install -y --no-install-recommends git" in runs
    assert "pip install --no-cache-dir ." in runs
    assert "useradd" in runs
    users = [rest for word, rest in steps if word == "USER"]
    assert users and users[-1] not in ("root", "0", "0:0"), "the worker must not run as root"
    assert any(word == "WORKDIR" for word, _ in steps)
    (entrypoint,) = [rest for word, rest in steps if word == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["verify-dag", "worker"]
    assert "celery -A verify_dag.tasks.app inspect ping" in " ".join(healthcheck_argv())


def test_dockerignore_lets_in_exactly_what_the_image_copies() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", "the build context is an allow-list (no .git, no .env)"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    copied = {
        src.rstrip("/")
        for word, rest in instructions(DOCKERFILE)
        if word == "COPY"
        for src in rest.split()[:-1]
    }
    assert copied == allowed
    # pip install . needs every directory pyproject maps a package to (tasks/ is verify_dag.tasks).
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {"verify_dag", *(d.split("/")[0] for d in setuptools["package-dir"].values())}
    assert mapped <= copied
    # verify_dag/schemas is a symlink to ../schemas: pip install . needs its target in the context.
    assert (ROOT / "verify_dag" / "schemas").resolve() == ROOT / "schemas"


# --- ops/compose.yaml ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return doc


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = compose["services"]
    return result


def workers(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: svc
        for name, svc in services(compose).items()
        if "VERIFY_DAG_QUEUES" in (svc.get("environment") or {})
    }


def default(value: Any) -> str:
    """The value compose uses when the variable is unset: ``${X:-3}`` -> ``3``."""
    match = re.fullmatch(r"\$\{[A-Z0-9_]+:-([^}]*)\}", str(value))
    return match.group(1) if match else str(value)


def check_compose(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_compose_file_follows_the_compose_spec() -> None:
    proc = check_compose(COMPOSE)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compose_spec_check_is_not_mute(tmp_path: Path) -> None:
    bad = tmp_path / "compose.yaml"
    bad.write_text(
        "services:\n  redis:\n    image: redis:7\n    environmnet: {A: b}\n", encoding="utf-8"
    )
    proc = check_compose(bad)
    assert proc.returncode != 0 and "environmnet" in proc.stdout + proc.stderr


def test_workers_cover_every_queue_with_known_names(compose: dict[str, Any]) -> None:
    covered: set[str] = set()
    for name, svc in workers(compose).items():
        env = svc["environment"]
        queues = [q.strip() for q in env["VERIFY_DAG_QUEUES"].split(",")]
        assert set(queues) <= {*QUEUES, "fleet"}, f"{name}: unknown queue in {queues}"
        covered |= set(queues)
        assert int(default(env["VERIFY_DAG_CONCURRENCY"])) >= 1, name
        assert default(env["VERIFY_DAG_POOL"]) == "prefork", f"{name}: time limits need prefork"
        assert env["VERIFY_DAG_BROKER_URL"].startswith("redis://redis:6379/"), name
    assert covered == {*QUEUES, "fleet"}


def test_workers_run_verify_dag_worker_from_the_worker_image(compose: dict[str, Any]) -> None:
    assert workers(compose)
    for name, svc in workers(compose).items():
        assert svc["build"]["dockerfile"] == "worker.Dockerfile", name
        assert (
            COMPOSE.parent / svc["build"]["context"] / "worker.Dockerfile"
        ).resolve() == DOCKERFILE
        # No override: the image's ENTRYPOINT, checked above to be `verify-dag worker`, runs.
        assert "entrypoint" not in svc, name
        assert "command" not in svc or not svc["command"], name


def test_one_small_review_pool_is_the_model_call_cap(compose: dict[str, Any]) -> None:
    review = [
        svc
        for svc in workers(compose).values()
        if "review" in svc["environment"]["VERIFY_DAG_QUEUES"].split(",")
    ]
    assert len(review) == 1, "the review queue's consumers' total concurrency is the cap"
    (svc,) = review
    assert svc["environment"]["VERIFY_DAG_QUEUES"] == "review"
    assert 1 <= int(default(svc["environment"]["VERIFY_DAG_CONCURRENCY"])) <= 4
    assert (svc.get("deploy") or {}).get("replicas", 1) == 1


def test_redis_is_append_only_and_never_evicts(compose: dict[str, Any]) -> None:
    svc = services(compose)["redis"]
    assert svc["image"] == "redis:7"
    command = svc["command"]
    pairs = dict(zip(command[1::2], command[2::2], strict=False))
    assert command[0] == "redis-server"
    assert pairs["--appendonly"] == "yes"
    assert pairs["--maxmemory-policy"] == "noeviction"
    assert any(v.endswith(":/data") for v in svc["volumes"])
    assert svc["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_flower_authenticates_from_the_environment(compose: dict[str, Any]) -> None:
    svc = services(compose)["flower"]
    auth = svc["environment"]["FLOWER_BASIC_AUTH"]
    # Required (`:?`): compose refuses to start Flower without credentials, and none are literal.
    assert re.fullmatch(r"\$\{FLOWER_BASIC_AUTH:\?[^}]+\}", auth), auth
    command = svc["command"]
    assert "--broker=redis://redis:6379/0" in command and "flower" in command
    assert "--port=5555" in command
    assert not [a for a in command if "auth" in a], "credentials never on the command line"
    assert any(p.endswith(":5555") for p in svc["ports"])


def strings(node: Any, key: str = "") -> list[tuple[str, str]]:
    """Every (key, string) in a parsed YAML document; list items keep their parent's key."""
    if isinstance(node, dict):
        return [pair for k, v in node.items() for pair in strings(v, str(k))]
    if isinstance(node, list):
        return [pair for v in node for pair in strings(v, key)]
    return [(key, str(node))]


def test_no_literal_secrets_anywhere(compose: dict[str, Any]) -> None:
    for key, value in strings(compose):
        if re.search(r"auth|password|secret|token", key, re.I):
            assert re.fullmatch(r"\$\{[A-Z0-9_]+(:?[-?][^}]*)?\}", value), f"{key}: literal"
        # A command-line flag would put the password in `ps` and `docker inspect` output.
        assert not re.search(r"--basic[-_]auth", value, re.I), f"{key}: {value}"
        assert not re.search(r"rediss?://[^/@\s]*:[^/@\s]*@", value), "password in a broker URL"


def test_nothing_runs_privileged(compose: dict[str, Any]) -> None:
    for name, svc in services(compose).items():
        assert svc.get("privileged") in (None, False), name
        assert not svc.get("cap_add"), name
        assert svc.get("user") not in ("root", "0", "0:0"), name
        for key in ("network_mode", "pid", "ipc", "userns_mode"):
            assert svc.get(key) != "host", f"{name}: {key}: host"
        assert not [v for v in svc.get("volumes") or [] if "docker.sock" in str(v)], name
        assert "no-new-privileges:true" in svc.get("security_opt", []), name
    for name, svc in workers(compose).items():
        assert svc["cap_drop"] == ["ALL"], name


def test_beat_is_celery_beat_sending_the_fleet_audit(compose: dict[str, Any]) -> None:
    from verify_dag.fleet.schedule import from_environment

    svc = services(compose)["beat"]
    argv = [*svc["entrypoint"], *svc.get("command", [])]
    assert argv[:4] == ["celery", "-A", "verify_dag", "beat"]
    env = {k: default(str(v)) for k, v in svc["environment"].items()}
    assert "VERIFY_DAG_QUEUES" not in env, "beat consumes no queue"
    assert env["VERIFY_DAG_BROKER_URL"].startswith("redis://redis:6379/")
    assert (svc.get("deploy") or {}).get("replicas", 1) == 1
    assert svc["healthcheck"] == {"disable": True}, "no worker ping answers for beat"
    # The schedule celery beat builds from that environment: the audit task, on its own queue.
    (entry,) = from_environment(env).values()
    assert entry["task"] == "verify_dag.fleet.audit" and entry["options"] == {"queue": "fleet"}
    assert entry["kwargs"]["fleet_file"] == "/fleet/fleet.toml"
    # The audit runs on a worker of the fleet queue that reads the file and writes the store.
    fleet = services(compose)["worker-fleet"]
    fleet_env = fleet["environment"]
    assert (
        fleet_env["VERIFY_DAG_QUEUES"],
        int(default(str(fleet_env["VERIFY_DAG_CONCURRENCY"]))),
    ) == ("fleet", 1)
    mounts = {}
    for volume in fleet["volumes"]:
        source, target, *mode = re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", volume).split(":")
        mounts[target] = (source, mode)
    assert mounts["/fleet"] == ("./fleet", ["ro"]), "the fleet file, read-only"
    # The store (reports, index, summaries) is on a named volume at a directory the image gives
    # its non-root user, so it survives restarts and can be written.
    store_dir = fleet_env["VERIFY_DAG_STORE"]
    (target,) = [t for t in mounts if store_dir == t or store_dir.startswith(t + "/")]
    assert mounts[target][0] in compose["volumes"]
    chown = re.search(r"chown -R verifydag:verifydag ([^\n]*)", DOCKERFILE.read_text())
    assert chown and any(
        target == d or target.startswith(d + "/") for d in chown.group(1).split()
    ), "the image does not give it its user"
    # ... and it is the very volume the workers write reports to.
    for name, svc in workers(compose).items():
        assert f"{mounts[target][0]}:{target}" in svc["volumes"], name
    # beat reads the same file as it starts; the directory ships an example that parses, and
    # the operators' README names the command compose runs.
    assert "./fleet:/fleet:ro" in svc_volumes(services(compose)["beat"])
    from verify_dag import fleet as fleet_file

    assert fleet_file.load(ROOT / "ops" / "fleet" / "fleet.example.toml")
    row = next(
        line
        for line in (ROOT / "ops" / "README.md").read_text().splitlines()
        if line.startswith("| `beat` |")
    )
    assert "`celery -A verify_dag beat`" in row


def svc_volumes(svc: dict[str, Any]) -> list[str]:
    return [str(v) for v in svc.get("volumes", [])]


def test_beat_refuses_a_missing_fleet_file_at_start(tmp_path: Path) -> None:
    """A beat whose fleet file is missing stops as it starts, in one line and exit 2: not a
    beat that runs quietly and fails its first audit in the night."""
    env = {**os.environ, "VERIFY_DAG_FLEET_FILE": str(tmp_path / "fleet.toml")}
    env.pop("VERIFY_DAG_BROKER_URL", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "verify_dag",
            "beat",
            "--schedule",
            str(tmp_path / "schedule"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if "verify-dag:" in line]
    assert len(said) == 1 and said[0].endswith(
        f"verify-dag: error: fleet file not found: {tmp_path / 'fleet.toml'}"
    ), said


def test_every_worker_that_runs_repository_code_shares_the_env_cache(
    compose: dict[str, Any],
) -> None:
    """Static analysis resolves imports in the project's env (mypy), the suite and the
    exercise run in it: the workers of those queues share one cache of envs."""
    for name in ("worker-static", "worker-test", "worker-exercise"):
        assert "testenv-cache:/var/cache/verify-dag" in svc_volumes(services(compose)[name]), name


def test_every_setting_is_documented_for_operators() -> None:
    readme = OPS_README.read_text(encoding="utf-8")
    names = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", COMPOSE.read_text(encoding="utf-8")))
    names |= {*WORKER_ENV, "VERIFY_DAG_BROKER_URL", "VERIFY_DAG_RESULT_BACKEND", "VERIFY_DAG_CACHE"}
    missing = sorted(n for n in names if f"`{n}`" not in readme)
    assert not missing, f"ops/README.md does not document {missing}"


# --- verify-dag worker takes its settings from the environment ---------------------------------

# Nothing listens on port 9: were a worker started, it would hang retrying instead of exiting 2.
DEAD_BROKER = "redis://127.0.0.1:9/0"

# Runs the CLI with celery's worker_main replaced by a print of the argv it would have run.
SHOW_WORKER_ARGV = """
import json, sys
from verify_dag.tasks.app import app
app.worker_main = lambda argv: print(json.dumps(argv))
from verify_dag.cli import main
sys.exit(main(sys.argv[1:]))
"""


def worker_env(**values: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (*WORKER_ENV, "VERIFY_DAG_BROKER_URL", "VERIFY_DAG_RESULT_BACKEND")
    }
    env["VERIFY_DAG_BROKER_URL"] = DEAD_BROKER
    env.update(values)
    return env


def run_worker(
    env: dict[str, str], *flags: str, show_argv: bool = False
) -> subprocess.CompletedProcess[str]:
    prefix = ["-c", SHOW_WORKER_ARGV] if show_argv else ["-m", "verify_dag.cli"]
    return subprocess.run(
        [sys.executable, *prefix, "worker", *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "flags", "needle"),
    [
        ({"VERIFY_DAG_QUEUES": "git,bogus"}, [], "VERIFY_DAG_QUEUES: unknown queue(s) bogus"),
        ({"VERIFY_DAG_QUEUES": " , "}, [], "VERIFY_DAG_QUEUES: no queue names given"),
        ({"VERIFY_DAG_QUEUES": "git"}, ["--queues=nope"], "--queues: unknown queue(s) nope"),
        ({"VERIFY_DAG_CONCURRENCY": "two"}, [], "VERIFY_DAG_CONCURRENCY: expected a positive"),
        ({"VERIFY_DAG_CONCURRENCY": "0"}, [], "VERIFY_DAG_CONCURRENCY: expected a positive"),
        ({}, ["--concurrency=-1"], "--concurrency: expected a positive"),
        ({"VERIFY_DAG_POOL": "gevent"}, [], "VERIFY_DAG_POOL: unknown pool 'gevent'"),
        ({"VERIFY_DAG_LOGLEVEL": "loud"}, [], "VERIFY_DAG_LOGLEVEL: unknown log level 'loud'"),
    ],
)
def test_bad_worker_settings_are_usage_errors(
    env: dict[str, str], flags: list[str], needle: str
) -> None:
    proc = run_worker(worker_env(**env), *flags)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verify-dag: error: "), proc.stderr
    assert needle in lines[0]
    assert proc.stdout == "", "no worker banner: the worker never started"


def test_worker_settings_come_from_the_environment() -> None:
    proc = run_worker(
        worker_env(
            VERIFY_DAG_QUEUES="test, review",
            VERIFY_DAG_CONCURRENCY="3",
            VERIFY_DAG_POOL="solo",
            VERIFY_DAG_LOGLEVEL="debug",
        ),
        show_argv=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        "worker",
        "-Q",
        "test,review",
        "--pool",
        "solo",
        "--loglevel",
        "DEBUG",
        "-E",
        "--concurrency",
        "3",
    ]


def test_worker_flags_beat_the_environment() -> None:
    proc = run_worker(
        worker_env(
            VERIFY_DAG_QUEUES="bogus",
            VERIFY_DAG_CONCURRENCY="3",
            VERIFY_DAG_POOL="gevent",
            VERIFY_DAG_LOGLEVEL="loud",
        ),
        "--queues=git",
        "--concurrency=1",
        "--pool=threads",
        "--loglevel=WARNING",
        show_argv=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        "worker",
        "-Q",
        "git",
        "--pool",
        "threads",
        "--loglevel",
        "WARNING",
        "-E",
        "--concurrency",
        "1",
    ]


def test_worker_defaults_without_environment() -> None:
    proc = run_worker(worker_env(VERIFY_DAG_QUEUES=""), show_argv=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        "worker",
        "-Q",
        ",".join(QUEUES),
        "--pool",
        "prefork",
        "--loglevel",
        "INFO",
        "-E",
    ]


# --- the image's entrypoint and health check against a real Redis ------------------------------


def healthcheck_env(broker: str, hostname: str) -> dict[str, str]:
    return {
        **worker_env(VERIFY_DAG_BROKER_URL=broker),
        "HOSTNAME": hostname,
        "PATH": os.pathsep.join([sysconfig.get_path("scripts"), os.environ["PATH"]]),
    }


def healthcheck(broker: str, hostname: str) -> subprocess.CompletedProcess[str]:
    env = healthcheck_env(broker, hostname)
    return subprocess.run(healthcheck_argv(), env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.redis
def test_entrypoint_serves_the_environment_queues_and_passes_its_health_check(
    tmp_path: Path,
) -> None:
    # Database 11, its own (see tests/redis_workers.py); kombu scopes broadcasts by database.
    broker = redis_workers.fresh_db(11)
    log = tmp_path / "worker.log"
    # What the container runs: the ENTRYPOINT with no arguments, everything from the environment.
    env = worker_env(
        VERIFY_DAG_BROKER_URL=broker,
        VERIFY_DAG_QUEUES="static,review",
        VERIFY_DAG_CONCURRENCY="1",
        VERIFY_DAG_POOL="prefork",
        VERIFY_DAG_LOGLEVEL="INFO",
    )
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "verify_dag.cli", "worker"],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    node = f"celery@{socket.gethostname()}"
    other: subprocess.Popen[bytes] | None = None
    try:
        # The check is about this container's worker: another node name is unhealthy. No
        # worker answers for it, so that check waits its whole timeout: it runs meanwhile.
        other = subprocess.Popen(
            healthcheck_argv(),
            env=healthcheck_env(broker, "no-such-worker"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # Checked once the worker says it is ready: a check while it starts waits its whole
        # timeout for an answer (Docker's start period is for that).
        deadline = time.monotonic() + 90
        while "ready." not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "never ready:\n" + log.read_text()
            time.sleep(0.2)
        checked = healthcheck(broker, socket.gethostname())
        assert checked.returncode == 0, checked.stdout + checked.stderr + log.read_text()
        inspect = Celery(broker=broker).control.inspect(destination=[node], timeout=5)
        queues = inspect.active_queues()[node]
        assert sorted(q["name"] for q in queues) == ["review", "static"]
        assert inspect.stats()[node]["pool"]["max-concurrency"] == 1
        assert other.wait(timeout=60) != 0
    finally:
        if other is not None and other.poll() is None:
            other.kill()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        redis_workers.fresh_db(11)  # leave the database empty for the next run
