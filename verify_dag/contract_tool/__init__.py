"""The contract verifier as a command (docs/contract.md): ``verify-dag contract verify``,
``gates run`` and the floor guard.

The verifier itself is the pipeline's, since the verify DAG runs it as its contract skill:
:func:`verify_dag.reviewers.contract.verify.verify_contract` (the verdict, never raises for bad
input) and :func:`verify_dag.reviewers.contract.floor.guard`. Here are what only the command
does: :func:`gates_run.run`, the only writer of a contract, and :mod:`render`, the verdict as
the command prints it.
"""
