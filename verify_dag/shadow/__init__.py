"""Shadow verification (``verify-dag shadow``, docs/shadow.md).

Findings are normalised into claims (``inputs``, ``claims``), the highest-stakes ones selected
(``select``) and re-derived independently, one verifier per claim (the pipeline's claim
verifier, :mod:`verify_dag.phases.claims`: anchors, searches, the tool runner, a test
re-run; or the ``model_arm``), each within a budget; ``merge`` applies the merge rules and guards
docs/shadow.md describes and gives the gate; ``render`` writes the result. ``run`` is what one
claim task does on a worker. The verify DAG's exerciser verifies reported issues with the same
claim verifier (phases/exerciser/reproduce.py).
"""
