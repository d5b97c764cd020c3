"""The completion-criterion verifier (docs/completion.md): run one bash criterion with limits and
give a deterministic pass/fail.

- :mod:`verify_dag.phases.exerciser.criterion`: extract, execute, classify as functions (no
  files); the pipeline's own, since the verify DAG's exerciser checks ``--completion`` with them.
- :mod:`~verify_dag.completion.gate`: the mode gate, full or quick, asked before every run.
- :mod:`~verify_dag.completion.flow`: each step over a run directory, as the tasks run it.
- :mod:`~verify_dag.completion.report`: VERIFY_REPORT.md from the shipped template.
- :mod:`~verify_dag.completion.artifacts`: the run directory, its files, dispatches.jsonl.

The Celery chain is built in :func:`verify_dag.tasks.workflow.completion_plan`; the tasks are in
:mod:`verify_dag.tasks.completion`; ``verify-dag completion`` is :mod:`verify_dag.cli.completion`.
"""
