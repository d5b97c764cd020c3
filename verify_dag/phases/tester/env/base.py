"""What the Python and node builders of :mod:`verify_dag.phases.tester.env` share: the environment
they hand back, the lock and marker of a cache entry, and the environment their children run in.
"""

# Long module: the env record, its cache entry's lock, seal and marker, and the environment and
# private uv cache its builders run with belong together: each is what the others check.

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from verify_dag import git, processes, url_secrets
from verify_dag.files import file_lock, write_atomic
from verify_dag.phases.tester.env import bytecode, pyc_mirror, seal
from verify_dag.sandbox import Policy

RECIPE = "verify-dag-env-2"  # part of every key: change it when the way envs are built changes
MARKER = ".verify-dag-ready"
# Our own interpreter's path setup must not leak into the repository's env.
PY_LEAKS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PIP_USER")


@dataclass(frozen=True)
class Runner:
    """How to run a command inside a built tox environment: tox itself, with its set_env,
    change_dir and commands_pre, and the tester's command in place of the env's ``commands``."""

    tox: tuple[str, ...]  # `python -m tox run -e NAME --workdir W -x deps+=...`
    name: str
    work_dir: Path
    variables: tuple[tuple[str, str], ...] = ()  # what tox itself needs in its environment
    commands: tuple[tuple[str, ...], ...] = ()  # the env's own `commands`, as tox resolved them
    section: str = ""  # how tox's --override names the env: `testenv:NAME` (ini), `env.NAME`
    # What keeps a run from installing anything: tox's flag, and tox-uv's for its lock runner,
    # which syncs the env (reinstalling the package) on every run otherwise.
    no_install: tuple[str, ...] = ("--skip-env-install",)

    @property
    def writable(self) -> tuple[Path, ...]:
        """What a run through tox writes: its work directory (its logs and scratch), but for
        :attr:`readonly`."""
        return (self.work_dir,)

    @property
    def readonly(self) -> tuple[Path, ...]:
        """What a run must not change although it lies in :attr:`writable`: the built env (its
        interpreter, packages, compiled tree), the package env and uv's cache. A test that
        wrote there would decide a later run's verdict; tox's logs stay writable."""
        kept = [
            p
            for env in (self.work_dir / self.name, self.work_dir / ".pkg")
            if env.is_dir()
            for p in sorted(env.iterdir())
            if p.name not in RUNNER_WRITES
        ]
        private = self.work_dir / PRIVATE_UV
        return (*kept, *([private] if private.exists() else []))

    def policy(self, *writable: Path) -> Policy:
        """The sandbox of a command run through tox, writing ``writable`` besides."""
        return Policy(writable=(*writable, *self.writable), readonly=self.readonly)

    def own_commands(self) -> list[str]:
        """The env's declared commands, run by tox as its maintainers run them."""
        return [*self.tox, *self.no_install]

    def command(
        self,
        argv: Sequence[str],
        pycache: Path | None = None,
        passed: Sequence[str] = (),
        scratch: Path | None = None,
    ) -> list[str]:
        """``argv`` run by tox as the env's commands; ``pycache``: where their bytecode goes
        (set by tox for the commands alone, not for tox itself); ``passed``: more variables
        of the caller's that the commands see (tox passes only what pass_env names);
        ``scratch``: a directory of the caller's in place of the env's tmp and log dirs, which
        tox empties as it starts: a run beside another of the same env (the derived probes
        beside the suite) must not empty the other's."""
        line = _escaped(shlex.join(argv))
        section = self.section or f"testenv:{self.name}"
        prefix = (
            ["-x", f"{section}.set_env+=PYTHONPYCACHEPREFIX={_escaped(str(pycache))}"]
            if pycache is not None
            else []
        )
        if scratch is not None:
            for key, name in (("env_tmp_dir", "tmp"), ("env_log_dir", "log")):
                prefix += ["-x", f"{section}.{key}={_escaped(str(scratch / name))}"]
        # The tester's plugin directory (PYTHONPATH) and the env's own variables.
        names = ["PYTHONPATH", *passed]
        return [
            *self.tox,
            *self.no_install,
            *(a for name in names for a in ("-x", f"{section}.pass_env+={name}")),
            *prefix,
            "-x",
            f"{section}.commands={line}",
        ]


