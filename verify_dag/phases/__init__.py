"""Pipeline phases: each module is a pure function ``run(inputs) -> outputs`` without Celery."""
