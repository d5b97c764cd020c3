"""External analysers as data: a registry of ToolSpecs by name, plus specs for discovered commands.

A toolchain Command whose ``tool`` names an entry here is run through that spec (structured output,
scoped files passed as arguments); any other lint or typecheck command is run as discovered and
read by the generic parser.

Adding a linter is one module here whose ``SPEC`` says all there is to know of it: how to run it,
read its output and rate a finding; which config files mean a project uses it (``discovery``);
how the project's own command lines of it are read and merged (``declarations``); the pre-commit
hooks that mirror its PyPI package (``mirror``) and that package (``package``). Plus its line in
``REGISTRY``. Triage then discovers it, the static phase and its baseline run it through
:mod:`~verify_dag.tools.runner`, and the claim verifier re-runs it.
"""

from __future__ import annotations

from verify_dag.models.toolchain import Command
from verify_dag.tools import generic, mypy, ruff
from verify_dag.tools.base import ToolSpec

# Registry order is the order triage lists the tools in a toolchain.
REGISTRY: dict[str, ToolSpec] = {spec.name: spec for spec in (ruff.SPEC, mypy.SPEC)}


def spec_for(command: Command) -> ToolSpec:
    """The spec a toolchain command runs with: a registry tool the project runs itself (its
    targets and options on the command) gets the spec that honours them."""
    if command.tool is not None and command.tool in REGISTRY:
        spec = REGISTRY[command.tool]
        return spec.declarations.spec(command) if spec.declarations is not None else spec
    return generic.spec_for(command)


def packages() -> list[str]:
    """The PyPI distributions of the registry's tools, in registry order."""
    return [s.package for s in REGISTRY.values() if s.package is not None]