def _escaped(value: str) -> str:
    # tox substitutes {...} in every value, overrides too: a literal brace is escaped.
    return value.replace("{", r"\{").replace("}", r"\}")


@dataclass(frozen=True)
class Env:
    python: Path | None = None  # None: nothing to install, the suite runs on our interpreter
    bin_dir: Path | None = None
    key: str = ""
    reused: bool = False
    source: str = ""  # what was installed from: "requirements-test.txt, pyproject.toml [...]"
    # Which env builder made it (its registry name: "tox", "nox", "hatch") and the env it built
    # ("py311-tests"): another commit's env is asked for by these, to be built alike.
    builder: str = ""
    name: str = ""
    error: str | None = None
    project: bool = False  # the project is installed per run (layer), not kept in the cache
    path_dirs: tuple[Path, ...] = ()  # prepended to PATH for the suite
    notes: tuple[str, ...] = ()
    runner: Runner | None = None  # set when tox built the env: commands run through tox
    writable: tuple[Path, ...] = ()  # what a command in the env writes besides its checkout
    # The env's own test commands, as its builder resolved them (a hatch env's pytest line),
    # and the variables its commands run with (its env-vars), where no runner applies them.
    commands: tuple[tuple[str, ...], ...] = ()
    variables: tuple[tuple[str, str], ...] = ()
    readable: tuple[Path, ...] = ()  # what a command in the env reads outside it (wheelhouse)

    @property
    def declared_commands(self) -> tuple[tuple[str, ...], ...]:
        """What the env declares its suite runs: tox's commands, or the builder's line."""
        return self.runner.commands if self.runner is not None else self.commands

    def policy(self, *writable: Path) -> Policy:
        """The sandbox of a command in this env, writing ``writable`` besides its checkout."""
        policy = (
            self.runner.policy(*writable)
            if self.runner is not None
            else Policy(writable=(*writable, *self.writable))
        )
        return replace(policy, readonly=(*policy.readonly, *self.readable))

    def command(
        self, argv: Sequence[str], pycache: Path | None = None, scratch: Path | None = None
    ) -> list[str]:
        """``argv`` as it runs in this env: through tox when tox built it, else as it is
        (``scratch``: :meth:`Runner.command`'s)."""
        if self.runner is None:
            return list(argv)
        return self.runner.command(argv, pycache, [name for name, _ in self.variables], scratch)


def env_json(env: Env) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(env), default=str))  # type: ignore[no-any-return]


def env_from_json(data: dict[str, Any]) -> Env:
    """An Env as :func:`env_json` wrote it (a marker file of a shared env)."""

    def path(value: object) -> Path | None:
        return Path(str(value)) if value else None

    runner = data.get("runner")
    return Env(
        python=path(data.get("python")),
        bin_dir=path(data.get("bin_dir")),
        key=str(data.get("key", "")),
        reused=bool(data.get("reused")),
        source=str(data.get("source", "")),
        builder=str(data.get("builder", "")),
        name=str(data.get("name", "")),
        project=bool(data.get("project")),
        path_dirs=tuple(Path(p) for p in data.get("path_dirs", ())),
        notes=tuple(data.get("notes", ())),
        writable=tuple(Path(p) for p in data.get("writable", ())),
        commands=tuple(tuple(c) for c in data.get("commands", ())),
        variables=tuple((k, v) for k, v in data.get("variables", ())),
        readable=tuple(Path(p) for p in data.get("readable", ())),
        runner=None
        if not runner
        else Runner(
            tox=tuple(runner["tox"]),
            name=runner["name"],
            work_dir=Path(runner["work_dir"]),
            variables=tuple((k, v) for k, v in runner.get("variables", ())),
            commands=tuple(tuple(c) for c in runner.get("commands", ())),
            section=runner.get("section", ""),
            no_install=tuple(runner.get("no_install", ("--skip-env-install",))),
        ),
    )


