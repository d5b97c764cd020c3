# verify-dag worker: one queue set per container, chosen by the environment (ops/README.md).
#
#   docker build -f worker.Dockerfile -t verify-dag-worker .
#   docker run -e VERIFY_DAG_BROKER_URL=redis://redis:6379/0 -e VERIFY_DAG_QUEUES=test \
#              -e VERIFY_DAG_CONCURRENCY=2 verify-dag-worker
#
# Any extra arguments are appended to `verify-dag worker` (e.g. `--hostname test1@%h`).
FROM python:3.11-slim

# The image user's ids; build with the ids that own what is mounted from the host (the shared
# report store, where clients leave the bundles of local runs and workers write reports).
ARG UID=10001
ARG GID=10001

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VERIFY_DAG_CACHE=/var/cache/verify-dag \
    VERIFY_DAG_MIRRORS=/var/cache/verify-dag/mirrors \
    VERIFY_DAG_STORE=/var/lib/verify-dag/runs \
    VERIFY_DAG_POOL=prefork \
    VERIFY_DAG_LOGLEVEL=INFO

# git: every scope, triage and worktree goes through it. bubblewrap: the sandbox repository code
# runs in (docs/security.md; it needs user namespaces, see ops/README.md "Sandbox"). Nothing else:
# test suites that need more (node, browsers) get an image built FROM this one.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git bubblewrap \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid "${GID}" verifydag \
    && useradd --system --uid "${UID}" --gid verifydag --create-home --home-dir /home/verifydag \
       --shell /usr/sbin/nologin verifydag \
    && mkdir -p /var/cache/verify-dag/mirrors /var/lib/verify-dag/runs \
    && chown -R verifydag:verifydag /var/cache/verify-dag /var/lib/verify-dag

WORKDIR /opt/verify-dag
# verify_dag/schemas is a symlink to ../schemas, so both are copied.
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY verify_dag ./verify_dag
# The Celery side, installed as verify_dag.tasks (pyproject.toml's package-dir mapping).
COPY tasks ./tasks
# Installed as root into the system site-packages, so the worker user cannot modify its own code.
RUN pip install --no-cache-dir . \
    && rm -rf build ./*.egg-info

# Numeric, so a runtime that enforces non-root (runAsNonRoot) can check it without /etc/passwd.
USER ${UID}:${GID}
WORKDIR /home/verifydag

# The worker answers a ping on the broker under its own node name (celery@<container hostname>).
HEALTHCHECK --interval=60s --timeout=20s --start-period=60s --retries=3 \
    CMD ["sh", "-c", "celery -A verify_dag.tasks.app inspect ping --timeout 10 --destination \"celery@$HOSTNAME\" || exit 1"]

# Queues, concurrency, pool and log level come from VERIFY_DAG_QUEUES, VERIFY_DAG_CONCURRENCY,
# VERIFY_DAG_POOL and VERIFY_DAG_LOGLEVEL; the broker from VERIFY_DAG_BROKER_URL.
ENTRYPOINT ["verify-dag", "worker"]
CMD []
