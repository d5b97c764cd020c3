"""The CI examples (examples/ci/) and the pre-commit hook (.pre-commit-hooks.yaml).

No GitHub or GitLab runs here: actionlint lints the workflow and check-jsonschema validates the
GitLab job against GitLab's schema, each also shown a bad file so a mute linter cannot pass. The
hook runs for real, through `pre-commit run` with a `.pre-commit-config.yaml` naming this
project's work tree at a commit, as a project adopts it, on repositories made in tmp_path.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Repo, calc_base, make_repo

ROOT = Path(__file__).resolve().parent.parent
GITHUB = ROOT / "examples" / "ci" / "github-actions.yml"
GITLAB = ROOT / "examples" / "ci" / "gitlab-ci.yml"
HOOK_ID = "verify-dag"


def tool(name: str) -> str:
    """An executable installed with this interpreter (the dev extra), else one on PATH. A missing
    one skips the test, except under CI, where a skip would hide a broken setup: it fails."""
    here = Path(sysconfig.get_path("scripts")) / name
    if here.is_file():
        return str(here)
    found = shutil.which(name)
    if found:
        return found
    reason = f"{name} is not installed: pip install -e '.[dev]'"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


# --- GitHub Actions ---------------------------------------------------------------------------


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    # cwd is the file's directory: actionlint would otherwise read the configuration of the
    # repository it stands in.
    return subprocess.run(
        [tool("actionlint"), "-no-color", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=path.parent,
    )


def test_actionlint_finds_nothing_in_the_github_workflow() -> None:
    proc = actionlint(GITHUB)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_actionlint_is_not_mute(tmp_path: Path) -> None:
    # The two mistakes the workflow avoids: a pull request's text spliced into a script, and the
    # last step reading the exit code of a step id that does not exist.
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: pull_request\n"
        "jobs:\n"
        "  verify:\n"
        "    runs-on: ubuntu-latest\n"
        "    steps:\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n"
        "      - run: exit ${{ steps.verify.outputs.code }}\n",
        encoding="utf-8",
    )
    proc = actionlint(bad)
    assert proc.returncode == 1
    assert "potentially untrusted" in proc.stdout
    assert 'property "verify" is not defined' in proc.stdout


def test_the_github_job_fails_with_verify_dag_after_uploading_its_findings() -> None:
    steps: list[dict[str, Any]] = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))["jobs"][
        "verify"
    ]["steps"]
    (verify,) = [s for s in steps if s.get("id") == "verify"]
    command = shlex.split(verify["run"].replace("\\\n", " "), comments=True)
    assert "--format=sarif" in command and "--output=verify-dag.sarif" in command
    (sarif,) = [
        s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif")
    ]
    (artifact,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert sarif["with"]["sarif_file"] == "verify-dag.sarif"
    assert "verify-dag.sarif" in artifact["with"]["path"].split()
    # Both uploads run after a failed verification; the job's result comes last, from its code.
    assert sarif["if"].startswith("always()") and artifact["if"] == "always()"
    assert steps[-1]["env"]["CODE"] == "${{ steps.verify.outputs.code }}"
    assert steps.index(verify) < steps.index(sarif) < steps.index(artifact) < len(steps) - 1


def pull_request(tmp_path: Path, test_mul: str) -> Path:
    """A clone as a CI checkout leaves it: origin (a bare repository) has ``main`` with the
    calculator; the clone, fetched in full, is on a pull request's branch that adds ``mul`` and
    a test of it."""
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    author = staged_change(make_repo(tmp_path / "author"), test_mul)
    author.commit("mul")
    author.git("remote", "add", "origin", str(origin))
    author.git("push", "-q", "origin", "base:refs/heads/main", "HEAD:refs/heads/feature")
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", "-b", "feature", str(origin), str(clone)], check=True)
    return clone


def ci_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """What a runner gives the job: this interpreter's verify-dag first on PATH, no model
    backend of the developer's, and the variables the job reads."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERIFY_DAG_BACKEND", "VERIFY_DAG_MODEL", "ANTHROPIC_", "OPENAI_"))
        and k != "VERIFY_DAG_BROKER_URL"
    }
    env["PATH"] = f"{sysconfig.get_path('scripts')}{os.pathsep}{env['PATH']}"
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    return {**env, **extra}