def checkout_id(workdir: Path) -> str:
    """What an env that installed the project from ``workdir`` holds: that checkout's code (its
    path, which an editable install points at, and its commit)."""
    return f"{workdir.resolve()}@{git.rev_parse(workdir, 'HEAD') or ''}"


def portable_id(want: str, workdir: Path) -> str | None:
    """``want`` (as :func:`checkout_id` begins it) without the checkout's path: what an env
    that never refers to that path holds, the commit's code built and installed, which another
    checkout of the same commit may use as it is. None without a commit to name."""
    prefix = f"{workdir.resolve()}@"
    rest = want[len(prefix) :] if want.startswith(prefix) else ""
    return f"@{rest}" if rest and not rest.startswith("\0") else None


def refers_to(env: Env, workdir: Path) -> bool:
    """Whether the built env points at ``workdir`` (an editable install's ``.pth`` or finder
    module, a ``direct_url.json``): such an env serves that checkout alone. True when its
    site-packages cannot be found, so an env is shared only when it is known not to."""
    needles = {str(workdir).encode(), str(workdir.resolve()).encode()}
    for bin_dir in env.path_dirs or ((env.bin_dir,) if env.bin_dir is not None else ()):
        site = purelib(bin_dir / "python")
        if site is None:
            return True
        files = [p for p in site.iterdir() if p.is_file()]
        files += list(site.glob("*.dist-info/direct_url.json"))
        files += list(site.glob("*.egg-link"))
        for path in files:
            try:
                data = path.read_bytes()
            except OSError:
                return True
            if any(n in data for n in needles):
                return True
    return False


_INSTALLED = "verify-dag-installed.json"
# How long a phase that found the env not built for its checkout waits for the exclusive lock
# before it looks again whether another has built it meanwhile (see shared).
_BUILD_WAIT = 1.0


@contextlib.contextmanager
def shared(
    env_dir: Path,
    want: str,
    build: Callable[[], Env],
    deadline: float,
    workdir: Path | None = None,
) -> Iterator[Env]:
    """A cached env (a tox or nox work directory) that the phases and runs of one checkout use
    at once: held with a shared lock while it holds the project as checkout ``want`` installed
    it, rebuilt by ``build`` under the exclusive lock when it holds another checkout's. The
    static tools and the suite of one run then share one build, while a run of another commit
    waits for them to finish instead of replacing the project under them. An Env without an
    interpreter (an error, or nothing to run) is handed back as it is, unlocked.

    ``workdir``: the checkout ``want`` names. An env built from the same commit in another
    checkout (each run has its own) that does not point at that checkout's path holds the same
    code: it is used as it is, without running the builder again."""
    lock, marker = env_dir.with_suffix(".lock"), env_dir / _INSTALLED
    portable = portable_id(want, workdir) if workdir is not None else None
    notes: tuple[str, ...] = ()
    while True:
        with file_lock(lock, deadline, shared=True) as got:
            if not got:
                yield Env(error="timed out waiting for another run using the same env")
                return
            env, _ = _installed(marker, want, portable, why_too=False)
            if env is not None:
                yield replace(env, notes=(*env.notes, *notes))
                return
        # The exclusive lock, to build. Waited for briefly, then the shared one is looked at
        # again: another phase of this checkout may be building the same env (it then holds the
        # shared lock for its whole suite, right after the build, and a blocking wait for the
        # exclusive one here would last until that suite ended: click's and platformdirs' static
        # tools waited so for the suite they should run beside).
        with file_lock(lock, min(deadline, time.monotonic() + _BUILD_WAIT)) as got:
            if not got:
                if time.monotonic() >= deadline:
                    yield Env(error="timed out waiting for another run using the same env")
                    return
                continue
            failed: Env | None = None
            env, why = _installed(marker, want, portable)
            if env is None:
                marker.unlink(missing_ok=True)
                if why is not None:
                    # Written after its build: the runner would build on what is there.
                    shutil.rmtree(env_dir, ignore_errors=True)
                    notes = (f"the cached env was rebuilt: {why}",)
                built = build()
                if built.error is not None or built.python is None:
                    failed = replace(built, notes=(*built.notes, *notes))
                else:
                    seal.seal(env_dir, RUNNER_WRITES)
                    record = {
                        "want": want,
                        "portable": portable,
                        "bound": workdir is None or refers_to(built, workdir),
                        "env": env_json(replace(built, reused=False)),
                    }
                    write_atomic(marker, json.dumps(record).encode("utf-8"))
        if failed is not None:
            yield failed
            return
        # Built: take it shared, unless another checkout replaced it meanwhile (then again).


