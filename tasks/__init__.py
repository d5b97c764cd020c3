"""The Celery side of verify-dag, installed as ``verify_dag.tasks``: the app and its configuration
(app, reliability), the thin task wrappers (base, pipeline, review, shadow, completion), all canvas
building (workflow) and the in-process worker (embedded). The pure pipeline lives in verify_dag/
and never imports this package; importing it registers no task (the app's ``include`` does)."""
