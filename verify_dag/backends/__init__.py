"""Model backends for judgement reviewers: Codex CLI, Claude Code CLI, or a command template.

``load_config`` reads the configuration (environment, user config file, the repository's
pyproject), ``resolve`` picks one skill's backend with its model and effort, ``invoke`` calls it
once and classifies what came back, and ``parse.parse_reply`` turns the reply into findings.
"""

from __future__ import annotations

from verify_dag.backends.config import (
    DEFAULT_TIMEOUT,
    MODEL_SKILLS,
    Backend,
    BackendsConfig,
    Kind,
    codex_on_path,
    how_to_configure,
    load_config,
    resolve,
)
from verify_dag.backends.invoke import Reply, ReplyStatus, invoke
from verify_dag.backends.parse import ParsedReply, Unparseable, parse_reply

__all__ = [
    "DEFAULT_TIMEOUT",
    "MODEL_SKILLS",
    "Backend",
    "BackendsConfig",
    "Kind",
    "ParsedReply",
    "Reply",
    "ReplyStatus",
    "Unparseable",
    "codex_on_path",
    "how_to_configure",
    "invoke",
    "load_config",
    "parse_reply",
    "resolve",
]
