"""Tools whose PyPI package downloads the rest of itself on first run.

The ``pyright`` package on PyPI is a wrapper: its first run installs the npm package of the same
version with npm, into a cache under HOME. Repository code (and a linter a project declares is
that) runs in a sandbox with a private HOME and no network, so every run would try that download
again and fail after npm's retries (70 s seen on click 8.1.8's typing env), reporting a tool that
could not run when it only could not fetch itself. So the download happens once, when the env
that holds the wrapper is provisioned (with the index, like every install), into verify-dag's
cache, and every run of the tool reads it there. A download that fails is the provisioning's
failure, said once with npm's reason, never retried by each run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from verify_dag import processes
from verify_dag.paths import cache_root
from verify_dag.sandbox import Policy

# The wrapper's console script -> how to make its first run happen (a harmless command).
WARM: Mapping[str, tuple[str, ...]] = {"pyright": ("--version",)}


def variables(cache: Path | None = None) -> dict[str, str]:
    """What every run of such a tool needs in its environment: where the download lives, and
    no check for a newer release (a network call that only prints a warning)."""
    root = cache if cache is not None else cache_root()
    return {
        "PYRIGHT_PYTHON_CACHE_DIR": str(root / "pyright"),
        "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1",
    }


def warm(bin_dir: Path, cache: Path, timeout: float) -> str | None:
    """Run each fetching wrapper in ``bin_dir`` once with the index reachable, so its download
    is in the cache; why one could not fetch itself, or None."""
    for script, args in WARM.items():
        exe = bin_dir / script
        if not exe.is_file() or _fetched(bin_dir, cache):
            continue
        target = Path(variables(cache)["PYRIGHT_PYTHON_CACHE_DIR"])
        target.mkdir(parents=True, exist_ok=True)
        env = processes.scrubbed_env(variables(cache))
        env["PATH"] = f"{bin_dir}:{env.get('PATH', '')}"
        res = processes.run(
            [str(exe), *args],
            timeout=timeout,
            env=env,
            sandbox=Policy(network=True, writable=(target,)),
        )
        if res.returncode != 0 or res.timed_out:
            said = "\n".join((res.stdout + res.stderr).strip().splitlines()[-6:])
            return f"{script} could not fetch its npm package: {processes.redact(said)}"
    return None


def _fetched(bin_dir: Path, cache: Path) -> bool:
    """Whether the npm package of the env's pyright version is in the cache already (its first
    run there left ``pyright-python/<version>/node_modules/pyright``)."""
    sites = sorted((bin_dir.parent / "lib").glob("python*/site-packages"))
    versions = [
        d.name.removeprefix("pyright-").removesuffix(".dist-info")
        for site in sites
        for d in site.glob("pyright-*.dist-info")
    ]
    root = Path(variables(cache)["PYRIGHT_PYTHON_CACHE_DIR"]) / "pyright-python"
    return bool(versions) and all(
        (root / v / "node_modules" / "pyright" / "package.json").is_file() for v in versions
    )
