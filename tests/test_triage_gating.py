"""Phase 3 Job B on real repositories: assignments, gating and the reasons given for it."""

from __future__ import annotations

from pathlib import Path

from conftest import Repo

from verify_dag.models import RunState, TriageResult, VerifyRequest
from verify_dag.models.request import Depth
from verify_dag.models.source import parse_source
from verify_dag.phases import scope as scope_phase
from verify_dag.phases.triage import gating

CLI_BASE = (
    "import argparse\n\n\n"
    "def parser() -> argparse.ArgumentParser:\n"
    "    p = argparse.ArgumentParser()\n"
    "    p.add_argument('--name')\n"
    "    return p\n"
)
CORE_BASE = "def total(xs):\n    out = 0\n    for x in xs:\n        out += x\n    return out\n"


def _triage(repo: Repo, depth: Depth = "deep", **flags: bool) -> TriageResult:
    """Scope the branch against the ``base`` tag and run Job B on the checked-out head."""
    req = VerifyRequest(
        source=parse_source(str(repo.path)), scope="branch", base="base", depth=depth, **flags
    )
    state = RunState(run_id="r", request=req, scope=scope_phase.run(req))
    return gating.run(state, repo.path)


def _base(repo: Repo) -> None:
    repo.write("src/cli.py", CLI_BASE)
    repo.write("src/core.py", CORE_BASE)
    repo.write("config/app.json", '{"port": 8000}\n')
    repo.commit("base")
    repo.git("tag", "base")


def test_light_gives_every_light_skill_all_scoped_files_and_no_gating(repo: Repo) -> None:
    _base(repo)
    repo.write("src/core.py", CORE_BASE.replace("out = 0", "out = 0  # start"))
    repo.write("src/new.py", "X = 1\n")
    repo.git("rm", "-q", "config/app.json")
    repo.commit("change")
    result = _triage(repo, depth="light")
    assert not result.job_b and result.gating == {}
    assert set(result.skill_assignments) == {"tester", "reviewer", "codex-reviewer"}
    # Deleted files are not part of the scoped file list.
    assert all(
        files == ("src/core.py", "src/new.py") for files in result.skill_assignments.values()
    )


def test_cli_help_change_gates_ux_in_with_the_file_named(repo: Repo) -> None:
    _base(repo)
    repo.write(
        "src/cli.py",
        CLI_BASE.replace(
            "p.add_argument('--name')", "p.add_argument('--name', help='who to greet')"
        ),
    )
    repo.commit("help")
    result = _triage(repo)
    assert result.job_b
    ux = result.gating["ux-reviewer"]
    assert ux.applies and ux.files == ("src/cli.py",)
    assert "CLI help text modified in src/cli.py" in ux.reason and "help=" in ux.reason
    assert result.skill_assignments["ux-reviewer"] == ("src/cli.py",)
    for skill in gating.ALWAYS_ON:
        assert result.skill_assignments[skill] == ("src/cli.py",)
    visual = result.gating["visual-verify"]
    assert not visual.applies and visual.reason.startswith("no UI-rendering files in scope")


def test_internal_refactor_skips_ux_even_in_a_file_with_output_elsewhere(repo: Repo) -> None:
    _base(repo)
    # The unchanged part of the file prints; the changed lines are a pure refactor.
    repo.write("src/core.py", CORE_BASE + "\n\ndef show(xs):\n    print(total(xs))\n")
    repo.commit("show")
    repo.git("tag", "-f", "base")
    repo.write(
        "src/core.py",
        CORE_BASE.replace(
            "    out = 0\n    for x in xs:\n        out += x\n    return out\n",
            "    return sum(xs)\n",
        )
        + "\n\ndef show(xs):\n    print(total(xs))\n",
    )
    repo.commit("refactor")
    ux = _triage(repo).gating["ux-reviewer"]
    assert not ux.applies and ux.files == ()
    assert "no user-facing surface" in ux.reason and "1 file(s)" in ux.reason


