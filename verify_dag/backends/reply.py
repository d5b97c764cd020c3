"""What one call to a model backend came to, whichever kind of backend it was."""

from __future__ import annotations

from typing import Literal

from verify_dag.models.base import Frozen
from verify_dag.models.findings import TokenUsage

ReplyStatus = Literal["ok", "timeout", "rate_limited", "auth", "missing", "empty", "failed"]


class Reply(Frozen):
    status: ReplyStatus
    text: str = ""
    reason: str = ""
    # Tokens and requests, where the backend reports them (the HTTP kinds, claude's envelope).
    usage: TokenUsage | None = None
