"""Model backends for judgement reviewers: Codex CLI, Claude Code CLI, a command template, or a
model API over HTTP (Anthropic's Messages API, OpenAI's chat completions at any base URL).

``load_config`` reads the configuration (environment, user config file, the repository's
pyproject), ``resolve`` picks one skill's backend with its model and effort, ``invoke`` calls it
once and classifies what came back, and ``parse.parse_reply`` turns the reply into findings.
"""

from __future__ import annotations

from verify_dag.backends.config import (
    DEFAULT_TIMEOUT,
    HTTP_KINDS,
    MODEL_SKILLS,
    Backend,
    BackendsConfig,
    Kind,
    codex_on_path,
    how_to_configure,
    load_config,
    resolve,
)
from verify_dag.backends.invoke import invoke
from verify_dag.backends.parse import ParsedReply, Unparseable, parse_reply
from verify_dag.backends.reply import Reply, ReplyStatus

__all__ = [
    "DEFAULT_TIMEOUT",
    "HTTP_KINDS",
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
