"""The one runner of ToolSpecs: run a spec over files, and rate what it printed as a Finding.

The static phase runs every analyser through here, and so do the static baseline (the same tool
at the merge base) and the claim verifier (one analyser re-run on one file), so that a finding is
read and rated the same way wherever it is seen. The first two pass a :class:`Memo`: what a run
found is then kept in the result cache (verify_dag/resultcache.py) and reused by any later run
with the same inputs: file by file for a per-file tool, for the whole tree otherwise.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from verify_dag import git, processes, resultcache
from verify_dag.files import file_lock
from verify_dag.models.findings import Finding, Location
from verify_dag.models.toolchain import Command
from verify_dag.paths import tools_root
from verify_dag.sandbox import Policy
from verify_dag.tools import fetched, versions
from verify_dag.tools.base import PY_SUFFIXES, Invocation, RawFinding, ToolSpec

# Characters of file arguments per invocation: far below ARG_MAX, so `--scope=all` on a large
# repository becomes several runs instead of an E2BIG.
_ARGV_BUDGET = 100_000
_TITLE_MAX = 160


@dataclass
class ToolRun:
    name: str
    raw: list[RawFinding] = field(default_factory=list)
    failure: str | None = None  # why the tool could not run (or stopped part way)
    detail: str = ""  # the first lines of its stderr (stdout if stderr was empty), redacted
    version: str | None = None  # the version it ran at, where its environment says


class Memo:
    """What, besides the files it checks, decides a tool run's findings in one checkout: the
    command (``identity``: the tool, the project's command line for it, where that was read)
    and the checkout's content, read from git without touching the files."""

    def __init__(self, identity: str, workdir: Path, project: str | None = None) -> None:
        self.identity = resultcache.key(resultcache.host_key(), "tool", identity)
        self.workdir = workdir
        # The repository the checkout is of (its path or URL): whose tool caches to use.
        self.project = project
        self._tree: str | None = None
        self._blobs: dict[str, str] | None = None
        self._ctx: str | None = None

    @classmethod
    def of(cls, command: Command, workdir: Path, project: str | None = None) -> Memo | None:
        """None when ``workdir`` is not a git checkout (nothing to key the content on)."""
        memo = cls(json.dumps([command.argv, command.source, command.tool]), workdir, project)
        return memo if memo.tree() else None

    def tree(self) -> str:
        if self._tree is None:
            self._tree = git.rev_parse(self.workdir, "HEAD^{tree}") or ""
        return self._tree

    def blobs(self) -> dict[str, str]:
        if self._blobs is None:
            self._blobs = git.blobs(self.workdir, "HEAD")
        return self._blobs

    def whole(self, files: Sequence[str]) -> str:
        """The entry of a run over ``files`` that reads the whole tree."""
        return resultcache.key(self.identity, "tree", self.tree(), json.dumps(list(files)))

    def per_file(self, path: str) -> str | None:
        """The entry of ``path``'s findings from a per-file tool: that file's content, plus
        everything that is not Python source (configuration, declarations, pins) and where the
        Python files are (import sorting asks which modules are first-party). None for a file
        git does not know in this commit."""
        blob = self.blobs().get(path)
        if blob is None:
            return None
        return resultcache.key(self.identity, "file", path, blob, self._context())

    def _context(self) -> str:
        if self._ctx is None:
            rest = sorted(
                (p, b if Path(p).suffix not in PY_SUFFIXES else "") for p, b in self.blobs().items()
            )
            self._ctx = resultcache.key(json.dumps(rest))
        return self._ctx


_KIND = "tool"


def cached(spec: ToolSpec, files: Sequence[str], memo: Memo | None) -> ToolRun | None:
    """The findings of ``spec`` over ``files`` when the result cache has all of them (the hit is
    recorded for the report), else None."""
    if memo is None or not resultcache.enabled():
        return None
    if spec.per_file and spec.takes_files:
        found, _ = _per_file_hits(spec, files, memo)
        if found is None or len(found) < len(files):
            return None
        return _assembled(spec, files, found, memo)
    value = resultcache.get(_KIND, memo.whole(files), spec.name)
    return _from_json(spec.name, value) if value is not None else None


def _per_file_hits(
    spec: ToolSpec, files: Sequence[str], memo: Memo
) -> tuple[dict[str, tuple[list[RawFinding], str, str | None]] | None, dict[str, str]]:
    """(file -> (its findings, when stored, the tool's version) for the files the cache has;
    None when a file has no entry key at all), and every file's entry key."""
    keys: dict[str, str] = {}
    found: dict[str, tuple[list[RawFinding], str, str | None]] = {}
    for path in files:
        entry = memo.per_file(path)
        if entry is None:
            return None, keys
        keys[path] = entry
        got = resultcache.lookup(_KIND, entry)
        if got is not None:
            run = _from_json(spec.name, got[0])
            if run is not None:
                found[path] = (run.raw, got[1], run.version)
    return found, keys


def _assembled(
    spec: ToolSpec,
    files: Sequence[str],
    found: dict[str, tuple[list[RawFinding], str, str | None]],
    memo: Memo,
) -> ToolRun:
    version = next((found[p][2] for p in files if found[p][2] is not None), None)
    run = ToolRun(spec.name, raw=[r for p in files for r in found[p][0]], version=version)
    stored = min((found[p][1] for p in files), default="")
    resultcache.hit(
        f"{spec.name}: {len(files)} of {len(files)} file(s)",
        memo.per_file(files[0]) or "",
        stored,
    )
    return run


def _to_json(run: ToolRun) -> dict[str, object]:
    return {"raw": [asdict(r) for r in run.raw], "detail": run.detail, "version": run.version}


def _from_json(name: str, value: object) -> ToolRun | None:
    try:
        assert isinstance(value, dict)
        raw = [RawFinding(**r) for r in value["raw"]]
        version = value.get("version")
        return ToolRun(
            name,
            raw=raw,
            detail=str(value.get("detail", "")),
            version=version if isinstance(version, str) else None,
        )
    except (AssertionError, KeyError, TypeError):
        return None


def run(
    spec: ToolSpec,
    files: Sequence[str],
    workdir: Path,
    timeout: float,
    python: Path | None = None,
    memo: Memo | None = None,
    store: bool = True,
) -> ToolRun:
    """``spec`` over ``files`` (repo-relative) in ``workdir``, in chunks; stops at a failure.

    ``python`` is the project's interpreter when its environment is known: a spec that resolves
    imports (mypy) then resolves them there. None keeps verify-dag's own. With a ``memo`` the
    result cache answers what it can (a per-file tool then runs on the other files only), and
    a run that completed is stored there unless ``store`` is False (its environment was not
    the one the project declares).
    """
    hit = cached(spec, files, memo)
    if hit is not None:
        return hit
    if memo is None or not resultcache.enabled():
        # The tool's own incremental cache still applies: it checks what it reuses itself.
        return _run(spec, files, workdir, timeout, python, memo)
    if spec.per_file and spec.takes_files:
        found, keys = _per_file_hits(spec, files, memo)
        if found is None:  # a file git does not know: no keys, no cache
            return _run(spec, files, workdir, timeout, python, memo)
        todo = [p for p in files if p not in found]
        result = _run(spec, todo, workdir, timeout, python, memo)
        if result.failure is None and store:
            for path in todo:
                mine = ToolRun(
                    spec.name,
                    raw=[r for r in result.raw if r.path == path],
                    version=result.version,
                )
                resultcache.put(_KIND, keys[path], _to_json(mine))
        if found:
            result.raw = [r for p in files if p in found for r in found[p][0]] + result.raw
            result.version = result.version or next(iter(found.values()))[2]
            resultcache.hit(
                f"{spec.name}: {len(found)} of {len(files)} file(s)",
                keys[next(iter(found))],
                min(stored for _, stored, _ in found.values()),
            )
        return result
    result = _run(spec, files, workdir, timeout, python, memo)
    if result.failure is None and store:
        resultcache.put(_KIND, memo.whole(files), _to_json(result))
    return result


def _run(
    spec: ToolSpec,
    files: Sequence[str],
    workdir: Path,
    timeout: float,
    python: Path | None = None,
    memo: Memo | None = None,
) -> ToolRun:
    result = ToolRun(spec.name)
    if spec.takes_files and not files:
        return result
    # A tool that fetched the rest of itself when its env was provisioned reads it from there.
    env = processes.scrubbed_env(fetched.variables())
    if python is not None:
        # Inside the project's environment: its scripts first on PATH, which is also what makes
        # the sandbox show the environment (read-only) wherever it lives.
        env["PATH"] = os.pathsep.join(p for p in (str(python.parent), env.get("PATH")) if p)
    # One scratch directory per run, outside the checkout, gone when the run is; and the
    # tool's own cache of this project when it keeps one and no other run holds it now.
    with (
        tempfile.TemporaryDirectory(prefix="verify-dag-tool-") as tmp,
        _own_cache(spec, memo) as cache,
    ):
        scratch = Path(tmp)
        writable = (scratch, *([cache] if cache is not None else []))
        for chunk in _chunks(files, spec.takes_files, whole=spec.argfile):
            argv = spec.argv(Invocation(chunk, workdir, scratch, python, cache))
            if argv is None:
                result.failure = f"{spec.name} is not installed (not importable, not on PATH)"
                return result
            if result.version is None:
                result.version = versions.installed(
                    spec.package or spec.name, argv, env.get("PATH", "")
                )
            # The project's config (mypy plugins, make recipes, npm scripts) executes repository
            # code, so these run like the test suite: scrubbed environment, time limit, capped
            # output; the scratch directory is the one place besides the checkout it may write,
            # and a tool known not to write its checkout (ruff, mypy) sees it read-only: the
            # run's other phases read the same checkout.
            res = processes.run(
                argv,
                cwd=workdir,
                timeout=timeout,
                env=env,
                sandbox=Policy(writable=writable, cwd_writable=not spec.read_only),
            )
            result.detail = _head(res.stderr) or _head(res.stdout)
            if res.not_found:
                result.failure = f"{argv[0]} was not found"
                return result
            if res.timed_out:
                result.failure = f"timed out after {timeout:g}s"
                return result
            raw = spec.parse(res.stdout, res.stderr, workdir)
            result.raw.extend(raw)
            if res.returncode not in spec.ok_exit_codes and not _explained(spec, raw):
                result.failure = f"exited {res.returncode}" + (
                    ", output truncated" if res.truncated else ""
                )
                return result
    return result


def targets(spec: ToolSpec, files: Sequence[str], workdir: Path) -> tuple[list[str], str]:
    """The files of ``files`` that are ``spec``'s to check in ``workdir``, as the project's
    configuration says, and a remark on those it leaves out ("" when none)."""
    mine = [p for p in files if spec.applies_to(p)]
    if spec.select is None or not mine:
        return mine, ""
    return spec.select(workdir, mine)


def title(spec: ToolSpec, r: RawFinding) -> str:
    """The finding's title; also what findings without a rule code are matched on."""
    message = processes.redact(r.message)
    text = f"{spec.name} {r.code}: {message}" if r.code else f"{spec.name}: {message}"
    return text[: _TITLE_MAX - 3] + "..." if len(text) > _TITLE_MAX else text


def finding(spec: ToolSpec, command: Command, r: RawFinding, source: str) -> Finding:
    """``r`` as a Finding of the skill ``source``, rated by the spec's own rule."""
    severity, issue_class = spec.rate(r)
    where = ":".join(str(x) for x in (r.path, r.line, r.col) if x is not None)
    return Finding(
        title=title(spec, r),
        severity=severity,
        description=(
            f"{spec.name} ({command.source}) reported at {where}: {processes.redact(r.message)}"
        ),
        source=source,
        issue_class=issue_class,
        location=Location(path=r.path, line=r.line, column=r.col),
        rule=r.code,
        tool=spec.name,
        help_uri=r.url,
    )


@contextmanager
def _own_cache(spec: ToolSpec, memo: Memo | None) -> Iterator[Path | None]:
    """The tool's incremental cache of this project (``<cache>/tools/<tool>/<key>``), held
    exclusively for the run; None when it keeps none, the project is unknown, or another run
    holds it now (that run's tool is writing it: this one uses a throwaway cache)."""
    if not spec.own_cache or memo is None or memo.project is None:
        yield None
        return
    home = tools_root() / spec.name / resultcache.key(memo.project, memo.identity)[:24]
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError:
        yield None
        return
    with file_lock(home.with_suffix(".lock"), time.monotonic()) as got:
        yield home if got else None


def _chunks(files: Sequence[str], takes_files: bool, whole: bool) -> Iterator[list[str]]:
    if not takes_files:
        yield []
        return
    if whole:
        yield list(files)
        return
    chunk: list[str] = []
    size = 0
    for path in files:
        if chunk and size + len(path) > _ARGV_BUDGET:
            yield chunk
            chunk, size = [], 0
        chunk.append(path)
        size += len(path) + 1
    if chunk:
        yield chunk


def _explained(spec: ToolSpec, raw: list[RawFinding]) -> bool:
    """A non-ok exit code that the tool's own diagnostics account for."""
    if spec.findings_explain_exit and raw:
        return True
    return any(r.code in spec.blocking_rules for r in raw)


def _head(text: str, lines: int = 6) -> str:
    return processes.redact("\n".join(text.strip().splitlines()[:lines]))
