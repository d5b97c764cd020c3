"""Every environment variable verify-dag reads, with what it does: the one table ``verify-dag
--help`` prints and tests/test_envvars.py holds the code to (a variable read anywhere and not
listed here fails that test)."""

from __future__ import annotations

# The settings that name a broker, read in this order by tasks/app.py (broker_origin). With none
# of them set, runs go to the in-process worker: the CLI looks before it imports Celery.
BROKER_ENV = "VERIFY_DAG_BROKER_URL"
BROKER_FILE_ENV = "VERIFY_DAG_BROKER_URL_FILE"
CELERY_BROKER_ENV = "CELERY_BROKER_URL"

# name -> (who reads it, what it does). Per-skill forms are written with <SKILL>.
ENV: dict[str, tuple[str, str]] = {
    "VERIFY_DAG_BROKER_URL": ("client, worker", "the Celery broker (else in-process)"),
    "VERIFY_DAG_BROKER_URL_FILE": ("client, worker", "a file holding the broker URL"),
    "VERIFY_DAG_RESULT_BACKEND": ("client, worker", "the result backend (else the broker's Redis)"),
    "VERIFY_DAG_STORE": ("client, worker", "the report store directory"),
    "VERIFY_DAG_OUTAGE_LIMIT": ("client", "seconds the result store may be unreachable (60)"),
    "VERIFY_DAG_CONFIG": ("client, worker", "the user config file of the model backends"),
    "VERIFY_DAG_BACKEND": ("worker", "codex, claude, command, anthropic or openai"),
    "VERIFY_DAG_BACKEND_COMMAND": ("worker", "the command template of the command backend"),
    "VERIFY_DAG_MODEL": ("worker", "the model every skill asks (VERIFY_DAG_MODEL_<SKILL>: one)"),
    "VERIFY_DAG_EFFORT": ("worker", "the effort every skill asks (VERIFY_DAG_EFFORT_<SKILL>: one)"),
    "VERIFY_DAG_MODEL_TIMEOUT": ("worker", "seconds a model call may take (600)"),
    "VERIFY_DAG_BASE_URL": ("worker", "the anthropic or openai backend's API address"),
    "VERIFY_DAG_API_KEY_FILE": ("worker", "a file holding the model API's key"),
    "VERIFY_DAG_MAX_OUTPUT_TOKENS": ("worker", "tokens a model API reply may use (8192)"),
    "VERIFY_DAG_MODEL_RETRIES": ("worker", "retries of a model API's 429 or 5xx (3)"),
    "VERIFY_DAG_REVIEW_RATE_LIMIT": ("worker", "review tasks' Celery rate_limit (30/m, 2/s)"),
    "VERIFY_DAG_COMMENT_DENSITY": ("client", "comment-review's density limit (0.1 or 10%)"),
    "VERIFY_DAG_CACHE": ("worker", "the cache root: run checkouts, tools, results"),
    "VERIFY_DAG_RESULT_CACHE": ("worker", "the result cache directory"),
    "VERIFY_DAG_MIRRORS": ("worker", "the repository mirrors directory"),
    "VERIFY_DAG_QUEUES": ("verify-dag worker", "the queues to consume"),
    "VERIFY_DAG_CONCURRENCY": ("verify-dag worker", "child processes or threads"),
    "VERIFY_DAG_POOL": ("verify-dag worker", "prefork, threads or solo"),
    "VERIFY_DAG_LOGLEVEL": ("verify-dag worker", "the worker's log level"),
    "VERIFY_DAG_VISIBILITY_TIMEOUT": ("worker", "seconds before Redis redelivers a lost task"),
    "VERIFY_DAG_REQUIRE_SANDBOX": ("worker", "1: refuse to run repository code unsandboxed"),
    "VERIFY_DAG_SANDBOX": ("worker", "force a sandbox: bubblewrap, unshare or none"),
    "VERIFY_DAG_MEMORY_LIMIT_MB": ("worker", "data memory limit of repository code"),
    "VERIFY_DAG_FILE_LIMIT_MB": ("worker", "file size limit of repository code"),
    "VERIFY_DAG_PROCESS_LIMIT": ("worker", "processes one step of repository code may run"),
    "VERIFY_DAG_INDEX_HOSTS": ("worker", "hosts provisioning may reach besides the indexes"),
    "VERIFY_DAG_TMP_LIMIT_MB": ("worker", "size of a sandboxed step's /tmp (bubblewrap)"),
    "VERIFY_DAG_INVENTORY_TIER": ("worker", "the evidence tier this worker offers (0, 1, 2)"),
    "VERIFY_DAG_FLEET_FILE": ("celery beat", "the fleet file whose audits beat schedules"),
    "VERIFY_DAG_FLEET_CRON": ("celery beat", "when, in UTC cron (default 0 2 * * *)"),
    "VERIFY_DAG_FLEET_FAIL_ON": ("celery beat", "the scheduled audits' --fail-on (default 7)"),
    "VERIFY_DAG_RUNS_DIR": ("completion", "where completion runs keep their artifacts"),
    "VERIFY_DAG_CONTRACT": ("contract", "the CONTRACT file when none is given"),
    "VERIFY_DAG_DEBUG": ("every command", "1: a traceback for internal errors"),
    # Set by verify-dag itself in the processes it starts, never by a user.
    "VERIFY_DAG_SANDBOX_OWNER": ("internal", "which worker process owns a sandboxed process"),
    "VERIFY_DAG_WORKER_PID": ("internal", "the worker process a sandbox reports to"),
    "VERIFY_DAG_NOX_LINES": ("internal", "where nox's recorder writes a session's run lines"),
}


def help_text() -> str:
    lines = ["environment (VERIFY_DAG_*; `verify-dag config` shows what a run would use):"]
    for name, (who, what) in ENV.items():
        if who != "internal":
            lines.append(f"  {name:<29} {what} [{who}]")
    return "\n".join(lines) + "\n"
