"""The application under test: started in the background, probed until healthy, stopped whole.

The one child process of the product that stays up past a single call (an app must stay up while
it is exercised), started through :func:`verify_dag.processes.start_background` so that it gets the
limits every other command of the repository gets: sandbox policy, scrubbed environment, resource
limits, its own process group, a time limit and a capped log.
"""

from __future__ import annotations

import time
from pathlib import Path

from verify_dag import processes
from verify_dag.phases import gates
from verify_dag.sandbox import Policy

APP_LOG_CAP = 64_000  # bytes of the app's output kept (the tail: where a crash is reported)
# The app lives at most as long as a whole sandboxed exercise may take (exerciser/sandboxed.py).
APP_TIMEOUT = 3600.0


def start(command: str, cwd: Path, env: dict[str, str]) -> processes.Background:
    """``command`` (shell text the repository declared) started under bash in ``cwd``."""
    return processes.start_background(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        timeout=APP_TIMEOUT,
        cap=APP_LOG_CAP,
        sandbox=Policy(),
    )


def tail(app: processes.Background, limit: int = 400) -> str:
    return gates.excerpt(app.output()[-4000:], limit, tail=True)


def start_healthy(
    start_command: str, health: str | None, wt: Path, env: dict[str, str], limit: float
) -> tuple[processes.Background | None, bool, str]:
    """(app, healthy, evidence). The caller stops the app whatever the answer."""
    began = time.monotonic()
    try:
        app = start(start_command, wt, env)
    except OSError as exc:
        return None, False, f"could not start `{start_command}`: {exc}"
    last = "no HEALTH attempt finished"
    while True:
        code = app.proc.poll()
        if code is not None:
            return (
                app,
                False,
                (
                    f"`{start_command}` exited {code} before it was healthy; app output: "
                    f"{tail(app) or 'none'}"
                ),
            )
        waited = time.monotonic() - began
        if health is None:
            if waited >= 1.0:  # no HEALTH: the app must at least stay up for a moment
                return app, True, "no HEALTH declared; still running after 1s"
            time.sleep(0.1)
            continue
        if waited >= limit:
            return (
                app,
                False,
                (
                    f"HEALTH `{health}` not ok within {limit:g}s (last: {last}); "
                    f"app output: {tail(app) or 'none'}"
                ),
            )
        res = gates.run_command(health, wt, env, timeout=max(1.0, min(10.0, limit - waited)))
        if res.returncode == 0 and not res.timed_out:
            return app, True, f"healthy after {time.monotonic() - began:.1f}s"
        said = gates.excerpt(res.stderr or res.stdout, 160, tail=True)
        last = (
            "timed out"
            if res.timed_out
            else (f"exit {res.returncode}" + (f": {said}" if said else ""))
        )
        time.sleep(0.25)
