"""Phase 9 (docs/fixes.md): interactive triage and auto-fix, after the report.

Workers propose fixes (:mod:`.propose`, run by the ``verify_dag.fix.propose`` task); only the
client, where the repository is, decides and applies them (:mod:`.flow`), after keeping a backup
of the work tree and index under ``refs/verify-dag/backups/<run id>`` (:mod:`.backup`).
"""
