#!/usr/bin/env bash
# Runs the whole suite on whatever DATABASE_URL / CELERY_BROKER_URL say (embedded defaults if unset).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DJANGO_ALLOW_ASYNC_UNSAFE=true PYTHONHASHSEED=0
export WORKBENCH_DATA_DIR="${WORKBENCH_TEST_DATA_DIR:-$PWD/var/test}"
mkdir -p "$WORKBENCH_DATA_DIR" test-output
scripts/browser-deps.sh
$BIN/ruff check .
$BIN/ruff format --check .
$BIN/mypy
$BIN/python manage.py makemigrations --check --dry-run >/dev/null || {
  echo "Models changed without a migration: run manage.py makemigrations"; exit 1; }
exec $BIN/python -m pytest "$@"