# What tox and nox write in their work directory when they run (their logs, an env's tmp dir
# and lock, tox's scratch and env info), our marker, written after the seal, and the tester's
# pytest plugin, written over whatever is there before each run: left out of the seal. Also
# pytest's cache directory: a suite's own nested pytest runs (platformdirs' tests of its pytest
# plugin) left .pytest_cache at the env's root, and counted as a change it had the next phase of
# the same run rebuild the env (9 s of a 23 s verify of platformdirs). Nothing imports from it,
# and verify-dag's own pytest runs never read it (-p no:cacheprovider).
RUNNER_WRITES = frozenset(
    {
        "log",
        "tmp",
        ".tmp",
        "file.lock",
        ".tox-info.json",
        _INSTALLED,
        "_verify_dag_outcomes.py",
        ".pytest_cache",
    }
)


def _installed(
    marker: Path, want: str, portable: str | None = None, *, why_too: bool = True
) -> tuple[Env | None, str | None]:
    """The env the marker records for checkout ``want`` (or, ``portable``, for its commit in
    any checkout, when the env does not point at the one it was built from); None when there is
    none or it holds another checkout, and (``why_too``) why when the work directory is not what
    was sealed after its build, whichever checkout it holds (the runner would build the next
    one on top of it)."""
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    ours = isinstance(record, dict) and holds(record, want, portable)
    if not ours and not why_too:
        return None, None  # the seal is not walked for an env that is not ours anyway
    why = seal.broken(marker.parent)
    if why is not None:
        return None, why
    if not ours:
        return None, None
    env = env_from_json(record["env"])
    return (env, None) if env.python is not None and env.python.exists() else (None, None)


def holds(record: dict[str, Any], want: str, portable: str | None) -> bool:
    """Whether a marker's record is of checkout ``want``, or of the same commit (``portable``)
    in an env that does not point at the checkout it was built from."""
    if record.get("want") == want:
        return True
    return portable is not None and record.get("portable") == portable and not record.get("bound")


# Inside a venv: its site-packages compiled under a PYTHONPYCACHEPREFIX tree of its own.
PYCACHE_TREE = ".verify-dag-pycache"


def compile_site(python: Path, deadline: float) -> None:
    """Compile the env's site-packages to bytecode after each build of it, both in place and
    into :data:`PYCACHE_TREE` (where a run's bytecode prefix finds it, :func:`pycache_prefix`):
    the suite runs with the env read-only, so what is not compiled here would be compiled again
    by every run (uv installs without bytecode; a fresh PYTHONPYCACHEPREFIX ignores the
    ``__pycache__`` directories: 1.3 s of tomlkit's 3.3 s suite). Every build, not the first
    alone: a later one reinstalls the package (another commit's wheel, in a tox env shared by the
    head and its merge base), and modules whose bytecode no longer matches are compiled from
    source on every import of every run. compileall compiles only what is missing or stale
    (0.25 s over an up-to-date site-packages of 10,000 files) and the tree takes only what
    changed. Best effort: a file that does not compile is the suite's to report when it imports
    it."""
    venv = python.parent.parent
    site = purelib(python)
    if site is None:
        return
    argv = [str(python), "-m", "compileall", "-q", "-j", "0", str(site)]
    res = processes.run(
        argv, timeout=left(deadline), env=pip_env(), sandbox=Policy(writable=(venv,))
    )
    if res.timed_out:
        return
    # The same bytecode, copied where a prefix finds it instead of compiled a second time.
    mirror = [str(python), "-I", "-S", pyc_mirror.__file__, str(site), str(venv / PYCACHE_TREE)]
    processes.run(mirror, timeout=left(deadline), env=pip_env(), sandbox=Policy(writable=(venv,)))


