"""The exercise, run inside one sandbox (docs/security.md).

An exercise is several processes that talk over loopback: the app START starts, its HEALTH
checks, the EXERCISE commands and the gates that query it. Each in a namespace of its own could not
reach the app, so the whole exercise runs in one: this module is started inside the sandbox with
the exercise's inputs as JSON, runs :func:`verify_dag.phases.exerciser.exercise.exercise` there
(its own commands then run unwrapped: they are inside already) and writes the outcome as JSON.
The worker reads it back through the same models, so nothing but data crosses.

The outcome is the repository's own to forge, like its tests' results; what the sandbox keeps
from it is everything else: other runs, the broker, the worker's secrets.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from pydantic import TypeAdapter

from verify_dag import processes, sandbox
from verify_dag.models import EngineerContext
from verify_dag.phases import gates
from verify_dag.phases.exerciser import exercise as direct
from verify_dag.sandbox import Policy

# The exercise's own limits (start, health, each command) are inside; this one bounds the lot.
TIMEOUT = 3600.0
_OUTCOME: TypeAdapter[direct.Exercise] = TypeAdapter(direct.Exercise)


def exercise(
    eng: EngineerContext, wt: Path, env: dict[str, str], criterion: str | None = None
) -> direct.Exercise:
    """The exercise in one sandbox of this host's (or directly without one, or when the
    exercise would run no command of the repository's: then there is nothing to isolate, and a
    Python started for nothing costs about half a second)."""
    if sandbox.mode() == "none" or not runs_commands(eng, criterion):
        return direct.exercise(eng, wt, env, criterion)
    with tempfile.TemporaryDirectory(prefix="verify-dag-exercise-") as tmp:
        io = Path(tmp)
        (io / "in.json").write_text(
            json.dumps(
                {
                    "engineer": eng.model_dump(mode="json"),
                    "workdir": str(wt),
                    "criterion": criterion,
                }
            ),
            encoding="utf-8",
        )
        # Inside, the exercise's commands must not try to nest a sandbox of their own.
        inner = {**env, **processes.limit_settings(), sandbox.MODE_ENV: "none"}
        res = processes.run(
            [sys.executable, "-m", __name__, str(io)],
            cwd=wt,
            env=inner,
            timeout=TIMEOUT,
            sandbox=Policy(writable=(io,)),
        )
        try:
            return _OUTCOME.validate_json((io / "out.json").read_bytes())
        except (OSError, ValueError) as exc:
            said = processes.redact((res.stderr or res.stdout).strip()[-400:])
            raise RuntimeError(
                f"the sandboxed exercise gave no outcome (exit {res.returncode}"
                f"{', timed out' if res.timed_out else ''}): "
                f"{said or type(exc).__name__}"
            ) from exc


def runs_commands(eng: EngineerContext, criterion: str | None) -> bool:
    """Whether the exercise runs anything: an app, EXERCISE commands, a gate's CHECK, the
    completion criterion."""
    parsed = gates.parse(eng.verification_md or "")
    return bool(
        eng.start
        or eng.exercise
        or criterion
        or any(g.check for g in (*parsed.exerciser, *parsed.review))
    )


def _main(io: Path) -> int:  # pragma: no cover - runs inside the sandbox, tested through it
    spec = json.loads((io / "in.json").read_text(encoding="utf-8"))
    eng = EngineerContext.model_validate(spec["engineer"])
    ex = direct.exercise(eng, Path(spec["workdir"]), dict(os.environ), spec["criterion"])
    (io / "out.json").write_bytes(_OUTCOME.dump_json(ex))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(Path(sys.argv[1])))
