"""``verify-dag config``: what a run from here would use, and where each setting came from: the
run settings (flag, repository, default), what the run would do in this repository (its
linters, type checkers and test command as triage finds them, the environment the suite runs
in, the skills of the depth), the broker and result backend, the store and cache paths, the
model backend of every skill that asks one, and the tools with their versions."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from typing import Any

from verify_dag.cli import args as cli_args

VERSION_TIMEOUT = 20.0


def add_parsers(sub: Any) -> None:
    """``sub`` is the subparsers action of the top-level parser."""
    c = sub.add_parser(
        "config",
        help="show what a run would use (backends, models, tools, broker, paths) and where "
        "each setting came from",
    )
    c.set_defaults(handler=cmd_config)
    c.add_argument("path", nargs="?", default=".", help="the repository (default: here)")
    cli_args.add_broker(c)
    cli_args.add_store(c)


def cmd_config(args: argparse.Namespace) -> int:
    sys.stdout.write(render(args))
    return 0


def render(args: argparse.Namespace) -> str:
    from verify_dag import git, paths, resultcache, settings, store
    from verify_dag.backends import config as backends
    from verify_dag.repos import MIRRORS_ENV, mirrors_dir
    from verify_dag.tasks.app import (
        REVIEW_RATE_ENV,
        broker_origin,
        result_backend_origin,
        review_rate_limit,
    )

    top = git.toplevel(args.path)
    table, where = settings.table(top)
    chosen = settings.resolve({}, table, where)
    out = [f"Repository: {top}", "", "Run settings (a flag wins over these):"]
    out += [f"  {key:<17} {_show(s.value):<10} {s.source}" for key, s in chosen.items()]
    out += ["", *would_run(top, str(chosen["depth"].value))]
    broker, broker_from = broker_origin(args.broker)
    backend, backend_from = result_backend_origin(broker)
    store_from = "--store" if args.store else _env_or_default(store.STORE_ENV)
    out += [
        "",
        f"Broker:          {git.display_source(broker)}  ({broker_from})",
        f"Result backend:  {git.display_source(backend)}  ({backend_from})",
        f"Report store:    {store.resolve(cli_args.store_dir(args.store))}  ({store_from})",
        f"Result cache:    {resultcache.root()}  ({_env_or_default(resultcache.CACHE_ENV)})",
        f"Mirrors:         {mirrors_dir()}  ({_env_or_default(MIRRORS_ENV)})",
        f"Run checkouts:   {paths.runs_root()}",
        "",
    ]
    cfg = backends.load_config(top)
    out.append("Model backends (per skill: backend, model, effort; where each came from):")
    for skill in backends.MODEL_SKILLS:
        out += _backend_lines(cfg, skill)
    out += [f"  note: {n}" for n in cfg.notes]
    rate = review_rate_limit()
    out.append(
        f"  review tasks' rate limit per worker: {rate}  (environment {REVIEW_RATE_ENV})"
        if rate
        else f"  review tasks' rate limit per worker: none  ({REVIEW_RATE_ENV} not set)"
    )
    out += [
        "",
        "Tools (verify-dag's own; a run uses the project's pinned or env copy where it has one):",
    ]
    out += [f"  {name:<9} {version:<34} {found}" for name, version, found in tools()]
    return "\n".join(out) + "\n"


def _backend_lines(cfg: Any, skill: str) -> list[str]:
    """One skill's backend, model and effort and where each came from; for a model API also
    its address, where its key would come from (never the key) and its call settings."""
    from verify_dag.backends import config as backends
    from verify_dag.errors import VerifyDagError

    said = backends.explain(cfg, skill)
    try:
        chosen = backends.resolve(cfg, skill)
    except VerifyDagError as exc:
        return [f"  {skill:<17} none ({exc.message}): the skill is NOT_RUN"]
    if chosen is None:
        return [f"  {skill:<17} none ({said['backend']}): the skill is NOT_RUN"]
    lines = [
        f"  {skill:<17} {chosen.kind} model={chosen.model or '-'} "
        f"effort={chosen.effort or '-'}  (backend: {said['backend']}; model: "
        f"{said['model']}; effort: {said['effort']})"
    ]
    if chosen.kind in backends.HTTP_KINDS:
        from verify_dag import git
        from verify_dag.backends import http

        url, url_from = http.base_url(chosen)
        if chosen.base_url:
            url_from = cfg.origin("base_url")
        key_from = http.key_source(chosen)
        if chosen.api_key_file:
            key_from += f" ({cfg.origin('api_key_file')})"
        lines.append(
            f"  {'':<17} url={git.display_source(url)} ({url_from}); key: "
            f"{key_from}; max-output-tokens={chosen.max_output_tokens} "
            f"retries={chosen.retries} timeout={chosen.timeout:g}s"
        )
    return lines


def would_run(top: Any, depth: str) -> list[str]:
    """The checks a run of this work tree would make, as triage finds them: each command with
    the declaration it came from, the environment the suite would run in, and the skills of
    ``depth``'s composition (a gated one runs only when the change calls for it)."""
    from verify_dag import skills
    from verify_dag.phases import triage

    toolchain = triage.discover(top)
    out = [f"What a run here would do (depth {depth}, read from the work tree):"]
    for kind in ("lint", "typecheck", "test"):
        for command in toolchain.of(kind):
            missing = "" if command.exists else "  [not installed]"
            out.append(f"  {kind:<10} {command.display()}  ({command.source}){missing}")
    if not toolchain.commands:
        out.append("  no linter, type checker or test command found")
    out.append(f"  test env   {_test_env(top, toolchain)}")
    out += [f"  note: {n}" for n in toolchain.notes]
    when = {
        "if-codex": "with Codex on PATH",
        "if-no-codex": "without Codex",
        "triage-gated": "when the change calls for it",
        "needs-plan": "with a plan",
        "needs-contract": "with a contract",
        "on-failure": "when a test or the exercise fails",
    }
    composed = []
    for name in skills.pipeline():
        gate = skills.gate(name, depth)  # type: ignore[arg-type]
        if gate is not None:
            composed.append(name if gate == "always" else f"{name} ({when.get(gate, gate)})")
    out.append(f"  skills     {', '.join(composed)}")
    return out


