"""Reports never echo secrets (DESIGN §5b): redaction of output before it is kept."""

from __future__ import annotations

import os

from verify_dag import util


def redact(text: str) -> str:
    """``text`` with the values of secret-looking environment variables replaced."""
    for key, value in os.environ.items():
        if len(value) >= 8 and util._secret(key, value):
            text = text.replace(value, "[REDACTED]")
    return text
