"""Repository code in a sandbox (docs/security.md): hostile test suites, for real.

Each attacker is a real repository whose pytest suite tries one thing a hostile repository would:
read the worker's environment and command line, reach the broker and write a result key, write
into what other runs use, leave processes behind. The suite *passes* only when the reads and the
connection failed, so the tester's verdict is the sandbox's; the test then checks the world from
outside (the files it tried to write, the broker's keys, the processes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import Repo, alive, make_repo, run_cli, running, verify_branch
from redis_workers import fresh_db, workers

import verify_dag
from verify_dag import cli, report, sandbox

CANARY = "canary-worker-secret-4e1f0c"

PROBE = '''\
import glob, json, os, socket

BROKER = {broker!r}
TARGETS = {targets!r}
SECRETS = {secrets!r}


def proc_leaks():
    """Other processes' environments and command lines that name the broker or a secret."""
    leaks = []
    for d in glob.glob("/proc/[0-9]*"):
        for name in ("environ", "cmdline"):
            try:
                with open(os.path.join(d, name), "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if b"redis://" in data or {canary!r}.encode() in data:
                leaks.append(d + "/" + name)
    return leaks


def resp(*words):
    return b"".join([b"*%d\\r\\n" % len(words)] + [b"$%d\\r\\n%s\\r\\n" % (len(w), w)
                                                   for w in words])


def broker():
    """Connect to the broker and write a result key, as the forger did."""
    if BROKER is None:
        return "no broker"
    host, port, db = BROKER
    try:
        s = socket.create_connection((host, port), timeout=2)
    except OSError as exc:
        return "refused: " + type(exc).__name__
    s.sendall(resp(b"SELECT", str(db).encode())
              + resp(b"SET", b"celery-task-meta-forged", b'{{"status": "SUCCESS"}}'))
    return "connected: " + s.recv(200).decode(errors="replace")


def writes():
    done = []
    for path in TARGETS:
        try:
            with open(path, "a") as fh:
                fh.write("poisoned\\n")
            done.append(path)
        except OSError:
            pass
    return done


def reads():
    """The files of SECRETS this code could read something from."""
    done = []
    for path in SECRETS:
        try:
            with open(path, "rb") as fh:
                if fh.read():
                    done.append(path)
        except OSError:
            pass
    return done


def test_attack():
    achieved = {{
        "proc": proc_leaks(), "broker": broker(), "writes": writes(), "reads": reads()
    }}
    assert not achieved["proc"], json.dumps(achieved)
    assert not achieved["reads"], json.dumps(achieved)
    assert not achieved["broker"].startswith("connected"), json.dumps(achieved)
    # Writes are judged from outside: one that "worked" may have gone to a private scratch
    # copy (a hidden directory's tmpfs), which is the point.
    print(json.dumps(achieved))
'''


def attacker(
    path: Path,
    *,
    broker: tuple[str, int, int] | None = None,
    targets: tuple[str, ...] = (),
    secrets: tuple[str, ...] = (),
) -> Repo:
    repo = make_repo(path)
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    repo.write("tests/test_attack.py", "def test_nothing():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write(
        "tests/test_attack.py",
        PROBE.format(broker=broker, targets=list(targets), secrets=list(secrets), canary=CANARY),
    )
    repo.commit("attack")
    return repo


def verify(
    repo: Repo,
    out: Path,
    *flags: str,
    env: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        verify_branch(
            repo, "--depth=light", "--format=json", f"--output={out}", "--timeout=240", *flags
        ),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    doc = (
        json.loads(out.read_text(encoding="utf-8"))
        if out.suffix == ".json" and out.is_file()
        else {}
    )
    if doc:
        report.validate(doc)
    return proc.returncode, doc, proc.stderr


def suite_result(doc: dict[str, Any]) -> dict[str, Any]:
    (result,) = [s for s in doc["skillResults"] if s["skill"] == "tester"]
    return result


def suite_detail(doc: dict[str, Any]) -> dict[str, Any]:
    (detail,) = [s for s in doc["skillDetails"] if s["skill"] == "tester"]
    return detail


def need_mode(wanted: str = "bubblewrap") -> None:
    if sandbox.mode() != wanted:
        if os.environ.get("CI"):
            pytest.fail(f"{wanted} must work under CI (.ci/run installs it)")
        pytest.skip(f"no working {wanted} here (sandbox mode: {sandbox.mode()})")


# --- on real workers over Redis -----------------------------------------------------------------


@pytest.fixture(scope="module")
def _reserved_db() -> int:
    # Module-scoped: the module's tests share database 12, so they stay on one xdist worker
    # (tests/conftest.py) and never use it at the same time.
    return 12


@pytest.fixture
def broker(_reserved_db: int) -> str:
    """Database 12, emptied for each test: a test that SIGKILLs a worker leaves its run's
    unacknowledged task to be delivered again (a suite that sleeps for an hour), and the next
    test's worker must not be the one that gets it."""
    return fresh_db(_reserved_db)


def test_a_suite_cannot_read_the_worker_reach_the_broker_or_forge_a_result(
    tmp_path: Path, broker: str, sandbox_mode: str
) -> None:
    """A forged result, step by step: each step fails, and the victim's report is its own (its
    failing test and its exit code)."""
    where = redis.Redis.from_url(broker).connection_pool.connection_kwargs
    bad = attacker(tmp_path / "attacker", broker=(where["host"], where["port"], where["db"]))
    victim = make_repo(tmp_path / "victim")
    victim.write("tests/test_calc.py", "def test_ok():\n    assert True\n")
    victim.commit("base")
    victim.git("tag", "base")
    victim.write("tests/test_calc.py", "def test_ok():\n    assert 1 + 1 == 3\n")
    victim.commit("break it")
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_BROKER_URL"}
    env["VERIFY_DAG_STORE"] = str(tmp_path / "worker-store")
    env["WORKER_CANARY_SECRET"] = CANARY
    # The broker URL in the worker's environment, as ops/README.md tells operators to pass it.
    env["VERIFY_DAG_BROKER_URL"] = broker
    with workers(broker, ["sandboxed"], tmp_path / "logs", env):
        _rc, doc, err = verify(bad, tmp_path / "attacker.json", f"--broker={broker}")
        assert suite_result(doc)["status"] == "PASSED", (suite_result(doc), doc["issues"], err)
        assert suite_detail(doc)["isolation"] == sandbox_mode
        rc_victim, victim_doc, err = verify(victim, tmp_path / "victim.json", f"--broker={broker}")
    assert redis.Redis.from_url(broker).get("celery-task-meta-forged") is None
    assert rc_victim == 1, err
    assert any("test_ok" in i["title"] for i in victim_doc["issues"]), victim_doc["issues"]


# --- embedded ---------------------------------------------------------------------------------


def test_writes_outside_the_checkout_change_nothing_another_run_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox_mode: str
) -> None:
    """Cached environments, the store, the mirrors, verify-dag's own installation (a .pth would
    run in every later verify-dag process) and the user's .git/config stay as they were; the
    user's secrets (~/.netrc, an SSH key, verify-dag's config) and the host's shadow file read
    as nothing; no other process's environment is readable."""
    cache, mirrors = tmp_path / "cache", tmp_path / "mirrors"
    (cache / "envs" / "someone-elses").mkdir(parents=True)
    cached = cache / "envs" / "someone-elses" / "site.py"
    cached.write_text("ORIGINAL = True\n", encoding="utf-8")
    mirrors.mkdir()
    mirror = mirrors / "other.git-config"
    mirror.write_text("[core]\n", encoding="utf-8")
    store = Path(os.environ["VERIFY_DAG_STORE"])
    (store / "earlier-run").mkdir(parents=True)
    stored = store / "earlier-run" / "report.json"
    stored.write_text("{}", encoding="utf-8")
    package = Path(verify_dag.__file__).parent / "zz_verify_dag_test_poison.py"
    pth = Path(sysconfig.get_paths()["purelib"]) / "zz_verify_dag_test_poison.pth"
    bad_path = tmp_path / "attacker"
    user_config = bad_path / ".git" / "config"
    targets = (str(cached), str(mirror), str(stored), str(package), str(pth), str(user_config))
    home = Path(os.environ["HOME"])
    config = home / ".config" / "verify-dag" / "config.toml"
    secrets = (home / ".netrc", home / ".ssh" / "id_rsa", config)
    for secret in secrets:
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_text(f"{CANARY}\n", encoding="utf-8")
    bad = attacker(bad_path, targets=targets, secrets=(*map(str, secrets), "/etc/shadow"))
    before = {p: Path(p).read_bytes() if Path(p).exists() else None for p in targets}
    monkeypatch.setenv("VERIFY_DAG_CACHE", str(cache))
    monkeypatch.setenv("VERIFY_DAG_MIRRORS", str(mirrors))
    monkeypatch.setenv("WORKER_CANARY_SECRET", CANARY)
    try:
        rc, doc, err = verify(bad, tmp_path / "out.json")
        after = {p: Path(p).read_bytes() if Path(p).exists() else None for p in targets}
    finally:
        for planted in (package, pth):  # only if the sandbox failed: never leave them
            planted.unlink(missing_ok=True)
    assert after == before
    assert suite_result(doc)["status"] == "PASSED", (suite_result(doc), doc["issues"], err)
    assert suite_detail(doc)["isolation"] == sandbox_mode
    assert rc == 4, err  # nothing failed; no reviewer (no backend) or exerciser could run


def test_a_daemon_and_children_a_conftest_starts_are_gone_after_the_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    repo.write("tests/test_one.py", "def test_one():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    # A double-forked daemon in a session of its own, and 200 children: all outlive pytest.
    repo.write(
        "tests/conftest.py",
        """\
import os, subprocess

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "3600.5151"])
    os._exit(0)
for _ in range(200):
    subprocess.Popen(["sleep", "3600.5152"], start_new_session=True)
""",
    )
    repo.commit("conftest")
    _rc, doc, err = verify(repo, tmp_path / "out.json")
    assert suite_result(doc)["status"] == "PASSED", (suite_result(doc), err)
    deadline = time.monotonic() + 10
    while (left := running("sleep 3600.515")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == []


def test_require_sandbox_refuses_a_host_without_bubblewrap(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(sandbox.MODE_ENV, "none")
    repo = attacker(tmp_path / "attacker")
    rc = cli.main(
        [
            "verify",
            str(repo.path),
            "--scope=branch",
            "--base=base",
            "--depth=light",
            "--require-sandbox",
            f"--output={tmp_path / 'out.md'}",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 3
    assert err == [
        "verify-dag: error: repository code must run in a bubblewrap sandbox "
        "(--require-sandbox or VERIFY_DAG_REQUIRE_SANDBOX) and this host offers none "
        "(install bubblewrap (Debian: apt-get install bubblewrap) on the worker "
        "hosts)"
    ]
    assert not (tmp_path / "out.md").exists()


def test_each_skill_says_which_isolation_its_repository_code_ran_under(tmp_path: Path) -> None:
    need_mode()
    repo = attacker(tmp_path / "attacker")
    _rc, doc, _err = verify(repo, tmp_path / "out.json")
    by_skill = {s["skill"]: s["isolation"] for s in doc["skillDetails"]}
    assert by_skill["tester"] == by_skill["static-analysis"] == "bubblewrap"
    assert by_skill["reviewer"] is None  # a model call, not repository code
    # Run again, not from the result cache: a cached result ran no repository code at all.
    _rc, _doc, _err = verify(repo, tmp_path / "out.md", "--format=markdown", "--no-cache")
    text = (tmp_path / "out.md").read_text(encoding="utf-8")
    (line,) = [t for t in text.splitlines() if t.startswith("> **Sandbox:**")]
    assert "static-analysis, tester" in line or "tester, static-analysis" in line
    assert "ran the repository's code in bubblewrap (own PID namespace" in line


@pytest.mark.parametrize("mode", ["bubblewrap", "unshare", "none"])
def test_a_killed_workers_suite_does_not_outlive_it(
    tmp_path: Path, broker: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL a worker (its whole process group) while its suite runs: the suite goes with it
    (bubblewrap, and unshare under setpriv, die with their parent), or, where nothing can tie
    it to the worker (no sandbox on the host), the next worker that starts there kills it."""
    if mode != "none":
        monkeypatch.setenv(sandbox.MODE_ENV, mode)
        need_mode(mode)
    repo = make_repo(tmp_path / "repo")
    repo.write("tests/test_slow.py", "def test_slow():\n    pass\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write(
        "tests/test_slow.py",
        "import subprocess\n\n\ndef test_slow():\n"
        f"    subprocess.run(['sleep', '3600.{len(mode)}717'])\n",
    )
    repo.commit("slow")
    needle = f"sleep 3600.{len(mode)}717"
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_BROKER_URL"}
    env.update({"VERIFY_DAG_STORE": str(tmp_path / "store"), sandbox.MODE_ENV: mode})
    submitted = subprocess.run(
        verify_branch(repo, "--depth=light", f"--broker={broker}", "--no-wait"),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert submitted.returncode == 0, submitted.stderr
    try:
        with workers(broker, ["doomed"], tmp_path / "logs", env) as (proc,):
            deadline = time.monotonic() + 120
            while not (suite := running(needle)):
                assert time.monotonic() < deadline, "the suite never started"
                time.sleep(0.2)
            os.killpg(proc.pid, signal.SIGKILL)
            if mode == "none":
                # Nothing ties the suite to the dead worker: it is still there, looked at by pid
                # at once (a worker that starts on this host, another test's too, ends it, so a
                # scan of /proc after the worker was reaped left another test's worker a window).
                assert [pid for pid in suite if alive(pid)]
            proc.wait(timeout=10)
        if mode != "none":
            # A sandbox dies with its parent.
            deadline = time.monotonic() + 10
            while running(needle) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert running(needle) == []
        # ... until a worker starts on this host.
        with workers(broker, ["successor"], tmp_path / "logs2", env):
            deadline = time.monotonic() + 10
            while running(needle) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert running(needle) == []
    finally:
        for pid in running(needle):
            os.kill(pid, signal.SIGKILL)


def test_a_worker_set_to_require_the_sandbox_refuses_to_start_without_it(broker: str) -> None:
    env = {**os.environ, sandbox.REQUIRE_ENV: "1", sandbox.MODE_ENV: "none"}
    proc = subprocess.run(
        [sys.executable, "-m", "verify_dag.cli", "worker", "--broker", broker],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 3
    assert proc.stderr.splitlines() == [
        "verify-dag: error: repository code must run in a bubblewrap sandbox (--require-sandbox "
        "or VERIFY_DAG_REQUIRE_SANDBOX) and this host offers none (install bubblewrap (Debian: "
        "apt-get install bubblewrap) on the worker hosts)"
    ]


def test_require_sandbox_on_a_broker_stops_at_a_worker_without_it(
    tmp_path: Path, broker: str
) -> None:
    repo = attacker(tmp_path / "attacker")
    env = {k: v for k, v in os.environ.items() if k != "VERIFY_DAG_BROKER_URL"}
    env.update({"VERIFY_DAG_STORE": str(tmp_path / "store"), sandbox.MODE_ENV: "none"})
    with workers(broker, ["unsandboxed"], tmp_path / "logs", env):
        rc, doc, err = verify(
            repo, tmp_path / "out.json", f"--broker={broker}", "--require-sandbox"
        )
    assert rc == 3, err
    assert doc["status"] == "error"
    assert "must run in a bubblewrap sandbox" in doc["error"]["message"]
    assert suite_result(doc)["status"] == "NOT_RUN"
    assert suite_detail(doc)["isolation"] is None


def test_a_step_reads_its_own_checkout_but_not_other_runs_or_projects_cached_data(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox_mode: str
) -> None:
    """Other runs' checkouts, other projects' tool caches and every cached result live in the
    cache the sandbox exposes for its environments: repository code sees only what its own
    step is given (its checkout, its writable scratch), never the rest."""
    from verify_dag import paths, processes, workspace
    from verify_dag.sandbox import Policy

    monkeypatch.setenv(paths.CACHE_VAR, str(tmp_path / "cache"))
    monkeypatch.delenv(paths.RESULT_CACHE_VAR, raising=False)
    repo.write("a.py", "print('mine')\n")
    sha = repo.commit("one")
    mine = workspace.ensure("this-run", repo.path, sha)
    theirs = workspace.ensure("other-run", repo.path, sha)
    secrets = {
        "another run's checkout": theirs / "a.py",
        "another project's tool cache": paths.tools_root() / "mypy" / "x" / "secret.json",
        "a cached result": paths.results_root() / "suite" / "ab" / "entry.json",
    }
    for path in secrets.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("not yours\n")
    env = processes.scrubbed_env()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    own = processes.run(["cat", "a.py"], cwd=mine, env=env, sandbox=Policy(writable=(scratch,)))
    assert own.stdout == "print('mine')\n", own.stderr
    for what, path in secrets.items():
        seen = processes.run(["cat", str(path)], cwd=mine, env=env, sandbox=Policy())
        assert seen.returncode != 0 and "not yours" not in seen.stdout, what
    # Read-only steps (ruff) see their checkout all the same, and the environments stay there.
    ro = processes.run(["cat", "a.py"], cwd=mine, env=env, sandbox=Policy(cwd_writable=False))
    assert ro.stdout == "print('mine')\n", ro.stderr
    listing = processes.run(["ls", str(paths.cache_root())], cwd=mine, env=env, sandbox=Policy())
    assert "runs" in listing.stdout.split()


def test_a_host_without_any_sandbox_refuses_unless_no_sandbox_is_passed(tmp_path: Path) -> None:
    """Neither bubblewrap nor unshare works (here: both fail, as in a container that forbids
    namespaces): a verification refuses in one line, exit 3, no report; with --no-sandbox it
    runs, and the report's first line says the code ran unconfined."""
    fakes = tmp_path / "bin"
    fakes.mkdir()
    for name in ("bwrap", "unshare"):
        (fakes / name).write_text("#!/bin/sh\necho 'no namespaces here' >&2\nexit 1\n")
        (fakes / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != sandbox.MODE_ENV}
    env["PATH"] = f"{fakes}{os.pathsep}{env['PATH']}"
    repo = attacker(tmp_path / "repo")
    out = tmp_path / "out.md"
    refused = subprocess.run(
        verify_branch(repo, "--depth=light", f"--output={out}"),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert refused.returncode == 3, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "verify-dag: error: this host offers no sandbox for repository code (neither bubblewrap "
        "nor unshare works here) (install bubblewrap (Debian: apt-get install bubblewrap), or "
        "pass --no-sandbox to run it unsandboxed)"
    ]
    assert not out.exists()
    ran = subprocess.run(
        verify_branch(repo, "--depth=light", "--no-sandbox", f"--output={out}"),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert ran.returncode in (0, 1, 4), ran.stderr
    first = out.read_text(encoding="utf-8").splitlines()[0]
    assert first == "# Verification Report (repository code ran WITHOUT a sandbox)"


def test_the_tools_refuse_a_host_without_a_sandbox_unless_no_sandbox_is_passed(
    tmp_path: Path,
) -> None:
    """The commands outside verify that run the repository's code (a completion criterion, a
    contract's CHECKs and --test command, shadow's test re-runs) refuse on a host with neither
    launcher unless --no-sandbox says otherwise, as verify does."""
    fakes = tmp_path / "bin"
    fakes.mkdir()
    for name in ("bwrap", "unshare"):
        (fakes / name).write_text("#!/bin/sh\necho 'no namespaces here' >&2\nexit 1\n")
        (fakes / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != sandbox.MODE_ENV}
    env["PATH"] = f"{fakes}{os.pathsep}{env['PATH']}"
    refused = (
        "verify-dag: error: this host offers no sandbox for repository code (neither bubblewrap "
        "nor unshare works here) (install bubblewrap (Debian: apt-get install bubblewrap), or "
        "pass --no-sandbox to run it unsandboxed)"
    )
    repo = make_repo(tmp_path / "repo")
    repo.write("tests/test_one.py", "def test_one():\n    assert 1 + 1 == 3\n")
    repo.commit("base")
    repo.git("tag", "base")
    repo.write("a.txt", "changed\n")
    repo.commit("change")
    contract = tmp_path / "CONTRACT.md"
    contract.write_text(
        "# Contract\n\n## REQUEST\nChange a.txt.\n\n## ACCEPTANCE CRITERIA\n"
        "1. a.txt says changed\n   CHECK: grep -q changed a.txt\n   EVIDENCE: pending\n\n"
        "## FILE SCOPE\n- a.txt\n\n## CLARIFICATIONS\n",
        encoding="utf-8",
    )
    runs = tmp_path / "runs"
    (runs / "r1").mkdir(parents=True)
    (runs / "r1" / "parsed_scope.json").write_text(
        json.dumps({"goal": "done", "completion": "true"}), encoding="utf-8"
    )
    findings = tmp_path / "findings.json"
    findings.write_text(
        json.dumps(
            {
                "findings": [
                    {
                        "title": "Test failed: tests/test_one.py::test_one",
                        "location": {"path": "tests/test_one.py", "line": 2},
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    commands = {
        "gates": ["gates", "run", str(contract), f"--repo={repo.path}"],
        "contract": [
            "contract",
            f"--contract={contract}",
            "--diff=base..HEAD",
            "--test=true",
            f"--repo={repo.path}",
        ],
        "completion": ["completion", "r1", f"--runs-dir={runs}", "--mode=full"],
    }
    for name, args in commands.items():
        proc = run_cli(*args, cwd=repo.path, env=env, timeout=300)
        assert (proc.returncode, proc.stderr.strip().splitlines()) == (3, [refused]), name
        ran = run_cli(*args, "--no-sandbox", cwd=repo.path, env=env, timeout=300)
        assert ran.returncode == 0, (name, ran.stdout, ran.stderr)
    # shadow: the claim that needs the test re-run is unverifiable, and says why.
    args = ["shadow", str(findings), f"--repo={repo.path}", "--all", "--format=json"]
    proc = run_cli(*args, cwd=repo.path, env=env, timeout=300)
    (claim,) = json.loads(proc.stdout)["claims"]
    assert claim["verdict"] == "UNVERIFIABLE", claim
    assert "offers no sandbox" in claim["detail"] and "--no-sandbox" in claim["detail"]
    ran = run_cli(*args, "--no-sandbox", cwd=repo.path, env=env, timeout=300)
    (claim,) = json.loads(ran.stdout)["claims"]
    assert claim["verdict"] == "CONFIRMED" and claim["method"] == "test", claim


VIEW_PROBE = """\
import json, os, sys

seen = {}
for path in sys.argv[1:]:
    entry = {"exists": os.path.exists(path)}
    try:
        with open(path, "rb") as fh:
            entry["read"] = len(fh.read(64)) if os.path.isfile(path) else "dir"
    except OSError as exc:
        entry["read"] = exc.strerror
    if os.path.isdir(path):
        entry["list"] = sorted(os.listdir(path))[:20] if os.access(path, os.R_OK) else None
        probe = os.path.join(path, ".verify-dag-probe")
        try:
            with open(probe, "w") as fh:
                fh.write("x")
            os.unlink(probe)
            entry["write"] = True
        except OSError as exc:
            entry["write"] = exc.strerror
    seen[path] = entry
seen["uid"] = [os.getuid(), os.getgid()]
seen["dev"] = sorted(os.listdir("/dev"))
seen["pids"] = len([p for p in os.listdir("/proc") if p.isdigit()]) < 5
print(json.dumps(seen, sort_keys=True))
"""


def test_the_unshare_fallback_gives_the_same_view_as_bubblewrap(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One plan, two launchers: what exists, what reads and what writes, path by path, is the
    same under bubblewrap and under unshare (the user's home and its secrets, the checkout, a
    writable scratch, the cache and its private parts, /tmp, /usr, the shadow file, /dev)."""
    from verify_dag import paths, processes, workspace
    from verify_dag.sandbox import Policy

    monkeypatch.setenv(paths.CACHE_VAR, str(tmp_path / "cache"))
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("key\n", encoding="utf-8")
    repo.write("a.py", "print('mine')\n")
    checkout = workspace.ensure("view-run", repo.path, repo.commit("one"))
    (paths.tools_root() / "mypy").mkdir(parents=True)
    envs = paths.cache_root() / "envs"
    envs.mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    probed = [
        "/",
        "/usr",
        "/etc/shadow",
        "/var/lib",
        "/tmp",
        "/run",
        str(home),
        str(home / ".ssh" / "id_rsa"),
        str(checkout),
        str(checkout / "a.py"),
        str(scratch),
        str(envs),
        str(paths.tools_root()),
        str(paths.runs_root()),
        str(Path(sys.prefix)),
    ]
    views = {}
    for mode in ("bubblewrap", "unshare"):
        monkeypatch.setenv(sandbox.MODE_ENV, mode)
        need_mode(mode)
        res = processes.run(
            [sys.executable, "-I", "-c", VIEW_PROBE, *probed],
            cwd=checkout,
            env=processes.scrubbed_env(),
            sandbox=Policy(writable=(scratch,)),
        )
        assert res.returncode == 0, (mode, res.stderr)
        views[mode] = json.loads(res.stdout)
    assert views["unshare"] == views["bubblewrap"]
    view = views["bubblewrap"]
    assert view["uid"] == [65534, 65534] and view["pids"]
    assert view[str(checkout)]["write"] is True and view[str(scratch)]["write"] is True
    assert view["/usr"]["write"] == view[str(envs)]["write"] == "Read-only file system"
    assert view[str(home / ".ssh" / "id_rsa")]["exists"] is False
    assert view["/etc/shadow"]["read"] == "Permission denied"  # the host's /dev/null, nodev
    assert view[str(paths.tools_root())]["list"] == []


TMP_PROBE = """\
import json, os, stat, sys

tmp = os.stat("/tmp")
mine = "/tmp/" + sys.argv[1]
with open(mine, "w") as fh:
    fh.write("x")
print(json.dumps({
    "tmp": [tmp.st_uid, stat.S_IMODE(tmp.st_mode)],
    "me": os.geteuid(),
    "mine": os.stat(mine).st_uid,
    "home": os.stat(os.environ["HOME"]).st_uid,
    "others": sorted(n for n in os.listdir("/tmp") if n.startswith("verify-dag-tmp-probe")),
}))
sys.exit(int(sys.argv[2]))
"""


def test_a_root_workers_sandbox_has_a_sticky_tmp_of_another_account_as_any_machine_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A suite runs as an ordinary user under a sticky /tmp root owns (filelock tests what a
    lock does under such a parent): a root worker maps a second uid for it. /tmp is still
    private to each command and size-limited, its mount shows nowhere on the host, and the
    command's exit code comes through the extra launcher."""
    from verify_dag import paths, processes
    from verify_dag.sandbox import Policy

    if os.geteuid() != 0:
        pytest.skip("only a root worker can map a second uid; this one is not root")
    monkeypatch.setenv(sandbox.MODE_ENV, "bubblewrap")
    need_mode("bubblewrap")
    monkeypatch.setenv(paths.CACHE_VAR, str(tmp_path / "cache"))
    seen = []
    for name, code in (("verify-dag-tmp-probe-a", 0), ("verify-dag-tmp-probe-b", 3)):
        res = processes.run(
            [sys.executable, "-I", "-c", TMP_PROBE, name, str(code)],
            cwd=tmp_path,
            env=processes.scrubbed_env(),
            sandbox=Policy(),
        )
        assert res.returncode == code, res.stderr
        seen.append(json.loads(res.stdout))
    first, second = seen
    assert first["me"] == sandbox.SANDBOX_UID
    assert first["tmp"] == [0, 0o1777]  # root's, sticky, as on the host
    assert first["mine"] == first["home"] == first["me"]  # what it writes and HOME stay its own
    assert first["others"] == ["verify-dag-tmp-probe-a"]
    assert second["others"] == ["verify-dag-tmp-probe-b"]  # the first one's /tmp went with it
    mounts = Path("/proc/self/mounts").read_text(encoding="utf-8")
    assert "sandbox-tmp" not in mounts
    assert not list((tmp_path / "cache" / "sandbox-tmp").iterdir())
    assert not list(Path("/tmp").glob("verify-dag-tmp-probe-*"))
    # The size limit holds on this /tmp as on bubblewrap's own.
    monkeypatch.setenv(sandbox.TMP_LIMIT_ENV, "1")
    fill = "open('/tmp/fill', 'wb').write(b'x' * 2 * 2**20)"
    res = processes.run(
        [sys.executable, "-I", "-c", fill],
        cwd=tmp_path,
        env=processes.scrubbed_env(),
        sandbox=Policy(),
    )
    assert res.returncode == 1 and "No space left on device" in res.stderr, res.stderr


def test_a_verify_dag_started_from_a_home_or_tmp_exposes_neither(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox_mode: str
) -> None:
    """``python -m verify_dag.cli`` puts its working directory first on sys.path, and the
    directories verify-dag's own imports need are exposed read-only: started from a home, the
    whole home (its secrets) was readable inside, and started from /tmp, the host's /tmp lay
    read-only over the sandbox's own, so that nothing could write there (uv: "Read-only file
    system" for its cache under HOME)."""
    from verify_dag import paths, processes
    from verify_dag.sandbox import Policy

    monkeypatch.setenv(paths.CACHE_VAR, str(tmp_path / "cache"))
    home = Path(os.environ["HOME"])
    secret = home / ".netrc"
    secret.write_text(f"{CANARY}\n", encoding="utf-8")
    monkeypatch.setattr(sys, "path", [str(home), "/tmp", *sys.path])
    probe = (
        "import os, sys\n"
        "try:\n    print(open(sys.argv[1]).read().strip())\nexcept OSError as exc:\n"
        "    print(exc.strerror)\n"
        "os.makedirs(os.path.expanduser('~/.cache/uv'))\nprint('wrote')\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    res = processes.run(
        [sys.executable, "-I", "-c", probe, str(secret)],
        cwd=work,
        env=processes.scrubbed_env(),
        sandbox=Policy(),
    )
    assert res.returncode == 0, res.stderr
    assert CANARY not in res.stdout
    assert res.stdout.splitlines() == ["No such file or directory", "wrote"]
