"""The review-token tally (verify_dag/backends/budget.py) kept in the result backend, which every
worker of a fleet reaches: on Redis an INCRBY, atomic across hosts, expiring with the run's other
records; in-process (the cache backend of the embedded worker) a read and a write under a lock,
which is atomic there because the whole run lives in this one process.
"""

from __future__ import annotations

import sys
import threading

from celery.backends.base import KeyValueStoreBackend

from verify_dag.backends.budget import Uncountable
from verify_dag.tasks.app import app

PREFIX = "verify-dag-tokens-"
_lock = threading.Lock()


class ResultBackendTally:
    def add(self, key: str, tokens: int) -> int:
        backend = app.backend
        name = PREFIX + key
        # A Redis backend is an instance of a class Celery imported to make it: where that
        # module is not loaded (the embedded worker's cache backend) redis-py is never imported,
        # 0.1 s of every command line's start-up.
        redis_backend = sys.modules.get("celery.backends.redis")
        if redis_backend is not None and isinstance(backend, redis_backend.RedisBackend):
            with backend.client.pipeline() as pipe:
                pipe.incrby(name, tokens)
                pipe.expire(name, int(app.conf.result_expires or 86400))
                total, _ = pipe.execute()
            return int(total)
        if isinstance(backend, KeyValueStoreBackend):
            # Not atomic across hosts; a fleet's result backend is Redis (ops/README.md).
            with _lock:
                total = int(backend.get(name) or 0) + tokens
                backend.set(name, str(total).encode())
            return total
        raise Uncountable(f"the result backend {type(backend).__name__} keeps no counters")
