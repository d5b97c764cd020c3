#!/usr/bin/env bash
# Start Flower, the Celery task monitor, for the verify-dag broker, without containers.
#
#   FLOWER_BASIC_AUTH=user:password VERIFY_DAG_BROKER_URL=redis://127.0.0.1:6379/0 ops/flower.sh
#
# Reads:
#   VERIFY_DAG_BROKER_URL  the broker the workers use (required; `--broker URL` as first args wins)
#   FLOWER_BASIC_AUTH      user:password[,user2:password2] (required: Flower never runs without auth)
#   FLOWER_PORT            port to listen on (default 5555)
#   FLOWER_ADDRESS         address to listen on (default 127.0.0.1; basic auth is cleartext, so put
#                          a TLS proxy in front before listening anywhere else)
# Any further arguments are passed to `celery flower` unchanged.
#
# The credentials stay in the environment (Flower reads FLOWER_BASIC_AUTH itself), never on the
# command line where `ps` would show them. Persistent mode is off: Flower's view of tasks is rebuilt
# from worker events; runs and reports live in verify-dag's report store.
# /metrics is Flower's Prometheus endpoint (it and /healthcheck answer without authentication).
set -euo pipefail

broker="${VERIFY_DAG_BROKER_URL:-}"
if [ "${1:-}" = "--broker" ] && [ $# -ge 2 ]; then
  broker="$2"
  shift 2
fi

if [ -z "$broker" ]; then
  echo "flower.sh: no broker: set VERIFY_DAG_BROKER_URL or pass --broker URL" >&2
  exit 2
fi
if [ -z "${FLOWER_BASIC_AUTH:-}" ]; then
  echo "flower.sh: FLOWER_BASIC_AUTH is required (user:password[,user2:password2]);" \
       "Flower never runs without authentication" >&2
  exit 2
fi
case "$FLOWER_BASIC_AUTH" in
  *:*) ;;
  *)
    echo "flower.sh: FLOWER_BASIC_AUTH must be user:password[,user2:password2]" >&2
    exit 2
    ;;
esac

port="${FLOWER_PORT:-5555}"
address="${FLOWER_ADDRESS:-127.0.0.1}"
export FLOWER_BASIC_AUTH

python="${PYTHON:-python3}"
if ! "$python" -c "import flower, prometheus_client" 2>/dev/null; then
  echo "flower.sh: Flower is not installed for $python: pip install 'verify-dag[ops]'" >&2
  exit 2
fi
# Celery reads the broker from CELERY_BROKER_URL: a password in it stays off Flower's command line,
# which every process on the host can read.
export CELERY_BROKER_URL="$broker"
# The task list's columns: what an operator needs on one screen. Args is the task's argsrepr,
# "repo=... phase=... run=...", never the run's state.
exec "$python" -m celery flower \
  --port="$port" --address="$address" --persistent=False \
  --tasks_columns=name,args,state,result,started,runtime,worker "$@"