def pycache_prefix(env: Env, dest: Path) -> Path:
    """``dest`` made into a run's PYTHONPYCACHEPREFIX: writable for the run's own modules (the
    checkout's), with each venv of ``env`` that has a compiled tree linked in at its own path,
    and the host interpreter's standard library and site-packages (:mod:`.bytecode`), so the
    modules of both are read compiled instead of compiled again."""
    dest.mkdir(parents=True, exist_ok=True)
    trees = [(bin_dir.parent, bin_dir.parent / PYCACHE_TREE) for bin_dir in env.path_dirs]
    host = bytecode.host_tree()
    if host is not None:
        trees += [(source, host) for source in bytecode.sources()]
    for source, tree_root in trees:
        for root in dict.fromkeys((source, source.resolve())):
            tree = tree_root / source.relative_to(source.anchor)
            link = dest / root.relative_to(root.anchor)
            if not tree.is_dir() or link.exists() or link.is_symlink():
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            # The suite and the derived probes beside it make the same run's prefix at once.
            with contextlib.suppress(FileExistsError):
                link.symlink_to(tree, target_is_directory=True)
    return dest


def redacted(text: str) -> str:
    """``text`` (a message about building an environment) fit for a finding: the secrets
    processes.redact knows and every URL's whole userinfo masked. The messages quote package index
    URLs, whose user part is often a token of a shape no rule knows, so even a plain user name
    goes there (url_secrets.mask_in, ``whole``)."""
    return url_secrets.mask_in(processes.redact(text), "[REDACTED]", whole=True)


