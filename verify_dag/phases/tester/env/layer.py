"""The project itself, installed editable over a cached env for one run (see the package's
docstring): a venv of its own that sees the cached env's site-packages, with the project
installed from the run's checkout by uv (pip where uv cannot). Made once per run and checkout
on a host, beside the checkout (:mod:`verify_dag.workspace`), and shared by the static tools,
the suite and the exerciser.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import re
import shutil
import sys
import sysconfig
from dataclasses import replace
from pathlib import Path

from verify_dag import processes
from verify_dag.files import file_lock, write_atomic
from verify_dag.phases.tester.env.base import (
    Env,
    env_from_json,
    env_json,
    pip_env,
    redacted,
    tail,
    throwaway_uv,
    uv_bin,
    uv_env,
)
from verify_dag.sandbox import Policy


def for_run(env: Env, workdir: Path, home: Path) -> Env:
    """The run's layer over ``env`` for its checkout ``workdir``: made by the first phase that
    needs it, reused by the others (an install that failed is not tried again in the run)."""
    dest, marker = home / "layer", home / "layer.json"
    with file_lock(home / "layer.lock"):
        try:
            return env_from_json(json.loads(marker.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        shutil.rmtree(dest, ignore_errors=True)
        made = layer(env, workdir, dest)
        write_atomic(marker, json.dumps(env_json(made)).encode("utf-8"))
        return made


def layer(env: Env, workdir: Path, dest: Path, timeout: float = 900) -> Env:
    """A per-run venv over the cached ``env`` with the project installed editable from
    ``workdir``. The cached env's site-packages is added with ``site.addsitedir`` from a .pth
    file, so its own .pth files (editable dependencies, namespace packages) still work."""
    assert env.python is not None and env.bin_dir is not None
    res = processes.run(
        [sys.executable, "-m", "venv", "--without-pip", str(dest)], timeout=timeout, env=pip_env()
    )
    if res.returncode != 0:
        return replace(env, error=redacted(f"could not create the run venv: {tail(res)}"))
    (site_dir(dest) / "_verify_dag_base.pth").write_text(
        f"import site; site.addsitedir({str(site_dir(env.bin_dir.parent))!r})\n", encoding="utf-8"
    )
    python = dest / "bin" / "python"
    # --no-deps: the dependencies are in the cached env already. The build files an editable
    # install leaves in the checkout (egg-info, build/) are the run's own. The project's build
    # backend runs here: sandboxed, with the index but no credentials.
    # The cached env is read by name: the layer sees its site-packages (the build requirements
    # among them) through the .pth above, wherever the cache lives.
    cached = (env.bin_dir.parent,)
    offline = Policy(writable=(dest,), readable=cached)
    build = Policy(network=True, writable=(dest,), readable=cached)
    tries = [
        # uv first: no pip start-up, and no isolated build when the cached env holds the
        # project's build requirements (it does, see _build); pip where uv cannot (a backend
        # without PEP 660 editable hooks, which only pip's legacy path installs). The first
        # needs no index (no dependencies, no build env to fetch), so it goes without the
        # index's proxy and its relay: 0.44 s against 0.61 s for tomlkit's; an install that
        # needed it after all is tried again, with it, by the next.
        (
            [
                uv_bin(),
                "pip",
                "install",
                "--python",
                str(python),
                "--no-deps",
                "--no-build-isolation",
            ],
            offline,
        ),
        ([uv_bin(), "pip", "install", "--python", str(python), "--no-deps"], build),
        ([*pip(python), "install", "--no-deps", "--no-build-isolation"], build),
        ([*pip(python), "install", "--no-deps"], build),
    ]
    # uv's cache a private one in the run venv (the build runs the project's code), removed
    # with the install.
    with throwaway_uv(dest) as uv_cache:
        for argv, policy in tries:
            uv = argv[0] == uv_bin()
            res = processes.run(
                [*argv, "-e", str(workdir)],
                cwd=workdir,
                timeout=timeout,
                env=uv_env(uv_cache) if uv else pip_env(),
                sandbox=policy,
            )
            if res.returncode == 0 or res.timed_out:
                break
    if res.returncode != 0 or res.timed_out:
        return replace(
            env,
            error=redacted(
                f"installing the project into the run venv failed ({env.source}): {tail(res)}"
            ),
        )
    _link_commands(env.bin_dir, python.parent)
    return replace(
        env, python=python, bin_dir=python.parent, path_dirs=(python.parent, *env.path_dirs)
    )


def _link_commands(cached: Path, own: Path) -> None:
    """The cached env's commands listed in the layer's bin too, after the project's own: a tool
    the env installed (the mypy or ruff the project pins) is then beside the interpreter the
    static tools are given, which is how they tell it is there (``tools.base.python_tool_argv``);
    without it they ran verify-dag's own copy over a layered env (tomlkit's pinned mypy 1.19.1
    was passed over for 2.4.1). On PATH nothing changes: the cached env's bin is right behind
    the layer's."""
    for entry in cached.iterdir():
        link = own / entry.name
        if not link.exists() and not link.is_symlink():
            with contextlib.suppress(OSError):  # a tool not seen there runs as before
                link.symlink_to(entry)


@functools.cache
def own_pip() -> bool:
    try:
        version = importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return False
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2]) >= (22, 3)


def pip(python: Path) -> list[str]:
    """pip for the env of ``python``. Our own pip driving it (--python, pip >= 22.3) spares
    every venv the seconds ensurepip takes to install pip into it; else the env's own pip."""
    if own_pip():
        return [sys.executable, "-m", "pip", "--python", str(python)]
    return [str(python), "-m", "pip"]


def site_dir(venv: Path) -> Path:
    return Path(
        sysconfig.get_path("purelib", "venv", vars={"base": str(venv), "platbase": str(venv)})
    )
