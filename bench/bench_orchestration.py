"""What orchestration costs: the same phases through the embedded Celery DAG vs called directly.

Run by hand: ``python bench/bench_orchestration.py [--runs N]``. Both paths run side by side in
one process on the same small repository (one file, one test), alternating, and the script prints
medians, the per-run orchestration overhead (DAG minus direct) and their ratio. The issue's target
is an overhead well under 100 ms per run on the embedded default.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from verify_dag import client
from verify_dag.models import RunState, VerifyRequest
from verify_dag.models.source import parse_source
from verify_dag.phases import scope
from verify_dag.tasks import embedded, pipeline, stash
from verify_dag.tasks.review import TASKS
from verify_dag.tasks.workflow import header_tasks


def make_repo(root: Path) -> Path:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.name", "bench")
    git("config", "user.email", "bench@example.invalid")
    (root / "tests").mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    git("add", "-A")
    git("commit", "-qm", "base")
    git("tag", "base")
    (root / "calc.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    git("commit", "-qam", "sub")
    return root


# Called directly, a task body sees no request id: no idempotency lookup, no progress event.
_DIRECT = SimpleNamespace(request=SimpleNamespace(id=None, is_eager=False))


def direct(request: VerifyRequest) -> dict[str, Any]:
    """The DAG's phases in the DAG's order, as plain function calls."""
    state: dict[str, Any] = RunState(run_id="direct", request=request).model_dump(mode="json")
    for phase in (pipeline._scope, pipeline._engineer, pipeline._triage, pipeline._static):
        state = phase(_DIRECT, state)
    header = {"verify_dag.test": pipeline._tester}
    header.update({f"verify_dag.review.{k}": v.run for k, v in TASKS.items()})
    results = []
    for name in header_tasks(request):
        body = header[name]
        results.append(body(_DIRECT, state) if name == "verify_dag.test" else body(state))
    st = pipeline.collect(stash.state(state), results)
    state = stash.put_state(st, "collect")
    for phase in (pipeline._exerciser, pipeline._debugger):
        state = phase(_DIRECT, state)
    # The report task's own body, called in-process (no request id: no idempotency lookup): the
    # report, the evidence bundle and the store writes cost the same on both paths.
    result: dict[str, Any] = pipeline.report_task(state)
    doc: dict[str, Any] = result["report"]
    return doc


def via_dag(request: VerifyRequest) -> dict[str, Any]:
    result = client.wait(client.submit(request), timeout=120)
    doc: dict[str, Any] = result["report"]
    return doc


def side_by_side(request: VerifyRequest, runs: int) -> tuple[float, float]:
    via_dag(request), direct(request)  # warm both paths (imports, caches)
    dag_times, direct_times = [], []
    for _ in range(runs):
        t = time.perf_counter()
        a = via_dag(request)
        dag_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        b = direct(request)
        direct_times.append(time.perf_counter() - t)
        assert a["findings"] == b["findings"], "the two paths disagree"
    return statistics.median(dag_times) * 1000, statistics.median(direct_times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        full = scope.validate_request(
            VerifyRequest(
                source=parse_source(str(repo)),
                scope="branch",
                base="base",
                mode="report-only",
                store=str(Path(tmp) / "store"),
            )
        )
        # The same DAG where scope finds nothing: every task still runs and hands the state on,
        # but no phase does work, so what is left is the orchestration alone.
        empty = full.model_copy(update={"scope": "staged"})
        start = time.perf_counter()
        embedded.ensure_worker()
        startup = (time.perf_counter() - start) * 1000
        full_dag, full_direct = side_by_side(full, runs)
        empty_dag, empty_direct = side_by_side(empty, runs * 4)
        embedded.shutdown()
    print(f"embedded worker start, once per process:     {startup:7.1f} ms")
    print(f"full run (ruff, pytest), {runs} runs each, alternating, medians:")
    _row(full_dag, full_direct)
    print(f"nothing-to-verify run (all 12 tasks, no phase work), {runs * 4} runs each:")
    _row(empty_dag, empty_direct)


def _row(dag: float, plain: float) -> None:
    print(
        f"  through the embedded DAG {dag:7.1f} ms | phases called directly {plain:7.1f} ms"
        f" | overhead {dag - plain:6.1f} ms | ratio {dag / plain:.3f}"
    )


if __name__ == "__main__":
    main()