def test_error_message_and_warning_log_are_user_facing(repo: Repo) -> None:
    _base(repo)
    guard = "    if not xs:\n        raise ValueError('nothing to add')\n"
    repo.write("src/core.py", CORE_BASE.replace("    out = 0\n", guard + "    out = 0\n"))
    repo.write(
        "src/jobs.py",
        "import logging\nlog = logging.getLogger()\n\n\n"
        "def run():\n    log.warning('disk almost full')\n",
    )
    repo.commit("messages")
    ux = _triage(repo).gating["ux-reviewer"]
    assert ux.applies and ux.files == ("src/core.py", "src/jobs.py")
    assert "user-facing error message modified in src/core.py" in ux.reason
    assert "user-visible log output modified in src/jobs.py" in ux.reason


def test_tsx_component_gates_visual_in_but_a_types_only_tsx_does_not(repo: Repo) -> None:
    _base(repo)
    repo.write(
        "src/Button.tsx",
        "export function Button({label}: {label: string}) {\n"
        '  return <button className="primary">{label}</button>;\n}\n',
    )
    repo.write("src/types.tsx", "export type Props = { items: Array<string> };\n")
    repo.commit("ui")
    result = _triage(repo)
    visual = result.gating["visual-verify"]
    assert visual.applies and visual.files == ("src/Button.tsx",)
    assert "JSX markup in src/Button.tsx" in visual.reason
    assert result.skill_assignments["visual-verify"] == ("src/Button.tsx",)
    ux = result.gating["ux-reviewer"]
    assert ux.applies and ux.files == ("src/Button.tsx",)  # a UI component is a user surface


def test_json_config_does_not_gate_visual_in(repo: Repo) -> None:
    _base(repo)
    repo.write("config/app.json", '{"port": 8080}\n')
    repo.commit("config")
    visual = _triage(repo).gating["visual-verify"]
    assert not visual.applies
    assert visual.reason == "no UI-rendering files in scope (config/app.json is configuration)"


def test_stylesheet_and_public_asset_gate_visual_in(repo: Repo) -> None:
    _base(repo)
    repo.write("web/site.css", "body { margin: 0; }\n")
    repo.write("public/logo.png", b"\x89PNG\r\n\x1a\n\0\0binary")
    repo.commit("style")
    visual = _triage(repo).gating["visual-verify"]
    assert visual.applies and set(visual.files) == {"web/site.css", "public/logo.png"}
    assert "stylesheet in web/site.css" in visual.reason


def test_skip_flags_force_skips_and_keep_triages_finding(repo: Repo) -> None:
    _base(repo)
    repo.write(
        "src/cli.py",
        CLI_BASE.replace(
            "p.add_argument('--name')", "p.add_argument('--name', help='who to greet')"
        ),
    )
    repo.write("src/App.jsx", "export const App = () => <main><h1>Hi</h1></main>;\n")
    repo.commit("both")
    result = _triage(repo, skip_ux=True, skip_visual=True)
    ux, visual = result.gating["ux-reviewer"], result.gating["visual-verify"]
    assert not ux.applies and ux.reason.startswith("--skip-ux (triage: ")
    assert "CLI help text modified in src/cli.py" in ux.reason
    assert not visual.applies and visual.reason.startswith("--skip-visual (triage: ")
    assert "JSX markup in src/App.jsx" in visual.reason
    assert result.skill_assignments["ux-reviewer"] == ()
    assert result.skill_assignments["visual-verify"] == ()


def test_skip_visual_without_ui_files_still_says_why(repo: Repo) -> None:
    _base(repo)
    repo.write("src/core.py", CORE_BASE.replace("out = 0", "out = 0  # start"))
    repo.commit("change")
    visual = _triage(repo, skip_visual=True).gating["visual-verify"]
    assert visual.reason == "--skip-visual (triage: no UI-rendering files in scope)"


def test_scope_all_runs_every_skill_on_everything(repo: Repo) -> None:
    _base(repo)
    req = VerifyRequest(source=parse_source(str(repo.path)), scope="all", depth="deep")
    state = RunState(run_id="r", request=req, scope=scope_phase.run(req))
    result = gating.run(state, Path("/nonexistent"))  # nothing is read at --scope=all
    assert result.gating["ux-reviewer"].applies and result.gating["visual-verify"].applies
    assert "--scope=all" in result.gating["ux-reviewer"].reason
    assert set(result.skill_assignments["visual-verify"]) == {
        "src/cli.py",
        "src/core.py",
        "config/app.json",
    }
