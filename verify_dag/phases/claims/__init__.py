"""The claim verifier: does a reported finding hold at a commit? One implementation of it, used
by the exerciser to reproduce the issues a run reported (phases/exerciser/reproduce.py) and by
shadow verification (verify_dag/shadow/, docs/shadow.md) for the claims it is given.

- :mod:`~verify_dag.phases.claims.phrasing`: a finding as a claim (kind and wording);
- :mod:`~verify_dag.phases.claims.anchors`: whether the cited file and lines exist;
- :mod:`~verify_dag.phases.claims.verifiers`: each kind re-derived (an analyser re-run,
  a test re-run, a search, a line count) within a :mod:`~verify_dag.phases.claims.budget`;
- :mod:`~verify_dag.phases.claims.models`: the claim and the verdict.
"""