def pip_env() -> dict[str, str]:
    # Proxies, index URLs and pip's own settings stay (they are what lets pip reach an index);
    # secret-looking names go, as for any repository code: setup.py runs during the build.
    env = processes.scrubbed_env(
        {"PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    )
    for name in PY_LEAKS:
        env.pop(name, None)
    return env


def tail(res: processes.Result, lines: int = 15) -> str:
    text = "\n".join(t for t in (res.stdout.strip(), res.stderr.strip()) if t)
    return "\n".join(text.splitlines()[-lines:])


def uv_bin() -> str:
    """The uv executable installed beside verify-dag (the ``uv`` package ships it)."""
    try:
        from uv import find_uv_bin  # imported late: only an env that needs uv pays for it

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv") or "uv"


def purelib(python: Path) -> Path | None:
    """The site-packages of the venv of ``python``: a venv's POSIX layout, read off the disk
    (running the interpreter would need a sandbox that shows where the venv lives)."""
    found = sorted((python.parent.parent / "lib").glob("python*/site-packages"))
    return found[0] if len(found) == 1 else None


# Lock files an installer reads while it builds an env (tox-uv's uv.lock runner, pdm, poetry,
# pipenv): an env built from one lock must not be reused for another.
LOCK_FILES = ("uv.lock", "pdm.lock", "poetry.lock", "Pipfile.lock", "pylock.toml")
# Skipped where a declared directory is hashed: what builds and runs write, not what they read.
HASH_SKIP = frozenset({".git", "node_modules", ".tox", ".nox", ".venv", "__pycache__"})


def build_inputs(workdir: Path) -> tuple[str, ...]:
    """What a build reads besides the declaring files: the lock files present, and the in-tree
    build backend's directories (``[build-system] backend-path``, PEP 517). The env key hashes
    them: a commit that changes only its build backend gets an env of its own, so a backend
    that plants something in the env it builds plants it for its own commit alone."""
    found = [name for name in LOCK_FILES if (workdir / name).is_file()]
    try:
        table = tomllib.loads((workdir / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return tuple(found)
    paths = table.get("build-system", {}).get("backend-path", [])
    for rel in paths if isinstance(paths, list) else []:
        path = workdir / str(rel)
        if path.exists() and path.resolve().is_relative_to(workdir.resolve()):
            found.append(str(rel))
    return tuple(found)


def hash_tree(h: Any, workdir: Path, rel: str) -> None:
    """Feed ``h`` the names and bytes of the file or directory ``rel`` of ``workdir``."""
    for path in _files(workdir / rel):
        h.update(path.relative_to(workdir).as_posix().encode() + b"\0" + path.read_bytes())


def _files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(
            d for d in dirnames if d not in HASH_SKIP and not d.endswith(".egg-info")
        )
        for name in sorted(filenames):
            yield Path(dirpath) / name


def cache_dir(
    workdir: Path, cache: Path, kind: str, declaring: tuple[str, ...], *, base: bool = False
) -> Path:
    """``cache/kind/KEY``: one directory per declaration (the bytes of the ``declaring`` files
    present in ``workdir``, and of what the build reads, :func:`build_inputs`) and interpreter,
    for the envs a runner (tox, nox, hatch) builds there. ``base``: ``KEY-base``, for the env of
    the merge base the debugger and the exerciser re-run failures at. One directory for both had
    the two commits' packages replace each other in every run that re-ran something at the base
    (platformdirs: 2.8 s to rebuild the base's in the exerciser, then 1.7 s for the head's at
    the start of the next run, its static tools waiting meanwhile)."""
    h = hashlib.sha256(
        f"{RECIPE}\0{kind}\0{sys.version}\0{os.path.realpath(sys.executable)}".encode()
    )
    for name in declaring:
        path = workdir / name
        if path.is_file():
            h.update(name.encode() + b"\0" + path.read_bytes())
    for rel in build_inputs(workdir):
        hash_tree(h, workdir, rel)
    return cache / kind / (h.hexdigest()[:24] + ("-base" if base else ""))


def left(deadline: float) -> float:
    """Seconds to a ``time.monotonic()`` deadline, at least one."""
    return max(1.0, deadline - time.monotonic())


# uv's cache for a step that may run code of the repository's or of an sdist (a build backend,
# setup.py, a .pth file an earlier build left in the venv, which runs when uv asks the
# interpreter about itself): a private one inside the directory that step may write anyway,
# never the shared cache another repository's build reads wheels from.
PRIVATE_UV = ".verify-dag-uv-cache"


def private_uv(work_dir: Path) -> Path:
    path = work_dir / PRIVATE_UV
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def throwaway_uv(venv: Path) -> Iterator[Path]:
    """A private uv cache in ``venv`` for the block, removed after it."""
    try:
        yield private_uv(venv)
    finally:
        shutil.rmtree(venv / PRIVATE_UV, ignore_errors=True)


def uv_env(uv_cache: Path) -> dict[str, str]:
    """The environment uv runs in: pip's (index settings, no credentials), ``uv_cache``, never a
    downloaded interpreter, and files copied out of the cache, not hard-linked: a link would make
    every later write into the env a write into the cache."""
    return {
        **pip_env(),
        "UV_CACHE_DIR": str(uv_cache),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_LINK_MODE": "copy",
    }


def uv_install(
    python: Path,
    args: Sequence[str],
    *,
    cache: Path,
    deadline: float,
    cwd: Path | None = None,
    writable: tuple[Path, ...] = (),
    shared: bool = False,
) -> processes.Result:
    """``uv pip install ARGS`` into the venv of ``python``, sandboxed with the index and no
    credentials, writing only that venv and ``writable``.

    ``shared``: wheels only (``--only-binary :all:``) into a venv no code but ours has touched,
    so nothing runs but uv: then uv's shared cache under verify-dag's ``cache`` is used and
    grown. Otherwise the install may run a build, and uv gets a private cache inside the venv,
    removed afterwards: the shared cache is never writable by code that is not ours."""
    venv = python.parent.parent
    with contextlib.ExitStack() as stack:
        if shared:
            uv_cache = cache / "uv"
            uv_cache.mkdir(parents=True, exist_ok=True)
            args, writable = ["--only-binary", ":all:", *args], (uv_cache, *writable)
        else:
            uv_cache = stack.enter_context(throwaway_uv(venv))
        return processes.run(
            [uv_bin(), "pip", "install", "--python", str(python), *args],
            cwd=cwd,
            timeout=left(deadline),
            env=uv_env(uv_cache),
            sandbox=Policy(network=True, writable=(venv, *writable)),
        )