def run_script(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # As GitHub runs a step's `run:` (bash --noprofile --norc -eo pipefail), and GitLab a job's
    # script lines (one shell, stopping at the first failing line).
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize(
    ("assertion", "code"), [("assert mul(3, 4) == 12", "0"), ("assert mul(3, 4) == 13", "1")]
)
def test_the_github_job_as_a_runner_runs_it_without_a_model_key(
    tmp_path: Path, assertion: str, code: str
) -> None:
    """A new user's first pull request, with no ANTHROPIC_API_KEY secret: the job's own steps
    give exit 0 for a clean change and 1 for a failing test (not 4 for every pull request), and
    leave the SARIF and the summary for the upload steps."""
    steps = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))["jobs"]["verify"]["steps"]
    (verify,) = [s for s in steps if s.get("id") == "verify"]
    clone = pull_request(tmp_path, assertion)
    outputs, summary = tmp_path / "github-output", tmp_path / "summary.md"
    env = ci_env(
        tmp_path,
        BASE_REF="main",
        RUNNER_TEMP=str(tmp_path / "runner-temp"),
        GITHUB_OUTPUT=str(outputs),
        GITHUB_STEP_SUMMARY=str(summary),
        ANTHROPIC_API_KEY="",  # a secret the repository does not have is empty
    )
    ran = run_script(verify["run"], clone, env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "::notice::no ANTHROPIC_API_KEY secret" in ran.stdout
    assert outputs.read_text(encoding="utf-8") == f"code={code}\n"
    assert (clone / "verify-dag.sarif").is_file() and (clone / "verify-dag.md").is_file()
    assert summary.read_text(encoding="utf-8").startswith("# Verification Report")
    last = run_script(steps[-1]["run"], clone, {**env, "CODE": code})
    assert last.returncode == int(code)


def test_the_github_job_reviews_with_the_key_when_the_secret_is_set(tmp_path: Path) -> None:
    """With the secret, the judgement reviewer runs (here against a local fake of the Messages
    API) and --allow-incomplete is not passed: a check that did not run fails the job (this
    calculator declares no way to exercise it: the exerciser's BLOCKED is the one, exit 4)."""
    from fakes.fake_api import FakeAPI

    steps = yaml.safe_load(GITHUB.read_text(encoding="utf-8"))["jobs"]["verify"]["steps"]
    (verify,) = [s for s in steps if s.get("id") == "verify"]
    clone = pull_request(tmp_path, "assert mul(3, 4) == 12")
    outputs = tmp_path / "github-output"
    with FakeAPI("sk-ant-test-key") as api:
        api.reply = '{"findings": []}'
        env = ci_env(
            tmp_path,
            BASE_REF="main",
            RUNNER_TEMP=str(tmp_path / "runner-temp"),
            GITHUB_OUTPUT=str(outputs),
            GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
            ANTHROPIC_API_KEY="sk-ant-test-key",
            ANTHROPIC_BASE_URL=api.url,
        )
        ran = run_script(verify["run"], clone, env)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert api.requests, "the reviewer never called the model"
    report = (clone / "verify-dag.md").read_text(encoding="utf-8")
    assert "| reviewer | COMPLETED |" in report, report
    said = outputs.read_text(encoding="utf-8")
    missing = re.search(r"\*\*Did not run:\*\* (.*)", report)
    assert said == "code=0\n" or (
        said == "code=4\n" and missing and missing.group(1).startswith("exerciser BLOCKED")
    ), report
    assert "sk-ant-test-key" not in report


# --- GitLab CI --------------------------------------------------------------------------------


def check_gitlab_schema(path: Path) -> subprocess.CompletedProcess[str]:
    # check-jsonschema vendors GitLab's own CI schema: no network needed.
    return subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.gitlab-ci", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_gitlab_job_reports_code_quality_from_the_verify_command(tmp_path: Path) -> None:
    job = yaml.safe_load(GITLAB.read_text(encoding="utf-8"))["verify-dag"]
    report = job["artifacts"]["reports"]["codequality"]
    assert report == "gl-code-quality-report.json"
    assert job["artifacts"]["when"] == "always"  # a failing verification keeps its report
    (verify,) = [shlex.split(line) for line in job["script"] if line.startswith("verify-dag ")]
    assert verify[:2] == ["verify-dag", "verify"]
    assert "--format=gitlab" in verify and f"--output={report}" in verify
    assert str(job["variables"]["GIT_DEPTH"]) == "0"
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]

    proc = check_gitlab_schema(GITLAB)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "verify-dag:\n  script: [echo]\n  artifacts:\n    when: sometimes\n", encoding="utf-8"
    )
    assert check_gitlab_schema(bad).returncode == 1


