#!/usr/bin/env bash
# Starts the workbench on its embedded defaults: SQLite, Celery on a SQLite-file broker, a demo
# study. Serves http://127.0.0.1:${PORT:-8000}/ with a Celery worker beside it; Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" TRANSFORMERS_OFFLINE="${TRANSFORMERS_OFFLINE:-1}"
PORT="${PORT:-8000}"

$BIN/python manage.py migrate --noinput -v0
$BIN/python manage.py setup_demo

$BIN/celery -A workbench worker -Q celery,gpu --concurrency 1 --loglevel WARNING &
WORKER=$!
cleanup() { kill "$WORKER" 2>/dev/null || true; wait "$WORKER" 2>/dev/null || true; }
trap cleanup EXIT INT TERM

echo ""
echo "The workbench is at http://127.0.0.1:${PORT}/  (sign in with an account above; Ctrl-C stops it)"
# Request line and headers capped (gunicorn has no body limit: the app refuses oversized and anonymous
# uploads from their headers; see docs/security.md).
$BIN/gunicorn workbench.wsgi --bind "127.0.0.1:${PORT}" --workers 2 --threads 4 --timeout 120 \
  --limit-request-line 8190 --limit-request-fields 100 --limit-request-field_size 8190 \
  --access-logfile - --log-level warning
