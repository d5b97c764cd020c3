"""Work a phase runs side by side (the static tools, the derived exercise's probes) runs at
once, keeps its order, and sees the run's settings, which live in context variables."""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar

from verify_dag import resultcache
from verify_dag.phases import static
from verify_dag.tools import runner

_SETTING: ContextVar[str] = ContextVar("test_setting", default="unset")


def test_static_tools_run_at_once_in_order_with_the_callers_context() -> None:
    started: dict[str, float] = {}
    gate = threading.Barrier(2, timeout=10)

    def tool(name: str) -> runner.ToolRun:
        started[name] = time.monotonic()
        gate.wait()  # both tools must be running for either to finish
        cache = "on" if resultcache.enabled() else "off"
        return runner.ToolRun(name, detail=f"{_SETTING.get()} {cache}")

    _SETTING.set("the run's")
    with resultcache.session(enabled=False):
        done = static._side_by_side(
            {0: ("ruff", lambda: tool("ruff")), 2: ("mypy", lambda: tool("mypy"))}
        )
    assert [done[n].name for n in sorted(done)] == ["ruff", "mypy"]
    assert {r.detail for r in done.values()} == {"the run's off"}


def test_runs_of_one_tool_stay_one_after_another() -> None:
    running: list[str] = []
    most = 0

    def tool(name: str, n: int) -> runner.ToolRun:
        nonlocal most
        running.append(name)
        most = max(most, running.count("mypy"))
        time.sleep(0.05)
        running.remove(name)
        return runner.ToolRun(name, detail=str(n))

    done = static._side_by_side(
        {
            0: ("mypy", lambda: tool("mypy", 0)),
            1: ("ruff", lambda: tool("ruff", 1)),
            2: ("mypy", lambda: tool("mypy", 2)),
        }
    )
    assert [done[n].detail for n in range(3)] == ["0", "1", "2"]
    assert most == 1  # mypy's two runs share its cache directory: never at once
