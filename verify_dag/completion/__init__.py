"""The completion-criterion verifier (seed 001): run one bash criterion with limits and give a
deterministic pass/fail.

- :mod:`~verify_dag.completion.steps`: extract, execute, classify as functions (no files); the
  verify DAG's exerciser uses :func:`~verify_dag.completion.steps.criterion`.
- :mod:`~verify_dag.completion.flow`: each step over a run directory, as the tasks run it.
- :mod:`~verify_dag.completion.report`: VERIFY_REPORT.md from the shipped template.
- :mod:`~verify_dag.completion.artifacts`: the run directory, its files, dispatches.jsonl.

The Celery chain is built in :func:`verify_dag.tasks.workflow.completion_plan`; the tasks are in
:mod:`verify_dag.tasks.completion`; ``verify-dag completion`` is :mod:`verify_dag.cli_completion`.
"""
