"""A real terminal for the tests that talk to a person: a tmux server of the test's own (its
own socket), one 80-column window named ``vd``; the test sends keys and reads the screen."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


class Terminal:
    def __init__(self, socket: str, wait: float = 120) -> None:
        self.socket = socket
        self.wait = wait  # how long wait_for waits by default, in seconds

    def tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], check=True, capture_output=True, text=True
        )
        return out.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-5000", "-t", "vd")

    def wait_for(self, needle: str, count: int = 1, timeout: float | None = None) -> str:
        end = time.monotonic() + (self.wait if timeout is None else timeout)
        while time.monotonic() < end:
            text = self.screen()
            if text.count(needle) >= count:
                return text
            time.sleep(0.2)
        raise AssertionError(f"{needle!r} (x{count}) never showed; the screen:\n{self.screen()}")

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", "vd", key)
            time.sleep(0.15)


def terminal(prefix: str, tmp_path: Path, wait: float = 120) -> Iterator[Terminal]:
    """A fixture's body: the terminal, and its tmux server killed after the test."""
    term = Terminal(f"{prefix}-{os.getpid()}-{tmp_path.name}", wait)
    yield term
    subprocess.run(["tmux", "-L", term.socket, "kill-server"], capture_output=True)
