"""Shadow verification (seed 003, ``verify-dag shadow``, docs/shadow.md).

Findings are normalised into claims (``inputs``, ``claims``), the highest-stakes ones selected
(``select``) and re-derived independently, one verifier per claim (``verifiers``: ``anchors``,
``search``, the static phase's runner, a test re-run, the ``model_arm``), each within a
``budget``; ``merge`` applies the seed's merge rules and guards and gives the gate; ``render``
writes the result. ``run`` is what one claim task does on a worker. The verify DAG's exerciser
verifies reported issues with the same verifiers (phases/exerciser/reproduce.py).
"""
