"""External analysers as data: a registry of ToolSpecs by name, plus specs for discovered commands.

A toolchain Command whose ``tool`` names an entry here is run through that spec (structured output,
scoped files passed as arguments); any other lint or typecheck command is run as discovered and
read by the generic parser.

Adding a linter is one module here whose ``SPEC`` says how to run it, read its output and rate a
finding, and (``discovery``) which config files mean a project uses it; plus its line in
``REGISTRY``. Triage then discovers it, the static phase and its baseline run it through
:mod:`~verify_dag.tools.runner`, and the claim verifier re-runs it.
"""

from __future__ import annotations

from collections.abc import Callable

from verify_dag.models.toolchain import Command
from verify_dag.tools import generic, mypy, ruff
from verify_dag.tools.base import ToolSpec

# Registry order is the order triage lists the tools in a toolchain.
REGISTRY: dict[str, ToolSpec] = {spec.name: spec for spec in (ruff.SPEC, mypy.SPEC)}


# A registry tool the project runs itself (its targets and options on the command) gets the
# spec that honours them.
_DECLARED: dict[str, Callable[[Command], ToolSpec]] = {
    "ruff": ruff.for_command,
    "mypy": mypy.for_command,
}


def spec_for(command: Command) -> ToolSpec:
    """The spec a toolchain command runs with."""
    if command.tool is not None and command.tool in REGISTRY:
        declared = _DECLARED.get(command.tool)
        return declared(command) if declared is not None else REGISTRY[command.tool]
    return generic.spec_for(command)
