#!/usr/bin/env bash
# Starts the workbench on its embedded defaults: SQLite, Celery on a SQLite-file broker, a demo
# study. Serves http://127.0.0.1:${PORT:-8000}/ with a Celery worker beside it; Ctrl-C stops both.
# The worker logs to var/log/worker.log; gunicorn logs warnings only, and every request too with
# WORKBENCH_ACCESS_LOG=1 (docs/deploy.md). The address and the demo accounts are printed last.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=.venv/bin
umask "${WORKBENCH_UMASK:-077}"  # logs and data the workbench's account only (docs/security.md, "File modes")
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" TRANSFORMERS_OFFLINE="${TRANSFORMERS_OFFLINE:-1}"
PORT="${PORT:-8000}"
LOG_DIR="${WORKBENCH_DATA_DIR:-var}/log"

step() { echo "==> $*"; }

# The lines a newcomer needs, printed once everything is up, so nothing scrolls them away.
print_banner() {
  local port="${1:-$PORT}"
  echo ""
  echo "The workbench is at http://127.0.0.1:${port}/"
  echo "Sign in at        http://127.0.0.1:${port}/accounts/login/  (admin pages: /admin/)"
  echo "Worker log:       ${LOG_DIR}/worker.log    Ctrl-C stops the workbench."
  $BIN/python manage.py setup_demo --accounts-only
}

# gunicorn's access log (one line per request and static file) only when asked for.
access_log_args() {
  case "${WORKBENCH_ACCESS_LOG:-0}" in
    1 | true | yes | on) echo "--access-logfile -" ;;
    *) echo "" ;;
  esac
}

# Sourced (tests read the functions above): define them and stop here.
if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
  return 0
fi

mkdir -p "$LOG_DIR"
step "Applying database migrations"
$BIN/python manage.py migrate --noinput -v0
step "Preparing the demo study and accounts"
$BIN/python manage.py setup_demo --no-accounts

step "Starting the Celery worker (log: ${LOG_DIR}/worker.log)"
: >"${LOG_DIR}/worker.log"  # so the wait below reads this start's "ready", not an earlier one
$BIN/celery -A workbench worker -Q celery,gpu --concurrency 1 --loglevel INFO \
  --logfile "${LOG_DIR}/worker.log" >/dev/null 2>&1 &
WORKER=$!
SERVER=""
cleanup() {
  [[ -n "$SERVER" ]] && kill "$SERVER" 2>/dev/null || true
  kill "$WORKER" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

step "Starting the web server"
# Request line and headers capped (gunicorn has no body limit: the app refuses oversized and anonymous
# uploads from their headers; see docs/security.md).
# shellcheck disable=SC2046  # access_log_args prints zero or two words
$BIN/gunicorn workbench.wsgi --bind "127.0.0.1:${PORT}" --workers 2 --threads 4 --timeout 120 \
  --limit-request-line 8190 --limit-request-fields 100 --limit-request-field_size 8190 \
  $(access_log_args) --log-level warning &
SERVER=$!

# Wait (at most a minute) until the worker is ready and the server answers, then print the banner.
for _ in $(seq 60); do
  if grep -q "ready" "${LOG_DIR}/worker.log" 2>/dev/null \
    && $BIN/python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${PORT}/healthz/', timeout=2)" \
      2>/dev/null; then
    break
  fi
  kill -0 "$SERVER" 2>/dev/null || { echo "The web server stopped; see the lines above." >&2; exit 1; }
  sleep 1
done
print_banner "$PORT"
wait "$SERVER"