def test_the_gitlab_job_as_a_runner_runs_it_without_a_model_key(tmp_path: Path) -> None:
    """The job's script lines, as a merge request pipeline runs them with no ANTHROPIC_API_KEY
    variable: the target branch fetched, a clean change verified, exit 0 (not 4), and the Code
    Quality report written."""
    job = yaml.safe_load(GITLAB.read_text(encoding="utf-8"))["verify-dag"]
    clone = pull_request(tmp_path, "assert mul(3, 4) == 12")
    env = ci_env(tmp_path, CI_MERGE_REQUEST_TARGET_BRANCH_NAME="main")
    ran = run_script("\n".join(job["script"]), clone, env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "no ANTHROPIC_API_KEY: no judgement reviewer" in ran.stdout
    quality = json.loads((clone / "gl-code-quality-report.json").read_text(encoding="utf-8"))
    assert isinstance(quality, list)


# --- the pre-commit hook ----------------------------------------------------------------------


def _git(cwd: Path, *args: str, env: dict[str, str]) -> bytes:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=120
    ).stdout


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This project as its work tree stands, committed in a repository of its own: a project's
    configuration names a repository and a commit, and the work tree's files not yet committed
    (the hook manifest among them, while it is being changed) must be in that commit."""
    base = tmp_path_factory.mktemp("hook-repo")
    dest = base / "verify-dag"
    # Session fixtures are made before the per-test isolation: git must not read the user's
    # configuration (hooks, signing) here either.
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env.pop("GIT_DIR", None)
    listed = _git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard", env=env)
    for rel in filter(None, listed.decode().split("\0")):
        src, copy = ROOT / rel, dest / rel
        copy.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():  # verify_dag/schemas -> ../schemas, kept a link as git keeps it
            copy.symlink_to(os.readlink(src))
        elif src.is_file():  # else deleted in the work tree, not yet in the index
            shutil.copy2(src, copy)
    _git(base, "init", "-q", "-b", "main", str(dest), env=env)
    _git(dest, "add", "-A", env=env)
    _git(
        dest,
        "-c",
        "user.name=Test User",
        "-c",
        "user.email=test@example.com",
        "commit",
        "-q",
        "--no-verify",
        "-m",
        "verify-dag's work tree",
        env=env,
    )
    return dest


@pytest.fixture(scope="session")
def hook_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pre-commit's store (PRE_COMMIT_HOME) and pip's cache, shared by the hook's tests: the
    hook's environment is installed once per repository and rev, as on a developer's machine,
    and the second test uses it (this module's tests share one xdist worker, tests/conftest.py)."""
    return tmp_path_factory.mktemp("pre-commit-store")


def run_hook(fixture: Repo, hook_store: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``pre-commit run`` of the hook on the fixture's staged change, as a commit runs it."""
    env = {
        **os.environ,
        # pre-commit's own store (its log, its repositories, the hook's virtualenv), never in
        # ~/.cache.
        "PRE_COMMIT_HOME": str(hook_store / "pre-commit"),
        "PIP_CACHE_DIR": str(hook_store / "pip"),
        "TMPDIR": str(tmp_path),
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [tool("pre-commit"), "run", HOOK_ID, "--verbose"],
        cwd=fixture.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
    )


def with_the_hook(repo: Repo, hook_repo: Path) -> Repo:
    """``repo`` with a committed .pre-commit-config.yaml using the hook from ``hook_repo`` at its
    commit, as a project adopts it (``repo:`` and ``rev:``)."""
    rev = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=hook_repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    config = {"repos": [{"repo": str(hook_repo), "rev": rev, "hooks": [{"id": HOOK_ID}]}]}
    repo.write(".pre-commit-config.yaml", yaml.safe_dump(config, sort_keys=False))
    repo.commit("pre-commit: verify-dag")
    return repo


def staged_change(repo: Repo, test_mul: str) -> Repo:
    """The calculator at ``base`` with ``mul`` and a test of it staged, nothing committed."""
    calc_base(repo)
    repo.write(
        "src/calc.py", "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
    )
    repo.write(
        "tests/test_calc.py",
        "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
        f"def test_mul():\n    {test_mul}\n",
    )
    repo.git("add", "-A")
    return repo


# The first run installs verify-dag and its dependencies into the hook's virtualenv: about 25 s
# with a package index nearby, minutes without one; pytest's default limit is 300 s.
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("assertion", "rc", "status", "said"),
    [
        # Its verdict, shown by --verbose: one line, not the whole report.
        ("assert mul(3, 4) == 12", 0, "Passed", ("verify-dag: pass (exit 0)",)),
        # pre-commit's "- exit code: 1": issues found, not a verification error (3); the issue
        # at the gate on a line of its own, as linters print theirs.
        (
            "assert mul(3, 4) == 13",
            1,
            "Failed",
            (
                "- exit code: 1",
                "verify-dag: issues found (exit 1): 1 issue(s) at severity 7+",
                "tests/test_calc.py:8: [9] Test failed: tests/test_calc.py::test_mul (tester)",
            ),
        ),
    ],
    ids=["clean", "failing-test"],
)
def test_the_hook_on_a_staged_change(
    tmp_path: Path,
    hook_repo: Path,
    hook_store: Path,
    assertion: str,
    rc: int,
    status: str,
    said: tuple[str, ...],
) -> None:
    fixture = staged_change(with_the_hook(make_repo(tmp_path / "fixture"), hook_repo), assertion)
    proc = run_hook(fixture, hook_store, tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == rc, output
    assert re.search(rf"^{HOOK_ID}\.+{status}$", output, re.M), output
    assert all(text in output for text in said), output
    assert "# Verification Report" not in output and "## Issues Found" not in output, output
