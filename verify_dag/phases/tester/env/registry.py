"""The env builders: one module per way a project declares the envs its suite runs in, each behind
one interface (:class:`EnvBuilder`), as pre-commit's ``languages/`` or tox's env register.

A builder says whether a checkout declares envs of its kind, builds the one its suite runs in (by
the tool that defines them: tox, nox, hatch; or uv and pip from the declared dependencies) and
hands it back held for the block, and names the command lines its declaration runs (the linters
triage finds there). How a command runs in a built env is the Env's own
(:meth:`~verify_dag.phases.tester.env.base.Env.command`, :meth:`~.Env.policy`). Every builder
builds sandboxed with the index and a private uv cache, and hands back an env that is sealed
after its build and checked before each reuse (env/base.py ``shared``, env/seal.py).

Adding a builder is one module with these members and its line in :data:`BUILDERS`, in the order
they are tried: the first builder that declares an env running tests here builds it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from verify_dag.phases.tester.env import hatch, nox, tox, venv
from verify_dag.phases.tester.env.base import Env


class EnvBuilder(Protocol):
    """One kind of env declaration (a module: tox.py, nox.py, hatch.py, venv.py)."""

    @property
    def NAME(self) -> str:
        """How an env it built is named (``Env.builder``, ``BuiltEnv.builder``)."""
        ...

    @property
    def CONFIG_FILES(self) -> tuple[str, ...]:
        """The files of its own configuration, whose syntax errors stop it (the change broke
        one: the next builder applies, and the broken file is the static phase's finding)."""
        ...

    def declared(self, workdir: Path) -> bool:
        """Whether ``workdir`` declares envs of this kind."""
        ...

    def runtime(
        self, workdir: Path, cache: Path, timeout: float = ..., want: str | None = ...
    ) -> AbstractContextManager[Env]:
        """The env the suite runs in (env ``want`` when declared here), built for this checkout
        and held for the block. An error is in ``Env.error``; an Env with neither python nor
        error: nothing declared here runs tests (the next builder applies)."""
        ...

    def command_lines(self, workdir: Path) -> list[tuple[str, str, int]]:
        """(line, source, rank) of the command lines the declaration runs (for triage)."""
        ...

    def tool_env(self, workdir: Path, source: str, cache: Path, timeout: float) -> Env | None:
        """The env that runs a linter's command line of ``source`` (one of
        :meth:`command_lines`' sources), built from its declaration, with the tool at the
        version the project pins there; None when ``source`` is not this builder's."""
        ...


BUILDERS: tuple[EnvBuilder, ...] = (tox, nox, hatch, venv)


def tool_env(workdir: Path, source: str, cache: Path, timeout: float) -> tuple[str, Env] | None:
    """The builder and env that run the linter command line of ``source``, when an env builder
    declared it."""
    for builder in BUILDERS:
        env = builder.tool_env(workdir, source, cache, timeout)
        if env is not None:
            return builder.NAME, env
    return None
