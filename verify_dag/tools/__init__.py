"""External analysers as data: a registry of ToolSpecs by name, plus specs for discovered commands.

A toolchain Command whose ``tool`` names an entry here is run through that spec (structured output,
scoped files passed as arguments); any other lint or typecheck command is run as discovered and
read by the generic parser.
"""

from __future__ import annotations

from verify_dag.models.toolchain import Command
from verify_dag.tools import generic, mypy, ruff
from verify_dag.tools.base import RawFinding, ToolSpec

REGISTRY: dict[str, ToolSpec] = {spec.name: spec for spec in (ruff.SPEC, mypy.SPEC)}


def spec_for(command: Command) -> ToolSpec:
    """The spec a toolchain command runs with."""
    if command.tool is not None and command.tool in REGISTRY:
        return REGISTRY[command.tool]
    return generic.spec_for(command)


__all__ = ["REGISTRY", "RawFinding", "ToolSpec", "spec_for"]
