"""``verify``'s request: the flags checked, the repository's run settings applied
(verify_dag/settings.py), the files the request carries read, and whether anyone is attached to
answer interactive mode's questions."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from verify_dag import attended
from verify_dag.cli import args as cli_args
from verify_dag.errors import UsageError
from verify_dag.report import formats

if TYPE_CHECKING:
    from verify_dag.models.source import RepoSource


def _comment_density() -> str | None:
    """$VERIFY_DAG_COMMENT_DENSITY, checked here so a bad value is a usage error, not a
    comment-review that did not run on some worker."""
    from verify_dag import settings

    text = os.environ.get(settings.DENSITY_ENV, "").strip()
    if not text:
        return None
    settings.parse_density(text, f"environment {settings.DENSITY_ENV}")
    return text


def _criterion(value: str | None) -> str | None:
    """``--completion=CMD`` checked as the completion verifier's step 1 checks parsed_scope.json's
    field (docs/completion.md)."""
    if value is None:
        return None
    from verify_dag.phases.exerciser.criterion import problems, validate

    errors = validate(value)
    if errors:
        raise UsageError(f"--completion: {problems(errors)}")
    return value.strip()


def _unattended(args: argparse.Namespace, source: RepoSource) -> str | None:
    """Why interactive mode cannot ask anyone here, so it runs as report-only; None when it can.
    No prompt may ever block a pipeline (Phase 9)."""
    if args.mode != "interactive":
        return None
    if args.no_wait:
        return "--no-wait: nobody waits for the report"
    nobody = attended.nobody()
    if nobody is not None:
        return nobody
    if args.output == "-" or formats.for_machines_on_stdout(args.format):
        return "nobody attached (stdout is not a terminal)"
    if source.remote:
        return "the repository is a URL: there is no work tree to fix"
    return None


def run_settings(args: argparse.Namespace, source: RepoSource) -> dict[str, Any]:
    """The run settings a repository may make, flag first, then its [tool.verify-dag], then the
    default (verify_dag/settings.py); a repository named by URL has no table here to read."""
    from verify_dag import git, settings

    table: dict[str, Any] = {}
    where = ""
    if not source.remote:
        try:
            top = git.toplevel(source.location)
        except UsageError:
            top = None  # not a repository: the request's own checks say so, in their order
        if top is not None:
            table, where = settings.table(top)
    flags = {key: getattr(args, key.replace("-", "_")) for key in settings.REPO_SETTINGS}
    return settings.resolve(flags, table, where)


def build_request(args: argparse.Namespace) -> Any:
    from verify_dag import ledger, store
    from verify_dag.models import VerifyRequest
    from verify_dag.phases import scope

    source = cli_args.repo_arg(args.path)
    chosen = run_settings(args, source)
    for key, setting in chosen.items():
        setattr(args, key.replace("-", "_"), setting.value)
    if args.skip_ux and args.depth == "light":
        raise UsageError("--skip-ux is only valid with --depth=deep (light runs no ux-reviewer)")
    if args.no_wait and args.output:
        raise UsageError(
            "--output cannot be written by a --no-wait run; fetch the report later "
            "with: verify-dag report RUN_ID --output=PATH"
        )
    if args.output is not None and not args.output.strip():
        raise UsageError("--output: empty path")
    if formats.FORMATS[args.format].document and not args.output:
        raise UsageError(
            f"--format={args.format} requires --output=PATH (or --output=- for stdout)"
        )
    if args.mode == "auto-fix" and args.no_wait:
        raise UsageError("--mode=auto-fix applies fixes when the report is back: drop --no-wait")
    output = cli_args.new_output(args.output) if args.output else None
    files = tuple(f.strip() for f in args.files.split(",") if f.strip()) if args.files else ()
    if args.files is not None and not files:
        raise UsageError("--files: no file names given")
    ledger_path = cli_args.existing_file(args.ledger, "--ledger")
    epic_path = cli_args.existing_file(args.epic_context, "--epic-context")
    plan_path = cli_args.existing_file(args.plan_file, "--plan-file")
    contract_path = cli_args.existing_file(args.contract, "--contract")
    request = VerifyRequest(
        source=source,
        scope=args.scope,
        base=args.base,
        head=args.head,
        files=files,
        module=args.module,
        depth=args.depth,
        mode=args.mode,
        unattended=_unattended(args, source),
        format=args.format,
        output=output,
        fail_on=args.fail_on,
        new_only=args.new_only,
        allow_incomplete=args.allow_incomplete,
        fail_under=args.fail_under,
        since=args.since,
        ledger=ledger_path,
        no_carry_forward=args.no_carry_forward,
        epic_context=epic_path,
        plan_file=plan_path,
        ledger_data=ledger.load(ledger_path) if ledger_path else None,
        epic_text=cli_args.read_text(epic_path, "--epic-context"),
        plan_text=cli_args.read_text(plan_path, "--plan-file"),
        skip_ux=args.skip_ux,
        contract=contract_path,
        contract_text=cli_args.read_text(contract_path, "--contract"),
        skip_visual=args.skip_visual,
        require_sandbox=args.require_sandbox,
        no_sandbox=args.no_sandbox,
        no_cache=args.no_cache,
        auto_fix_threshold=args.auto_fix_threshold,
        test_timeout=args.test_timeout,
        per_test_timeout=args.per_test_timeout,
        tool_timeout=args.tool_timeout,
        completion=_criterion(args.completion),
        comment_density=_comment_density(),
        max_review_tokens=args.max_review_tokens,
        store=cli_args.store_dir(args.store),
        submitted=store.now(),
    )
    return scope.validate_request(request)
