"""node dependencies for a suite run by npm, npx, yarn, pnpm or node: from package.json."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

from verify_dag import processes
from verify_dag.files import file_lock
from verify_dag.phases.tester.env.base import MARKER, RECIPE, Env, pip_env, redacted, tail
from verify_dag.sandbox import Policy

RUNNERS = frozenset({"npm", "npx", "yarn", "pnpm", "node"})


def node(workdir: Path, cache: Path, timeout: float) -> Env:
    """npm ci (npm install without a lockfile). node_modules is cached by the lockfile's hash and
    linked into the worktree only when that is safe: no workspaces, no local file: packages and
    no install scripts of the project's own, which would have to run in the worktree itself."""
    if shutil.which("npm") is None:
        return Env(notes=("npm is not on PATH: node dependencies were not installed",))
    lock = workdir / "package-lock.json"
    pkg = json.loads((workdir / "package.json").read_text(encoding="utf-8"))
    specs = [str(v) for k in ("dependencies", "devDependencies") for v in pkg.get(k, {}).values()]
    hooks = set(pkg.get("scripts", {})) & {"preinstall", "install", "postinstall", "prepare"}
    local = any(v.startswith(("file:", "link:", "workspace:")) for v in specs)
    if not lock.is_file() or "workspaces" in pkg or hooks or local:
        verb = "ci" if lock.is_file() else "install"
        res = processes.run(
            ["npm", verb, "--no-audit", "--no-fund"],
            cwd=workdir,
            timeout=timeout,
            env=pip_env(),
            sandbox=Policy(network=True),
        )
        error = None if res.returncode == 0 else redacted(f"npm {verb} failed: {tail(res)}")
        return Env(
            source=f"package.json (npm {verb})",
            error=error,
            notes=(f"npm {verb} ran in the worktree: node_modules not cached",),
        )
    key = hashlib.sha256(
        RECIPE.encode() + (workdir / "package.json").read_bytes() + lock.read_bytes()
    ).hexdigest()
    target = cache / key[:24]
    cache.mkdir(parents=True, exist_ok=True)
    with file_lock(cache / f"{key[:24]}.lock", time.monotonic() + timeout) as got:
        reused = (target / MARKER).is_file()
        if got and not reused:
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            shutil.copy2(workdir / "package.json", target)
            shutil.copy2(lock, target)
            res = processes.run(
                ["npm", "ci", "--no-audit", "--no-fund"],
                cwd=target,
                timeout=timeout,
                env=pip_env(),
                sandbox=Policy(network=True),
            )
            if res.returncode != 0:
                return Env(
                    key=key,
                    source="package-lock.json",
                    error=redacted(f"npm ci failed: {tail(res)}"),
                )
            (target / "node_modules").mkdir(exist_ok=True)  # npm ci makes none without deps
            (target / MARKER).write_text("ok", encoding="utf-8")
    if not (target / MARKER).is_file():
        return Env(key=key, source="package-lock.json", error="timed out waiting for npm ci")
    if not (workdir / "node_modules").exists():
        (workdir / "node_modules").symlink_to(target / "node_modules", target_is_directory=True)
    return Env(key=key, reused=reused, source="package-lock.json (npm ci, cached)")