def _test_env(top: Any, toolchain: Any) -> str:
    """Who would build the environment the suite runs in: the env builders (env/registry.py)
    that find a declaration here, in the order they are tried; the first whose declared envs
    run tests builds it, which only running their tool can tell."""
    from pathlib import Path

    from verify_dag.phases.tester.env import registry

    if toolchain.test is None:
        return "none: no test command found"
    found = [b.NAME for b in registry.BUILDERS if b.declared(Path(top))]
    if not found:
        return "verify-dag's own interpreter: the project declares no environment or dependencies"
    tried = ", then ".join(found)
    return f"built by {tried} (the first that declares an env running the tests)"


def tools() -> list[tuple[str, str, str]]:
    from verify_dag import processes
    from verify_dag.tools import REGISTRY
    from verify_dag.tools.base import python_tool_argv

    rows: list[tuple[str, str, str]] = []
    analysers = [s.discovery.module for s in REGISTRY.values() if s.discovery is not None]
    for name in (*analysers, "pytest", "coverage", "tox", "nox", "uv"):
        argv = python_tool_argv(name)
        rows.append((name, *_version(argv, processes.run)))
    for name, flag in (("git", "--version"), ("bwrap", "--version"), ("chromium", "--version")):
        exe = shutil.which(name)
        rows.append((name, *_version([exe] if exe else None, processes.run, flag)))
    return rows


def _version(argv: list[str] | None, run: Any, flag: str = "--version") -> tuple[str, str]:
    if argv is None:
        return "not found", "-"
    where = " ".join(argv) if argv[0] == sys.executable else argv[0]
    try:
        # Not from the repository: tox reads the tox.ini of its working directory first and
        # prints what it thinks of that (an error, say) where its version should be.
        with tempfile.TemporaryDirectory(prefix="verify-dag-version-") as neutral:
            res = run([*argv, flag], timeout=VERSION_TIMEOUT, cwd=neutral)
    except OSError as exc:
        return f"cannot run: {exc.strerror}", where
    lines = (res.stdout + "\n" + res.stderr).strip().splitlines()
    # The line with the version: tox prints its own warnings first.
    said = next((x for x in lines if re.search(r"\d+\.\d+", x)), lines[0] if lines else "")
    return (said.strip()[:34] or f"exit {res.returncode}"), where


def _env_or_default(name: str) -> str:
    return f"environment {name}" if os.environ.get(name, "").strip() else "default"


def _show(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
