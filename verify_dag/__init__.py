"""verify-dag: change verification as a Celery DAG."""
